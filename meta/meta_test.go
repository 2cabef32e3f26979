package meta

import (
	"errors"
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
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
