package snapshots

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/internal/s3test"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/restore"
	"github.com/cutkv/cutkv/server"
)

// TestSnapshotsToS3 takes a full and then incremental snapshots of a
// 3-node cluster into a real S3-compatible server (internal/s3test),
// checks them there, and restores the last one from S3 onto a 1-node
// cluster, which must serve every key written before its cut.
func TestSnapshotsToS3(t *testing.T) {
	endpoint := s3test.Start(t) // skips where the gateway cannot be built, unless CI is set
	store := s3test.URL(endpoint, s3test.Bucket)
	c := clustertest.Start(t, nodes, clustertest.Options{Partitions: partitions, Configure: func(_ int, cfg *server.Config) {
		cfg.SnapshotStore = store // the default store of requests without one
	}})
	want := map[string]string{}
	write := func(prefix string, n int) {
		for i := range n {
			k, v := fmt.Sprintf("%s-%03d", prefix, i), strings.Repeat(prefix, 50)
			clustertest.Eventually(t, 10*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := c.KV(i%nodes).Put(ctx, &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)})
				return err
			})
			want[k] = v
		}
	}
	write("a", 100)
	full, err := createSnapshot(c, 0, &kvpb.CreateSnapshotRequest{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	write("b", 100)
	inc, err := createSnapshot(c, 1, &kvpb.CreateSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if inc.GetStore() != store || inc.GetPiecesReused() == 0 || inc.GetBytesUploaded() >= inc.GetSnapshot().GetTotalBytes() {
		t.Fatalf("incremental snapshot to S3: %v (full: %v)", inc, full)
	}
	for _, s := range []*kvpb.CreateSnapshotResult{full, inc} {
		if ck := checkSnapshot(t, c, "", s.GetSnapshot().GetId()); !ck.GetOk() {
			t.Fatalf("check %s in S3: %v", s.GetSnapshot().GetId(), ck)
		}
	}
	c.Close()

	r := clustertest.Start(t, 1, clustertest.Options{Partitions: partitions, Prepare: func(i int, cfg server.Config) error {
		_, err := restore.Run(context.Background(), restore.Options{
			StoreURL: store, Snapshot: inc.GetSnapshot().GetId(), DataDir: cfg.DataDir, NodeID: cfg.ID, InitialCluster: cfg.InitialCluster,
		})
		return err
	}})
	got := scanAll(t, r, 0)
	if len(got) != len(want) {
		t.Fatalf("restored from S3: %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Fatalf("restored from S3: %s = %q, want %q", k, got[k], v)
		}
	}
}
