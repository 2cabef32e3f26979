package discovery

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

var (
	// ErrInvalidConfig: Config.Validate refused a setting.
	ErrInvalidConfig = errors.New("discovery: invalid config")
	// ErrListen: the gossip address could not be bound (busy port, address
	// not on this host); the error names the address.
	ErrListen = errors.New("discovery: cannot listen for gossip")
	// ErrClosed: the Discovery was closed.
	ErrClosed = errors.New("discovery: closed")
	// ErrLeaveTimeout: Leave could not confirm within its timeout that its
	// leave message went out; others may report this node failed.
	ErrLeaveTimeout = errors.New("discovery: leave not confirmed in time")
	// ErrForeignCluster: a peer advertises another cluster id and was refused.
	ErrForeignCluster = errors.New("discovery: member of another cluster")
	// ErrBadMeta: a peer's metadata could not be decoded.
	ErrBadMeta = errors.New("discovery: malformed member metadata")
	// ErrMetaTooLarge: the encoded Meta exceeds the limit this package keeps
	// far below memberlist.MetaMaxSize.
	ErrMetaTooLarge = errors.New("discovery: member metadata too large")
	// ErrBadMessage: a gossip message could not be decoded.
	ErrBadMessage = errors.New("discovery: malformed gossip message")
)

// MaxBroadcastSize is the largest message Broadcast and BroadcastKeyed
// accept: a broadcast must fit, with memberlist's own messages, into one UDP
// packet of 1400 bytes.
const MaxBroadcastSize = 1024

const (
	// defaultLeaveTimeout replaces a non-positive Leave timeout.
	defaultLeaveTimeout = 5 * time.Second
	// maxQueuedBroadcasts bounds the broadcast queue; the oldest go first.
	maxQueuedBroadcasts = 256
	// maxPendingMessages bounds received broadcasts waiting for OnMessage;
	// beyond it new ones are dropped (membership changes never are).
	maxPendingMessages = 1024
)

// Meta is what each member advertises; it travels compactly encoded in
// memberlist's node metadata (see wire.go), well under MetaMaxSize.
type Meta struct {
	ID        string // node id, e.g. "n1"; also memberlist's node name, so unique
	ClusterID uint64 // members of another cluster are refused
	GRPCAddr  string // host:port of the node's gRPC server
	HTTPAddr  string // host:port of the node's HTTP (metrics) server
}

// Member is one member as this node sees it.
type Member struct {
	Meta
	// GossipAddr is the host:port the member gossips on.
	GossipAddr string
	// Instance is a random number the member drew when it started; it
	// differs between two runs of the same node id.
	Instance uint64
	State    State
	// Since is when the member entered State (this node's clock).
	Since time.Time
}

// Config configures Start. Validate fills the defaults.
type Config struct {
	// BindAddr is the IP:port to listen on for gossip, TCP and UDP. Port 0
	// picks a free port (Addr reports it). The host must be an IP literal;
	// empty or 0.0.0.0 listens on every interface.
	BindAddr string
	// AdvertiseAddr is the IP:port other members reach this node at, when
	// it differs from BindAddr (NAT, containers, binding 0.0.0.0). Port 0
	// means the bound port. Optional.
	AdvertiseAddr string
	// Meta is advertised to every member. Meta.ID is required.
	Meta Meta
	// Join lists seed gossip addresses (host:port). It may include this
	// node's own address. While this node sees no other live member, the
	// seeds are retried in the background, with backoff, until Leave or
	// Close.
	Join []string
	// Logger receives this package's logs and, at debug level,
	// memberlist's. Nil discards them.
	Logger *slog.Logger
	// OnChange, if set, is called when a member (self included) appears,
	// changes state or changes its metadata. Calls come one at a time from
	// one goroutine, in order, never under this package's locks; they stop
	// when Close returns. OnChange must not call Close.
	OnChange func(Member)
	// OnMessage, if set, receives the broadcasts of other members, on the
	// same goroutine as OnChange. Delivery is best effort: a message may
	// arrive more than once, out of order, or not at all. The slice is the
	// callee's.
	OnMessage func([]byte)
	// Timing sets the failure detector's and gossip's clocks; zero fields
	// take LocalTiming's values.
	Timing Timing
	// Keys, when set, encrypt and authenticate all gossip (memberlist's
	// keyring: AES-GCM with keys of 16, 24 or 32 bytes). The first key
	// encrypts; every key decrypts, so a new key can be added everywhere
	// before it is used (SetKeys). Without keys gossip is plaintext, and
	// anyone who reaches the port can speak it.
	Keys [][]byte
}

// Validate checks c and fills its defaults (Logger, Timing).
func (c *Config) Validate() error {
	if c.Meta.ID == "" {
		return fmt.Errorf("%w: Meta.ID is empty", ErrInvalidConfig)
	}
	if err := checkKeys(c.Keys); err != nil {
		return err
	}
	if _, _, err := splitIPPort(c.BindAddr); err != nil {
		return fmt.Errorf("%w: BindAddr %q: %v", ErrInvalidConfig, c.BindAddr, err)
	}
	if c.AdvertiseAddr != "" {
		ip, _, err := splitIPPort(c.AdvertiseAddr)
		if err == nil && (ip == "" || net.ParseIP(ip).IsUnspecified()) {
			err = errors.New("needs a specific IP")
		}
		if err != nil {
			return fmt.Errorf("%w: AdvertiseAddr %q: %v", ErrInvalidConfig, c.AdvertiseAddr, err)
		}
	}
	for _, s := range c.Join {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("%w: seed %q: %v", ErrInvalidConfig, s, err)
		}
	}
	if _, err := encodeMeta(c.Meta, 0); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	c.Timing = c.Timing.withDefaults(LocalTiming())
	if err := c.Timing.validate(); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// splitIPPort splits "ip:port"; the IP may be empty.
func splitIPPort(s string) (ip string, port int, err error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	if host != "" && net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("host %q is not an IP address", host)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

// Discovery is one node's membership in the cluster: a memberlist instance
// plus the member table built from its events. Safe for concurrent use.
//
// Lock order: memberlist's internal locks, then mu. mu is a leaf: nothing
// calls into memberlist or user callbacks while holding it.
type Discovery struct {
	cfg      Config // validated
	log      *slog.Logger
	instance uint64
	meta     []byte // encoded Meta, read by memberlist
	ml       *memberlist.Memberlist
	queue    *memberlist.TransmitLimitedQueue
	addr     string
	keyring  *memberlist.Keyring // nil: plaintext gossip

	mu      sync.Mutex
	members *table  // REQUIRES mu
	pending []event // callbacks not yet delivered; REQUIRES mu
	npend   int     // messages in pending; REQUIRES mu
	stopped bool    // no more callbacks; REQUIRES mu

	life   sync.Mutex // serialises Leave and Close (memberlist panics on Leave after Shutdown)
	closed bool       // REQUIRES life

	leaving atomic.Bool  // Leave was called: do not rejoin
	refused atomic.Int64 // peers or messages of another cluster refused
	wake    chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
}

// event is one pending callback: a membership change or a message.
type event struct {
	member Member
	msg    []byte // nil for a membership change
}

// Start listens on cfg.BindAddr, joins the seeds (once synchronously, then
// in the background while no other member is live) and returns the running
// Discovery. A bind failure is ErrListen, naming the address.
func Start(cfg Config) (*Discovery, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Join = slices.Clone(cfg.Join)
	instance := rand.Uint64() | 1 // never 0
	meta, err := encodeMeta(cfg.Meta, instance)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	d := &Discovery{
		cfg:      cfg,
		log:      cfg.Logger.With("node", cfg.Meta.ID),
		instance: instance,
		meta:     meta,
		members:  newTable(cfg.Meta.ID),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	d.queue = &memberlist.TransmitLimitedQueue{
		NumNodes:       d.liveCount,
		RetransmitMult: cfg.Timing.RetransmitMult,
	}

	mc, err := d.memberlistConfig()
	if err != nil {
		return nil, err
	}
	// Create calls our delegates (self joins) before it returns; they touch
	// only the table, never d.ml.
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("%w on %s: %v", ErrListen, cfg.BindAddr, err)
	}
	d.ml = ml
	d.mu.Lock()
	self, _ := d.members.get(cfg.Meta.ID)
	d.mu.Unlock()
	d.addr = self.GossipAddr

	d.wg.Add(2)
	go d.deliver()
	go d.watch()
	if len(cfg.Join) > 0 {
		d.tryJoin()
		d.wg.Add(1)
		go d.joinLoop()
	}
	return d, nil
}

// memberlistConfig derives memberlist's settings from d.cfg.
func (d *Discovery) memberlistConfig() (*memberlist.Config, error) {
	mc := memberlist.DefaultLANConfig()
	mc.Name = d.cfg.Meta.ID
	ip, port, err := splitIPPort(d.cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: BindAddr %q: %v", ErrInvalidConfig, d.cfg.BindAddr, err)
	}
	if ip == "" {
		ip = "0.0.0.0"
	}
	mc.BindAddr, mc.BindPort = ip, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	if d.cfg.AdvertiseAddr != "" {
		aip, aport, err := splitIPPort(d.cfg.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("%w: AdvertiseAddr %q: %v", ErrInvalidConfig, d.cfg.AdvertiseAddr, err)
		}
		if aport == 0 {
			aport = port // memberlist replaces it when port is 0 too
		}
		mc.AdvertiseAddr, mc.AdvertisePort = aip, aport
	}
	d.cfg.Timing.apply(mc)
	// Packets are small; compressing them costs more than it saves.
	mc.EnableCompression = false
	h := hooks{d}
	mc.Delegate = h
	mc.Events = h
	mc.Alive = h
	mc.Merge = h
	mc.Conflict = h
	mc.Ping = h
	mc.Logger = newMemberlistLogger(d.log)
	if len(d.cfg.Keys) > 0 {
		kr, err := memberlist.NewKeyring(d.cfg.Keys, d.cfg.Keys[0])
		if err != nil {
			return nil, fmt.Errorf("%w: gossip keys: %v", ErrInvalidConfig, err)
		}
		mc.Keyring, d.keyring = kr, kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	return mc, nil
}

// checkKeys accepts a keyring's keys: AES-128, -192 or -256, no duplicates.
func checkKeys(keys [][]byte) error {
	seen := map[string]bool{}
	for i, k := range keys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return fmt.Errorf("%w: gossip key %d is %d bytes, not 16, 24 or 32", ErrInvalidConfig, i+1, n)
		}
		if seen[string(k)] {
			return fmt.Errorf("%w: gossip key %d appears twice", ErrInvalidConfig, i+1)
		}
		seen[string(k)] = true
	}
	return nil
}

// SetKeys replaces the gossip keyring's keys without a restart (a node
// started with keys only): keys[0] becomes the key that encrypts, the
// others still decrypt, and keys not listed are removed. Rotating means
// adding the new key second on every node, then first, then dropping the
// old one (docs/operations.md).
func (d *Discovery) SetKeys(keys [][]byte) error {
	kr := d.keyring
	if kr == nil {
		return fmt.Errorf("%w: gossip was started without keys; restart the node with --gossip-key-file", ErrInvalidConfig)
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no gossip keys (gossip cannot go back to plaintext without a restart)", ErrInvalidConfig)
	}
	if err := checkKeys(keys); err != nil {
		return err
	}
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return fmt.Errorf("discovery: add gossip key: %w", err)
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return fmt.Errorf("discovery: use gossip key: %w", err)
	}
	keep := map[string]bool{}
	for _, k := range keys {
		keep[string(k)] = true
	}
	for _, k := range kr.GetKeys() {
		if !keep[string(k)] {
			if err := kr.RemoveKey(k); err != nil {
				return fmt.Errorf("discovery: remove gossip key: %w", err)
			}
		}
	}
	return nil
}

// Refused returns how many peers and gossip messages of another cluster
// this node refused since it started.
func (d *Discovery) Refused() int64 { return d.refused.Load() }

// Addr returns the address other members reach this node's gossip at: the
// bound address with the real port (or AdvertiseAddr when set).
func (d *Discovery) Addr() string { return d.addr }

// Members returns every member ever seen, failed and left ones included,
// self included, sorted by ID.
func (d *Discovery) Members() []Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.members.members()
}

// Member returns the member with this id, if it was ever seen.
func (d *Discovery) Member(id string) (Member, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.members.get(id)
}

// Broadcast gossips msg to every member, best effort: each message is sent
// a few times to random members (memberlist's TransmitLimitedQueue), so a
// member may get it more than once, or not at all. Messages larger than
// MaxBroadcastSize are dropped and logged.
func (d *Discovery) Broadcast(msg []byte) {
	d.queueBroadcast(msg, func(frame []byte) memberlist.Broadcast { return uniqueBroadcast{frame} })
}

// BroadcastKeyed is Broadcast for messages that supersede each other: a
// message still queued here is dropped when a newer one with the same key
// is queued (for example the latest cut version).
func (d *Discovery) BroadcastKeyed(key string, msg []byte) {
	d.queueBroadcast(msg, func(frame []byte) memberlist.Broadcast {
		return namedBroadcast{name: "user/" + key, msg: frame}
	})
}

func (d *Discovery) queueBroadcast(msg []byte, wrap func([]byte) memberlist.Broadcast) {
	if len(msg) > MaxBroadcastSize {
		d.log.Warn("discovery: broadcast dropped, too large", "size", len(msg), "limit", MaxBroadcastSize)
		return
	}
	d.queue.QueueBroadcast(wrap(encodeFrame(kindBroadcast, d.cfg.Meta.ClusterID, msg)))
	d.queue.Prune(maxQueuedBroadcasts)
}

// Leave announces that this node leaves on purpose, so that the others
// report it StateLeft rather than StateFailed, and waits up to timeout
// (non-positive: 5 s) for the announcement to go out. The node keeps
// answering gossip until Close. After Leave the node does not rejoin.
func (d *Discovery) Leave(timeout time.Duration) error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return ErrClosed
	}
	if timeout <= 0 {
		timeout = defaultLeaveTimeout
	}
	deadline := time.Now().Add(timeout)
	d.leaving.Store(true)

	// Tell the others before memberlist's own leave message, which cannot
	// say "on purpose": over TCP to every live member, and by gossip for
	// anyone those miss. Receivers also cope with the reverse order.
	dep := departure{ID: d.cfg.Meta.ID, Instance: d.instance}
	d.mu.Lock()
	d.members.depart(dep, time.Now())
	peers := d.livePeersLocked()
	d.mu.Unlock()
	notice := encodeFrame(kindDeparture, d.cfg.Meta.ClusterID, encodeDepartures([]departure{dep}))
	d.queue.QueueBroadcast(namedBroadcast{name: "departure", msg: notice})
	d.sendAll(peers, notice, deadline)

	if err := d.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
		return fmt.Errorf("%w: %v", ErrLeaveTimeout, err)
	}
	return nil
}

// livePeersLocked returns the other members memberlist holds alive.
// REQUIRES mu.
func (d *Discovery) livePeersLocked() []*memberlist.Node {
	var out []*memberlist.Node
	for _, m := range d.members.members() {
		if m.ID == d.cfg.Meta.ID || (m.State != StateAlive && m.State != StateSuspect) {
			continue
		}
		ip, port, err := splitIPPort(m.GossipAddr)
		if err != nil {
			continue
		}
		out = append(out, &memberlist.Node{Name: m.ID, Addr: net.ParseIP(ip), Port: uint16(port)})
	}
	return out
}

// sendAll sends msg over TCP to every peer in parallel and waits for the
// sends until deadline; stragglers finish in the background (bounded by
// Timing.StreamTimeout) and Close waits for them.
func (d *Discovery) sendAll(peers []*memberlist.Node, msg []byte, deadline time.Time) {
	done := make(chan struct{}, len(peers))
	for _, p := range peers {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := d.ml.SendReliable(p, msg); err != nil {
				d.log.Debug("discovery: leave notice not delivered", "to", p.Name, "err", err)
			}
			done <- struct{}{}
		}()
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for range peers {
		select {
		case <-done:
		case <-timer.C:
			return
		}
	}
}

// Close stops gossip without announcing anything (call Leave first for a
// graceful exit; without it the others soon report this node failed).
// After Close returns no callback runs. Close is idempotent.
func (d *Discovery) Close() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.mu.Lock()
	d.stopped = true
	d.pending = nil
	d.mu.Unlock()
	close(d.stop)
	err := d.ml.Shutdown()
	d.wg.Wait()
	return err
}

// emitLocked queues callbacks for changed members. REQUIRES mu.
func (d *Discovery) emitLocked(ms ...Member) {
	if d.stopped || d.cfg.OnChange == nil || len(ms) == 0 {
		return
	}
	for _, m := range ms {
		d.pending = append(d.pending, event{member: m})
	}
	d.signal()
}

// emitMessage queues a received broadcast for OnMessage.
func (d *Discovery) emitMessage(msg []byte) {
	if d.cfg.OnMessage == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	if d.npend >= maxPendingMessages {
		d.log.Warn("discovery: received broadcast dropped, receiver is slow", "pending", d.npend)
		return
	}
	d.npend++
	d.pending = append(d.pending, event{msg: msg})
	d.signal()
}

func (d *Discovery) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// deliver runs the callbacks, in order, outside every lock.
func (d *Discovery) deliver() {
	defer d.wg.Done()
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
		}
		for {
			d.mu.Lock()
			batch := d.pending
			d.pending, d.npend = nil, 0
			d.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, e := range batch {
				select {
				case <-d.stop:
					return
				default:
				}
				if e.msg != nil {
					d.cfg.OnMessage(e.msg)
				} else {
					d.cfg.OnChange(e.member)
				}
			}
		}
	}
}

// watch marks StateSuspect the members that stop answering this node's
// probes (see StateSuspect), once per probe interval.
func (d *Discovery) watch() {
	defer d.wg.Done()
	tick := time.NewTicker(d.cfg.Timing.ProbeInterval)
	defer tick.Stop()
	for {
		select {
		case <-d.stop:
			return
		case now := <-tick.C:
			d.mu.Lock()
			after := suspectAfter(d.cfg.Timing, d.members.live())
			d.emitLocked(d.members.expire(now, after)...)
			d.mu.Unlock()
		}
	}
}

// liveCount is the number of live members, self included; the broadcast
// queue scales its retransmissions by it.
func (d *Discovery) liveCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.members.live()
}

// joinLoop retries the seeds, with backoff, whenever this node sees no
// other live member, until Leave or Close.
func (d *Discovery) joinLoop() {
	defer d.wg.Done()
	t := d.cfg.Timing
	backoff := t.JoinRetryMin
	for {
		wait := t.JoinRetryMax
		if d.ml.NumMembers() <= 1 {
			wait = backoff
			backoff = nextBackoff(backoff, t.JoinRetryMin, t.JoinRetryMax)
		} else {
			backoff = t.JoinRetryMin
		}
		timer := time.NewTimer(wait)
		select {
		case <-d.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		if d.leaving.Load() {
			return
		}
		if d.ml.NumMembers() <= 1 {
			d.tryJoin()
		}
	}
}

// tryJoin contacts the seeds other than this node itself and reports
// whether another member is now live. (memberlist counts contacting
// itself as a successful join.)
func (d *Discovery) tryJoin() bool {
	seeds := make([]string, 0, len(d.cfg.Join))
	for _, s := range d.cfg.Join {
		if s != d.addr && s != d.cfg.BindAddr {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return false
	}
	if _, err := d.ml.Join(seeds); err != nil {
		d.log.Debug("discovery: join failed, will retry", "seeds", seeds, "err", err)
	}
	return d.ml.NumMembers() > 1
}
