package chaos

import (
	"bufio"
	"strings"
	"testing"
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
