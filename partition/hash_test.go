package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cutkv/cutkv/proto/internalpb"
)

// TestHashAtRacingApply: a replica asked for the hash at index i while it
// applies the Hash entry at i answers that hash, never "no hash at that
// index" (kvctl check reported a replica inconsistent when HashAt read
// the hashes before the apply and the applied index after it).
func TestHashAtRacingApply(t *testing.T) {
	p := New(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := uint64(1); i <= 3000; i++ {
		errc := make(chan error, 1)
		go func() {
			_, _, err := p.HashAt(ctx, i)
			errc <- err
		}()
		if i%2 == 0 {
			time.Sleep(time.Duration(i%7) * time.Microsecond)
		}
		if _, err := p.ApplyCommand(i, &internalpb.Command{Op: &internalpb.Command_Hash{Hash: &internalpb.HashOp{}}}); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			if errors.Is(err, ErrNoHash) {
				t.Fatalf("index %d: %v while its Hash entry applied", i, err)
			}
			t.Fatal(err)
		}
	}
}
