package hosts

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Net is one run's hosts: the namespaces, links and fault tables Setup
// made, and the processes started on them. Its methods are safe for
// concurrent use.
type Net struct {
	cfg   Config
	hosts []*Host // hosts[i-1] is host i
	lock  *os.File

	mu      sync.Mutex // guards the fields below; serialises nft calls
	closed  bool
	procs   []*Proc
	faults  *faultSet
	applied map[int]string // the script last applied to each host; absent = unknown
	proxies []*proxy       // one per host and Config.ProxyPorts entry

	// delays is the faults' delay table, published on every change so
	// that the proxies read it per chunk without taking mu (held while
	// nft runs).
	delays atomic.Pointer[map[link]delaySpec]
}

// Host is one host of a Net: a network namespace with one interface,
// eth0, on the run's bridge.
type Host struct {
	net   *Net
	index int
	ns    string
	addr  netip.Addr
}

// Index is the host's 1-based number.
func (h *Host) Index() int { return h.index }

// IP is the host's address, 10.231.<Subnet>.(10+Index).
func (h *Host) IP() string { return h.addr.String() }

// Namespace is the name of the host's network namespace (as in ip netns
// list; the file is /run/netns/<name>).
func (h *Host) Namespace() string { return h.ns }

// Config is the configuration the Net was set up with.
func (n *Net) Config() Config { return n.cfg }

// Hosts is the number of hosts.
func (n *Net) Hosts() int { return len(n.hosts) }

// Host returns host i (1-based), or nil if there is no host i.
func (n *Net) Host(i int) *Host {
	if i < 1 || i > len(n.hosts) {
		return nil
	}
	return n.hosts[i-1]
}

// HostIP is the harness's address on the run's network, 10.231.<Subnet>.1:
// connections the harness opens to a host come from it. No fault rule
// matches it.
func (n *Net) HostIP() string { return hostAddr(n.cfg.Subnet, 0).String() }

// Setup creates cfg.Hosts hosts and returns them. It needs root and
// blocks while it runs ip and nft: about 85 ms for 3 hosts, 170 ms for 9.
//
// What it creates (see doc.go for why the bridge is not in the harness's
// namespace):
//   - namespace <name>sw with lo up and bridge <name>br;
//   - a veth pair <name>h (the harness's namespace, 10.231.S.1/24, which
//     routes the subnet to the bridge) / <name>u (a port of the bridge);
//   - per host i a namespace <name>n<i>, a veth pair <name>v<i> (a port of
//     the bridge) / eth0 (in the host, 10.231.S.(10+i)/24), lo up, and the
//     nftables table inet cutkvchaos with chains input and output (filter
//     hooks, priority filter, policy accept, no rules);
//   - with Config.ProxyPorts, per host and port a delay proxy listener in
//     the host and the chain proxy (nat hook prerouting) redirecting the
//     other hosts' connections to the port to it (delay.go).
//
// The hosts have no route but their /24, and IPv6 is off on every
// interface the run creates, so a host can reach only the other hosts and
// the harness, over IPv4.
//
// Setup claims the name with a lock held until Close (ErrNameInUse if a
// live Net has it) and refuses a subnet that a route in the harness's
// namespace overlaps (ErrSubnetInUse). Leftovers of a crashed run of the
// same name are removed first. If anything fails, whatever Setup created
// is removed before it returns the error.
func Setup(cfg Config) (*Net, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: setting up hosts %q", ErrNotRoot, cfg.Name)
	}
	lock, err := flockFile(runLockPath(cfg.Name), false)
	if err != nil {
		return nil, fmt.Errorf("hosts: set up %q: %w", cfg.Name, err)
	}
	// Serialise the subnet check and the claiming of it with other Setups.
	global, err := flockFile(lockDir+"/setup.lock", true)
	if err != nil {
		releaseRun(lock, cfg.Name)
		return nil, err
	}
	defer global.Close()

	n := &Net{cfg: cfg, lock: lock, faults: newFaultSet(cfg.Hosts), applied: map[int]string{}}
	for i := 1; i <= cfg.Hosts; i++ {
		n.hosts = append(n.hosts, &Host{net: n, index: i, ns: hostNS(cfg.Name, i), addr: hostAddr(cfg.Subnet, i)})
	}
	// We hold the name's lock, so anything under the name is a leftover.
	if err := removeRun(cfg.Name); err != nil {
		releaseRun(lock, cfg.Name)
		return nil, fmt.Errorf("hosts: set up %q: remove leftovers: %w", cfg.Name, err)
	}
	if err := checkSubnet(cfg.Subnet); err != nil {
		releaseRun(lock, cfg.Name)
		return nil, err
	}
	if err := n.create(); err != nil {
		n.stopProxies()
		if rerr := removeRun(cfg.Name); rerr != nil {
			err = errors.Join(err, fmt.Errorf("hosts: clean up after failed setup: %w", rerr))
		}
		releaseRun(lock, cfg.Name)
		return nil, fmt.Errorf("hosts: set up %q: %w", cfg.Name, err)
	}
	return n, nil
}

// setupCrash, if set (by tests), is called at each named point of create;
// an error it returns fails Setup there, as a failing command would.
var setupCrash func(point string) error

// Crash points of create, in order.
var setupCrashPoints = []string{"namespaces", "uplink", "switch", "hosts", "proxies", "rules"}

func crashPoint(point string) error {
	if setupCrash == nil {
		return nil
	}
	return setupCrash(point)
}

// create makes the run's objects (Setup's list, in that order).
func (n *Net) create() error {
	name, sw := n.cfg.Name, switchNS(n.cfg.Name)
	const noV6 = "/proc/sys/net/ipv6/conf/default/disable_ipv6"
	for _, ns := range n.namespaces() {
		if _, err := ip("netns", "add", ns); err != nil {
			return err
		}
		// Interfaces created in ns from now on start without IPv6.
		if err := writeSysctl(ns, noV6, "1"); err != nil {
			return fmt.Errorf("hosts: disable IPv6 in %s: %w", ns, err)
		}
	}
	if err := crashPoint("namespaces"); err != nil {
		return err
	}
	up := uplinkName(name)
	if err := ipBatch("", "link add "+up+" type veth peer name "+uplinkPeer(name)+" netns "+sw); err != nil {
		return err
	}
	if err := writeSysctl("", "/proc/sys/net/ipv6/conf/"+up+"/disable_ipv6", "1"); err != nil {
		return fmt.Errorf("hosts: disable IPv6 on %s: %w", up, err)
	}
	if err := ipBatch("",
		"addr add "+hostAddr(n.cfg.Subnet, 0).String()+"/24 dev "+up,
		"link set "+up+" up"); err != nil {
		return err
	}
	if err := crashPoint("uplink"); err != nil {
		return err
	}
	br := bridgeName(name)
	lines := []string{
		"link set lo up",
		"link add " + br + " type bridge",
		"link set " + br + " up",
		"link set " + uplinkPeer(name) + " master " + br + " up",
	}
	for _, h := range n.hosts {
		port := hostPort(name, h.index)
		lines = append(lines,
			"link add "+port+" type veth peer name "+hostIface+" netns "+h.ns,
			"link set "+port+" master "+br+" up")
	}
	if err := ipBatch(sw, lines...); err != nil {
		return err
	}
	if err := crashPoint("switch"); err != nil {
		return err
	}
	for _, h := range n.hosts {
		if err := ipBatch(h.ns,
			"link set lo up",
			"addr add "+h.IP()+"/24 dev "+hostIface,
			"link set "+hostIface+" up"); err != nil {
			return err
		}
	}
	if err := crashPoint("hosts"); err != nil {
		return err
	}
	if err := n.startProxies(); err != nil {
		return err
	}
	if err := crashPoint("proxies"); err != nil {
		return err
	}
	if err := n.applyLocked(); err != nil {
		return err
	}
	return crashPoint("rules")
}

// namespaces lists the run's namespaces, the switch first.
func (n *Net) namespaces() []string {
	out := []string{switchNS(n.cfg.Name)}
	for _, h := range n.hosts {
		out = append(out, h.ns)
	}
	return out
}

// checkSubnet fails with ErrSubnetInUse if a route in the harness's
// namespace (any table, default routes aside) overlaps the run's /24.
func checkSubnet(s byte) error {
	want := subnetPrefix(s)
	out, err := ip("-4", "-o", "route", "show", "table", "all")
	if err != nil {
		return err
	}
	types := []string{"unicast", "local", "broadcast", "multicast", "anycast", "blackhole", "unreachable", "prohibit", "throw", "nat"}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 1 && slices.Contains(types, f[0]) {
			f = f[1:]
		}
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		p, err := netip.ParsePrefix(f[0])
		if err != nil {
			a, aerr := netip.ParseAddr(f[0])
			if aerr != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Overlaps(want) {
			return fmt.Errorf("%w: %s overlaps route %q", ErrSubnetInUse, want, strings.TrimSpace(line))
		}
	}
	return nil
}

// Close kills every process started through the Net (SIGKILL to its
// process group, then waits until it is reaped), kills any other process
// left in the run's namespaces, unmounts the hosts' disks (copying their
// files onto the disk under them first: MountDisk), and deletes the
// uplink and the namespaces (which deletes the bridge and every veth with
// them). The harness's route to the subnet goes with the uplink, so the
// subnet is free when Close returns. It needs root and blocks, about
// 300 ms and the time to copy the disks.
// Calling it again does nothing and returns nil.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, p := range n.procs {
		if err := p.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	// The proxies' sockets would keep the hosts' namespaces alive.
	n.stopProxies()
	if err := removeRun(n.cfg.Name); err != nil {
		errs = append(errs, err)
	}
	releaseRun(n.lock, n.cfg.Name)
	if len(errs) > 0 {
		return fmt.Errorf("hosts: close %q: %w", n.cfg.Name, errors.Join(errs...))
	}
	return nil
}

// abandon forgets the Net as a crashed harness would: it drops the name's
// lock and leaves everything else in place. For tests of CleanupStale.
func (n *Net) abandon() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	_ = n.lock.Close()
}

// listNetns returns the names in /run/netns.
func listNetns() ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hosts: list namespaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

// listLinks returns the names of the links in the harness's namespace.
func listLinks() ([]string, error) {
	out, err := ip("-o", "link", "show")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(out) {
		// "7: name@peer: <FLAGS> ..."
		f := strings.SplitN(line, ": ", 3)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(f[1], "@")
		names = append(names, name)
	}
	return names, nil
}

// killNetnsPids SIGKILLs every process whose namespace is ns (this
// process aside: one of its threads may be visiting), without waiting.
func killNetnsPids(ns string) error {
	out, err := ip("netns", "pids", ns)
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(out) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("hosts: kill %d in %s: %w", pid, ns, err)
		}
	}
	return nil
}

// removeRun deletes whatever exists of run name: it kills the processes
// in its namespaces, unmounts its disks (keeping their files; disk.go),
// deletes its uplink and deletes its namespaces.
// Objects already gone are not errors. The caller holds the name's lock.
func removeRun(name string) error {
	all, err := listNetns()
	if err != nil {
		return err
	}
	var nss []string
	for _, ns := range all {
		if run, ok := parseRunObject("ns", ns); ok && run == name {
			nss = append(nss, ns)
		}
	}
	var errs []error
	for _, ns := range nss {
		if err := killNetnsPids(ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unmountDisks(name); err != nil {
		errs = append(errs, err)
	}
	links, err := listLinks()
	if err != nil {
		errs = append(errs, err)
	}
	if slices.Contains(links, uplinkName(name)) {
		// Deleting one end deletes the pair, at once: the route to the
		// subnet goes with it.
		if _, err := ip("link", "del", uplinkName(name)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range nss {
		if _, err := ip("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CleanupStale removes what crashed runs left behind: for every run whose
// name starts with prefix ([a-z0-9], at most MaxNameLen) and whose owner
// is gone (its lock is free), it kills the processes still in its
// namespaces (ip netns pids; they are not waited for, not being our
// children), unmounts its disks keeping their files, deletes its uplink
// and namespaces, and its lock file. Runs
// of live Nets, in this process or another, are left alone, so it is safe
// to call with a broad prefix while other runs are going. Only names of
// the shapes Setup makes are considered. It needs root and blocks.
func CleanupStale(prefix string) error {
	if !nameRE.MatchString(prefix) {
		return fmt.Errorf("%w: prefix %q must be 1..%d characters of [a-z0-9]", ErrInvalidConfig, prefix, MaxNameLen)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: cleaning up %q", ErrNotRoot, prefix)
	}
	runs := map[string]bool{}
	nss, err := listNetns()
	if err != nil {
		return err
	}
	for _, ns := range nss {
		if run, ok := parseRunObject("ns", ns); ok && strings.HasPrefix(run, prefix) {
			runs[run] = true
		}
	}
	links, err := listLinks()
	if err != nil {
		return err
	}
	for _, l := range links {
		if run, ok := parseRunObject("link", l); ok && strings.HasPrefix(run, prefix) {
			runs[run] = true
		}
	}
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if ns, ok := strings.CutPrefix(m.source, diskSourcePrefix); ok && m.fstype == "tmpfs" {
			if run, ok := parseRunObject("ns", ns); ok && strings.HasPrefix(run, prefix) {
				runs[run] = true
			}
		}
	}
	if ents, err := os.ReadDir(lockDir); err == nil {
		for _, e := range ents {
			run, ok := strings.CutSuffix(e.Name(), ".lock")
			if ok && nameRE.MatchString(run) && strings.HasPrefix(run, prefix) {
				runs[run] = true
			}
		}
	}
	var errs []error
	for _, run := range slices.Sorted(maps.Keys(runs)) {
		lock, err := flockFile(runLockPath(run), false)
		if errors.Is(err, ErrNameInUse) {
			continue // alive
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := removeRun(run); err != nil {
			errs = append(errs, fmt.Errorf("run %q: %w", run, err))
		}
		releaseRun(lock, run)
	}
	if len(errs) > 0 {
		return fmt.Errorf("hosts: clean up %q: %w", prefix, errors.Join(errs...))
	}
	return nil
}

// applyLocked rewrites the fault table of every host whose rendering
// differs from what was last applied to it, all hosts at once (one nft
// process each), so a fault lands on every host within a few ms. A host
// whose nft call failed is marked unknown, so the next call rewrites it.
// REQUIRES: n.mu held (or n not yet shared).
func (n *Net) applyLocked() error {
	addr := func(i int) string { return hostAddr(n.cfg.Subnet, i).String() }
	scripts := map[int]string{}
	for _, h := range n.hosts {
		script := n.faults.render(h.index, addr)
		if s, ok := n.applied[h.index]; !ok || s != script {
			scripts[h.index] = script
			delete(n.applied, h.index)
		}
	}
	errs := make([]error, len(n.hosts)+1)
	var wg sync.WaitGroup
	for i, script := range scripts {
		wg.Go(func() {
			if err := nft(n.hosts[i-1].ns, script); err != nil {
				errs[i] = fmt.Errorf("host %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	for i, script := range scripts {
		if errs[i] == nil {
			n.applied[i] = script
		}
	}
	return errors.Join(errs...)
}

// change applies one fault call: edit changes the model, then every host
// whose rules changed is rewritten. A call with bad arguments changes
// nothing; if nft fails the model keeps the change and the rules may be
// partly in force (Heal resets both).
func (n *Net) change(what string, edit func(*faultSet) error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: %s", ErrClosed, what)
	}
	next := n.faults.clone()
	if err := edit(next); err != nil {
		return fmt.Errorf("hosts: %s: %w", what, err)
	}
	n.faults = next
	n.publishDelays()
	if err := n.applyLocked(); err != nil {
		return fmt.Errorf("hosts: %s: %w", what, err)
	}
	return nil
}

// Partition cuts every link between hosts of different groups, both
// directions, all IP traffic (TCP, UDP, ICMP): each host of a group drops
// packets from, and to, the addresses of every host in the other groups
// (input: ip saddr { ... } drop; output: ip daddr { ... } drop).
// Established connections are cut too. Hosts named in no group, and the
// harness's address, are not affected. A host may be in one group only.
// Like every fault call it adds to the faults in force (Heal removes
// them), needs root, and blocks while nft runs, in parallel, in the hosts
// whose rules changed (20 to 60 ms in all).
func (n *Net) Partition(groups ...[]int) error {
	return n.change(fmt.Sprintf("partition %v", groups), func(f *faultSet) error { return f.partition(groups) })
}

// Isolate cuts every link of host i, both directions: the same rules as
// Partition({i}, {every other host}).
func (n *Net) Isolate(i int) error {
	return n.change(fmt.Sprintf("isolate %d", i), func(f *faultSet) error { return f.isolate(i) })
}

// DropOneWay drops every packet from host from to host to (from's output:
// ip daddr to drop; to's input: ip saddr from drop); to's packets to from
// still flow. A TCP connection needs both directions, so none can be
// opened or kept between the two, either way; datagrams from to to from
// arrive (UDPReachable shows the difference).
func (n *Net) DropOneWay(from, to int) error {
	return n.change(fmt.Sprintf("drop %d->%d", from, to), func(f *faultSet) error { return f.dropOneWay(from, to) })
}

// Clog cuts the link between hosts a and b, both directions (the rules
// of DropOneWay both ways); other links of a and b still work. Unclog
// opens it again.
func (n *Net) Clog(a, b int) error {
	return n.change(fmt.Sprintf("clog %d-%d", a, b), func(f *faultSet) error { return f.clog(a, b) })
}

// Unclog lets the link between hosts a and b through again, both
// directions, whichever fault call cut it; the other faults in force
// stay.
func (n *Net) Unclog(a, b int) error {
	return n.change(fmt.Sprintf("unclog %d-%d", a, b), func(f *faultSet) error { return f.unclog(a, b) })
}

// Loss drops each packet between host i and the other hosts with
// probability percent/100, independently, in both directions (host i's
// input and output: ip saddr/daddr { other hosts } numgen random mod 100
// < percent drop). A request and its reply each cross the rule once. It
// replaces host i's earlier loss; 0 removes it, 100 drops everything.
// Traffic with the harness is not affected.
func (n *Net) Loss(i int, percent int) error {
	return n.change(fmt.Sprintf("loss %d %d%%", i, percent), func(f *faultSet) error { return f.setLoss(i, percent) })
}

// Heal removes every fault: it flushes both chains on every host (whatever
// the model says is there). It needs root and blocks.
func (n *Net) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: heal", ErrClosed)
	}
	n.faults = newFaultSet(n.cfg.Hosts)
	n.publishDelays()
	clear(n.applied)
	if err := n.applyLocked(); err != nil {
		return fmt.Errorf("hosts: heal: %w", err)
	}
	return nil
}

// Faults describes the faults in force, one entry per call since the last
// Heal, e.g. "partition {1} | {2 3}; drop 1->2; loss 2 30%", or "none".
// It does no I/O.
func (n *Net) Faults() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faults.describe()
}

// Rules returns host i's fault table as the kernel has it (nft list table
// inet cutkvchaos), for logs. It needs root and blocks.
func (n *Net) Rules(i int) (string, error) {
	h := n.Host(i)
	if h == nil {
		return "", fmt.Errorf("%w: host %d, want 1..%d", ErrBadHost, i, len(n.hosts))
	}
	return nftList(h.ns)
}

// endpoint names a side of a probe: host i, or the harness for i == 0.
func (n *Net) endpoint(i int) (*Host, netip.Addr, error) {
	if i == 0 {
		return nil, hostAddr(n.cfg.Subnet, 0), nil
	}
	h := n.Host(i)
	if h == nil {
		return nil, netip.Addr{}, fmt.Errorf("%w: host %d, want 0..%d", ErrBadHost, i, len(n.hosts))
	}
	return h, h.addr, nil
}

func (n *Net) dial(h *Host, network, address string, timeout time.Duration) (net.Conn, error) {
	if h == nil {
		return net.DialTimeout(network, address, timeout)
	}
	return h.Dial(network, address, timeout)
}

// Reachable reports whether a TCP connection from host from to port on
// host to's address is established within timeout. Index 0 stands for the
// harness (its own namespace, HostIP). A refused connection (nothing
// listening) is false, as is a bad index; so the caller needs a listener
// on port to tell a cut link from a working one. It blocks up to timeout.
func (n *Net) Reachable(from, to int, port int, timeout time.Duration) bool {
	if port < 1 || port > 65535 {
		return false
	}
	src, _, err := n.endpoint(from)
	if err != nil {
		return false
	}
	_, dst, err := n.endpoint(to)
	if err != nil {
		return false
	}
	c, err := n.dial(src, "tcp4", netip.AddrPortFrom(dst, uint16(port)).String(), timeout)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// UDPReachable reports whether a datagram sent from host from arrives at
// host to within timeout: it binds a UDP socket on host to's address (an
// ephemeral port), and from host from sends it a random token every 20 ms
// until one arrives. Index 0 stands for the harness. It needs no listener
// of the caller's, sees one-way faults (DropOneWay) that TCP cannot, and
// blocks up to timeout (less if a datagram arrives).
func (n *Net) UDPReachable(from, to int, timeout time.Duration) bool {
	src, _, err := n.endpoint(from)
	if err != nil {
		return false
	}
	dstHost, dst, err := n.endpoint(to)
	if err != nil {
		return false
	}
	bind := netip.AddrPortFrom(dst, 0).String()
	var pc net.PacketConn
	if dstHost == nil {
		pc, err = net.ListenPacket("udp4", bind)
	} else {
		pc, err = dstHost.ListenPacket("udp4", bind)
	}
	if err != nil {
		return false
	}
	defer pc.Close()
	deadline := time.Now().Add(timeout)
	c, err := n.dial(src, "udp4", pc.LocalAddr().String(), timeout)
	if err != nil {
		return false
	}
	defer c.Close()
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	buf := make([]byte, 64)
	for time.Now().Before(deadline) {
		_, _ = c.Write(token)
		rd := time.Now().Add(20 * time.Millisecond)
		if rd.After(deadline) {
			rd = deadline
		}
		_ = pc.SetReadDeadline(rd)
		for {
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			if bytes.Equal(buf[:k], token) {
				return true
			}
		}
	}
	return false
}
