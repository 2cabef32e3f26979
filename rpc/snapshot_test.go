package rpc

import (
	"slices"
	"testing"

	"github.com/cutkv/cutkv/topology"
)

// TestSnapshotMembersPreferLastUploader: the node that prepared a
// partition for the previous snapshot is asked first (its base is the
// stored one), then the others in layout order; a partition never
// prepared, or prepared by a node that is no replica, keeps that order.
func TestSnapshotMembersPreferLastUploader(t *testing.T) {
	ms, err := topology.ParseInitialCluster("n1=127.0.0.1:1,n2=127.0.0.1:2,n3=127.0.0.1:3,n4=127.0.0.1:4")
	if err != nil {
		t.Fatal(err)
	}
	l, err := topology.New("t", ms, 4)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Layout: l, Snapshots: &Snapshots{}}
	names := func(p uint64) []string {
		var out []string
		for _, id := range l.Groups[p] {
			m, _ := l.MemberByRaftID(id)
			out = append(out, m.ID)
		}
		return out
	}
	for p := uint64(1); p <= 4; p++ {
		base := names(p)
		if got := n.snapshotMembers(p); !slices.Equal(got, base) {
			t.Fatalf("partition %d never prepared: %v, want the layout's %v", p, got, base)
		}
		last := base[len(base)-1]
		n.Snapshots.setUploader(p, last)
		want := append([]string{last}, base[:len(base)-1]...)
		if got := n.snapshotMembers(p); !slices.Equal(got, want) {
			t.Fatalf("partition %d last prepared by %s: %v, want %v", p, last, got, want)
		}
		n.Snapshots.setUploader(p, "n9")
		if got := n.snapshotMembers(p); !slices.Equal(got, base) {
			t.Fatalf("partition %d last prepared by a non-replica: %v, want %v", p, got, base)
		}
	}
}
