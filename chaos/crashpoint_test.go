package chaos

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cutkv/cutkv/internal/failpoint"
)

// TestCrashPointsCoverEveryFailpoint: the kind arms every named crash
// point (issue 17), each once, with a time to reach it.
func TestCrashPointsCoverEveryFailpoint(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range crashPoints {
		if !slices.Contains(failpoint.Names, p.name) {
			t.Errorf("crash point %q is not a failpoint (failpoint.Names: %v)", p.name, failpoint.Names)
		}
		if seen[p.name] {
			t.Errorf("crash point %q listed twice", p.name)
		}
		seen[p.name] = true
		if p.within <= 0 || p.maxAfter < 0 {
			t.Errorf("crash point %q: within %v, maxAfter %d", p.name, p.within, p.maxAfter)
		}
	}
	for _, name := range failpoint.Names {
		if !seen[name] {
			t.Errorf("failpoint %q is not in crashPoints: add it, with the node that reaches it in a round", name)
		}
	}
}

// TestPickCrashArm: a seed gives the same arming again; counts and nodes
// stay in range; a point of group 0's leader goes to that node, or
// nowhere when it is unknown; every point is drawn.
func TestPickCrashArm(t *testing.T) {
	points := []crashPoint{
		{name: failpoint.RaftBeforeApply, maxAfter: 20},
		{name: failpoint.SnapshotBeforeManifest, needs: needMetaLeader},
	}
	draw := func(seed uint64, meta int) []crashArm {
		r := rand.New(rand.NewPCG(seed, 1))
		var out []crashArm
		for range 200 {
			a, ok := pickCrashArm(r, points, 3, meta)
			if ok {
				out = append(out, a)
			} else if a.point.needs != needMetaLeader || meta >= 0 {
				t.Fatalf("%+v not armed with group 0's leader %d", a, meta)
			}
		}
		return out
	}
	a, b := draw(7, 2), draw(7, 2)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew different armings")
	}
	drawn := map[string]int{}
	nodes := map[int]bool{}
	for _, x := range a {
		drawn[x.point.name]++
		if x.after < 0 || x.after > x.point.maxAfter || x.node < 0 || x.node > 2 {
			t.Errorf("arming out of range: %+v", x)
		}
		if x.point.needs == needMetaLeader && x.node != 2 {
			t.Errorf("%s armed on node %d, group 0's leader is 2", x.point.name, x.node)
		}
		if x.point.needs != needMetaLeader {
			nodes[x.node] = true
		}
	}
	if len(drawn) != 2 || len(nodes) != 3 {
		t.Errorf("200 draws armed points %v on nodes %v, want both points and all 3 nodes", drawn, nodes)
	}
	for _, x := range draw(8, -1) {
		if x.point.needs == needMetaLeader {
			t.Errorf("%s armed with group 0's leader unknown", x.point.name)
		}
	}
	x := crashArm{point: points[0], after: 3}
	if got, want := x.env(), "CUTKV_FAILPOINTS=raftBeforeApply=exit@3"; got != want {
		t.Errorf("env %q, want %q", got, want)
	}
}

// TestWithEnv: extra variables replace those of the same name and are
// added otherwise; the base is left as it was.
func TestWithEnv(t *testing.T) {
	base := []string{"PATH=/bin", "CUTKV_FAILPOINTS=walBeforeSync=error", "HOME=/root", "EMPTY"}
	keep := slices.Clone(base)
	got := withEnv(base, []string{"CUTKV_FAILPOINTS=raftAfterSave=exit@2", "NEW=1"})
	want := []string{"PATH=/bin", "HOME=/root", "EMPTY", "CUTKV_FAILPOINTS=raftAfterSave=exit@2", "NEW=1"}
	if !slices.Equal(got, want) {
		t.Errorf("withEnv: %q, want %q", got, want)
	}
	if !slices.Equal(base, keep) {
		t.Errorf("withEnv changed its base: %q", base)
	}
	if got := withEnv(base, nil); !slices.Equal(got, base) {
		t.Errorf("withEnv with nothing extra: %q, want the base %q", got, base)
	}
}

// TestLogSince: only what was written after the offset is read, so an
// earlier start's "exiting" line does not prove a later one.
func TestLogSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	if err := os.WriteFile(path, []byte("failpoint raftAfterSave: exiting\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("started\n")
	f.Close()
	if got := logSince(path, st.Size()); got != "started\n" {
		t.Errorf("logSince: %q, want what the second start wrote", got)
	}
	if got := logSince(filepath.Join(t.TempDir(), "none"), 0); got != "" {
		t.Errorf("logSince of a missing file: %q", got)
	}
}

// TestLeastArmed: a round arms every point once before any twice,
// reading what it armed from the nemesis's schedule (other kinds'
// entries aside).
func TestLeastArmed(t *testing.T) {
	points := []crashPoint{{name: failpoint.RaftBeforeSave}, {name: failpoint.CutAfterStart}, {name: failpoint.WALBeforeTruncate}}
	names := func(ps []crashPoint) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.name)
		}
		return out
	}
	if got := names(leastArmed(points, nil)); !slices.Equal(got, names(points)) {
		t.Errorf("nothing armed yet: %v, want every point", got)
	}
	// The entries as nemesis.run writes them.
	schedule := []string{
		"3s crash-point n1 (raftBeforeSave=exit@4) hold=2s",
		"9s kill-restart n2 hold=3s",
		"15s crash-point n2 (walBeforeTruncate=exit@0) hold=4s",
		"21s one-way n1 -> n2 dropped hold=2s",
	}
	if got := names(leastArmed(points, schedule)); !slices.Equal(got, []string{failpoint.CutAfterStart}) {
		t.Errorf("after two armed: %v, want only the third", got)
	}
	schedule = append(schedule, "30s crash-point n3 (cutAfterStart=exit@1) hold=2s", "40s crash-point n1 (cutAfterStart=exit@2) hold=2s")
	if got := names(leastArmed(points, schedule)); !slices.Equal(got, []string{failpoint.RaftBeforeSave, failpoint.WALBeforeTruncate}) {
		t.Errorf("after a full cycle and one more: %v, want those armed once", got)
	}
}
