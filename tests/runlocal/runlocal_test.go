// Package runlocal tests scripts/run-local.sh, the cluster of `make run`,
// as a user drives it: the foreground run, then stop and start of one node
// from another shell.
package runlocal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is the foreground run's output, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// repoRoot is the repository, two directories up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// freeOffset picks a port offset at which the script's 12 ports are free.
func freeOffset(t *testing.T) int {
	t.Helper()
	for range 20 {
		off := 10000 + 100*rand.IntN(400) // ports 17001..57303
		free := true
		for _, base := range []int{7000, 7100, 7200, 7300} {
			for i := 1; i <= 3 && free; i++ {
				l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off+i))
				if err != nil {
					free = false
					break
				}
				l.Close()
			}
		}
		if free {
			return off
		}
	}
	t.Skip("no free port range for the local cluster")
	return 0
}

// TestRunLocalStopStartOneNode: make run's cluster keeps serving when one
// node stops (before, the script stopped every node as soon as one
// exited), reports the exit and its status, and takes the node back with
// `run-local.sh start n2`.
func TestRunLocalStopStartOneNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three kvnode processes")
	}
	for _, tool := range []string{"bash", "setsid", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: %v", tool, err)
		}
	}
	root := repoRoot(t)
	script := filepath.Join(root, "scripts", "run-local.sh")
	bin := t.TempDir()
	for _, cmd := range []string{"kvnode", "kvctl"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), "github.com/cutkv/cutkv/cmd/"+cmd).CombinedOutput()
		if err != nil {
			t.Skipf("cannot build %s: %v\n%s", cmd, err, out)
		}
	}
	data := t.TempDir()
	off := freeOffset(t)
	env := append(os.Environ(), "BIN="+bin, "CUTKV_DATA="+data, fmt.Sprintf("CUTKV_PORT_OFFSET=%d", off),
		"CUTKV_RUN_FLAGS=--cut-interval 0 --raft-tick 50ms", "CUTKV_TLS=")
	endpoint := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", 7000+off+i) }
	script1 := func(args ...string) (string, error) {
		cmd := exec.Command(script, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	kvctl := func(eps string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "kvctl"), append([]string{"--endpoints", eps, "--timeout", "15s"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Whatever happens, no node outlives the test.
	t.Cleanup(func() {
		for i := 1; i <= 3; i++ {
			b, err := os.ReadFile(filepath.Join(data, fmt.Sprintf("n%d", i), "kvnode.pid"))
			if err != nil {
				continue
			}
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	out := &syncBuffer{}
	fg := exec.Command(script)
	fg.Env, fg.Stdout, fg.Stderr = env, out, out
	if err := fg.Start(); err != nil {
		t.Fatal(err)
	}
	var fgErr error
	fgDone := make(chan struct{}) // closed when the run ended, with fgErr
	go func() { fgErr = fg.Wait(); close(fgDone) }()
	t.Cleanup(func() {
		select {
		case <-fgDone:
		default:
			_ = fg.Process.Kill()
			<-fgDone
		}
	})
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !cond() {
			select {
			case <-fgDone:
				t.Fatalf("the foreground run ended (%v) while waiting for %s; its output:\n%s", fgErr, what, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within %v; the foreground run's output:\n%s", what, within, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("three ready lines", 30*time.Second, func() bool { return strings.Count(out.String(), "ready id=n") == 3 })

	all := endpoint(1) + "," + endpoint(2) + "," + endpoint(3)
	if o, err := kvctl(all, "put", "before", "1"); err != nil {
		t.Fatalf("put on the whole cluster: %v\n%s", err, o)
	}

	if o, err := script1("stop", "n2"); err != nil || !strings.Contains(o, "n2 stopped with status 0") {
		t.Fatalf("run-local.sh stop n2: %v\n%s", err, o)
	}
	waitFor("the exit of n2 reported", 10*time.Second, func() bool { return strings.Contains(out.String(), "node n2 exited with status 0") })
	if o, _ := script1("status"); !strings.Contains(o, "n1 running") || !strings.Contains(o, "n2 stopped") || !strings.Contains(o, "n3 running") {
		t.Fatalf("run-local.sh status with n2 stopped:\n%s", o)
	}
	if o, err := kvctl(endpoint(1)+","+endpoint(3), "put", "while-n2-down", "2"); err != nil {
		t.Fatalf("put on n1 and n3 with n2 stopped: %v\n%s\nforeground run:\n%s", err, o, out.String())
	}
	if o, err := kvctl(endpoint(3), "get", "before"); err != nil || o != "1\n" {
		t.Fatalf("get on n3 with n2 stopped: %v %q", err, o)
	}

	if o, err := script1("start", "n2"); err != nil || !strings.Contains(o, "ready id=n2") {
		t.Fatalf("run-local.sh start n2: %v\n%s", err, o)
	}
	waitFor("n2 reported running again", 10*time.Second, func() bool { return strings.Contains(out.String(), "node n2 runs again") })
	// n2 catches up and serves: its read is routed to the leaders, and its
	// own answer goes through its client listener.
	deadline := time.Now().Add(20 * time.Second)
	for {
		o, err := kvctl(endpoint(2), "get", "while-n2-down")
		if err == nil && o == "2\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get on n2 after its restart: %v %q", err, o)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if o, err := kvctl(endpoint(2), "put", "after", "3"); err != nil {
		t.Fatalf("put on n2 after its restart: %v\n%s", err, o)
	}

	// SIGTERM (as Ctrl-C) stops the whole cluster, n2 too although the
	// foreground run did not start it this time.
	if err := fg.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fgDone:
		if fgErr != nil {
			t.Fatalf("the foreground run exited with %v:\n%s", fgErr, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the foreground run did not stop within 30s:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "cluster stopped") {
		t.Errorf("no 'cluster stopped':\n%s", out.String())
	}
	if o, _ := script1("status"); strings.Contains(o, "running") {
		t.Errorf("nodes still running after the foreground run stopped:\n%s", o)
	}
	t.Logf("foreground run:\n%s", out.String())
}
