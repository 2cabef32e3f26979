package hosts

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests that build real hosts. They need root, ip and nft, and skip
// without them. Every run name starts with testPrefix, unique to this test
// process, so concurrent test runs do not meet.

var testPrefix = fmt.Sprintf("t%03d", os.Getpid()%1000)

const (
	port     = 7100
	cutWait  = 300 * time.Millisecond // how long a probe expected to fail waits
	flowWait = 5 * time.Second        // how long a probe expected to pass may take
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := ipPath(); err != nil {
		t.Skipf("needs iproute2: %v", err)
	}
	if _, err := nftPath(); err != nil {
		t.Skipf("needs nftables: %v", err)
	}
}

// newNet sets up a run named testPrefix+suffix on the first free subnet
// from a per-process start, and closes it when the test ends.
func newNet(t *testing.T, suffix string, hosts int) *Net {
	t.Helper()
	start := 100 + os.Getpid()%100
	for k := range 50 {
		n, err := Setup(Config{Name: testPrefix + suffix, Hosts: hosts, Subnet: byte(start + k)})
		if errors.Is(err, ErrSubnetInUse) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := n.Close(); err != nil {
				t.Error(err)
			}
		})
		return n
	}
	t.Fatal("no free subnet")
	return nil
}

// serve echoes on a TCP listener at addr:port (h nil: the harness's
// namespace) until the test ends.
func serve(t *testing.T, h *Host, addr string) {
	t.Helper()
	a := net.JoinHostPort(addr, strconv.Itoa(port))
	var l net.Listener
	var err error
	if h == nil {
		l, err = net.Listen("tcp4", a)
	} else {
		l, err = h.Listen("tcp4", a)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

func namespacesOf(t *testing.T, name string) []string {
	t.Helper()
	all, err := listNetns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ns := range all {
		if run, ok := parseRunObject("ns", ns); ok && run == name {
			out = append(out, ns)
		}
	}
	return out
}

func linksOf(t *testing.T, name string) []string {
	t.Helper()
	all, err := listLinks()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range all {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return out
}

// requireGone checks that nothing of run name is left: no namespace, no
// link in the harness's namespace, no lock file, and no route to its
// subnet (if subnet >= 0).
func requireGone(t *testing.T, name string, subnet int) {
	t.Helper()
	if got := namespacesOf(t, name); len(got) > 0 {
		t.Errorf("namespaces left: %v", got)
	}
	if got := linksOf(t, name); len(got) > 0 {
		t.Errorf("links left: %v", got)
	}
	if subnet < 0 {
		return
	}
	if err := checkSubnet(byte(subnet)); err != nil {
		t.Errorf("subnet not free: %v", err)
	}
	if _, err := os.Stat(runLockPath(name)); !os.IsNotExist(err) {
		t.Errorf("lock file left: %v", err)
	}
}

// poll calls cond until it is true or d has passed.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

func TestSetupClose(t *testing.T) {
	requireRoot(t)
	n := newNet(t, "a", 3)
	name, subnet := n.Config().Name, n.Config().Subnet

	wantNS := []string{switchNS(name), hostNS(name, 1), hostNS(name, 2), hostNS(name, 3)}
	if got := namespacesOf(t, name); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(wantNS))) {
		t.Fatalf("namespaces %v, want %v", got, wantNS)
	}
	if got := linksOf(t, name); !slices.Equal(got, []string{uplinkName(name)}) {
		t.Fatalf("links in the harness's namespace %v, want only the uplink", got)
	}
	if got, want := n.HostIP(), fmt.Sprintf("10.231.%d.1", subnet); got != want {
		t.Errorf("HostIP %s, want %s", got, want)
	}
	for i := 1; i <= 3; i++ {
		h := n.Host(i)
		if h.Index() != i || h.IP() != fmt.Sprintf("10.231.%d.%d", subnet, 10+i) || h.Namespace() != hostNS(name, i) {
			t.Errorf("host %d: index %d ip %s ns %s", i, h.Index(), h.IP(), h.Namespace())
		}
		out, err := ip("-n", h.Namespace(), "-o", "-4", "addr", "show", "dev", "eth0")
		if err != nil || !strings.Contains(out, h.IP()+"/24") {
			t.Errorf("host %d eth0: %q %v", i, out, err)
		}
		routes, err := ip("-n", h.Namespace(), "-o", "route", "show", "table", "all")
		if err != nil || strings.Contains(routes, "default") {
			t.Errorf("host %d has a default route or none: %q %v", i, routes, err)
		}
		rules, err := n.Rules(i)
		if err != nil || !strings.Contains(rules, "hook input priority filter; policy accept;") || !strings.Contains(rules, "hook output priority filter; policy accept;") {
			t.Errorf("host %d table: %q %v", i, rules, err)
		}
		serve(t, h, h.IP())
	}
	if n.Host(0) != nil || n.Host(4) != nil {
		t.Error("Host out of range is not nil")
	}
	serve(t, nil, n.HostIP())
	for i := 1; i <= 3; i++ {
		if !n.Reachable(0, i, port, flowWait) || !n.Reachable(i, 0, port, flowWait) {
			t.Errorf("harness and host %d do not reach each other", i)
		}
		for j := 1; j <= 3; j++ {
			if i != j && !n.Reachable(i, j, port, flowWait) {
				t.Errorf("host %d does not reach host %d", i, j)
			}
		}
	}
	if n.Reachable(1, 2, port+1, flowWait) {
		t.Error("reached a port nobody listens on")
	}

	if _, err := Setup(Config{Name: name, Hosts: 1, Subnet: subnet + 1}); !errors.Is(err, ErrNameInUse) {
		t.Errorf("second Setup of %s: %v, want ErrNameInUse", name, err)
	}
	if _, err := Setup(Config{Name: testPrefix + "b", Hosts: 1, Subnet: subnet}); !errors.Is(err, ErrSubnetInUse) {
		t.Errorf("Setup on a used subnet: %v, want ErrSubnetInUse", err)
	}
	requireGone(t, testPrefix+"b", -1) // the refused Setup left nothing

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, name, int(subnet))
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := n.Isolate(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Isolate after Close: %v", err)
	}
	if _, err := n.Host(1).Start("sleep", []string{"1"}, nil, filepath.Join(t.TempDir(), "log")); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
}

// TestSetupFails fails Setup at each of its named points and checks that
// it removed everything it had made.
func TestSetupFails(t *testing.T) {
	requireRoot(t)
	t.Cleanup(func() { setupCrash = nil })
	probe := newNet(t, "f", 1) // finds a free subnet
	subnet := probe.Config().Subnet
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("injected")
	for _, point := range setupCrashPoints {
		setupCrash = func(p string) error {
			if p == point {
				return boom
			}
			return nil
		}
		name := testPrefix + "f"
		n, err := Setup(Config{Name: name, Hosts: 3, Subnet: subnet, ProxyPorts: []int{port}})
		if !errors.Is(err, boom) {
			if n != nil {
				_ = n.Close()
			}
			t.Fatalf("crash at %s: Setup returned %v", point, err)
		}
		requireGone(t, name, int(subnet))
	}
}

// checkReach compares Reachable (TCP) between every pair of hosts and the
// harness (0) with the links expected to be cut.
func checkReach(t *testing.T, n *Net, what string, cut ...[2]int) {
	t.Helper()
	for i := 0; i <= n.Hosts(); i++ {
		for j := 0; j <= n.Hosts(); j++ {
			if i == j {
				continue
			}
			want := !slices.Contains(cut, [2]int{i, j})
			wait := flowWait
			if !want {
				wait = cutWait
			}
			if got := n.Reachable(i, j, port, wait); got != want {
				t.Errorf("%s: Reachable(%d, %d) = %v, want %v (faults: %s)", what, i, j, got, want, n.Faults())
			}
		}
	}
}

func both(pairs ...[2]int) [][2]int {
	var out [][2]int
	for _, p := range pairs {
		out = append(out, p, [2]int{p[1], p[0]})
	}
	return out
}

func TestFaults(t *testing.T) {
	requireRoot(t)
	n := newNet(t, "c", 3)
	serve(t, nil, n.HostIP())
	for i := 1; i <= 3; i++ {
		serve(t, n.Host(i), n.Host(i).IP())
	}
	heal := func() {
		t.Helper()
		if err := n.Heal(); err != nil {
			t.Fatal(err)
		}
		if n.Faults() != "none" {
			t.Errorf("after Heal, Faults = %q", n.Faults())
		}
		checkReach(t, n, "healed")
	}
	checkReach(t, n, "before faults")

	// An open connection across the cut stalls, and resumes after Heal.
	c, err := n.Host(1).Dial("tcp4", net.JoinHostPort(n.Host(2).IP(), strconv.Itoa(port)), flowWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo := func(msg string, d time.Duration) error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(d))
		buf := make([]byte, len(msg))
		_, err := io.ReadFull(c, buf)
		return err
	}
	if err := echo("a", flowWait); err != nil {
		t.Fatal(err)
	}

	if err := n.Partition([]int{1}, []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := n.Partition([]int{1}, []int{2, 3}); err != nil { // idempotent
		t.Fatal(err)
	}
	if got := n.Faults(); got != "partition {1} | {2 3}" {
		t.Errorf("Faults = %q", got)
	}
	checkReach(t, n, "partition 1 | 2 3", both([2]int{1, 2}, [2]int{1, 3})...)
	if n.UDPReachable(1, 2, cutWait) || n.UDPReachable(3, 1, cutWait) || !n.UDPReachable(2, 3, flowWait) || !n.UDPReachable(0, 1, flowWait) || !n.UDPReachable(1, 0, flowWait) {
		t.Error("UDP does not follow the partition")
	}
	if err := echo("b", cutWait); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("echo across the partition: %v, want a timeout", err)
	}
	heal()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // TCP retransmits "b" with backoff
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Errorf("connection did not resume after Heal: %v", err)
	}

	if err := n.Isolate(2); err != nil {
		t.Fatal(err)
	}
	checkReach(t, n, "isolate 2", both([2]int{2, 1}, [2]int{2, 3})...)
	heal()

	// Clogged links one by one, opened again one by one.
	if err := errors.Join(n.Clog(1, 2), n.Clog(2, 3)); err != nil {
		t.Fatal(err)
	}
	checkReach(t, n, "clog 1-2, 2-3", both([2]int{1, 2}, [2]int{2, 3})...)
	if err := n.Unclog(2, 1); err != nil {
		t.Fatal(err)
	}
	if got := n.Faults(); got != "clog 2-3" {
		t.Errorf("Faults = %q", got)
	}
	checkReach(t, n, "clog 2-3", both([2]int{2, 3})...)
	heal()

	if err := n.DropOneWay(1, 2); err != nil {
		t.Fatal(err)
	}
	if got := n.Faults(); got != "drop 1->2" {
		t.Errorf("Faults = %q", got)
	}
	// TCP needs both ways: no connection either way.
	checkReach(t, n, "drop 1->2", [2]int{1, 2}, [2]int{2, 1})
	if n.UDPReachable(1, 2, cutWait) {
		t.Error("datagrams flow 1->2 through a one-way drop")
	}
	if !n.UDPReachable(2, 1, flowWait) {
		t.Error("datagrams do not flow 2->1 beside a one-way drop 1->2")
	}
	heal()

	if err := n.Loss(2, 100); err != nil {
		t.Fatal(err)
	}
	checkReach(t, n, "loss 2 100%", both([2]int{2, 1}, [2]int{2, 3})...)
	if rules, err := n.Rules(2); err != nil || !strings.Contains(rules, `drop comment "cutkv chaos: loss 100%"`) {
		t.Errorf("host 2 rules: %q %v", rules, err)
	}
	if err := n.Loss(2, 50); err != nil {
		t.Fatal(err)
	}
	if rules, err := n.Rules(2); err != nil || !strings.Contains(rules, "numgen random mod 100 < 50 drop") {
		t.Errorf("host 2 rules: %q %v", rules, err)
	}
	if err := n.Loss(2, 0); err != nil {
		t.Fatal(err)
	}
	if got := n.Faults(); got != "none" {
		t.Errorf("Faults after Loss 0 = %q", got)
	}
	checkReach(t, n, "loss 2 0%")

	// Faults compose: a partition and a loss, then Heal clears both.
	if err := errors.Join(n.Partition([]int{1}, []int{3}), n.Loss(2, 100)); err != nil {
		t.Fatal(err)
	}
	checkReach(t, n, "partition 1 | 3 + loss 2", append(both([2]int{1, 3}), both([2]int{2, 1}, [2]int{2, 3})...)...)
	heal()

	if err := n.Partition([]int{1}, []int{1}); !errors.Is(err, ErrBadHost) {
		t.Errorf("bad partition: %v", err)
	}
	if err := n.Loss(4, 10); !errors.Is(err, ErrBadHost) {
		t.Errorf("bad loss host: %v", err)
	}
	if n.Faults() != "none" {
		t.Errorf("refused calls changed the faults: %q", n.Faults())
	}
}

func commOf(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestProcesses(t *testing.T) {
	requireRoot(t)
	n := newNet(t, "p", 2)
	dir := t.TempDir()
	h := n.Host(2)

	p, err := h.Start("sleep", []string{"60"}, nil, filepath.Join(dir, "sleep.log"))
	if err != nil {
		t.Fatal(err)
	}
	// The pid is sleep's own, inside host 2's namespace.
	if got := commOf(t, p.Pid()); got != "sleep" {
		t.Errorf("pid %d runs %q, want sleep", p.Pid(), got)
	}
	ns, err := nsInode(fmt.Sprintf("/proc/%d/ns/net", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := nsInode(netnsPath(h.Namespace())); ns != want {
		t.Errorf("process in namespace %d, want host 2's %d", ns, want)
	}
	if pgid, err := syscall.Getpgid(p.Pid()); err != nil || pgid != p.Pid() {
		t.Errorf("process group %d (%v), want its own %d", pgid, err, p.Pid())
	}

	paused := func(want bool) bool {
		return poll(5*time.Second, func() bool { got, err := p.Paused(); return err == nil && got == want })
	}
	if got, err := p.Paused(); err != nil || got {
		t.Fatalf("Paused before Pause: %v %v", got, err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if !paused(true) {
		t.Fatal("Pause: state never became T")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if !paused(false) {
		t.Fatal("Resume: state stayed T")
	}
	if err := p.Pause(); err != nil { // Kill works on a stopped process
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Error("Running after Kill")
	}
	if exited, code := p.Wait(0); !exited || code != -1 {
		t.Errorf("Wait after Kill = %v, %d", exited, code)
	}
	if ws := p.State().Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("ended by %v, want SIGKILL", ws)
	}
	if err := p.Pause(); !errors.Is(err, ErrExited) {
		t.Errorf("Pause after exit: %v", err)
	}
	if _, err := p.Paused(); !errors.Is(err, ErrExited) {
		t.Errorf("Paused after exit: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}

	// Term, and Wait with a timeout.
	p, err = h.Start("sleep", []string{"60"}, nil, filepath.Join(dir, "sleep.log"))
	if err != nil {
		t.Fatal(err)
	}
	if exited, _ := p.Wait(10 * time.Millisecond); exited {
		t.Fatal("sleep 60 exited at once")
	}
	if err := p.Term(); err != nil {
		t.Fatal(err)
	}
	if exited, code := p.Wait(10 * time.Second); !exited || code != -1 || p.State().Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("after Term: exited %v code %d state %v", exited, code, p.State())
	}

	// Output, environment and exit status; the log is appended to.
	log := filepath.Join(dir, "sh.log")
	if err := os.WriteFile(log, []byte("earlier\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = h.Start("/bin/sh", []string{"-c", "echo out $X; echo err >&2; exit 3"}, []string{"X=42", "PATH=/usr/bin:/bin"}, log)
	if err != nil {
		t.Fatal(err)
	}
	if exited, code := p.Wait(10 * time.Second); !exited || code != 3 {
		t.Errorf("sh: exited %v code %d", exited, code)
	}
	if b, _ := os.ReadFile(log); string(b) != "earlier\nout 42\nerr\n" {
		t.Errorf("log %q", b)
	}

	if _, err := h.Start("no-such-binary-here", nil, nil, log); err == nil {
		t.Error("Start of a missing binary succeeded")
	}

	// Close kills what is still running and reaps it.
	p, err = n.Host(1).Start("sleep", []string{"60"}, nil, filepath.Join(dir, "sleep.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Error("process still running after Close")
	}
	if err := syscall.Kill(p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d still exists after Close: %v", p.Pid(), err)
	}
}

func TestCleanupStale(t *testing.T) {
	requireRoot(t)
	if err := CleanupStale("BAD"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad prefix: %v", err)
	}
	live := newNet(t, "l", 1)
	stale := newNet(t, "s", 2)
	name, subnet := stale.Config().Name, stale.Config().Subnet
	p, err := stale.Host(2).Start("sleep", []string{"60"}, nil, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	stale.abandon() // as if the harness had crashed

	if err := CleanupStale(testPrefix); err != nil {
		t.Fatal(err)
	}
	requireGone(t, name, int(subnet))
	// The process in the stale run was killed (and, being our child,
	// reaped by its Proc).
	if exited, _ := p.Wait(10 * time.Second); !exited {
		t.Error("process of the stale run survived CleanupStale")
	}
	// The live run was spared.
	if got := namespacesOf(t, live.Config().Name); len(got) != 2 {
		t.Errorf("live run's namespaces: %v", got)
	}
	serve(t, live.Host(1), live.Host(1).IP())
	if !live.Reachable(0, 1, port, flowWait) {
		t.Error("live run broken by CleanupStale")
	}
	// A new Setup may reuse the stale run's name (its subnet too, unless
	// a concurrent test process took it meanwhile).
	again := newNet(t, "s", 1)
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, name, int(again.Config().Subnet))
}
