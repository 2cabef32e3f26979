package topology

import (
	"errors"
	"testing"
)

func TestParseInitialCluster(t *testing.T) {
	ms, err := ParseInitialCluster("n1=127.0.0.1:7001, n2=127.0.0.1:7002,n3=127.0.0.1:7003")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[2].ID != "n3" || ms[2].RaftID != 3 || ms[1].PeerAddr != "127.0.0.1:7002" {
		t.Fatalf("parsed %+v", ms)
	}
	for _, bad := range []string{"", "n1", "n1=", "=1.2.3.4:1", "n1=nohostport", "n1=a:1,n1=b:2"} {
		if _, err := ParseInitialCluster(bad); !errors.Is(err, ErrBadLayout) {
			t.Errorf("ParseInitialCluster(%q) err = %v, want ErrBadLayout", bad, err)
		}
	}
}

func TestLayoutPlacement(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		var ms []Member
		for i := 1; i <= n; i++ {
			ms = append(ms, Member{ID: "n" + string(rune('0'+i)), RaftID: uint64(i), PeerAddr: "h:1"})
		}
		l, err := New("tok", ms, 16)
		if err != nil {
			t.Fatal(err)
		}
		want := min(n, 3)
		perNode := map[uint64]int{}
		for g, reps := range l.Groups {
			if len(reps) != want {
				t.Fatalf("n=%d group %d has %d replicas, want %d", n, g, len(reps), want)
			}
			seen := map[uint64]bool{}
			for _, r := range reps {
				if seen[r] {
					t.Fatalf("n=%d group %d places two replicas on node %d", n, g, r)
				}
				seen[r] = true
				perNode[r]++
			}
		}
		for id, c := range perNode {
			if c < 17*want/n-1 || c > 17*want/n+2 {
				t.Errorf("n=%d node %d holds %d groups: unbalanced %v", n, id, c, perNode)
			}
		}
		back, err := FromProto(l.Proto())
		if err != nil || back.ClusterID != l.ClusterID || len(back.Groups) != 17 {
			t.Fatalf("round trip: %v %+v", err, back)
		}
	}
}

func TestClusterIDDependsOnInputs(t *testing.T) {
	ms, _ := ParseInitialCluster("n1=127.0.0.1:7001,n2=127.0.0.1:7002")
	a, _ := New("x", ms, 16)
	b, _ := New("x", ms, 16)
	c, _ := New("y", ms, 16)
	d, _ := New("x", ms, 8)
	if a.ClusterID != b.ClusterID {
		t.Fatal("same inputs gave different cluster ids")
	}
	if a.ClusterID == c.ClusterID || a.ClusterID == d.ClusterID {
		t.Fatal("different token or partition count gave the same cluster id")
	}
	if _, err := New("x", ms, 0); !errors.Is(err, ErrBadLayout) {
		t.Fatalf("0 partitions: %v", err)
	}
}
