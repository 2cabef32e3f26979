package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/client/clienttest"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// A full checkpoint of two nodes holding groups 0 to 2, and one in which
// group 2 failed on n1 and n3 could not be asked.
var (
	ckptOK = &kvpb.CheckpointResponse{Header: fakeHeader, Groups: []*kvpb.GroupCheckpoint{
		{Node: "n1", Group: 0, MaterializedIndex: 120},
		{Node: "n1", Group: 1, MaterializedIndex: 4031},
		{Node: "n1", Group: 2, MaterializedIndex: 880},
		{Node: "n2", Group: 0, MaterializedIndex: 120},
		{Node: "n2", Group: 1, MaterializedIndex: 4030},
		{Node: "n2", Group: 2, MaterializedIndex: 880},
	}}
	ckptPartial = &kvpb.CheckpointResponse{Header: fakeHeader, Groups: []*kvpb.GroupCheckpoint{
		{Node: "n1", Group: 0, MaterializedIndex: 120},
		{Node: "n1", Group: 1, MaterializedIndex: 4031},
		{Node: "n1", Group: 2, Error: "checkpoint: writing p0002: no space left on device"},
		{Node: "n2", Group: 0, MaterializedIndex: 120},
		{Node: "n2", Group: 1, MaterializedIndex: 4030},
		{Node: "n2", Group: 2, MaterializedIndex: 880},
		{Node: "n3", Error: "rpc error: code = Unavailable desc = connection refused", NotAsked: true},
	}}
)

func TestCheckpointText(t *testing.T) {
	var b bytes.Buffer
	if err := writeCheckpointText(&b, checkpointRows(ckptOK.GetGroups())); err != nil {
		t.Fatal(err)
	}
	want := `NODE  GROUP  MATERIALIZED  ERROR
n1    0      120           -
n1    1      4031          -
n1    2      880           -
n2    0      120           -
n2    1      4030          -
n2    2      880           -
6 of 6 groups materialized on 2 nodes
`
	if b.String() != want {
		t.Errorf("full checkpoint:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	if err := writeCheckpointText(&b, checkpointRows(ckptPartial.GetGroups())); err != nil {
		t.Fatal(err)
	}
	want = `NODE  GROUP  MATERIALIZED  ERROR
n1    0      120           -
n1    1      4031          -
n1    2      -             checkpoint: writing p0002: no space left on device
n2    0      120           -
n2    1      4030          -
n2    2      880           -
n3    -      -             rpc error: code = Unavailable desc = connection refused
5 of 6 groups materialized on 2 of 3 nodes (not asked: n3)
`
	if b.String() != want {
		t.Errorf("partial checkpoint:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestCheckpointRows: a row stands for a node that could not be asked
// exactly when the server says so.
func TestCheckpointRows(t *testing.T) {
	rows := checkpointRows([]*kvpb.GroupCheckpoint{{Node: "n1", Error: "down", NotAsked: true}, {Node: "n2", Error: "x"}, {Node: "n2", Group: 2}})
	for i, want := range []bool{true, false, false} {
		if rows[i].notAsked != want {
			t.Errorf("row %d notAsked %v, want %v", i, rows[i].notAsked, want)
		}
	}
}

func TestCheckpoint(t *testing.T) {
	f := startAdminFake(t)
	f.onCheckpoint(func(context.Context) (*kvpb.CheckpointResponse, error) { return ckptOK, nil })
	var text bytes.Buffer
	_ = writeCheckpointText(&text, checkpointRows(ckptOK.GetGroups()))
	want(t, fakeCtl(t, []*adminFake{f}, "checkpoint"), 0, text.String())
	// Without --timeout, checkpoint waits a minute.
	if d := f.Deadline(); d < 55*time.Second || d > time.Minute {
		t.Errorf("checkpoint without --timeout: deadline in %v, want 1m", d)
	}
	fakeCtl(t, []*adminFake{f}, "--timeout", "3s", "checkpoint")
	if d := f.Deadline(); d < time.Second || d > 3*time.Second {
		t.Errorf("checkpoint --timeout 3s: deadline in %v", d)
	}

	r := fakeCtl(t, []*adminFake{f}, "-o", "json", "checkpoint")
	want(t, r, 0, `{"header":{"cluster_id":"0000000000000c07","member_id":"n1","raft_term":0,"cut_version":7},"groups":[`+
		`{"node":"n1","group":0,"materialized_index":120},{"node":"n1","group":1,"materialized_index":4031},{"node":"n1","group":2,"materialized_index":880},`+
		`{"node":"n2","group":0,"materialized_index":120},{"node":"n2","group":1,"materialized_index":4030},{"node":"n2","group":2,"materialized_index":880}]}`+"\n")

	// A group not materialized and a node not asked: the table, then exit 8.
	f.onCheckpoint(func(context.Context) (*kvpb.CheckpointResponse, error) { return ckptPartial, nil })
	r = fakeCtl(t, []*adminFake{f}, "checkpoint")
	text.Reset()
	_ = writeCheckpointText(&text, checkpointRows(ckptPartial.GetGroups()))
	want(t, r, 8, text.String())
	if !strings.HasPrefix(r.stderr, "Error: checkpoint incomplete: 1 of 6 groups not materialized (n1/2); could not ask n3\n") ||
		!strings.Contains(r.stderr, "keeps its WAL tail") || !strings.Contains(r.stderr, "'kvctl status'") {
		t.Errorf("partial checkpoint: stderr %q", r.stderr)
	}
	var js jsonCheckpoint
	r = fakeCtl(t, []*adminFake{f}, "-o", "json", "checkpoint")
	decode(t, r, &js)
	if r.code != 8 || len(js.Groups) != 7 || js.Groups[2].Error == "" || js.Groups[2].MaterializedIndex != 0 ||
		js.Groups[6] != (jsonGroupCheckpoint{Node: "n3", Error: "rpc error: code = Unavailable desc = connection refused", NotAsked: true}) {
		t.Errorf("partial checkpoint json: exit %d, %s", r.code, r.stdout)
	}

	// Only a node not asked: exit 8 and no word about failed groups.
	f.onCheckpoint(func(context.Context) (*kvpb.CheckpointResponse, error) {
		return &kvpb.CheckpointResponse{Header: fakeHeader, Groups: append(ckptOK.GetGroups()[:3:3], ckptPartial.GetGroups()[6])}, nil
	})
	r = fakeCtl(t, []*adminFake{f}, "checkpoint")
	if r.code != 8 || !strings.HasSuffix(r.stdout, "\n3 of 3 groups materialized on 1 of 2 nodes (not asked: n3)\n") ||
		!strings.HasPrefix(r.stderr, "Error: checkpoint incomplete: could not ask n3\n") || strings.Contains(r.stderr, "WAL tail") {
		t.Errorf("checkpoint with a node not asked: %+v", r)
	}

	if r := fakeCtl(t, []*adminFake{f}, "checkpoint", "extra"); r.code != 2 || r.stdout != "" {
		t.Errorf("checkpoint with an argument: %+v; want exit 2", r)
	}
}

func TestCheckpointRetries(t *testing.T) {
	// The first node is shutting down: the second one answers.
	a, b := startAdminFake(t), startAdminFake(t)
	a.onCheckpoint(func(context.Context) (*kvpb.CheckpointResponse, error) {
		return nil, clienttest.NotApplied(clienttest.ReasonShuttingDown, "")
	})
	b.onCheckpoint(func(context.Context) (*kvpb.CheckpointResponse, error) { return ckptOK, nil })
	r := fakeCtl(t, []*adminFake{a, b}, "checkpoint")
	if r.code != 0 || a.Calls("Checkpoint") != 1 || b.Calls("Checkpoint") != 1 {
		t.Errorf("SHUTTING_DOWN then OK: exit %d, calls %d %d; %+v", r.code, a.Calls("Checkpoint"), b.Calls("Checkpoint"), r)
	}

	// The answer lost with the call in flight: it may have been taken,
	// exit 4.
	a.onCheckpoint(func(ctx context.Context) (*kvpb.CheckpointResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	r = fakeCtl(t, []*adminFake{a}, "--timeout", "300ms", "checkpoint")
	if r.code != 4 || !strings.Contains(r.stderr, "may have been taken") {
		t.Errorf("deadline with the call in flight: %+v", r)
	}
}

func TestStatusCheckpointColumns(t *testing.T) {
	f := startAdminFake(t)
	f.setStatus(&kvpb.StatusResponse{Header: fakeHeader, ClusterId: "0000000000000c07", Partitions: 2,
		Groups: []*kvpb.PartitionStatus{
			{Id: 0, Leader: "n1", Term: 3, CommitIndex: 120, AppliedIndex: 120, Replicas: []string{"n1", "n2"}, ReportedBy: "n1",
				MaterializedIndex: 118, Materializations: 2, WalTailEntries: 2, WalTailBytes: 312},
			{Id: 1, Leader: "n2", Term: 5, CommitIndex: 4031, AppliedIndex: 4031, Replicas: []string{"n1", "n2"}, ReportedBy: "n2", Keys: 12,
				MaterializedIndex: 3000, Materializations: 1, WalTailEntries: 1031, WalTailBytes: 1 << 20},
			{Id: 2, Term: 1, Replicas: []string{"n1", "n2"}, ReportedBy: "n1"},
		},
		Nodes: []*kvpb.NodeStatus{
			{Id: "n1", Serving: true, WalBytes: 1536, DiskFreeBytes: 20 << 30, WalFirstIndex: 40, WalLastIndex: 4200, Version: "test"},
			{Id: "n2", Error: "unreachable"},
		},
	})
	r := fakeCtl(t, []*adminFake{f}, "status")
	want(t, r, 0, `GROUP  LEADER  TERM  COMMIT  APPLIED  MATERIALIZED  MATS  WAL TAIL        REPLICAS
0      n1      3     120     120      118           2     2 (312 B)       n1,n2
1      n2      5     4031    4031     3000          1     1031 (1.0 MiB)  n1,n2
2      -       1     0       0        -             0     0 (0 B)         n1,n2

NODE  SERVING  WAL      FREE DISK  ERROR
n1    yes      1.5 KiB  20.0 GiB   -
n2    no       -        -          unreachable
`)

	var js jsonStatus
	r = fakeCtl(t, []*adminFake{f}, "-o", "json", "status")
	decode(t, r, &js)
	if g := js.Groups[1]; r.code != 0 || g.MaterializedIndex != 3000 || g.Materializations != 1 || g.WALTailEntries != 1031 || g.WALTailBytes != 1<<20 || g.Keys != 12 {
		t.Errorf("status json: exit %d, %s", r.code, r.stdout)
	}
	for _, field := range []string{`"materialized_index":0,"materializations":0,"wal_tail_entries":0,"wal_tail_bytes":0`, `"wal_first_index":40`} {
		if !strings.Contains(r.stdout, field) {
			t.Errorf("status json lacks %s: %s", field, r.stdout)
		}
	}
}

// TestCheckpointAgainstRealCluster runs checkpoint and status against
// in-process nodes.
func TestCheckpointAgainstRealCluster(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 4})
	eps := "--endpoints=" + strings.Join(c.Endpoints(), ",")
	ctl := func(args ...string) result {
		t.Helper()
		return kvctl(t, nil, "", append([]string{eps}, args...)...)
	}
	for i := range 40 {
		if r := ctl("put", fmt.Sprintf("k%02d", i), "v"); r.code != 0 {
			t.Fatalf("put: %+v", r)
		}
	}
	var js jsonCheckpoint
	r := ctl("-o", "json", "checkpoint")
	decode(t, r, &js)
	if r.code != 0 || len(js.Groups) != 3*5 {
		t.Fatalf("checkpoint: want 15 groups materialized; %+v", r)
	}
	for _, g := range js.Groups {
		if g.Error != "" || g.MaterializedIndex == 0 {
			t.Errorf("checkpoint row %+v: want an index and no error", g)
		}
	}
	r = ctl("checkpoint")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "\n15 of 15 groups materialized on 3 nodes\n") {
		t.Errorf("checkpoint text: %+v", r)
	}

	// A node publishes a group's new materialized index with the group's
	// next raft step (a heartbeat at the latest): poll.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st jsonStatus
		r = ctl("-o", "json", "status")
		decode(t, r, &st)
		if r.code != 0 || len(st.Groups) != 5 {
			t.Fatalf("status: %+v", r)
		}
		var bad []string
		for _, g := range st.Groups {
			if g.MaterializedIndex == 0 || g.MaterializedIndex > g.AppliedIndex || g.Materializations == 0 {
				bad = append(bad, fmt.Sprintf("%+v", g))
			}
		}
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status groups after checkpoint, for 10s: %s; want a materialized index up to the applied one, and a file", strings.Join(bad, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
