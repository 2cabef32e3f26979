package chaos

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

func TestSumFamily(t *testing.T) {
	text := `# HELP cutkv_raft_snapshots_installed_total Leader materializations installed.
# TYPE cutkv_raft_snapshots_installed_total counter
cutkv_raft_snapshots_installed_total{group="1"} 2
cutkv_raft_snapshots_installed_total{group="2"} 0
cutkv_raft_snapshots_installed_total{group="3"} 1.5e+00
cutkv_raft_snapshots_installed_total_other{group="1"} 100
cutkv_raft_snapshots_installed 7
`
	sum, ok, err := sumFamily(bufio.NewScanner(strings.NewReader(text)), "cutkv_raft_snapshots_installed_total")
	if err != nil || !ok || sum != 3.5 {
		t.Fatalf("sum = %v, %v, %v; want 3.5, true, nil", sum, ok, err)
	}
	if _, ok, _ := sumFamily(bufio.NewScanner(strings.NewReader(text)), "cutkv_missing"); ok {
		t.Fatal("a missing family was found")
	}
	if _, _, err := sumFamily(bufio.NewScanner(strings.NewReader("fam{a=\"b\"} x\n")), "fam"); err == nil {
		t.Fatal("a bad sample parsed")
	}
	if sum, ok, _ := sumFamily(bufio.NewScanner(strings.NewReader("fam 4\n")), "fam"); !ok || sum != 4 {
		t.Fatalf("unlabelled: %v %v", sum, ok)
	}
}

func TestGateHolds(t *testing.T) {
	g := &gate{}
	if !g.enter() {
		t.Fatal("an open gate refused a call")
	}
	done := make(chan bool)
	go func() {
		idle, release := g.hold(5 * time.Second)
		if g.enter() {
			t.Error("a held gate let a call in")
		}
		release()
		done <- idle
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("hold returned with a call in flight")
	default:
	}
	g.leave()
	if idle := <-done; !idle {
		t.Fatal("hold did not see the call leave")
	}
	if !g.enter() {
		t.Fatal("a released gate refused a call")
	}
	g.leave()
	if idle, release := (&gate{busy: 1}).hold(30 * time.Millisecond); idle {
		t.Fatal("hold reported idle with a call that never left")
	} else {
		release()
	}
}
