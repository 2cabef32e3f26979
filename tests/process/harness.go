package process

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/internal/clustertest"
)

// Time limits of the harness. They bound waits for conditions; none is a
// sleep.
const (
	readyTimeout = 30 * time.Second // a start or restart until the ready line
	exitTimeout  = 15 * time.Second // a killed or stopped process until it is reaped
)

// Binaries are the paths of the programs under test.
type Binaries struct {
	Kvnode           string // normal build
	KvnodeFailpoints string // built with -tags failpoints (internal/failpoint)
	Kvctl            string
}

// Build builds kvnode (normal and with failpoints) and kvctl into dir,
// with the go command on PATH and the caller's environment, so GOFLAGS,
// GOCACHE and friends apply as they would on the command line. Call it
// from TestMain; go build's output goes to stderr.
func Build(dir string) (Binaries, error) {
	b := Binaries{
		Kvnode:           filepath.Join(dir, "kvnode"),
		KvnodeFailpoints: filepath.Join(dir, "kvnode-failpoints"),
		Kvctl:            filepath.Join(dir, "kvctl"),
	}
	builds := [][]string{
		{"-o", b.Kvnode, "github.com/cutkv/cutkv/cmd/kvnode"},
		{"-tags", "failpoints", "-o", b.KvnodeFailpoints, "github.com/cutkv/cutkv/cmd/kvnode"},
		{"-o", b.Kvctl, "github.com/cutkv/cutkv/cmd/kvctl"},
	}
	for _, args := range builds {
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return Binaries{}, fmt.Errorf("go build %v: %w", args, err)
		}
	}
	return b, nil
}

// envSoak and envSeed are the package's knobs (doc.go).
const (
	envSoak = "CUTKV_SOAK"
	envSeed = "CUTKV_SEED"
)

// SoakDuration returns CUTKV_SOAK as a duration, 10s when unset.
func SoakDuration(t testing.TB) time.Duration {
	t.Helper()
	s := strings.TrimSpace(os.Getenv(envSoak))
	if s == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration such as 30s or 5m", envSoak, s)
	}
	return d
}

// NewRand returns a generator seeded from CUTKV_SEED, or at random; the
// seed is logged so that a failing run's choices can be repeated.
func NewRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if s := strings.TrimSpace(os.Getenv(envSeed)); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", envSeed, s)
		}
		seed = v
	}
	t.Logf("seed %d (set %s=%d to repeat the choices)", seed, envSeed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// ChildEnv is the test's environment without the variables that would
// change what kvnode or kvctl do behind a test's back.
func ChildEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CUTKV_FAILPOINTS=") || strings.HasPrefix(kv, "CUTKV_ENDPOINTS=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// FreeAddr returns 127.0.0.1:port with a port free for TCP and UDP now,
// below the ephemeral port range (see clustertest.FreeAddr). A node keeps
// its ports across restarts (the layout names its gRPC address), and a
// port of a stopped node must not be taken meanwhile by some process's
// outgoing connection, which the kernel numbers from the ephemeral range.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return clustertest.FreeAddr(t)
}

// proc is one run of a kvnode process.
type proc struct {
	cmd     *exec.Cmd
	logPath string // its stderr, shared by every run of a node
	logFrom int64  // where this run's stderr starts in logPath

	ready     chan struct{} // closed when the ready line arrives
	readyLine string        // set before ready is closed
	done      chan struct{} // closed once the process is reaped
	state     *os.ProcessState
	exitedAt  time.Time
}

// startProc runs bin with args, stdout into logPath+".out" (watched for
// the ready line) and stderr appended to logPath. The process is killed
// when the test ends.
func startProc(t testing.TB, binary string, args, env []string, logPath string) *proc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	outf, err := os.OpenFile(logPath+".out", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logf.Close()
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== %s %s %s\n", time.Now().Format("15:04:05.000"), filepath.Base(binary), strings.Join(args, " "))
	for _, kv := range env {
		if strings.HasPrefix(kv, "CUTKV_") {
			fmt.Fprintf(logf, "=== env %s\n", kv)
		}
	}
	from, _ := logf.Seek(0, 2)
	p := &proc{logPath: logPath, logFrom: from, ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = env
	p.cmd.Stderr = logf
	p.cmd.Stdout = &readyWatcher{w: outf, onReady: func(line string) {
		p.readyLine = line
		close(p.ready)
	}}
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		outf.Close()
		t.Fatalf("start %s: %v", binary, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exitedAt = time.Now()
		p.state = p.cmd.ProcessState
		logf.Close()
		outf.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// readyWatcher copies a process's stdout and reports its first line that
// starts with "ready ".
type readyWatcher struct {
	w       *os.File
	buf     []byte
	seen    bool
	onReady func(line string)
}

func (r *readyWatcher) Write(b []byte) (int, error) {
	_, _ = r.w.Write(b)
	r.buf = append(r.buf, b...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(r.buf[:i])
		r.buf = r.buf[i+1:]
		if !r.seen && strings.HasPrefix(line, "ready ") {
			r.seen = true
			r.onReady(line)
		}
	}
}

// running reports whether the process has not been reaped yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig; it is a no-op once the process is gone.
func (p *proc) signal(sig os.Signal) {
	if p.running() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
	}
}

// wait waits up to d for the process to exit and reports whether it did.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// exit describes how the process ended: its exit status, or -1 and the
// signal that killed it. It must be called after done is closed.
func (p *proc) exit() (code int, desc string) {
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return -1, "killed by " + ws.Signal().String()
	}
	return p.state.ExitCode(), fmt.Sprintf("exit status %d", p.state.ExitCode())
}

// stderr returns what this run wrote on stderr so far.
func (p *proc) stderr() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(b)) < p.logFrom {
		return ""
	}
	return string(b[p.logFrom:])
}

// waitReady waits for the ready line. ok is false, with a reason, when the
// process exits first or the deadline passes.
func (p *proc) waitReady(d time.Duration) (ok bool, why string) {
	select {
	case <-p.ready:
		return true, ""
	case <-p.done:
		_, desc := p.exit()
		return false, "exited before it was ready: " + desc
	case <-time.After(d):
		return false, fmt.Sprintf("not ready after %v", d)
	}
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d lines]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// logTailOnFailure registers a cleanup that prints the end of the file at
// path when the test has failed.
func logTailOnFailure(t testing.TB, name, path string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Logf("%s: no stderr: %v", name, err)
			return
		}
		t.Logf("%s stderr (%s), last lines:\n%s", name, path, Tail(string(b), 40))
	})
}

// Spec shapes a test cluster.
type Spec struct {
	// Bin is the kvnode binary every node runs (required); Configure may
	// pick another for some nodes.
	Bin             string
	Nodes           int           // default 3
	Partitions      int           // default 4
	Tick            time.Duration // raft tick, default 50ms
	ShutdownTimeout time.Duration // default 5s
	// Configure edits a node (binary, environment, extra flags) before its
	// first start.
	Configure func(n *Node)
}

// Cluster is a set of kvnode processes that bootstrapped one cluster.
type Cluster struct {
	t     testing.TB
	Nodes []*Node
}

// Node is one member of a Cluster, across its runs.
type Node struct {
	t       testing.TB
	ID      string
	DataDir string
	GRPC    string
	Peer    string
	Gossip  string
	HTTP    string

	// Bin is the binary the next start runs; Env is added to its
	// environment.
	Bin string
	Env []string
	// Flags are given on every start; Boot (--initial-cluster and
	// friends) only while Bootstrap is true.
	Flags     []string
	Boot      []string
	Bootstrap bool

	logPath string

	mu   sync.Mutex
	proc *proc // the current or last run
	runs int
}

// NewCluster bootstraps a cluster and waits until every node is ready.
func NewCluster(t testing.TB, spec Spec) *Cluster {
	t.Helper()
	if spec.Bin == "" {
		t.Fatal("process: Spec.Bin names no kvnode binary")
	}
	if spec.Nodes == 0 {
		spec.Nodes = 3
	}
	if spec.Partitions == 0 {
		spec.Partitions = 4
	}
	if spec.Tick == 0 {
		spec.Tick = 50 * time.Millisecond
	}
	if spec.ShutdownTimeout == 0 {
		spec.ShutdownTimeout = 5 * time.Second
	}
	base := t.TempDir()
	c := &Cluster{t: t}
	var initial []string
	for i := 0; i < spec.Nodes; i++ {
		n := &Node{
			t: t, ID: fmt.Sprintf("n%d", i+1),
			GRPC: FreeAddr(t), Peer: FreeAddr(t), Gossip: FreeAddr(t), HTTP: FreeAddr(t),
			Bin: spec.Bin, Bootstrap: true,
		}
		n.DataDir = filepath.Join(base, n.ID)
		n.logPath = filepath.Join(base, n.ID+".stderr")
		initial = append(initial, n.ID+"="+n.Peer)
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		var join []string
		for _, o := range c.Nodes {
			if o != n {
				join = append(join, o.Gossip)
			}
		}
		n.Flags = []string{
			"--id", n.ID, "--data-dir", n.DataDir,
			"--grpc-addr", n.GRPC, "--peer-addr", n.Peer, "--gossip-addr", n.Gossip, "--http-addr", n.HTTP,
			"--join", strings.Join(join, ","),
			"--raft-tick", spec.Tick.String(),
			"--shutdown-timeout", spec.ShutdownTimeout.String(),
		}
		n.Boot = []string{
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-token", "process-test",
			"--partitions", strconv.Itoa(spec.Partitions),
		}
		if spec.Configure != nil {
			spec.Configure(n)
		}
		logTailOnFailure(t, n.ID, n.logPath)
	}
	began := time.Now()
	c.StartAll()
	t.Logf("cluster of %d nodes ready in %v", len(c.Nodes), time.Since(began).Round(time.Millisecond))
	return c
}

// Endpoints returns every node's gRPC address.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.GRPC)
	}
	return eps
}

// StartAll starts every node that is not running, all at once (a
// restarted cluster needs a quorum before any node is ready), and waits
// until each is ready.
func (c *Cluster) StartAll() {
	c.t.Helper()
	var started []*Node
	for _, n := range c.Nodes {
		if !n.Running() {
			n.launch()
			started = append(started, n)
		}
	}
	for _, n := range started {
		n.awaitReady()
	}
}

// Kill9All SIGKILLs every running node.
func (c *Cluster) Kill9All() {
	c.t.Helper()
	for _, n := range c.Nodes {
		if n.Running() {
			n.current().signal(syscall.SIGKILL)
		}
	}
	for _, n := range c.Nodes {
		if p := n.current(); p != nil && !p.wait(exitTimeout) {
			c.t.Fatalf("%s: still running %v after SIGKILL", n.ID, exitTimeout)
		}
	}
}

// Client returns a client of the cluster, closed when the test ends.
func (c *Cluster) Client() *client.Client {
	c.t.Helper()
	return c.ClientOf(c.Endpoints()...)
}

// ClientOf returns a client that knows only the given endpoints.
func (c *Cluster) ClientOf(endpoints ...string) *client.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.NewWithConfig(ctx, client.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		c.t.Fatalf("client of %v: %v", endpoints, err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

func (n *Node) current() *proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Running reports whether the node's process runs.
func (n *Node) Running() bool {
	p := n.current()
	return p != nil && p.running()
}

func (n *Node) args() []string {
	args := append([]string(nil), n.Flags...)
	if n.Bootstrap {
		args = append(args, n.Boot...)
	}
	return args
}

// launch starts a run of the node without waiting for it.
func (n *Node) launch() {
	n.t.Helper()
	if n.Running() {
		n.t.Fatalf("%s: start while running", n.ID)
	}
	p := startProc(n.t, n.Bin, n.args(), ChildEnv(n.Env...), n.logPath)
	n.mu.Lock()
	n.proc = p
	n.runs++
	n.mu.Unlock()
}

// awaitReady waits for the current run's ready line. A port taken in the
// meantime by some other socket (the node's ports are fixed: the cluster's
// layout names them) is retried for a while.
func (n *Node) awaitReady() {
	n.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for retry := 0; ; retry++ {
		p := n.current()
		ok, why := p.waitReady(time.Until(deadline))
		if ok {
			return
		}
		if strings.Contains(p.stderr(), "already in use") && time.Now().Before(deadline) {
			if retry == 0 {
				n.t.Logf("%s: a port is busy; starting again until %v: %s", n.ID, readyTimeout, Tail(p.stderr(), 1))
			}
			time.Sleep(250 * time.Millisecond)
			n.launch()
			continue
		}
		n.t.Fatalf("%s: %s; stderr:\n%s", n.ID, why, Tail(p.stderr(), 30))
	}
}

// Start starts the node and waits until it is ready.
func (n *Node) Start() {
	n.t.Helper()
	n.launch()
	n.awaitReady()
}

// Restart starts the node again with the same flags and data dir.
func (n *Node) Restart() { n.t.Helper(); n.Start() }

// Launch starts the node again without waiting until it is ready, for a
// test that restarts nodes as they die while the others may die too: a
// node is ready only once a quorum answers. AwaitReady waits.
func (n *Node) Launch() { n.t.Helper(); n.launch() }

// AwaitReady waits until the node's current run is ready (Start's wait).
func (n *Node) AwaitReady() { n.t.Helper(); n.awaitReady() }

// Kill9 SIGKILLs the node and waits until it is gone.
func (n *Node) Kill9() {
	n.t.Helper()
	p := n.current()
	if p == nil || !p.running() {
		n.t.Fatalf("%s: SIGKILL, but it does not run", n.ID)
	}
	p.signal(syscall.SIGKILL)
	if !p.wait(exitTimeout) {
		n.t.Fatalf("%s: still running %v after SIGKILL", n.ID, exitTimeout)
	}
}

// Signal sends sig to the running node.
func (n *Node) Signal(sig os.Signal) {
	n.t.Helper()
	p := n.current()
	if p == nil || !p.running() {
		n.t.Fatalf("%s: signal %v, but it does not run", n.ID, sig)
	}
	p.signal(sig)
}

// Term sends SIGTERM and waits up to d for the exit. It returns the exit
// code (-1 if killed by a signal) and how long the exit took.
func (n *Node) Term(d time.Duration) (code int, took time.Duration) {
	n.t.Helper()
	p := n.current()
	n.Signal(syscall.SIGTERM)
	sent := time.Now()
	if !p.wait(d) {
		n.t.Fatalf("%s: still running %v after SIGTERM; stderr:\n%s", n.ID, d, Tail(p.stderr(), 30))
	}
	code, _ = p.exit()
	return code, p.exitedAt.Sub(sent)
}

// WaitExit waits up to d for the node's process to exit on its own.
func (n *Node) WaitExit(d time.Duration) (code int, desc string) {
	n.t.Helper()
	p := n.current()
	if !p.wait(d) {
		n.t.Fatalf("%s: still running after %v; stderr:\n%s", n.ID, d, Tail(p.stderr(), 30))
	}
	return p.exit()
}

// Stderr returns what the current (or last) run wrote on stderr.
func (n *Node) Stderr() string { return n.current().stderr() }

// WaitFor polls cond every 50ms until it returns true or d passes, and
// reports whether it did; last is cond's last explanation.
func WaitFor(d time.Duration, cond func() (bool, string)) (ok bool, last string) {
	deadline := time.Now().Add(d)
	for {
		ok, last = cond()
		if ok || time.Now().After(deadline) {
			return ok, last
		}
		time.Sleep(50 * time.Millisecond)
	}
}
