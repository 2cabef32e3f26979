package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/internal/clustertest"
)

// TestCutsAgainstRealCluster runs cut create, list and show and check
// against in-process nodes.
func TestCutsAgainstRealCluster(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 4})
	eps := "--endpoints=" + strings.Join(c.Endpoints(), ",")
	ctl := func(args ...string) result {
		t.Helper()
		return kvctl(t, nil, "", append([]string{eps}, args...)...)
	}
	for i := range 20 {
		if r := ctl("put", fmt.Sprintf("k%02d", i), "v"); r.code != 0 {
			t.Fatalf("put: %+v", r)
		}
	}

	var created jsonCutResponse
	r := ctl("-o", "json", "cut", "create")
	decode(t, r, &created)
	cut := created.Cut
	if r.code != 0 || cut.State != "completed" || cut.Version == 0 || len(cut.Partitions) != 4 || cut.FinishedUnixMs < cut.StartedUnixMs || cut.Error != "" {
		t.Fatalf("cut create: %+v", r)
	}
	for i, p := range cut.Partitions {
		if p.Partition != uint64(i+1) || p.Pos == 0 || p.FinishIndex < p.Pos {
			t.Errorf("cut partition %d: %+v", i, p)
		}
	}

	// The text of create and show, and the list, name the cut.
	r = ctl("cut", "create")
	if r.code != 0 || !strings.Contains(r.stdout, "state     completed\n") || !strings.Contains(r.stdout, "PARTITION  POS") {
		t.Errorf("cut create text: %+v", r)
	}
	var list jsonCutList
	r = ctl("-o", "json", "cut", "list")
	decode(t, r, &list)
	if r.code != 0 || len(list.Cuts) != 2 || list.Cuts[1].Version != cut.Version || list.Cuts[0].Version <= cut.Version {
		t.Errorf("cut list after two cuts: %+v", r)
	}
	var shown jsonCutResponse
	r = ctl("-o", "json", "cut", "show", fmt.Sprint(cut.Version))
	decode(t, r, &shown)
	if r.code != 0 || fmt.Sprint(shown.Cut) != fmt.Sprint(cut) {
		t.Errorf("cut show %d: %+v, created %+v", cut.Version, shown.Cut, cut)
	}
	if r := ctl("cut", "show", "999999"); r.code != 1 || !strings.Contains(r.stderr, "cut 999999 not found") {
		t.Errorf("cut show of an unknown cut: %+v", r)
	}

	r = ctl("check")
	if r.code != 0 || strings.Count(r.stdout, " OK\n") != 12 {
		t.Errorf("check: %+v", r)
	}
	var check jsonCheck
	r = ctl("-o", "json", "check")
	decode(t, r, &check)
	var keys uint64
	for _, p := range check.Partitions {
		if !p.Consistent || p.Index == 0 || len(p.Replicas) != 3 || p.Error != "" {
			t.Errorf("check partition %+v", p)
		}
		if len(p.Replicas) > 0 {
			keys += p.Replicas[0].Keys
		}
	}
	if r.code != 0 || len(check.Partitions) != 4 || keys != 20 {
		t.Errorf("check json: %d keys; %+v", keys, r)
	}
}
