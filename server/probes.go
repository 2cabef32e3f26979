package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/cutkv/cutkv/raftstore"
)

// The HTTP probes, for orchestrators (Kubernetes httpGet probes, load
// balancers, systemd watchdogs):
//
//   - /livez: the process is alive and its raft loop answers. A failing
//     liveness probe restarts the process, so it depends on nothing
//     outside it (no peer, no quorum): a node cut off from its peers is
//     alive, only not ready.
//   - /readyz: the node should take traffic: health is SERVING (every
//     group it holds knows its leader; not draining), the WAL has not
//     failed (its sticky error), and every group has applied up to the
//     commit index the node saw at start (catchUp). Once caught up it
//     stays so: later lag is normal operation, not unreadiness.
//
// Both answer a short plain-text line: "ok", or 503 with the reason.

// livenessTimeout bounds the raft loop's answer to /livez.
const livenessTimeout = 2 * time.Second

// catchUp decides when a starting node has applied what the cluster had
// committed when it started. Per group, the target is the larger of the
// commit index in the node's own log at start and the commit index the
// group reported when this node first knew its leader (the leader's
// commit, as far as this follower's log reaches). Pure: fed statuses by
// the ready watcher, it does no I/O.
type catchUp struct {
	target     map[uint64]uint64
	leaderSeen map[uint64]bool
	done       bool
}

// newCatchUp starts from the statuses published when the store opened.
func newCatchUp(start []raftstore.GroupStatus) *catchUp {
	c := &catchUp{target: map[uint64]uint64{}, leaderSeen: map[uint64]bool{}}
	for _, st := range start {
		c.target[st.ID] = st.Commit
	}
	return c
}

// step takes the groups' current statuses and says whether every one has
// caught up; when not, lagging names the groups still behind (the first
// few) and how far. Once done it stays done.
func (c *catchUp) step(sts []raftstore.GroupStatus) (done bool, lagging string) {
	if c.done {
		return true, ""
	}
	var behind []string
	n := 0
	for _, st := range sts {
		if !c.leaderSeen[st.ID] {
			if st.Leader == 0 {
				behind = append(behind, fmt.Sprintf("group %d: no leader yet", st.ID))
				n++
				continue
			}
			c.leaderSeen[st.ID] = true
			c.target[st.ID] = max(c.target[st.ID], st.Commit)
		}
		if st.Applied < c.target[st.ID] {
			if n < 3 {
				behind = append(behind, fmt.Sprintf("group %d applied %d of %d", st.ID, st.Applied, c.target[st.ID]))
			}
			n++
		}
	}
	if n == 0 {
		c.done = true
		return true, ""
	}
	if n > len(behind) {
		behind = append(behind, fmt.Sprintf("%d more", n-len(behind)))
	}
	return false, strings.Join(behind, "; ")
}

// groupStatuses returns the status of every group the node holds.
func (n *Node) groupStatuses() []raftstore.GroupStatus {
	var sts []raftstore.GroupStatus
	for _, g := range n.store.Groups() {
		if st, ok := n.store.Status(g); ok {
			sts = append(sts, st)
		}
	}
	return sts
}

// readyState is what /readyz decides from, read from the node at once.
type readyState struct {
	walErr, storeErr error
	fatal            string // the error that stopped the node; "": none
	draining         bool
	serving          bool   // gRPC health SERVING
	caughtUp         bool   // catchUp done
	lagging          string // while not caught up: what lags
}

// readiness reads the node's readyState.
func (n *Node) readiness(ctx context.Context) readyState {
	st := readyState{walErr: n.wal.Err(), storeErr: n.store.Err(), draining: n.draining.Load(), caughtUp: n.caughtUp.Load()}
	if p := n.fatalMsg.Load(); p != nil {
		st.fatal = *p
	}
	res, err := n.health.Check(ctx, &healthpb.HealthCheckRequest{})
	st.serving = err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING
	if p := n.lagging.Load(); p != nil {
		st.lagging = *p
	}
	return st
}

// decide says whether a node in state st should take traffic, and if
// not, why: the first of the reasons that applies, the most lasting first.
func (st readyState) decide() (bool, string) {
	switch {
	case st.walErr != nil:
		return false, "WAL failed (sticky; restart the node once the disk is fixed): " + st.walErr.Error()
	case st.storeErr != nil:
		return false, "raft stopped: " + st.storeErr.Error()
	case st.fatal != "":
		return false, "stopped serving: " + st.fatal
	case st.draining:
		return false, "shutting down"
	case !st.serving:
		return false, "health is NOT_SERVING: waiting for every group's leader"
	case !st.caughtUp:
		return false, "catching up to the commit index seen at start: " + cmp.Or(st.lagging, "starting")
	}
	return true, "ok"
}

// liveness checks that the raft loop answers within livenessTimeout.
func (n *Node) liveness(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, livenessTimeout)
	defer cancel()
	err := n.store.Ping(ctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("the raft loop did not answer within %v", livenessTimeout)
	default:
		return fmt.Errorf("the raft loop stopped: %w", err)
	}
}

// serveReadyz answers /readyz.
func (n *Node) serveReadyz(w http.ResponseWriter, r *http.Request) {
	ok, why := n.readiness(r.Context()).decide()
	writeProbe(w, ok, why)
}

// livezHandler answers /livez from check (the node's liveness; tests pass
// others).
func livezHandler(check func(context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := check(r.Context()); err != nil {
			writeProbe(w, false, err.Error())
			return
		}
		writeProbe(w, true, "ok")
	}
}

func writeProbe(w http.ResponseWriter, ok bool, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, msg)
}

// watchCatchUp is one step of the ready watcher: it records whether the
// node caught up, and logs it once. It reports whether it has.
func (n *Node) watchCatchUp(c *catchUp, started time.Time) bool {
	done, lagging := c.step(n.groupStatuses())
	if !done {
		n.lagging.Store(&lagging)
		return false
	}
	if !n.caughtUp.Swap(true) {
		n.log.Info("caught up to the commit index seen at start; ready", "took", time.Since(started).Round(time.Millisecond))
	}
	return true
}

// httpTLS is the HTTP listener's TLS config: the client listener's
// certificate (reloaded with it), no client certificate asked for, since
// probes and scrapers carry none. nil: the client listener is plaintext,
// and so is the HTTP port.
func (t *trust) httpTLS() *tls.Config {
	if t.client == nil {
		return nil
	}
	return t.client.ServerConfig(tls.NoClientCert)
}
