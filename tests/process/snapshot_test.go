package process

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKvctlSnapshotsAndRestore is the user path with the real
// binaries: a 3-node cluster sharing one file:// store takes snapshots
// with kvctl (the second reuses the first's pieces), lists and checks
// them; a flipped byte in a piece makes kvctl snapshot check exit 9 and
// kvnode restore refuse, both naming the piece; the repaired snapshot is
// restored with kvnode restore onto one node, which starts and serves
// every key written before the snapshot's cut.
func TestKvctlSnapshotsAndRestore(t *testing.T) {
	storeDir := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(storeDir, 0o750); err != nil {
		t.Fatal(err)
	}
	store := (&url.URL{Scheme: "file", Path: storeDir}).String()
	c := NewCluster(t, Spec{Bin: bin.Kvnode, Configure: func(n *Node) {
		n.Flags = append(n.Flags, "--snapshot-store", store)
	}})
	ctl := func(args ...string) kvctlResult { t.Helper(); return c.Kvctl(t, args...) }
	want := map[string]string{}
	put := func(prefix string, n int) {
		for i := range n {
			k, v := fmt.Sprintf("%s/%02d", prefix, i), fmt.Sprintf("value-%s-%d", prefix, i)
			if r := ctl("put", k, v); r.code != 0 {
				t.Fatal(r)
			}
			want[k] = v
		}
	}
	put("a", 20)
	first := ctl("snapshot", "create")
	if first.code != 0 || !strings.Contains(first.stdout, "cut-") {
		t.Fatalf("first snapshot: %v", first)
	}
	put("b", 20)
	second := ctl("-o", "json", "snapshot", "create")
	if second.code != 0 {
		t.Fatal(second)
	}
	var res struct {
		Result struct {
			Snapshot struct {
				ID string `json:"id"`
			} `json:"snapshot"`
			PiecesReused uint32 `json:"pieces_reused"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(second.stdout), &res); err != nil || res.Result.Snapshot.ID == "" {
		t.Fatalf("snapshot create -o json: %v\n%v", err, second)
	}
	if res.Result.PiecesReused == 0 {
		t.Fatalf("the second snapshot reused nothing: %v", second)
	}
	id := res.Result.Snapshot.ID
	if r := ctl("snapshot", "list"); r.code != 0 || strings.Count(r.stdout, "cut-") != 2 {
		t.Fatalf("snapshot list: %v", r)
	}
	if r := ctl("snapshot", "check", id); r.code != 0 {
		t.Fatalf("snapshot check: %v", r)
	}

	// Damage the newest piece of the second snapshot.
	show := ctl("-o", "json", "snapshot", "show", id)
	var info struct {
		Snapshot struct {
			Cluster    string `json:"cluster"`
			Partitions []struct {
				Pieces []struct {
					Name string `json:"name"`
				} `json:"pieces"`
			} `json:"partitions"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(show.stdout), &info); err != nil || len(info.Snapshot.Partitions) == 0 {
		t.Fatalf("snapshot show -o json: %v\n%v", err, show)
	}
	ps := info.Snapshot.Partitions[0].Pieces
	piece := ps[len(ps)-1].Name
	path := filepath.Join(storeDir, info.Snapshot.Cluster, "pieces", piece)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if r := ctl("snapshot", "check", id); r.code != 9 || !strings.Contains(r.stdout+r.stderr, piece) {
		t.Fatalf("check of a damaged snapshot: want exit 9 naming %s; %v", piece, r)
	}
	for _, n := range c.Nodes {
		n.Signal(os.Interrupt)
	}

	s := newSingle(t)
	restoreArgs := []string{"restore", "--store", store, "--snapshot", id, "--id", "n1", "--data-dir", s.dir,
		"--initial-cluster", "n1=" + s.peer}
	if code, out := runKvnodeToExit(t, restoreArgs...); code != 1 || !strings.Contains(out, piece) {
		t.Fatalf("restore of a damaged snapshot: exit %d, want 1 naming %s; output:\n%s", code, piece, out)
	}
	if ents, _ := os.ReadDir(s.dir); len(ents) > 0 {
		t.Fatalf("a refused restore left %d entries in %s", len(ents), s.dir)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if code, out := runKvnodeToExit(t, restoreArgs...); code != 0 {
		t.Fatalf("restore: exit %d; output:\n%s", code, out)
	}
	p := startReady(t, "restored", "--id", "n1", "--data-dir", s.dir, "--grpc-addr", s.grpc, "--peer-addr", s.peer, "--gossip-addr", s.gossip,
		"--http-addr", s.http, "--raft-tick", "50ms")
	defer p.signal(os.Interrupt)
	for k, v := range want {
		r := runKvctl(t, nil, nil, "--endpoints", s.grpc, "get", k)
		if r.code != 0 || strings.TrimSpace(r.stdout) != v {
			t.Fatalf("restored node: get %s: want %q; %v", k, v, r)
		}
	}
	if r := runKvctl(t, nil, nil, "--endpoints", s.grpc, "put", "after", "restore"); r.code != 0 {
		t.Fatalf("write to the restored node: %v", r)
	}
}
