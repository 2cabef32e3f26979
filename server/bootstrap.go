package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/topology"
)

// A cluster's id is random, so that two clusters bootstrapped with the
// same flags (or restored from the same snapshot) never take each
// other's messages: every peer call carries it and is refused on a
// mismatch. It is agreed once, at the members' first start: the first
// member of --initial-cluster draws it; every other member asks the
// members that have one (the first member first) over the peer listener
// (the Bootstrap service), and a member answers only a member whose
// layout digest — token or restore token, members, partitions — is its
// own. So the first member must be started for the others to complete
// their first start; later restarts need nobody.

// bootstrapWait bounds how long a new member waits for the cluster id.
const bootstrapWait = 5 * time.Minute

// newClusterID draws a random non-zero cluster id.
func newClusterID() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("server: draw a cluster id: %w", err)
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
}

// settleClusterID fills in a pending cluster id: drawn here on the first
// member, asked from the others elsewhere.
func (n *Node) settleClusterID() error {
	l := n.layout
	if l.Members[0].ID == n.cfg.ID {
		id, err := newClusterID()
		if err != nil {
			return err
		}
		l.ClusterID = id
		n.log.Info("drew the new cluster's id as its first member", "cluster", topology.FormatClusterID(id))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootstrapWait)
	defer cancel()
	start, lastLog := time.Now(), time.Now()
	var lastErr error
	for attempt := 0; ; attempt++ {
		for _, m := range l.Members {
			if m.ID == n.cfg.ID {
				continue
			}
			id, err := n.askClusterID(ctx, m)
			if err == nil {
				l.ClusterID = id
				n.log.Info("learned the cluster's id", "cluster", topology.FormatClusterID(id), "from", m.ID, "waited", time.Since(start).Round(time.Millisecond))
				return nil
			}
			if status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.PermissionDenied {
				// It has an id, for another cluster: nothing to wait for.
				return fmt.Errorf("%w: member %s at %s refuses to give the cluster id: %v", ErrWrongCluster, m.ID, m.PeerAddr, status.Convert(err).Message())
			}
			lastErr = fmt.Errorf("%s at %s: %w", m.ID, m.PeerAddr, err)
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			n.log.Info("waiting for the cluster id (start the cluster's first member, "+l.Members[0].ID+")", "waited", time.Since(start).Round(time.Second), "last_error", lastErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server: no member gave the cluster id within %v (the first member, %s at %s, draws it: is it started, with the same --initial-cluster, --initial-cluster-token and --partitions?): %w",
				bootstrapWait, l.Members[0].ID, l.Members[0].PeerAddr, lastErr)
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, time.Second)):
		}
	}
}

// errNoClusterID: a member asked has no id to give yet.
var errNoClusterID = errors.New("server: member has no cluster id yet")

// askClusterID asks member m for the cluster id.
func (n *Node) askClusterID(ctx context.Context, m topology.Member) (uint64, error) {
	conn, err := n.pool.Conn(m.ID, m.PeerAddr)
	if err != nil {
		return 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, err := internalrpc.NewBootstrapClient(conn).ClusterID(cctx, &internalpb.ClusterIDRequest{Digest: n.layout.Digest, Member: n.cfg.ID})
	if err != nil {
		return 0, err
	}
	if r.GetClusterId() == 0 {
		return 0, errNoClusterID
	}
	return r.GetClusterId(), nil
}
