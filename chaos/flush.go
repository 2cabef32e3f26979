package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// flushKeys returns one key per partition 1..partitions, outside every
// workload's keys, for flushCommits.
func flushKeys(partitions int) [][]byte {
	out := make([][]byte, partitions)
	found := 0
	for i := 0; found < partitions; i++ {
		k := []byte(fmt.Sprintf("chaos-flush-%d", i))
		p := keyspace.PartitionOf(k, uint32(partitions))
		if out[p-1] == nil {
			out[p-1] = k
			found++
		}
	}
	return out
}

// flushCommits writes one key in every partition, so that every replica
// writes its commit indexes to its WAL. A node keeps a commit-index-only
// hard state in memory until its next synced batch (raftstore's lazy hard
// states): once the load has stopped, the last cut's CutFinish can be
// committed everywhere and yet beyond the commit index of every WAL, and
// the live verifier's copies never hold it whole. (Group 0's entry that
// records the cut flushes the nodes holding group 0, but they may learn a
// partition's new commit index only after that.) A 5-node delay round
// failed so: its last cut was whole in the WALs once the nodes had
// stopped, in no copy before. A write to a partition makes its leader
// and followers append, and their lazy states go with that batch. It
// tries each node in turn per key.
func flushCommits(ctx context.Context, c *cluster) error {
	var errs []error
	for _, k := range flushKeys(partitions) {
		var last error
		for i := range c.nodes {
			if c.down(i) {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, last = kvrpc.NewKVClient(c.conns[i]).Put(rctx, &kvpb.PutRequest{Key: k, Value: []byte("flush")})
			cancel()
			if last == nil {
				break
			}
		}
		if last != nil {
			errs = append(errs, fmt.Errorf("chaos: flush write of %q: %w", k, last))
		}
	}
	return errors.Join(errs...)
}
