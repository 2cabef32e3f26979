package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/raftstore"
)

// TestCatchUp: a starting node is caught up once every group applied the
// larger of its own commit index at start and the commit index it saw when
// it first knew the group's leader; a group without a leader is not; once
// caught up it stays so.
func TestCatchUp(t *testing.T) {
	st := func(id, leader, commit, applied uint64) raftstore.GroupStatus {
		return raftstore.GroupStatus{ID: id, Leader: leader, Commit: commit, Applied: applied}
	}
	c := newCatchUp([]raftstore.GroupStatus{st(0, 0, 10, 4), st(1, 0, 7, 7)})
	for i, tc := range []struct {
		sts  []raftstore.GroupStatus
		done bool
		says string
	}{
		{[]raftstore.GroupStatus{st(0, 0, 10, 10), st(1, 0, 7, 7)}, false, "group 0: no leader yet; group 1: no leader yet"},
		// Group 0 learns its leader at commit 25: 10 applied is not enough.
		{[]raftstore.GroupStatus{st(0, 2, 25, 10), st(1, 0, 7, 7)}, false, "group 0 applied 10 of 25; group 1: no leader yet"},
		// Group 1's leader is seen at a commit below its own at start: 7 stays the target.
		{[]raftstore.GroupStatus{st(0, 2, 30, 24), st(1, 3, 5, 6)}, false, "group 0 applied 24 of 25; group 1 applied 6 of 7"},
		// The target of group 0 stays what it saw first (25), not the commit since.
		{[]raftstore.GroupStatus{st(0, 2, 40, 25), st(1, 3, 9, 7)}, true, ""},
		// Sticky: lag after catching up is normal operation.
		{[]raftstore.GroupStatus{st(0, 0, 90, 1), st(1, 3, 90, 1)}, true, ""},
	} {
		done, says := c.step(tc.sts)
		if done != tc.done || says != tc.says {
			t.Errorf("step %d: %v %q, want %v %q", i, done, says, tc.done, tc.says)
		}
	}
	// Many groups behind: the first three are named, then how many more.
	var many []raftstore.GroupStatus
	for g := uint64(1); g <= 6; g++ {
		many = append(many, st(g, 1, 5, 0))
	}
	if _, says := newCatchUp(nil).step(many); says != "group 1 applied 0 of 5; group 2 applied 0 of 5; group 3 applied 0 of 5; 3 more" {
		t.Errorf("six groups behind: %q", says)
	}
}

// TestLivezHandler: /livez answers 200 "ok" when the check passes at
// once, and 503 with the check's reason when it fails, whether it fails
// at once or by the deadline of a wedged loop (as Node.liveness does,
// bounded by livenessTimeout).
func TestLivezHandler(t *testing.T) {
	get := func(check func(context.Context) error) (int, string) {
		rec := httptest.NewRecorder()
		livezHandler(check).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/livez", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(func(context.Context) error { return nil }); code != 200 || body != "ok\n" {
		t.Errorf("live: %d %q", code, body)
	}
	if code, body := get(func(context.Context) error { return errors.New("the raft loop stopped: disk full") }); code != 503 || !strings.Contains(body, "disk full") {
		t.Errorf("stopped: %d %q", code, body)
	}
	wedged := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		<-ctx.Done() // a loop that never takes the call
		return errors.New("the raft loop did not answer within 50ms")
	}
	if code, body := get(wedged); code != 503 || !strings.Contains(body, "did not answer") {
		t.Errorf("wedged: %d %q", code, body)
	}
}

// TestReadyDecision: /readyz is 200 only when nothing is wrong, and
// otherwise names the most lasting problem first: a failed WAL before a
// stopped raft loop before another fatal error, then shutdown, unknown
// leaders, catching up.
func TestReadyDecision(t *testing.T) {
	ok := readyState{serving: true, caughtUp: true}
	for _, tc := range []struct {
		name string
		st   func(s *readyState)
		says string // "": ready
	}{
		{"ready", func(*readyState) {}, ""},
		{"WAL failed", func(s *readyState) {
			s.walErr, s.storeErr, s.fatal, s.serving = errors.New("wal: write failed: fsync"), errors.New("raftstore: failed"), "wal", false
		}, "WAL failed (sticky; restart the node once the disk is fixed): wal: write failed: fsync"},
		{"raft stopped", func(s *readyState) { s.storeErr, s.serving = errors.New("raftstore: failed"), false }, "raft stopped: raftstore: failed"},
		{"fatal", func(s *readyState) { s.fatal, s.serving = "group 0 refused this node's layout", false }, "stopped serving: group 0 refused this node's layout"},
		{"draining", func(s *readyState) { s.draining, s.serving = true, false }, "shutting down"},
		{"no leaders", func(s *readyState) { s.serving, s.caughtUp, s.lagging = false, false, "group 1: no leader yet" }, "health is NOT_SERVING: waiting for every group's leader"},
		{"catching up", func(s *readyState) { s.caughtUp, s.lagging = false, "group 2 applied 5 of 9" }, "catching up to the commit index seen at start: group 2 applied 5 of 9"},
		{"catching up, nothing seen yet", func(s *readyState) { s.caughtUp = false }, "catching up to the commit index seen at start: starting"},
	} {
		st := ok
		tc.st(&st)
		ready, why := st.decide()
		if ready != (tc.says == "") || (tc.says != "" && why != tc.says) || (tc.says == "" && why != "ok") {
			t.Errorf("%s: %v %q, want %q", tc.name, ready, why, tc.says)
		}
	}
}
