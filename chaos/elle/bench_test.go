package elle

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkCheck checks a serial history of 20000 transactions over 16
// keys under real time.
func BenchmarkCheck(b *testing.B) {
	h, _ := serialHistory(rand.New(rand.NewPCG(1, 2)), 20000, 16)
	b.ResetTimer()
	for b.Loop() {
		if r := CheckWith(h, Options{ProcessOrder: true, RealTime: true}); !r.OK {
			b.Fatal(r)
		}
	}
}
