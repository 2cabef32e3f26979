package meta

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/topology"
)

func boot(t *testing.T, token string) *internalpb.Command {
	t.Helper()
	ms, err := topology.ParseInitialCluster("n1=127.0.0.1:1,n2=127.0.0.1:2,n3=127.0.0.1:3")
	if err != nil {
		t.Fatal(err)
	}
	l, err := topology.New(token, ms, 16)
	if err != nil {
		t.Fatal(err)
	}
	return &internalpb.Command{Op: &internalpb.Command_Bootstrap{Bootstrap: &internalpb.BootstrapOp{Layout: l.Proto()}}}
}

func TestBootstrapFirstWins(t *testing.T) {
	s := New()
	if s.Layout() != nil {
		t.Fatal("layout before bootstrap")
	}
	if res, err := s.ApplyCommand(1, boot(t, "a")); err != nil || res != nil {
		t.Fatalf("first bootstrap: %v %v", res, err)
	}
	id := s.Layout().ClusterID
	if res, _ := s.ApplyCommand(2, boot(t, "a")); res != nil {
		t.Fatalf("same layout again: %v", res)
	}
	res, err := s.ApplyCommand(3, boot(t, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := res.(error); !errors.Is(e, ErrLayoutConflict) {
		t.Fatalf("conflicting layout result = %v", res)
	}
	if s.Layout().ClusterID != id {
		t.Fatal("second layout replaced the first")
	}
	bad := &internalpb.Command{Op: &internalpb.Command_Bootstrap{Bootstrap: &internalpb.BootstrapOp{}}}
	if res, err := s.ApplyCommand(4, bad); err != nil || res == nil {
		t.Fatalf("empty layout: %v %v", res, err)
	}
	if _, err := s.ApplyCommand(5, &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{}}}); err == nil {
		t.Fatal("a put in group 0 was accepted")
	}
}

func TestImageRoundTrip(t *testing.T) {
	s := New()
	l, err := topology.New("t", []topology.Member{{ID: "n1", RaftID: 1, PeerAddr: "127.0.0.1:1"}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(i uint64, c *internalpb.Command) any {
		r, err := s.ApplyCommand(i, c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	apply(1, &internalpb.Command{Op: &internalpb.Command_Bootstrap{Bootstrap: &internalpb.BootstrapOp{Layout: l.Proto()}}})
	apply(2, &internalpb.Command{Op: &internalpb.Command_CutAllocate{CutAllocate: &internalpb.CutAllocateOp{StartedUnixMs: 5}}})
	apply(3, &internalpb.Command{Op: &internalpb.Command_CutRecord{CutRecord: &internalpb.CutRecordOp{Cut: &kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED}}}})
	var buf bytes.Buffer
	if err := s.Materialize().Encode(&buf); err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.LoadImage(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if r.Layout().ClusterID != l.ClusterID || len(r.Cuts(0)) != 1 || r.Cuts(0)[0].GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
		t.Fatalf("restored: layout %v cuts %v", r.Layout(), r.Cuts(0))
	}
	// The next allocation continues from the restored version.
	c := apply(4, &internalpb.Command{Op: &internalpb.Command_CutAllocate{CutAllocate: &internalpb.CutAllocateOp{}}})
	if s.applied != 4 {
		t.Fatal("applied not advanced")
	}
	r2 := r
	c2, _ := r2.ApplyCommand(4, &internalpb.Command{Op: &internalpb.Command_CutAllocate{CutAllocate: &internalpb.CutAllocateOp{}}})
	if c.(*kvpb.CutInfo).GetVersion() != 2 || c2.(*kvpb.CutInfo).GetVersion() != 2 {
		t.Fatalf("allocations after restore: %v and %v", c, c2)
	}
	if err := New().LoadImage(bytes.NewReader([]byte{0xff, 0xff})); !errors.Is(err, ErrBadImage) {
		t.Fatalf("garbage image: %v", err)
	}
}
