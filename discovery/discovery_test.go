package discovery

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// The tests below run real memberlist instances on 127.0.0.1 with port 0,
// in one process, with LocalTiming. Set DISCOVERY_TEST_LOG=1 to see
// memberlist's logs.

const cluster = 1

// node is a started Discovery plus what its callbacks received.
type node struct {
	*Discovery
	mu      sync.Mutex
	changes []Member
	msgs    []string
}

func testLogger() *slog.Logger {
	if os.Getenv("DISCOVERY_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startNode starts a member; empty fields of cfg get test defaults. The
// member is closed when the test ends.
func startNode(t *testing.T, cfg Config) *node {
	t.Helper()
	n := &node{}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1:0"
	}
	if cfg.Meta.ClusterID == 0 {
		cfg.Meta.ClusterID = cluster
	}
	if cfg.Meta.GRPCAddr == "" {
		cfg.Meta.GRPCAddr = "127.0.0.1:7" + cfg.Meta.ID
		cfg.Meta.HTTPAddr = "127.0.0.1:8" + cfg.Meta.ID
	}
	cfg.Logger = testLogger()
	cfg.OnChange = func(m Member) {
		n.mu.Lock()
		n.changes = append(n.changes, m)
		n.mu.Unlock()
	}
	cfg.OnMessage = func(b []byte) {
		n.mu.Lock()
		n.msgs = append(n.msgs, string(b))
		n.mu.Unlock()
	}
	d, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.Meta.ID, err)
	}
	n.Discovery = d
	t.Cleanup(func() { _ = d.Close() })
	return n
}

// history lists the states OnChange reported for id, in order.
func (n *node) history(id string) []State {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []State
	for _, m := range n.changes {
		if m.ID == id {
			out = append(out, m.State)
		}
	}
	return out
}

func (n *node) messages() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.msgs)
}

// waitFor polls cond until it holds or timeout passes; cond returns what it
// saw, for the failure message.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, saw := cond()
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last saw: %s", what, timeout, saw)
		}
		<-tick.C
	}
}

// sees reports whether every observer holds member id in state want.
func sees(id string, want State, observers ...*node) func() (bool, string) {
	return func() (bool, string) {
		var saw []string
		ok := true
		for _, o := range observers {
			m, found := o.Member(id)
			saw = append(saw, fmt.Sprintf("%s sees %s %v (found %v)", o.cfg.Meta.ID, id, m.State, found))
			ok = ok && found && m.State == want
		}
		return ok, strings.Join(saw, "; ")
	}
}

// allAlive reports whether every node sees every other alive.
func allAlive(nodes ...*node) func() (bool, string) {
	return func() (bool, string) {
		for _, o := range nodes {
			for _, n := range nodes {
				if ok, saw := sees(n.cfg.Meta.ID, StateAlive, o)(); !ok {
					return false, saw
				}
			}
		}
		return true, ""
	}
}

// startCluster starts n1..nk, each joining the previous one.
func startCluster(t *testing.T, k int) []*node {
	t.Helper()
	var nodes []*node
	for i := 1; i <= k; i++ {
		cfg := Config{Meta: Meta{ID: fmt.Sprintf("n%d", i)}}
		if i > 1 {
			cfg.Join = []string{nodes[i-2].Addr()}
		}
		nodes = append(nodes, startNode(t, cfg))
	}
	waitFor(t, 5*time.Second, "cluster forms", allAlive(nodes...))
	return nodes
}

func TestJoinShowsMetadataEverywhere(t *testing.T) {
	nodes := startCluster(t, 3)
	for _, o := range nodes {
		ms := o.Members()
		if len(ms) != 3 {
			t.Fatalf("%s sees %d members: %+v", o.cfg.Meta.ID, len(ms), ms)
		}
		for i, m := range ms {
			want := nodes[i]
			if m.Meta != want.cfg.Meta || m.GossipAddr != want.Addr() || m.State != StateAlive ||
				m.Instance != want.instance || m.Since.IsZero() {
				t.Errorf("%s sees %+v, want meta %+v at %s, instance %d", o.cfg.Meta.ID, m, want.cfg.Meta, want.Addr(), want.instance)
			}
		}
		if h := o.history("n2"); len(h) == 0 || h[0] != StateAlive {
			t.Errorf("%s: OnChange history of n2 = %v, want it to start alive", o.cfg.Meta.ID, h)
		}
	}
	if !strings.HasPrefix(nodes[0].Addr(), "127.0.0.1:") || strings.HasSuffix(nodes[0].Addr(), ":0") {
		t.Fatalf("Addr = %q, want the real loopback port", nodes[0].Addr())
	}
}

func TestKilledMemberIsReportedFailedWithin5s(t *testing.T) {
	nodes := startCluster(t, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	if err := n3.Close(); err != nil { // no Leave: as if killed
		t.Fatal(err)
	}
	took := waitFor(t, 5*time.Second, "n3 failed on n1 and n2", sees("n3", StateFailed, n1, n2))
	t.Logf("failure detected in %v (bound %v)", took, detectionBound(LocalTiming(), 3))
	for _, o := range []*node{n1, n2} {
		t.Logf("%s saw n3: %v", o.cfg.Meta.ID, o.history("n3"))
		if h := o.history("n3"); slices.Contains(h, StateLeft) {
			t.Errorf("%s reported the killed member left: %v", o.cfg.Meta.ID, h)
		}
	}
	if ms := n1.Members(); len(ms) != 3 || ms[2].ID != "n3" {
		t.Fatalf("failed member dropped from Members: %+v", ms)
	}
}

func TestLeavingMemberIsReportedLeft(t *testing.T) {
	nodes := startCluster(t, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	if err := n3.Leave(2 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if self, _ := n3.Member("n3"); self.State != StateLeft {
		t.Fatalf("n3 sees itself %v, want left", self.State)
	}
	if err := n3.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "n3 left on n1 and n2", sees("n3", StateLeft, n1, n2))
	for _, o := range []*node{n1, n2} {
		if h := o.history("n3"); slices.Contains(h, StateFailed) {
			t.Errorf("%s reported the leaving member failed: %v", o.cfg.Meta.ID, h)
		}
	}
	if err := n3.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Leave after Close = %v, want ErrClosed", err)
	}
	if err := n3.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestRestartedMemberComesBack(t *testing.T) {
	nodes := startCluster(t, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	addr := n3.Addr()

	// Crash, then restart at the same address once the others noticed.
	// The seeds include the node's own address.
	_ = n3.Close()
	waitFor(t, 5*time.Second, "n3 failed", sees("n3", StateFailed, n1, n2))
	n3b := startNode(t, Config{BindAddr: addr, Meta: Meta{ID: "n3"}, Join: []string{addr, n1.Addr()}})
	back := func(d *node, addr string) func() (bool, string) {
		return func() (bool, string) {
			for _, o := range []*node{n1, n2} {
				m, _ := o.Member("n3")
				if m.State != StateAlive || m.Instance != d.instance || m.GossipAddr != addr {
					return false, fmt.Sprintf("%s sees %+v", o.cfg.Meta.ID, m)
				}
			}
			return true, ""
		}
	}
	waitFor(t, 5*time.Second, "restarted n3 alive again", back(n3b, addr))
	waitFor(t, 5*time.Second, "restarted n3 sees the others", allAlive(n1, n2, n3b))

	// Crash again and restart at once on a new port, before the others
	// noticed: the new address is refused until the old one is declared
	// failed, then reclaimed.
	_ = n3b.Close()
	n3c := startNode(t, Config{Meta: Meta{ID: "n3"}, Join: []string{n2.Addr()}})
	waitFor(t, 10*time.Second, "n3 alive at its new address", back(n3c, n3c.Addr()))
}

func TestForeignClusterIsRefused(t *testing.T) {
	nodes := startCluster(t, 2)
	n1, n2 := nodes[0], nodes[1]
	f := startNode(t, Config{Meta: Meta{ID: "f1", ClusterID: 2}, Join: []string{n1.Addr()}})
	// Both sides of each join attempt refuse the other's member list; wait
	// for a few retries.
	waitFor(t, 5*time.Second, "foreign joins refused", func() (bool, string) {
		a, b := n1.refused.Load(), f.refused.Load()
		return a >= 3 && b >= 3, fmt.Sprintf("n1 refused %d, f1 refused %d", a, b)
	})
	for _, o := range []*node{n1, n2} {
		if m, ok := o.Member("f1"); ok {
			t.Errorf("%s lists the foreign member: %+v", o.cfg.Meta.ID, m)
		}
		if h := o.history("f1"); len(h) > 0 {
			t.Errorf("%s reported the foreign member: %v", o.cfg.Meta.ID, h)
		}
	}
	if ms := f.Members(); len(ms) != 1 || ms[0].ID != "f1" {
		t.Errorf("foreign node sees %+v, want only itself", ms)
	}
}

func TestAdmitRefusesForeignAndMalformed(t *testing.T) {
	d := &Discovery{cfg: Config{Meta: Meta{ID: "n1", ClusterID: cluster}}}
	node := func(name string, meta Meta) *memberlist.Node {
		b, err := encodeMeta(meta, 1)
		if err != nil {
			t.Fatal(err)
		}
		return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 1, Meta: b}
	}
	h := hooks{d}
	if err := h.NotifyAlive(node("n2", Meta{ID: "n2", ClusterID: cluster})); err != nil {
		t.Fatalf("same cluster refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		n    *memberlist.Node
		want error
	}{
		{"other cluster", node("n2", Meta{ID: "n2", ClusterID: 2}), ErrForeignCluster},
		{"name differs", node("n2", Meta{ID: "n3", ClusterID: cluster}), ErrBadMeta},
		{"no metadata", &memberlist.Node{Name: "n2"}, ErrBadMeta},
	} {
		if err := h.NotifyAlive(tc.n); !errors.Is(err, tc.want) {
			t.Errorf("%s: NotifyAlive = %v, want %v", tc.name, err, tc.want)
		}
		if err := h.NotifyMerge([]*memberlist.Node{node("n4", Meta{ID: "n4", ClusterID: cluster}), tc.n}); !errors.Is(err, tc.want) {
			t.Errorf("%s: NotifyMerge = %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := d.refused.Load(); got != 6 {
		t.Fatalf("refused = %d, want 6", got)
	}
	// Cluster ids are printed as 16 hex digits, as everywhere else: a
	// decimal above 2^53 is not the id kvctl and the logs show.
	big := uint64(0xfedcba9876543210)
	err := h.NotifyAlive(node("n2", Meta{ID: "n2", ClusterID: big}))
	want := fmt.Sprintf("is in cluster fedcba9876543210, this is cluster %016x", cluster)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("foreign cluster: %v, want it to say %q", err, want)
	}
}

func TestMessagesOfAnotherClusterAreDropped(t *testing.T) {
	var got []string
	d := &Discovery{cfg: Config{Meta: Meta{ID: "n1", ClusterID: cluster}, OnMessage: func(b []byte) { got = append(got, string(b)) }},
		members: newTable("n1"), log: slog.New(slog.DiscardHandler)}
	h := hooks{d}
	h.NotifyMsg(encodeFrame(kindBroadcast, 2, []byte("foreign")))
	h.NotifyMsg([]byte{0xff})
	buf := encodeFrame(kindBroadcast, cluster, []byte("ours"))
	h.NotifyMsg(buf)
	buf[len(buf)-1] = 'X' // memberlist reuses its buffer
	if len(d.pending) != 1 || string(d.pending[0].msg) != "ours" {
		t.Fatalf("pending = %+v, want only %q", d.pending, "ours")
	}
	// A broadcast smuggled into push/pull state is not a message.
	h.MergeRemoteState(encodeFrame(kindBroadcast, cluster, []byte("state")), false)
	if len(d.pending) != 1 || d.refused.Load() != 1 {
		t.Fatalf("pending = %d, refused = %d", len(d.pending), d.refused.Load())
	}
}

func TestBroadcastReachesOthers(t *testing.T) {
	nodes := startCluster(t, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.Broadcast([]byte("hello"))
	n1.BroadcastKeyed("cut", []byte("cut-7"))
	n1.Broadcast(make([]byte, MaxBroadcastSize+1)) // dropped
	waitFor(t, 5*time.Second, "broadcasts delivered", func() (bool, string) {
		var saw []string
		ok := true
		for _, o := range []*node{n2, n3} {
			msgs := o.messages()
			saw = append(saw, fmt.Sprintf("%s got %q", o.cfg.Meta.ID, msgs))
			ok = ok && slices.Contains(msgs, "hello") && slices.Contains(msgs, "cut-7")
		}
		return ok, strings.Join(saw, "; ")
	})
	for _, o := range nodes {
		for _, m := range o.messages() {
			if m != "hello" && m != "cut-7" {
				t.Errorf("%s got unexpected message of %d bytes", o.cfg.Meta.ID, len(m))
			}
		}
	}
	if msgs := n1.messages(); len(msgs) != 0 {
		t.Errorf("sender received its own broadcast: %q", msgs)
	}
}

func TestKeyedBroadcastReplacesQueuedOne(t *testing.T) {
	q := &memberlist.TransmitLimitedQueue{NumNodes: func() int { return 3 }, RetransmitMult: 4}
	q.QueueBroadcast(namedBroadcast{name: "user/cut", msg: []byte("v1")})
	q.QueueBroadcast(uniqueBroadcast{msg: []byte("other")})
	q.QueueBroadcast(namedBroadcast{name: "user/cut", msg: []byte("v2")})
	if n := q.NumQueued(); n != 2 {
		t.Fatalf("queued = %d, want 2", n)
	}
	var got []string
	for _, b := range q.GetBroadcasts(2, 1400) {
		got = append(got, string(b))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"other", "v2"}) {
		t.Fatalf("sent %q, want the newer keyed message and the other", got)
	}
}

func TestBusyPortNamesTheAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	d, err := Start(Config{BindAddr: addr, Meta: Meta{ID: "n1"}})
	if err == nil {
		_ = d.Close()
		t.Fatalf("Start on busy %s succeeded", addr)
	}
	if !errors.Is(err, ErrListen) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Start on busy port: %v; want ErrListen naming %s", err, addr)
	}
}

// freeAddr returns a loopback address whose port was free for TCP and UDP
// a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 10 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

func TestSeedThatComesUpLater(t *testing.T) {
	addrA, addrB := freeAddr(t), freeAddr(t)
	// A's seeds: itself and B, which is not up yet.
	a := startNode(t, Config{BindAddr: addrA, Meta: Meta{ID: "a"}, Join: []string{addrA, addrB}})
	if ms := a.Members(); len(ms) != 1 {
		t.Fatalf("a sees %+v before b exists", ms)
	}
	b := startNode(t, Config{BindAddr: addrB, Meta: Meta{ID: "b"}})
	waitFor(t, 5*time.Second, "a joins b once b is up", allAlive(a, b))
}

func TestConfigValidate(t *testing.T) {
	good := func() Config { return Config{BindAddr: "127.0.0.1:0", Meta: Meta{ID: "n1"}} }
	c := good()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.Logger == nil || c.Timing != LocalTiming() {
		t.Fatalf("defaults not filled: %+v", c)
	}
	for name, mut := range map[string]func(*Config){
		"no id":               func(c *Config) { c.Meta.ID = "" },
		"host name bind":      func(c *Config) { c.BindAddr = "localhost:0" },
		"no port":             func(c *Config) { c.BindAddr = "127.0.0.1" },
		"bad port":            func(c *Config) { c.BindAddr = "127.0.0.1:70000" },
		"unspecified adv":     func(c *Config) { c.AdvertiseAddr = "0.0.0.0:7946" },
		"seed without port":   func(c *Config) { c.Join = []string{"127.0.0.1"} },
		"oversized meta":      func(c *Config) { c.Meta.HTTPAddr = strings.Repeat("h", 400) },
		"probe timeout large": func(c *Config) { c.Timing.ProbeTimeout = time.Hour },
	} {
		c := good()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
		if _, err := Start(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Start = %v, want ErrInvalidConfig", name, err)
		}
	}
}
