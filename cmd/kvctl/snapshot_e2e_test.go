package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/rpc"
	"github.com/cutkv/cutkv/server"
)

// TestSnapshotsAgainstRealCluster runs every snapshot command against
// in-process nodes and a file:// store.
func TestSnapshotsAgainstRealCluster(t *testing.T) {
	// A store other than the nodes' own, which they allow requests to name.
	store := (&url.URL{Scheme: "file", Path: filepath.ToSlash(t.TempDir())}).String()
	// And one allowed that does not exist.
	missing := (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(t.TempDir(), "missing"))}).String()
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 2, Configure: func(i int, cfg *server.Config) {
		cfg.SnapshotStoreAllow = []string{store, missing}
	}})
	ctl := func(args ...string) result {
		t.Helper()
		return kvctl(t, nil, "", append([]string{"--endpoints=" + strings.Join(c.Endpoints(), ","), "--timeout=1m"}, args...)...)
	}
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if r := ctl("put", fmt.Sprintf("k%02d", i), "v"); r.code != 0 {
				t.Fatalf("put: %+v", r)
			}
		}
	}
	put(0, 10)
	// The puts needed only the partitions' leaders; snapshots are run by
	// group 0's, which may still be moving to its preferred node.
	clustertest.Eventually(t, 10*time.Second, func() error {
		if r := ctl("cut", "list"); r.code != 0 {
			return fmt.Errorf("kvctl cut list: %+v", r)
		}
		return nil
	})

	var first, second struct {
		Result jsonSnapshotResult `json:"result"`
	}
	r := ctl("-o", "json", "snapshot", "create", "--store", store)
	decode(t, r, &first)
	if r.code != 0 || first.Result.Snapshot.ID == "" || first.Result.Snapshot.CutVersion == 0 || first.Result.Snapshot.PartitionCount != 2 ||
		first.Result.Store != store || first.Result.PiecesUploaded == 0 || !strings.Contains(r.stderr, "manifest: ") {
		t.Fatalf("snapshot create: %+v", r)
	}
	put(10, 20)
	r = ctl("snapshot", "create", "--store", store)
	if r.code != 0 || !strings.Contains(r.stdout, "pieces reused") {
		t.Fatalf("second snapshot create: %+v", r)
	}
	decode(t, ctl("-o", "json", "snapshot", "show", "--store", store, first.Result.Snapshot.ID), &struct{}{})

	var list jsonSnapshotList
	r = ctl("-o", "json", "snapshot", "list", "--store", store)
	decode(t, r, &list)
	if r.code != 0 || len(list.Snapshots) != 2 || list.Snapshots[0].ID != first.Result.Snapshot.ID || list.Store != store {
		t.Fatalf("snapshot list: %+v", r)
	}
	second.Result.Snapshot = list.Snapshots[1]
	if r := ctl("snapshot", "list", "--store", store); r.code != 0 || strings.Count(r.stdout, "\n") != 5 {
		t.Errorf("snapshot list text: %+v", r)
	}

	r = ctl("snapshot", "show", "-v", "--store", store, second.Result.Snapshot.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "PARTITION  POS") || !strings.Contains(r.stdout, ".log") {
		t.Errorf("snapshot show -v: %+v", r)
	}
	r = ctl("snapshot", "check", "--store", store, second.Result.Snapshot.ID)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "snapshot "+second.Result.Snapshot.ID+" ok: ") {
		t.Errorf("snapshot check: %+v", r)
	}
	if r := ctl("snapshot", "show", "--store", store, "cut-00000000000000999999"); r.code != 1 || !strings.Contains(r.stderr, "kvctl snapshot list") {
		t.Errorf("snapshot show of an unknown snapshot: %+v", r)
	}

	r = ctl("snapshot", "prune", "--store", store, "--keep-last", "1")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "deleted 1 snapshot\n  "+first.Result.Snapshot.ID+"\n") {
		t.Errorf("snapshot prune: %+v", r)
	}
	r = ctl("snapshot", "delete", "--store", store, second.Result.Snapshot.ID)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "deleted 1 snapshot\n  "+second.Result.Snapshot.ID+"\n") {
		t.Errorf("snapshot delete: %+v", r)
	}
	if r := ctl("snapshot", "list", "--store", store, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"snapshots":[]`) {
		t.Errorf("snapshot list after delete: %+v", r)
	}

	// A store that does not exist: the hint says to create it or point
	// --store elsewhere, not to run the command that just failed.
	for _, args := range [][]string{{"snapshot", "list"}, {"snapshot", "show", "1"}, {"snapshot", "create"}} {
		r := ctl(append(args, "--store", missing)...)
		if r.code != exitNotFound || !strings.Contains(r.stderr, "does not exist") || !strings.Contains(r.stderr, "create it") ||
			strings.Contains(r.stderr, "'kvctl snapshot list'") {
			t.Errorf("kvctl %s on a store that does not exist: %+v", strings.Join(args, " "), r)
		}
		t.Logf("kvctl %s on a store that does not exist:\n%s", strings.Join(args, " "), r.stderr)
	}
}

func TestNoStoreReasonAgreesWithServer(t *testing.T) {
	if reasonNoStore != rpc.ReasonNoStore || reasonStoreAccess != rpc.ReasonStoreAccess {
		t.Fatalf("kvctl looks for reasons %q and %q, the server sends %q and %q", reasonNoStore, reasonStoreAccess, rpc.ReasonNoStore, rpc.ReasonStoreAccess)
	}
}
