package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cutkv/cutkv/bench/internal/benchconn"
)

// node is one kvnode process of the local cluster, with the moments of
// its start seen from here.
type node struct {
	id      string
	grpc    string
	cmd     *exec.Cmd
	logPath string
	start   time.Time
	exited  chan struct{} // closed when the process is reaped
	err     error         // Wait's result, valid after exited
}

// clusterOut serializes the event lines the bench script parses:
//
//	started ID pid=PID
//	open ID SECONDS      the "node started" log line: WAL read, state restored
//	ready ID SECONDS     the node's "ready" line: every group knows a leader
//	applied ID SECONDS   every group applied what it had applied before the stop (-targets)
//	all-ready
//	stopped ID status=N took=SECONDS
//	exited ID status=N   (on its own: an error)
type clusterOut struct{ mu sync.Mutex }

func (o *clusterOut) printf(format string, a ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Printf(format+"\n", a...)
}

// runCluster starts n1..n3 as scripts/run-local.sh does (same addresses
// and data layout, stderr appended to DATA/nN/kvnode.log), reports when
// each becomes ready, and stops them all gracefully (SIGTERM) on SIGTERM
// or SIGINT. Flags after "--" go to every kvnode.
func runCluster(args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	data := fs.String("data", "", "data dir; node i uses DATA/ni (required)")
	bin := fs.String("bin", "bin", "directory holding kvnode")
	nodeBin := fs.String("node", "", "the kvnode binary to run (default: BIN/kvnode); a copy under another name keeps the nodes out of a `pkill kvnode` meant for other clusters on the machine")
	targets := fs.String("targets", "", "JSON from `benchckpt applied` taken before the stop: also report when each node applied as much again")
	readyTimeout := fs.Duration("ready-timeout", 15*time.Minute, "give up when a node is not ready (and applied) within this time")
	stopTimeout := fs.Duration("stop-timeout", 60*time.Second, "SIGKILL a node still running this long after SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" {
		return errors.New("-data is required")
	}
	var want map[string]map[uint64]uint64
	if *targets != "" {
		b, err := os.ReadFile(*targets)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &want); err != nil {
			return fmt.Errorf("%s: %w", *targets, err)
		}
	}
	out := &clusterOut{}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	// --initial-cluster names the members' peer addresses (the peer
	// listener, ports 7301-7303 as scripts/run-local.sh has them).
	initial := "n1=127.0.0.1:7301,n2=127.0.0.1:7302,n3=127.0.0.1:7303"
	var nodes []*node
	ready := make(chan string, 3)
	applied := make(chan string, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 1; i <= 3; i++ {
		var join []string
		for j := 1; j <= 3; j++ {
			if j != i {
				join = append(join, fmt.Sprintf("127.0.0.1:710%d", j))
			}
		}
		n := &node{id: fmt.Sprintf("n%d", i), grpc: fmt.Sprintf("127.0.0.1:700%d", i), exited: make(chan struct{})}
		dir := filepath.Join(*data, n.id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		n.logPath = filepath.Join(dir, "kvnode.log")
		argv := append([]string{"--id", n.id, "--data-dir", dir,
			"--grpc-addr", n.grpc, "--peer-addr", fmt.Sprintf("127.0.0.1:730%d", i), "--gossip-addr", fmt.Sprintf("127.0.0.1:710%d", i),
			"--http-addr", fmt.Sprintf("127.0.0.1:720%d", i),
			"--join", strings.Join(join, ","), "--initial-cluster", initial}, fs.Args()...)
		exe := *nodeBin
		if exe == "" {
			exe = filepath.Join(*bin, "kvnode")
		}
		if err := n.startProcess(exe, argv, out, ready); err != nil {
			stopAll(nodes, out, *stopTimeout)
			return err
		}
		nodes = append(nodes, n)
		if want != nil {
			go n.waitApplied(ctx, want[n.id], out, applied)
		}
	}

	need := 3
	if want != nil {
		need = 6
	}
	deadline := time.NewTimer(*readyTimeout)
	defer deadline.Stop()
	exited := make(chan *node, 3)
	for _, n := range nodes {
		go func() { <-n.exited; exited <- n }()
	}
	for {
		select {
		case <-ready:
			need--
		case <-applied:
			need--
		case n := <-exited:
			out.printf("exited %s status=%s", n.id, exitStatus(n.err))
			fmt.Fprintf(os.Stderr, "node %s exited on its own; last lines of %s:\n%s", n.id, n.logPath, tail(n.logPath, 20))
			stopAll(nodes, out, *stopTimeout)
			return fmt.Errorf("node %s exited on its own", n.id)
		case <-deadline.C:
			deadline.Stop()
			for _, n := range nodes {
				fmt.Fprintf(os.Stderr, "not ready after %s; last lines of %s:\n%s", *readyTimeout, n.logPath, tail(n.logPath, 10))
			}
			stopAll(nodes, out, *stopTimeout)
			return fmt.Errorf("cluster not ready within %s", *readyTimeout)
		case <-sigs:
			cancel()
			if !stopAll(nodes, out, *stopTimeout) {
				return errors.New("a node did not stop cleanly")
			}
			return nil
		}
		if need == 0 {
			out.printf("all-ready")
			need = -1
			deadline.Stop() // the timeout is for getting ready, not for the run
		}
	}
}

// startProcess starts the kvnode and the goroutines that copy its output
// to the log and watch for the lines timed.
func (n *node) startProcess(path string, argv []string, out *clusterOut, ready chan<- string) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.cmd = exec.Command(path, argv...)
	// A group of its own: a terminal's Ctrl-C reaches this supervisor
	// only, which stops the nodes in order.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return err
	}
	n.start = time.Now()
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.id, err)
	}
	out.printf("started %s pid=%d", n.id, n.cmd.Process.Pid)
	var logMu sync.Mutex
	var copiers sync.WaitGroup
	copyLines := func(r io.Reader, onLine func(string)) {
		defer copiers.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			onLine(line)
			logMu.Lock()
			fmt.Fprintln(logf, line)
			logMu.Unlock()
		}
	}
	copiers.Add(2)
	seenReady, seenOpen := false, false
	go copyLines(stdout, func(line string) {
		if !seenReady && strings.HasPrefix(line, "ready ") {
			seenReady = true
			out.printf("ready %s %.3f", n.id, time.Since(n.start).Seconds())
			ready <- n.id
		}
	})
	go copyLines(stderr, func(line string) {
		if !seenOpen && strings.Contains(line, `msg="node started"`) {
			seenOpen = true
			out.printf("open %s %.3f", n.id, time.Since(n.start).Seconds())
		}
	})
	go func() {
		copiers.Wait() // Wait must not run before the pipes are drained
		n.err = n.cmd.Wait()
		logf.Close()
		close(n.exited)
	}()
	return nil
}

// waitApplied polls the node's own status until every group in want has
// applied at least as far as want says.
func (n *node) waitApplied(ctx context.Context, want map[uint64]uint64, out *clusterOut, applied chan<- string) {
	cc, err := benchconn.Dial(n.grpc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", n.id, err)
		return
	}
	defer cc.Close()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		got, err := localApplied(ctx, cc)
		if err != nil {
			continue // not serving yet
		}
		done := true
		for g, idx := range want {
			if got[g] < idx {
				done = false
				break
			}
		}
		if done {
			out.printf("applied %s %.3f", n.id, time.Since(n.start).Seconds())
			applied <- n.id
			return
		}
	}
}

// stopAll sends SIGTERM to every running node and waits; a node still
// running after timeout gets SIGKILL. It reports whether all exited 0.
func stopAll(nodes []*node, out *clusterOut, timeout time.Duration) bool {
	t0 := time.Now()
	for _, n := range nodes {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	ok := true
	for _, n := range nodes {
		select {
		case <-n.exited:
		case <-time.After(timeout - time.Since(t0)):
			fmt.Fprintf(os.Stderr, "node %s still running %s after SIGTERM: SIGKILL\n", n.id, timeout)
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		out.printf("stopped %s status=%s took=%.3f", n.id, exitStatus(n.err), time.Since(t0).Seconds())
		if n.err != nil {
			ok = false
			fmt.Fprintf(os.Stderr, "node %s: %v; last lines of %s:\n%s", n.id, n.err, n.logPath, tail(n.logPath, 10))
		}
	}
	return ok
}

func exitStatus(err error) string {
	if err == nil {
		return "0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal().String()
		}
		return fmt.Sprint(ee.ExitCode())
	}
	return err.Error()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
