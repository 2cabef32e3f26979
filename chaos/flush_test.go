package chaos

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/keyspace"
)

// TestFlushKeys: one key per partition, each in its partition, none a
// workload's.
func TestFlushKeys(t *testing.T) {
	for _, n := range []int{1, partitions, 16} {
		ks := flushKeys(n)
		if len(ks) != n {
			t.Fatalf("%d partitions: %d keys", n, len(ks))
		}
		for i, k := range ks {
			if p := keyspace.PartitionOf(k, uint32(n)); p != uint64(i+1) {
				t.Errorf("%d partitions: key %q is in partition %d, want %d", n, k, p, i+1)
			}
			if !strings.HasPrefix(string(k), "chaos-flush-") || bytes.Equal(k, ks[(i+1)%n]) && n > 1 {
				t.Errorf("%d partitions: key %q", n, k)
			}
		}
	}
}
