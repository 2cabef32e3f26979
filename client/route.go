package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// routeTable is one answer of the Routing RPC. It is immutable: changes
// make a copy.
type routeTable struct {
	// partitions is 0 when the table cannot route keys (the server did not
	// answer Routing, or uses a key-hash function this client lacks).
	partitions uint32
	// leaders[i] is the gRPC address of partition i+1's leader, "" if
	// unknown.
	leaders []string
	// addrs maps member id to gRPC address.
	addrs map[string]string
	// members are the gRPC addresses of members not known to be failed or
	// gone, in the order the server listed them.
	members []string
}

// leaderAddr returns the address of the leader of key's partition, "" if
// unknown.
func (t *routeTable) leaderAddr(key []byte) string {
	if t == nil || t.partitions == 0 {
		return ""
	}
	p := keyspace.PartitionOf(key, t.partitions)
	if int(p) > len(t.leaders) {
		return ""
	}
	return t.leaders[p-1]
}

// withLeader returns a copy of t in which addr leads key's partition.
func (t *routeTable) withLeader(key []byte, addr string) *routeTable {
	if t == nil || t.partitions == 0 {
		return t
	}
	p := keyspace.PartitionOf(key, t.partitions)
	if int(p) > len(t.leaders) || t.leaders[p-1] == addr {
		return t
	}
	n := *t
	n.leaders = append([]string(nil), t.leaders...)
	n.leaders[p-1] = addr
	return &n
}

func newRouteTable(r *kvpb.RoutingResponse) (*routeTable, error) {
	t := &routeTable{addrs: make(map[string]string)}
	for _, m := range r.GetMembers() {
		if m.GetGrpcAddr() == "" {
			continue
		}
		t.addrs[m.GetId()] = m.GetGrpcAddr()
		switch m.GetState() {
		case kvpb.MemberState_MEMBER_STATE_FAILED, kvpb.MemberState_MEMBER_STATE_LEFT:
		default:
			t.members = append(t.members, m.GetGrpcAddr())
		}
	}
	if h := r.GetHash(); h != "" && h != keyspace.HashName {
		// Still usable for its member list; every request goes to any node,
		// which forwards it.
		return t, fmt.Errorf("client: routing: unknown key-hash function %q (want %q)", h, keyspace.HashName)
	}
	t.partitions = r.GetPartitions()
	t.leaders = make([]string, t.partitions)
	for i, id := range r.GetLeaders() {
		if i >= len(t.leaders) {
			break
		}
		t.leaders[i] = t.addrs[id]
	}
	return t, nil
}

// table returns the current routing table, possibly nil.
func (c *Client) table() *routeTable {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.route
}

// learnLeader records that addr leads key's partition (a NOT_LEADER hint).
func (c *Client) learnLeader(key []byte, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.route = c.route.withLeader(key, addr)
}

// addrOf maps a member id to its gRPC address using the routing table.
func (c *Client) addrOf(id string) string {
	if t := c.table(); t != nil {
		return t.addrs[id]
	}
	return ""
}

// refreshRouting fetches the routing table unless one was fetched (or
// attempted) less than RoutingRefreshInterval ago; concurrent callers share
// one fetch. Failures keep the old table. It blocks for at most the fetch.
func (c *Client) refreshRouting(ctx context.Context) {
	c.mu.Lock()
	if ch := c.refreshing; ch != nil {
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return
	}
	if !c.lastRefresh.IsZero() && time.Since(c.lastRefresh) < c.cfg.RoutingRefreshInterval {
		c.mu.Unlock()
		return
	}
	c.lastRefresh = time.Now()
	ch := make(chan struct{})
	c.refreshing = ch
	c.mu.Unlock()

	t, addr, err := c.fetchRouting(ctx)

	c.mu.Lock()
	if t != nil {
		c.route = t
		c.pinned = addr
	}
	c.refreshing = nil
	close(ch)
	c.mu.Unlock()
	if err != nil {
		c.log.Debug("cutkv client: routing refresh failed", "err", err)
	} else {
		c.log.Debug("cutkv client: routing refreshed", "from", addr, "partitions", t.partitions)
	}
}

// fetchRouting asks every candidate address for the routing table at once
// and returns the first answer, with the address that gave it.
func (c *Client) fetchRouting(ctx context.Context) (*routeTable, string, error) {
	cands := c.candidates()
	type result struct {
		t    *routeTable
		addr string
		err  error
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan result, len(cands))
	for _, addr := range cands {
		go func() {
			t, err := c.fetchRoutingFrom(fctx, addr)
			ch <- result{t, addr, err}
		}()
	}
	var errs []error
	for range cands {
		r := <-ch
		if r.t != nil {
			if r.err != nil {
				c.log.Warn("cutkv client: routing", "addr", r.addr, "err", r.err)
			}
			return r.t, r.addr, nil
		}
		var ns *errNotSent
		if !errors.As(r.err, &ns) {
			r.err = fmt.Errorf("%s: %w", r.addr, r.err)
		}
		errs = append(errs, r.err)
	}
	return nil, "", joinErrors(errs...)
}

// fetchRoutingFrom asks one address for the routing table. A server that
// does not implement Routing yields an empty table (it still answers, and
// forwards requests).
func (c *Client) fetchRoutingFrom(ctx context.Context, addr string) (*routeTable, error) {
	cc, err := c.pool.get(addr)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, addr, cc, c.cfg.DialTimeout); err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	resp, err := kvrpc.NewClusterClient(cc).Routing(actx, &kvpb.RoutingRequest{Header: c.requestHeader()}, c.callOpts...)
	if status.Code(err) == codes.Unimplemented {
		return &routeTable{addrs: map[string]string{}}, nil
	}
	if err != nil {
		return nil, err
	}
	c.observe(resp.GetHeader())
	return newRouteTable(resp)
}

// candidates lists the addresses an operation may use, best first: the
// last address that answered, the configured endpoints, then the members
// the routing table knows. No duplicates.
func (c *Client) candidates() []string {
	c.mu.Lock()
	pinned, t := c.pinned, c.route
	c.mu.Unlock()
	seen := make(map[string]bool)
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	add(pinned)
	for _, e := range c.cfg.Endpoints {
		add(e)
	}
	if t != nil {
		for _, m := range t.members {
			add(m)
		}
	}
	return out
}

// pick chooses the address for the next attempt: the leader of key's
// partition when known (key nil means any node), else the first candidate
// not in avoid. It returns "" when every candidate is to be avoided.
func (c *Client) pick(key []byte, avoid map[string]bool) string {
	if key != nil {
		if a := c.table().leaderAddr(key); a != "" && !avoid[a] {
			return a
		}
	}
	for _, a := range c.candidates() {
		if !avoid[a] {
			return a
		}
	}
	return ""
}

// pin remembers addr as the address that answered last.
func (c *Client) pin(addr string) {
	c.mu.Lock()
	c.pinned = addr
	c.mu.Unlock()
}
