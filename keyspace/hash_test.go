package keyspace

import (
	"hash/fnv"
	"testing"
)

func TestPartitionOfMatchesFNV(t *testing.T) {
	for _, k := range []string{"", "a", "key-1", "\x00\xff", "a much longer key with spaces"} {
		h := fnv.New64a()
		h.Write([]byte(k))
		for _, n := range []uint32{1, 3, 16, 1000} {
			want := h.Sum64()%uint64(n) + 1
			if got := PartitionOf([]byte(k), n); got != want {
				t.Fatalf("PartitionOf(%q, %d) = %d, want %d", k, n, got, want)
			}
		}
	}
}

func TestPartitionOfSpreads(t *testing.T) {
	const n = 16
	counts := make([]int, n+1)
	for i := 0; i < 16000; i++ {
		counts[PartitionOf([]byte("key-"+string(rune('a'+i%26))+string(rune(i))), n)]++
	}
	if counts[0] != 0 {
		t.Fatalf("partition 0 got %d keys; group 0 must hold none", counts[0])
	}
	for p := 1; p <= n; p++ {
		if counts[p] < 500 || counts[p] > 1500 {
			t.Fatalf("partition %d got %d of 16000 keys: poor spread %v", p, counts[p], counts)
		}
	}
}
