package hosts

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Delay has no kernel help here (no netem), so it is done in userspace:
// with Config.ProxyPorts, every connection from another host to such a
// port passes, from Setup on, through a proxy of the harness's (see
// doc.go, "Delay"). The rules never change after Setup; Delay and Heal
// only change the delay table the proxies read per chunk. Hence no
// connection ever needs closing or re-dialling when a delay starts or
// ends: one opened before a Delay is slowed by it, and one slowed is back
// to full speed (after the bytes already held) on Heal.

// delaySpec is the delay of one directed link: each chunk of bytes that
// crosses it is held for delay plus a uniform draw from [-jitter, jitter].
type delaySpec struct{ delay, jitter time.Duration }

// hold draws one chunk's holding time. r is the proxy's own source (the
// jitter need not be reproducible: chunk boundaries are not).
func (d delaySpec) hold(r *rand.Rand) time.Duration {
	if d.jitter == 0 {
		return d.delay
	}
	return d.delay - d.jitter + time.Duration(r.Int64N(int64(2*d.jitter)+1))
}

// setDelay sets the delay of the bytes host from sends to host to over
// proxied connections, replacing an earlier one; delay 0 removes it.
func (f *faultSet) setDelay(from, to int, delay, jitter time.Duration) error {
	if err := f.checkHost(from); err != nil {
		return err
	}
	if err := f.checkHost(to); err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("%w: delay from host %d to itself", ErrBadHost, from)
	}
	if delay < 0 || jitter < 0 || jitter > delay {
		return fmt.Errorf("%w: delay %v jitter %v, want 0 <= jitter <= delay", ErrInvalidConfig, delay, jitter)
	}
	prefix := fmt.Sprintf("delay %d->%d ", from, to)
	f.notes = slices.DeleteFunc(f.notes, func(s string) bool { return strings.HasPrefix(s, prefix) })
	if delay == 0 {
		delete(f.delay, link{from, to})
		return nil
	}
	f.delay[link{from, to}] = delaySpec{delay, jitter}
	f.note(prefix + delay.String() + "±" + jitter.String())
	return nil
}

// proxyChain is the nat chain, in every host's fault table, that sends
// connections to the proxied ports to the proxies. Heal flushes input and
// output only: this chain is written once, at Setup.
const proxyChain = "proxy"

// renderProxy returns the nft script that makes host h's proxy chain
// redirect TCP connections from every other host to port p to the proxy
// listening on redirect[p] in h. addr gives every host's address; the
// harness's address is never matched, so the harness reaches a host's
// ports directly. Like render it creates what is missing and flushes, so
// it can be applied more than once. It does no I/O.
//
//	proxy: ip saddr { every other host } tcp dport P redirect to :R
func renderProxy(h, hosts int, addr func(int) string, redirect map[int]int) string {
	var peers []string
	for j := 1; j <= hosts; j++ {
		if j != h {
			peers = append(peers, addr(j))
		}
	}
	t := "inet " + tableName
	var b strings.Builder
	fmt.Fprintf(&b, "add table %s\n", t)
	fmt.Fprintf(&b, "add chain %s %s { type nat hook prerouting priority dstnat; policy accept; }\n", t, proxyChain)
	fmt.Fprintf(&b, "flush chain %s %s\n", t, proxyChain)
	if len(peers) == 0 {
		return b.String()
	}
	for _, p := range slices.Sorted(maps.Keys(redirect)) {
		fmt.Fprintf(&b, "add rule %s %s ip saddr { %s } tcp dport %d redirect to :%d comment \"cutkv chaos: delay proxy\"\n",
			t, proxyChain, strings.Join(peers, ", "), p, redirect[p])
	}
	return b.String()
}

// Delay holds the bytes host from sends to host to, over connections
// through the delay proxy (those between the two to a port of
// Config.ProxyPorts, whichever end opened them), for delay ± jitter each
// (a uniform draw per chunk read, 0 <= jitter <= delay), like netem on
// from's link to to. The other direction is not slowed: call Delay(to,
// from, ...) for that. It replaces the link's earlier delay; 0 removes it;
// Heal removes all. Byte order within a connection is kept (a chunk never
// leaves before the one read before it), so jitter does not reorder a
// stream; separate connections are held independently. Connections
// already open are slowed too, and no rule changes (nft runs only to
// repair a host an earlier call failed on): the call takes effect for the
// next chunk read. Without Config.ProxyPorts it
// fails with ErrInvalidConfig.
func (n *Net) Delay(from, to int, delay, jitter time.Duration) error {
	what := fmt.Sprintf("delay %d->%d %v±%v", from, to, delay, jitter)
	if len(n.cfg.ProxyPorts) == 0 {
		return fmt.Errorf("hosts: %s: %w: no Config.ProxyPorts, so no connection passes through the delay proxy", what, ErrInvalidConfig)
	}
	return n.change(what, func(f *faultSet) error { return f.setDelay(from, to, delay, jitter) })
}

// publishDelays gives the proxies the model's delay table.
// REQUIRES: n.mu held (or n not yet shared).
func (n *Net) publishDelays() {
	m := maps.Clone(n.faults.delay)
	n.delays.Store(&m)
}

// delayOf is the delay in force on a link; none for an unknown host (0).
func (n *Net) delayOf(l link) delaySpec {
	m := n.delays.Load()
	if m == nil {
		return delaySpec{}
	}
	return (*m)[l]
}

// hostIndex is the index of the host with address a, 0 if none.
func (n *Net) hostIndex(a netip.Addr) int {
	a = a.Unmap()
	for _, h := range n.hosts {
		if h.addr == a {
			return h.index
		}
	}
	return 0
}

// rttProbe is what RoundTrip sends: a line, so that an echo server
// answers it, and not a TLS record, so that a TLS server rejects it at
// once (its first byte is not a handshake record type) and closes.
var rttProbe = []byte("cutkv chaos: round trip probe\n")

// RoundTrip measures one round trip from host from to port on host to
// (index 0: the harness): it connects (within timeout), writes a short
// probe line and waits for the first byte of an answer or for the other
// end to close, whichever comes first, and returns the time from the
// write to that. An echo server answers; a TLS server (the nodes' peer
// port) closes at once on a probe that is not TLS. The connection's
// handshake is not counted: through the delay proxy it is with the proxy,
// which holds bytes, not handshakes. A reset, a timeout or a failed
// connect is an error. It blocks up to twice timeout.
func (n *Net) RoundTrip(from, to, port int, timeout time.Duration) (time.Duration, error) {
	what := fmt.Sprintf("hosts: round trip %d->%d port %d", from, to, port)
	if port < 1 || port > 65535 {
		return 0, fmt.Errorf("%s: %w: port out of range", what, ErrInvalidConfig)
	}
	src, _, err := n.endpoint(from)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	_, dst, err := n.endpoint(to)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	c, err := n.dial(src, "tcp4", netip.AddrPortFrom(dst, uint16(port)).String(), timeout)
	if err != nil {
		return 0, fmt.Errorf("%s: connect: %w", what, err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetDeadline(start.Add(timeout))
	if _, err := c.Write(rttProbe); err != nil {
		return 0, fmt.Errorf("%s: write the probe: %w", what, err)
	}
	_, err = c.Read(make([]byte, 1))
	rtt := time.Since(start)
	if err != nil && !errors.Is(err, io.EOF) {
		return rtt, fmt.Errorf("%s: no answer and no close: %w", what, err)
	}
	return rtt, nil
}

// proxy is one delay proxy: a listener in a host's namespace that the
// host's proxy chain sends the other hosts' connections to port to, and
// the connections it forwards to port on the host's own address, each
// direction holding its chunks for the delay of its link.
type proxy struct {
	net  *Net
	host *Host
	port int // the proxied port
	l    net.Listener

	mu     sync.Mutex // guards the fields below
	closed bool
	conns  map[net.Conn]bool // both ends of every forwarded connection
	wg     sync.WaitGroup    // the accept loop and every connection's handler
}

// startProxies starts a proxy per host and proxied port, then writes
// every host's proxy chain. The listeners exist before the rules, so no
// connection is redirected to nothing. Setup calls it before any process
// starts: every connection to a proxied port passes through a proxy.
func (n *Net) startProxies() error {
	if len(n.cfg.ProxyPorts) == 0 {
		return nil
	}
	addr := func(i int) string { return hostAddr(n.cfg.Subnet, i).String() }
	for _, h := range n.hosts {
		redirect := map[int]int{}
		for _, port := range n.cfg.ProxyPorts {
			l, err := h.Listen("tcp4", net.JoinHostPort(h.IP(), "0"))
			if err != nil {
				return fmt.Errorf("hosts: delay proxy for port %d on host %d: listen: %w", port, h.index, err)
			}
			p := &proxy{net: n, host: h, port: port, l: l, conns: map[net.Conn]bool{}}
			n.proxies = append(n.proxies, p)
			p.wg.Go(p.accept)
			redirect[port] = l.Addr().(*net.TCPAddr).Port
		}
		if err := nft(h.ns, renderProxy(h.index, len(n.hosts), addr, redirect)); err != nil {
			return fmt.Errorf("hosts: delay proxy rules on host %d: %w", h.index, err)
		}
	}
	return nil
}

// stopProxies closes every proxy's listener and connections and waits for
// their goroutines (at most the longest delay in force).
func (n *Net) stopProxies() {
	for _, p := range n.proxies {
		p.close()
	}
	n.proxies = nil
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	_ = p.l.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers the ends of a connection, false once the proxy is closed.
func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

func (p *proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors, say
			continue
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

// forward connects to the proxied port on the proxy's host and copies
// both ways, each direction held by its link's delay, until both ends
// have closed their sending side (each end's close is passed on, held
// like the bytes before it) or either fails (then both are closed). If
// nothing listens on the port, the accepted connection is reset, as the
// kernel would refuse it.
func (p *proxy) forward(down net.Conn) {
	defer p.untrack(down)
	defer down.Close()
	var from int
	if a, ok := down.RemoteAddr().(*net.TCPAddr); ok {
		from = p.net.hostIndex(a.AddrPort().Addr())
	}
	up, err := p.host.Dial("tcp4", net.JoinHostPort(p.host.IP(), strconv.Itoa(p.port)), 5*time.Second)
	if err != nil {
		if tc, ok := down.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		return
	}
	defer up.Close()
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	stop := make(chan struct{})
	errc := make(chan error, 2)
	go func() { errc <- p.pipe(down, up, link{from, p.host.index}, stop) }()
	go func() { errc <- p.pipe(up, down, link{p.host.index, from}, stop) }()
	first := <-errc
	if first != nil {
		close(stop)
		_ = down.Close()
		_ = up.Close()
	}
	<-errc
	if first == nil {
		close(stop)
	}
}

// chunk is what pipe read from its source at one time, to be written at
// at; err (the last chunk) is how the source ended.
type chunk struct {
	b   []byte
	at  time.Time
	err error
}

// pipe copies src to dst, holding each chunk by l's delay as it stands
// when the chunk is read. A chunk never leaves before the one read before
// it. On src's EOF it closes dst's sending side and returns nil; on any
// other failure it returns it. It returns when stop is closed.
func (p *proxy) pipe(src, dst net.Conn, l link, stop <-chan struct{}) error {
	q := make(chan chunk, 256) // up to 8 MiB held per direction
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	go func() {
		defer close(q)
		buf := make([]byte, 32<<10)
		var last time.Time
		for {
			k, err := src.Read(buf)
			at := time.Now().Add(p.net.delayOf(l).hold(r))
			if at.Before(last) {
				at = last
			}
			last = at
			c := chunk{at: at, err: err}
			if k > 0 {
				c.b = slices.Clone(buf[:k])
			}
			select {
			case q <- c:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		if d := time.Until(c.at); d > 0 {
			select {
			case <-time.After(d):
			case <-stop:
				return nil
			}
		}
		if len(c.b) > 0 {
			if _, err := dst.Write(c.b); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(c.err, io.EOF):
			if tc, ok := dst.(*net.TCPConn); ok {
				return tc.CloseWrite()
			}
			return dst.Close()
		case c.err != nil:
			return c.err
		}
	}
	return nil
}
