package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/snapshot"
)

// fileStore returns a fresh file:// store directory and its URL.
func fileStore(t *testing.T) (dir, u string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return dir, (&url.URL{Scheme: "file", Path: dir}).String()
}

// allowStore lets requests name store (--snapshot-store-allow), then
// configures as next does.
func allowStore(store string, next func(int, *server.Config)) func(int, *server.Config) {
	return func(i int, cfg *server.Config) {
		cfg.SnapshotStoreAllow = append(cfg.SnapshotStoreAllow, store)
		if next != nil {
			next(i, cfg)
		}
	}
}

// createSnapshot runs kvpb CreateSnapshot through node via and returns the
// result and the progress messages seen.
func createSnapshot(t *testing.T, c *clustertest.Cluster, via int, req *kvpb.CreateSnapshotRequest) (*kvpb.CreateSnapshotResult, []*kvpb.SnapshotProgress, error) {
	t.Helper()
	stream, err := kvrpc.NewClusterClient(c.Conn(via)).CreateSnapshot(ctxT(t, 60*time.Second), req)
	if err != nil {
		return nil, nil, err
	}
	var progress []*kvpb.SnapshotProgress
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil, progress, errors.New("stream ended without a result")
		}
		if err != nil {
			return nil, progress, err
		}
		if m.GetResult() != nil {
			return m.GetResult(), progress, nil
		}
		progress = append(progress, m.GetProgress())
	}
}

// mustSnapshot creates a snapshot. A snapshot whose driver lost group 0's
// leadership midway is refused as not uploaded (FailedPrecondition) and
// is asked for again, as an operator would: on a fresh cluster group 0's
// leadership may still move in its first seconds (a CI run saw it).
func mustSnapshot(t *testing.T, c *clustertest.Cluster, via int, req *kvpb.CreateSnapshotRequest) *kvpb.CreateSnapshotResult {
	t.Helper()
	for attempt := 1; ; attempt++ {
		res, _, err := createSnapshot(t, c, via, req)
		if err == nil {
			return res
		}
		if attempt < 5 && status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), "no longer leads group 0") {
			t.Logf("attempt %d: %v; asking again", attempt, err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		t.Fatal(err)
	}
}

func checkSnapshot(t *testing.T, c *clustertest.Cluster, store, id string) *kvpb.CheckSnapshotResponse {
	t.Helper()
	r, err := kvrpc.NewClusterClient(c.Conn(0)).CheckSnapshot(ctxT(t, 30*time.Second), &kvpb.CheckSnapshotRequest{Store: store, Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// storePieces lists the piece objects of cluster in a file store.
func storePieces(t *testing.T, dir string, cluster uint64) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, fmt.Sprintf("%016x", cluster), "pieces"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !strings.Contains(e.Name(), ".tmp") && !strings.HasSuffix(e.Name(), ".attrs") { // .attrs: fileblob metadata
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSnapshotsIncrementalFullAndPrune takes snapshots of a live 3-node
// cluster into a file store: the first uploads each partition's log, the
// next ones only what is new; after a checkpoint the bases are uploaded;
// a full snapshot uploads a materialization at each cut's position; an
// incremental snapshot after writing X bytes uploads at most 1.5·X; every
// snapshot checks; prune keeps the newest and leaves no unreferenced piece.
func TestSnapshotsIncrementalFullAndPrune(t *testing.T) {
	dir, store := fileStore(t)
	c := clustertest.Start(t, 3, clustertest.Options{Configure: allowStore(store, smallCheckpoints)})
	cluster := c.Node(0).ClusterID()
	writeMany(t, c, "a", 100)

	s1 := mustSnapshot(t, c, 1, &kvpb.CreateSnapshotRequest{Store: store})
	parts := int(c.Config(0).Partitions)
	if s1.GetPiecesUploaded() != uint32(parts) || s1.GetPiecesReused() != 0 || s1.GetBytesUploaded() == 0 {
		t.Fatalf("first snapshot: %v; want one piece per partition (%d), none reused", s1, parts)
	}
	writeMany(t, c, "b", 100)
	s2 := mustSnapshot(t, c, 2, &kvpb.CreateSnapshotRequest{Store: store})
	if s2.GetPiecesReused() != uint32(parts) || s2.GetPiecesUploaded() != uint32(parts) {
		t.Fatalf("second snapshot: %v; want the %d first pieces reused and one new piece each", s2, parts)
	}
	if s2.GetBytesUploaded() >= s1.GetBytesUploaded()*3/2 {
		t.Fatalf("second snapshot uploaded %d bytes, the first %d: not incremental", s2.GetBytesUploaded(), s1.GetBytesUploaded())
	}

	// After a checkpoint, the node's new materializations become bases.
	checkpointAll(t, c, 0)
	writeMany(t, c, "c", 20)
	s3 := mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store})
	info := getSnapshot(t, c, store, s3.GetSnapshot().GetId())
	for _, p := range info.GetPartitions() {
		if p.GetBaseName() == "" || p.GetBaseIndex() >= p.GetPos() {
			t.Fatalf("snapshot after a checkpoint: partition %d has base %q at %d (pos %d)", p.GetPartition(), p.GetBaseName(), p.GetBaseIndex(), p.GetPos())
		}
		// Partitions on Pebble: the base is a checkpoint, its files
		// stored apart.
		if !strings.HasSuffix(p.GetBaseName(), ".ckpt") || len(p.GetBaseFiles()) == 0 {
			t.Fatalf("partition %d: base %q with %d files, want a checkpoint base", p.GetPartition(), p.GetBaseName(), len(p.GetBaseFiles()))
		}
	}
	if s3.GetBaseFileBytes() == 0 {
		t.Fatalf("snapshot after a checkpoint uploaded no checkpoint file: %v", s3)
	}

	// A second checkpoint after a few writes: the new bases share the
	// older SSTs, which are referenced, not uploaded again.
	checkpointAll(t, c, 0)
	writeMany(t, c, "d", 5)
	s4 := mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store})
	if s4.GetBaseFilesReused() == 0 || s4.GetBaseFileBytes() >= s3.GetBaseFileBytes()+s3.GetBaseBytesReused() {
		t.Fatalf("snapshot after a second checkpoint: %d base file bytes uploaded, %d files (%d bytes) reused; the first checkpoint's uploaded %d: not incremental",
			s4.GetBaseFileBytes(), s4.GetBaseFilesReused(), s4.GetBaseBytesReused(), s3.GetBaseFileBytes())
	}
	t.Logf("checkpoint bases: first %d file bytes uploaded; second %d uploaded, %d files (%d bytes) reused",
		s3.GetBaseFileBytes(), s4.GetBaseFileBytes(), s4.GetBaseFilesReused(), s4.GetBaseBytesReused())

	// Checkpoints back to back pile up level-0 files until a compaction
	// rewrites them; the next bases upload its output, which the result
	// counts apart (never more than the files uploaded).
	var compacted *kvpb.CreateSnapshotResult
	var rounds []*kvpb.CreateSnapshotResult
	for round := 0; round < 12 && compacted == nil; round++ {
		writeMany(t, c, fmt.Sprintf("e%d-", round), 20)
		checkpointAll(t, c, 0)
		s := mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store})
		rounds = append(rounds, s)
		if s.GetBaseCompactedBytes() > s.GetBaseFileBytes() {
			t.Fatalf("round %d: %d compacted bytes among %d file bytes uploaded", round, s.GetBaseCompactedBytes(), s.GetBaseFileBytes())
		}
		if s.GetBaseCompactedBytes() > 0 {
			compacted = s
		}
	}
	if compacted == nil {
		t.Fatal("12 checkpoints in a row: no snapshot uploaded a file a compaction wrote")
	}
	t.Logf("after compactions: %d of %d file bytes uploaded were compaction outputs", compacted.GetBaseCompactedBytes(), compacted.GetBaseFileBytes())
	if s3.GetBaseCompactedBytes() > s3.GetBaseFileBytes() || s4.GetBaseCompactedBytes() > s4.GetBaseFileBytes() {
		t.Fatalf("compacted bytes above the file bytes: %v, %v", s3, s4)
	}

	// Full: a base exactly before each partition's position.
	full := mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store, Full: true})
	finfo := getSnapshot(t, c, store, full.GetSnapshot().GetId())
	for _, p := range finfo.GetPartitions() {
		if p.GetBaseIndex() != p.GetPos()-1 || len(p.GetPieces()) != 1 {
			t.Fatalf("full snapshot: partition %d: base %d, pos %d, %d pieces", p.GetPartition(), p.GetBaseIndex(), p.GetPos(), len(p.GetPieces()))
		}
	}

	// Incremental size after the full one: X bytes of new 1 KiB values.
	const nValues = 200
	value := strings.Repeat("v", 1024)
	for i := range nValues {
		put(t, c, i%3, fmt.Sprintf("inc-%04d", i), value)
	}
	x := uint64(nValues * (1024 + len("inc-0000")))
	inc := mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store})
	if inc.GetBytesUploaded() > x*3/2 {
		t.Fatalf("incremental after full: %d bytes uploaded for %d bytes written (limit 1.5x = %d)", inc.GetBytesUploaded(), x, x*3/2)
	}
	t.Logf("incremental after full: %d bytes uploaded for %d bytes written (%.2fx)", inc.GetBytesUploaded(), x, float64(inc.GetBytesUploaded())/float64(x))

	all := append(append([]*kvpb.CreateSnapshotResult{s1, s2, s3, s4}, rounds...), full, inc)
	for _, s := range all {
		if r := checkSnapshot(t, c, store, s.GetSnapshot().GetId()); !r.GetOk() {
			t.Fatalf("check %s: %v", s.GetSnapshot().GetId(), r)
		}
	}
	list, err := kvrpc.NewClusterClient(c.Conn(2)).ListSnapshots(ctxT(t, 10*time.Second), &kvpb.ListSnapshotsRequest{Store: store})
	if err != nil || len(list.GetSnapshots()) != len(all) {
		t.Fatalf("list: %v, %v", list, err)
	}
	// Taking the same cut twice is refused.
	if _, _, err := createSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store, CutVersion: inc.GetSnapshot().GetCutVersion()}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("snapshot of a cut already stored: %v", err)
	}

	// Prune to the newest two: they still check, and every piece left is
	// referenced by one of them.
	gc, err := kvrpc.NewClusterClient(c.Conn(0)).PruneSnapshots(ctxT(t, 30*time.Second), &kvpb.PruneSnapshotsRequest{Store: store, KeepLast: 2})
	if err != nil || len(gc.GetDeletedSnapshots()) != len(all)-2 || len(gc.GetDeletedPieces()) == 0 {
		t.Fatalf("prune: %v, %v", gc, err)
	}
	var refs []string
	for _, s := range all[len(all)-2:] {
		if r := checkSnapshot(t, c, store, s.GetSnapshot().GetId()); !r.GetOk() {
			t.Fatalf("check %s after prune: %v", s.GetSnapshot().GetId(), r)
		}
		for _, p := range getSnapshot(t, c, store, s.GetSnapshot().GetId()).GetPartitions() {
			if p.GetBaseName() != "" {
				refs = append(refs, p.GetBaseName())
			}
			for _, f := range p.GetBaseFiles() {
				refs = append(refs, f.GetName())
			}
			for _, pc := range p.GetPieces() {
				refs = append(refs, pc.GetName())
			}
		}
	}
	slices.Sort(refs)
	refs = slices.Compact(refs)
	if got := storePieces(t, dir, cluster); !slices.Equal(got, refs) {
		t.Fatalf("pieces left after prune:\n%v\nreferenced by the kept snapshots:\n%v", got, refs)
	}
	if _, err := kvrpc.NewClusterClient(c.Conn(0)).PruneSnapshots(ctxT(t, 10*time.Second), &kvpb.PruneSnapshotsRequest{Store: store}); err == nil {
		t.Fatal("prune without keep-last or keep-within was accepted")
	}
}

func getSnapshot(t *testing.T, c *clustertest.Cluster, store, id string) *kvpb.SnapshotInfo {
	t.Helper()
	r, err := kvrpc.NewClusterClient(c.Conn(1)).GetSnapshot(ctxT(t, 10*time.Second), &kvpb.GetSnapshotRequest{Store: store, Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetSnapshot()
}

// TestSnapshotCheckNamesDamage flips a byte in a stored piece and removes
// another: check fails naming each.
func TestSnapshotCheckNamesDamage(t *testing.T) {
	dir, store := fileStore(t)
	c := clustertest.Start(t, 3, clustertest.Options{Configure: allowStore(store, smallCheckpoints)})
	writeMany(t, c, "a", 50)
	s := mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store})
	info := getSnapshot(t, c, store, s.GetSnapshot().GetId())
	piece := func(i int) (string, string) {
		p := info.GetPartitions()[i]
		name := p.GetPieces()[0].GetName()
		return name, filepath.Join(dir, fmt.Sprintf("%016x", c.Node(0).ClusterID()), "pieces", name)
	}
	name, path := piece(1)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
	r := checkSnapshot(t, c, store, s.GetSnapshot().GetId())
	if r.GetOk() || r.GetPiece() != name || r.GetPartition() != info.GetPartitions()[1].GetPartition() {
		t.Fatalf("check of a flipped byte in %s: %v", name, r)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
	name, path = piece(2)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r = checkSnapshot(t, c, store, s.GetSnapshot().GetId())
	if r.GetOk() || r.GetPiece() != name || !strings.Contains(r.GetError(), "missing") {
		t.Fatalf("check with %s deleted: %v", name, r)
	}
}

// TestAutomaticSnapshots runs --snapshot-interval on a busy cluster: the
// group-0 leader keeps taking snapshots and prunes to --snapshot-keep.
func TestAutomaticSnapshots(t *testing.T) {
	_, store := fileStore(t)
	c := clustertest.Start(t, 3, clustertest.Options{Configure: func(i int, cfg *server.Config) {
		smallCheckpoints(i, cfg)
		cfg.SnapshotStore = store
		cfg.SnapshotInterval = 200 * time.Millisecond
		cfg.SnapshotKeep = 3
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
			_, _ = c.KV(i%3).Put(wctx, &kvpb.PutRequest{Key: []byte(fmt.Sprintf("auto-%d", i%500)), Value: []byte("x")})
			wcancel()
		}
	}()
	cluster := c.Node(0).ClusterID()
	st, err := snapshot.OpenStore(ctxT(t, 5*time.Second), store, cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var seen []string
	clustertest.Eventually(t, 60*time.Second, func() error {
		ids, err := st.IDs(ctxT(t, 5*time.Second))
		if err != nil {
			return err
		}
		for _, id := range ids {
			if !slices.Contains(seen, id) {
				seen = append(seen, id)
			}
		}
		if len(seen) < 12 {
			return fmt.Errorf("%d automatic snapshots seen so far", len(seen))
		}
		return nil
	})
	// Pruned to the newest few (one more may have arrived since). Stop the
	// nodes first: a prune must not delete what is being checked.
	cancel()
	c.Close()
	ms, err := st.List(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) >= len(seen) {
		t.Fatalf("%d snapshots kept of %d taken with --snapshot-keep 3: nothing pruned", len(ms), len(seen))
	}
	for _, m := range ms {
		if err := st.Check(ctxT(t, 30*time.Second), m.ID); err != nil {
			t.Fatal(err)
		}
		if m.KeyHash != keyspace.HashName {
			t.Fatalf("manifest key hash %q", m.KeyHash)
		}
	}
}

// TestSnapshotWithANodeDown: a snapshot needs every partition, not every
// node: with one node stopped, partitions it led move, and the replicas
// left prepare and upload their parts.
func TestSnapshotWithANodeDown(t *testing.T) {
	_, store := fileStore(t)
	c := clustertest.Start(t, 3, clustertest.Options{Configure: allowStore(store, smallCheckpoints)})
	writeMany(t, c, "a", 60)
	mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store})
	c.Stop(2)
	writeMany(t, c, "b", 30, 0, 1)
	var res *kvpb.CreateSnapshotResult
	clustertest.Eventually(t, 30*time.Second, func() error {
		var err error
		res, _, err = createSnapshot(t, c, 1, &kvpb.CreateSnapshotRequest{Store: store})
		return err
	})
	if r := checkSnapshot(t, c, store, res.GetSnapshot().GetId()); !r.GetOk() {
		t.Fatalf("snapshot with n3 down does not check: %v", r)
	}
	if res.GetPiecesReused() == 0 {
		t.Fatalf("snapshot with n3 down reused nothing: %v", res)
	}
}

// TestSnapshotUploadRate: with --snapshot-upload-rate a node reads what
// it uploads, and reads and writes what it builds for a full snapshot, at
// no more than that many bytes per second. On one node an incremental
// snapshot of B bytes takes at least B at that rate (less a burst after
// each idle spell), and a
// full one of F bytes at least 2F (each image is written, then uploaded);
// unpaced they take a fraction of that. The snapshots are whole.
func TestSnapshotUploadRate(t *testing.T) {
	const rate = 64 << 10
	_, store := fileStore(t)
	c := clustertest.Start(t, 1, clustertest.Options{Configure: allowStore(store, func(i int, cfg *server.Config) {
		cfg.SnapshotUploadRate = rate
	})})
	const n, size = 50, 4 << 10
	value := strings.Repeat("r", size)
	for i := range n {
		put(t, c, 0, fmt.Sprintf("rate-%04d", i), value)
	}
	for _, full := range []bool{false, true} {
		start := time.Now()
		res := mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{Store: store, Full: full})
		took := time.Since(start)
		b := res.GetBytesUploaded()
		passes := 1.0 // bytes paced per byte uploaded
		if full {
			passes = 2
		}
		floor := time.Duration(passes*float64(b)/rate*float64(time.Second)) - 400*time.Millisecond // a burst per idle phase
		t.Logf("full=%v: %d bytes uploaded in %v at %d B/s (floor %v)", full, b, took, rate, floor)
		if b < n*size {
			t.Fatalf("full=%v: uploaded %d bytes, less than the %d written", full, b, n*size)
		}
		if took < floor {
			t.Fatalf("full=%v: %d bytes uploaded by a node limited to %d B/s in %v, under the %v the limit allows", full, b, rate, took, floor)
		}
		if r := checkSnapshot(t, c, store, res.GetSnapshot().GetId()); !r.GetOk() {
			t.Fatalf("check: %v", r)
		}
	}
}
