package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/proto/internalpb"
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

// TestSnapshotPinLease: a pin whose upload never comes is released when
// its lease ends; one taken for its upload is released once, by the taker;
// one waiting while the node uploads another is kept until that ends.
func TestSnapshotPinLease(t *testing.T) {
	s := &Snapshots{Log: slog.New(slog.DiscardHandler)}
	var released atomic.Int32
	token := s.addPin(&snapshotPin{group: 1, release: func() { released.Add(1) }}, 20*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if released.Load() != 1 || s.takePin(token) != nil {
		t.Fatalf("after the lease: released %d times, pin still held: %v", released.Load(), s.takePin(token) != nil)
	}

	token = s.addPin(&snapshotPin{group: 2, release: func() { released.Add(1) }}, 50*time.Millisecond)
	p := s.takePin(token)
	if p == nil {
		t.Fatal("a pin taken before its lease ended is gone")
	}
	p.drop()
	time.Sleep(100 * time.Millisecond) // past the lease: its timer must not release again
	if released.Load() != 2 {
		t.Fatalf("released %d times, want 2", released.Load())
	}

	// While this node uploads (another partition of the snapshot, paced),
	// a waiting pin's lease runs again instead of ending.
	done := s.workStarted()
	token = s.addPin(&snapshotPin{group: 3, release: func() { released.Add(1) }}, 20*time.Millisecond)
	time.Sleep(150 * time.Millisecond) // several leases
	if released.Load() != 2 {
		t.Fatal("a pin waiting behind an upload in flight was released")
	}
	done()
	deadline = time.Now().Add(5 * time.Second)
	for released.Load() == 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if released.Load() != 3 || s.takePin(token) != nil {
		t.Fatalf("after the upload ended and the lease: released %d times, want 3", released.Load())
	}
}

// TestSnapshotPartitionsRefuseBadRequests: requests of another cluster,
// malformed ranges and unknown or mismatched pins get clear codes before
// anything is read or uploaded.
func TestSnapshotPartitionsRefuseBadRequests(t *testing.T) {
	ms, err := topology.ParseInitialCluster("n1=127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := topology.New("t", ms, 2)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Layout: l, Snapshots: &Snapshots{DefaultDir: t.TempDir(), Log: slog.New(slog.DiscardHandler)}}
	srv := NewSnapshotPartitionsServer(n)
	ctx := context.Background()
	want := func(what string, err error, code codes.Code) {
		t.Helper()
		if status.Code(err) != code {
			t.Fatalf("%s: %v, want %v", what, err, code)
		}
	}
	_, err = srv.PrepareSnapshot(ctx, &internalpb.PrepareSnapshotRequest{ClusterId: l.ClusterID + 1, Group: 1, Pos: 5, FinishIndex: 6})
	want("prepare for another cluster", err, codes.FailedPrecondition)
	for _, r := range []*internalpb.PrepareSnapshotRequest{{Group: 0, Pos: 5, FinishIndex: 6}, {Group: 1, Pos: 0, FinishIndex: 6}, {Group: 1, Pos: 7, FinishIndex: 6}} {
		r.ClusterId = l.ClusterID
		_, err = srv.PrepareSnapshot(ctx, r)
		want(fmt.Sprintf("prepare %v", r), err, codes.InvalidArgument)
	}
	_, err = srv.UploadSnapshot(ctx, &internalpb.UploadSnapshotRequest{ClusterId: l.ClusterID, Pin: "nope", Group: 1})
	want("upload with an unknown pin", err, codes.FailedPrecondition)

	released := 0
	pin := func() string {
		return n.Snapshots.addPin(&snapshotPin{group: 1, pos: 5, finish: 6, release: func() { released++ }}, time.Minute)
	}
	_, err = srv.UploadSnapshot(ctx, &internalpb.UploadSnapshotRequest{ClusterId: l.ClusterID, Pin: pin(), Group: 2})
	want("upload for another partition than pinned", err, codes.InvalidArgument)
	_, err = srv.UploadSnapshot(ctx, &internalpb.UploadSnapshotRequest{ClusterId: l.ClusterID, Pin: pin(), Group: 1,
		Pieces: []*internalpb.LogRange{{Lo: 3, Hi: 9}}})
	want("upload of entries past the cut", err, codes.InvalidArgument)
	if released != 2 {
		t.Fatalf("refused uploads released %d pins, want 2", released)
	}
}
