package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/restore"
	"github.com/cutkv/cutkv/restore/restoretest"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/topology"
)

// TestRestoredClusterRuns restores a snapshot onto three nodes, starts
// them, and checks that the cluster holds the snapshot's state, takes new
// writes and completes a cut above the snapshot's, also after a restart.
func TestRestoredClusterRuns(t *testing.T) {
	const parts = 4
	f := restoretest.Build(t, restoretest.Options{Partitions: parts})
	m := f.Snapshots[0]
	base := t.TempDir()
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: parts, Configure: func(i int, cfg *server.Config) {
		dir := filepath.Join(base, cfg.ID)
		res, err := restore.Run(context.Background(), restore.Options{
			StoreURL: f.URL, Snapshot: m.ID, DataDir: dir, NodeID: cfg.ID, InitialCluster: cfg.InitialCluster,
		})
		if err != nil {
			t.Fatalf("restore %s: %v", cfg.ID, err)
		}
		if res.Layout.ClusterID != 0 {
			t.Fatalf("restore %s wrote cluster id %x; the members draw it at their first start", cfg.ID, res.Layout.ClusterID)
		}
		// The node starts with the usual flags: --initial-cluster and a
		// token other than the restore's are accepted for a restored dir.
		cfg.DataDir = dir
	}})
	newCluster := c.Node(0).ClusterID()
	for i := 0; i < 3; i++ {
		if got := c.Node(i).ClusterID(); got != newCluster || got == f.Cluster || got == 0 {
			t.Fatalf("node %d runs cluster %x; n1 runs %x, restored from %x", i+1, got, newCluster, f.Cluster)
		}
	}
	cl, err := client.New(ctxT(t, 10*time.Second), c.Endpoints()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	checkState := func() {
		t.Helper()
		for g := uint64(1); g <= parts; g++ {
			want := f.Want(t, m, g)
			for k, v := range want {
				kv, err := cl.Get(ctxT(t, 10*time.Second), []byte(k))
				if err != nil {
					t.Fatalf("get %q (partition %d): %v", k, g, err)
				}
				if !bytes.Equal(kv.Value, v) {
					t.Fatalf("get %q (partition %d) = %q, want %q", k, g, kv.Value, v)
				}
			}
			// TF aborted: its key never existed; TA is after the cut.
			if _, err := cl.Get(ctxT(t, 10*time.Second), []byte(restoretest.Key(g, parts, 5))); !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("partition %d: TF's key: %v, want not found", g, err)
			}
		}
		for g := uint64(1); g <= 2; g++ {
			if kv, err := cl.Get(ctxT(t, 10*time.Second), []byte(restoretest.Key(g, parts, 2))); err != nil || string(kv.Value) != fmt.Sprintf("tb%d", g) {
				t.Fatalf("partition %d: TB's key = %q, %v; want tb%d (TB is before the cut)", g, kv.Value, err, g)
			}
			if kv, err := cl.Get(ctxT(t, 10*time.Second), []byte(restoretest.Key(g, parts, 3))); err != nil || string(kv.Value) != "a3" {
				t.Fatalf("partition %d: TA's key = %q, %v; want a3 (TA is after the cut)", g, kv.Value, err)
			}
		}
	}
	checkState()

	// New writes, and a write over a restored key and transaction.
	for k := 0; k < 20; k++ {
		if err := cl.Put(ctxT(t, 10*time.Second), []byte(fmt.Sprintf("new-%02d", k)), []byte(fmt.Sprint(k))); err != nil {
			t.Fatal(err)
		}
	}
	tbKey := []byte(restoretest.Key(1, parts, 2))
	old, err := cl.Get(ctxT(t, 10*time.Second), tbKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Put(ctxT(t, 10*time.Second), tbKey, []byte("rewritten")); err != nil {
		t.Fatal(err)
	}
	kv, err := cl.Get(ctxT(t, 10*time.Second), tbKey)
	if err != nil || string(kv.Value) != "rewritten" || kv.Version != old.Version+1 || kv.ModIndex <= m.Partitions[0].Pos-1 {
		t.Fatalf("after rewriting %q: %+v, %v (before: %+v); want version +1 and a mod index past the restored %d", tbKey, kv, err, old, m.Partitions[0].Pos-1)
	}

	// A cut completes, above the snapshot's.
	cc := kvrpc.NewClusterClient(c.Conn(0))
	var cut *kvpb.CutInfo
	clustertest.Eventually(t, 30*time.Second, func() error {
		r, err := cc.CreateCut(ctxT(t, 15*time.Second), &kvpb.CreateCutRequest{})
		if err != nil {
			return err
		}
		if cut = r.GetCut(); cut.GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
			return fmt.Errorf("cut %d %v: %s", cut.GetVersion(), cut.GetState(), cut.GetError())
		}
		return nil
	})
	if cut.GetVersion() <= m.CutVersion {
		t.Fatalf("first cut of the restored cluster is %d, not above the snapshot's %d", cut.GetVersion(), m.CutVersion)
	}
	for _, p := range cut.GetPartitions() {
		if p.GetPos() < m.Partitions[p.GetPartition()-1].Pos {
			t.Errorf("cut %d partition %d at pos %d, inside the restored state (< %d)", cut.GetVersion(), p.GetPartition(), p.GetPos(), m.Partitions[p.GetPartition()-1].Pos)
		}
	}
	chk, err := cc.Check(ctxT(t, 20*time.Second), &kvpb.CheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range chk.GetPartitions() {
		if !p.GetConsistent() {
			t.Errorf("partition %d not consistent across replicas: %v", p.GetPartition(), p)
		}
	}

	// A restart replays its WAL on top of the restored materializations.
	c.Stop(2)
	c.Restart(2)
	kv, err = cl.Get(ctxT(t, 10*time.Second), []byte("new-07"))
	if err != nil || string(kv.Value) != "7" {
		t.Fatalf("after a restart: new-07 = %q, %v", kv.Value, err)
	}
	if err := cl.Put(ctxT(t, 10*time.Second), tbKey, []byte(fmt.Sprintf("tb%d", 1))); err != nil {
		t.Fatal(err)
	}
	checkState()
}

// restoredDir restores the fixture's first snapshot for node n1 of the
// given members and returns the data dir.
func restoredDir(t *testing.T, f *restoretest.Fixture, initial string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "n1")
	if _, err := restore.Run(context.Background(), restore.Options{
		StoreURL: f.URL, Snapshot: f.Snapshots[0].ID, DataDir: dir, NodeID: "n1", InitialCluster: initial,
	}); err != nil {
		t.Fatal(err)
	}
	return dir
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func nodeConfig(dir, initial string, parts uint32, token string) server.Config {
	return server.Config{
		ID: "n1", DataDir: dir, GRPCAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		InitialCluster: initial, InitialClusterToken: token, Partitions: parts,
		TickInterval: 20 * time.Millisecond, ShutdownTimeout: time.Second,
	}
}

// TestRestoredIdentity: which --initial-cluster a restored data dir
// accepts, and that an unfinished restore never starts.
func TestRestoredIdentity(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{})
	const initial = "n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003"
	dir := restoredDir(t, f, initial)
	for name, c := range map[string]struct {
		cfg  server.Config
		says string
	}{
		"another address": {nodeConfig(dir, strings.Replace(initial, "7003", "7004", 1), 4, "cutkv"), "was restored from snapshot " + fmt.Sprintf("%016x/%s", f.Cluster, f.Snapshots[0].ID)},
		"another member":  {nodeConfig(dir, initial+",n4=127.0.0.1:7004", 4, "cutkv"), "--partitions 4"},
		"member order":    {nodeConfig(dir, "n1=127.0.0.1:7001,n3=127.0.0.1:7003,n2=127.0.0.1:7002", 4, "cutkv"), "members " + initial},
		"partitions":      {nodeConfig(dir, initial, 16, "cutkv"), "with 4 partitions"},
	} {
		n, err := server.Start(c.cfg, quiet)
		if err == nil {
			n.Kill()
		}
		if !errors.Is(err, server.ErrWrongCluster) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want ErrWrongCluster saying %q", name, err, c.says)
		}
	}

	// A data dir that is not restored keeps refusing another token.
	plain := t.TempDir()
	ms, err := topology.ParseInitialCluster(initial)
	if err != nil {
		t.Fatal(err)
	}
	l, err := topology.New("first", ms, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := datadir.CreateIdentity(plain, datadir.Identity{NodeID: "n1", Layout: l}); err != nil {
		t.Fatal(err)
	}
	if n, err := server.Start(nodeConfig(plain, initial, 4, "second"), quiet); !errors.Is(err, server.ErrWrongCluster) {
		if err == nil {
			n.Kill()
		}
		t.Fatalf("plain data dir with another token: %v, want ErrWrongCluster", err)
	}
	if err := datadir.CreateIdentity(plain, datadir.Identity{NodeID: "n1", Layout: l}); err == nil || !strings.Contains(err.Error(), "never replaced") {
		t.Fatalf("CreateIdentity over an identity: %v", err)
	}
	if err := datadir.CreateIdentity(t.TempDir(), datadir.Identity{NodeID: "n9", Layout: l}); !errors.Is(err, datadir.ErrNotMember) {
		t.Fatalf("CreateIdentity of a non-member: %v, want ErrNotMember", err)
	}

	// An unfinished restore (the marker is there) never starts, whatever
	// the flags.
	if err := os.WriteFile(filepath.Join(dir, datadir.RestoreMarkerFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []server.Config{nodeConfig(dir, initial, 4, "cutkv"), nodeConfig(dir, "", 4, "")} {
		n, err := server.Start(cfg, quiet)
		if err == nil {
			n.Kill()
		}
		if !errors.Is(err, server.ErrRestoreIncomplete) || !strings.Contains(err.Error(), "run kvnode restore again") {
			t.Fatalf("start on an unfinished restore: %v, want ErrRestoreIncomplete", err)
		}
	}
}

// TestCreateIdentityAsBootstrap: CreateIdentity writes the file a node
// bootstrapping the same cluster writes, byte for byte, but restored_from
// (given the cluster id the bootstrap drew).
func TestCreateIdentityAsBootstrap(t *testing.T) {
	const initial = "n1=127.0.0.1:7001"
	dir := t.TempDir()
	cfg := nodeConfig(dir, initial, 2, "tok")
	cfg.HTTPAddr = ""
	n, err := server.Start(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	id := n.ClusterID()
	n.Kill()
	boot, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := topology.ParseInitialCluster(initial)
	l, err := topology.New("tok", ms, 2)
	if err != nil {
		t.Fatal(err)
	}
	l.ClusterID = id // random, drawn by the bootstrap
	other := t.TempDir()
	if err := datadir.CreateIdentity(other, datadir.Identity{NodeID: "n1", Layout: l}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(other, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, boot) {
		t.Fatalf("CreateIdentity wrote\n%s\na bootstrap wrote\n%s", got, boot)
	}
}
