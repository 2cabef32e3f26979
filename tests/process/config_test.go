package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kvnodeFlags is every flag kvnode documents (README.md, cmd/kvnode).
var kvnodeFlags = []string{
	"config", "id", "data-dir", "grpc-addr", "gossip-addr", "http-addr", "join",
	"initial-cluster", "initial-cluster-token", "partitions", "max-key-size", "max-value-size",
	"shutdown-timeout", "raft-tick", "election-ticks", "wal-segment-size", "log-level", "log-format",
	"peer-addr", "peer-cert-file", "peer-key-file", "peer-trusted-ca-file", "insecure-peer",
	"cert-file", "key-file", "trusted-ca-file", "gossip-key-file", "max-connections", "idle-timeout", "pprof",
	"snapshot-store", "snapshot-store-allow",
	"advertise-grpc", "advertise-peer", "advertise-gossip", "advertise-http",
}

// runKvnodeToExit runs kvnode with args and waits, up to 20 s, for it to
// exit on its own. It returns the exit status and stdout+stderr.
func runKvnodeToExit(t testing.TB, args ...string) (code int, output string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.Kvnode, args...)
	cmd.Env = ChildEnv()
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("kvnode %v still running after 20s; output:\n%s", args, Tail(string(out), 20))
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		code = ee.ExitCode()
	default:
		t.Fatalf("kvnode %v: %v", args, err)
	}
	return code, string(out)
}

// single is one single-node cluster's worth of flags.
type single struct {
	dir                      string
	grpc, peer, gossip, http string
}

func newSingle(t testing.TB) single {
	t.Helper()
	return single{
		dir:  filepath.Join(t.TempDir(), "n1"),
		grpc: FreeAddr(t), peer: FreeAddr(t), gossip: FreeAddr(t), http: FreeAddr(t),
	}
}

func (s single) flags(extra ...string) []string {
	return append([]string{
		"--id", "n1", "--data-dir", s.dir, "--grpc-addr", s.grpc, "--peer-addr", s.peer, "--gossip-addr", s.gossip, "--http-addr", s.http,
		"--partitions", "2", "--raft-tick", "50ms",
	}, extra...)
}

func (s single) boot(extra ...string) []string {
	return s.flags(append([]string{"--initial-cluster", "n1=" + s.peer}, extra...)...)
}

// startReady starts kvnode with args and waits for its ready line.
func startReady(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".stderr")
	logTailOnFailure(t, name, log)
	p := startProc(t, bin.Kvnode, args, ChildEnv(), log)
	if ok, why := p.waitReady(readyTimeout); !ok {
		t.Fatalf("%s: %s; stderr:\n%s", name, why, Tail(p.stderr(), 20))
	}
	return p
}

func TestKvnodeHelp(t *testing.T) {
	code, out := runKvnodeToExit(t, "--help")
	if code != 0 {
		t.Fatalf("kvnode --help: exit %d, want 0; output:\n%s", code, out)
	}
	for _, f := range kvnodeFlags {
		if !strings.Contains(out, "-"+f+" ") && !strings.Contains(out, "-"+f+"\n") {
			t.Errorf("kvnode --help does not mention --%s", f)
		}
	}

	// Bad flags: exit 2, with a message.
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"--id", "n1", "--partitions", "many"},
		{"--id", "n1", "--log-level", "loud"},
		{"--id", "n1", "surplus-argument"},
		{"--id", "n1", "--grpc-addr", "no-port"},
		{"--id", "n1", "--advertise-gossip", "0.0.0.0:7101"},
		{"--id", "n1", "--advertise-grpc", "kvnode-0:99999"},
	} {
		code, out := runKvnodeToExit(t, args...)
		if code != 2 || out == "" {
			t.Errorf("kvnode %v: exit %d, want 2 and a message; output:\n%s", args, code, out)
		}
	}
}

func TestKvnodeConfigFile(t *testing.T) {
	s := newSingle(t)
	flagGRPC := s.grpc      // given on the command line: it must win
	fileGRPC := FreeAddr(t) // given in the file only
	cfg := filepath.Join(t.TempDir(), "node.yaml")
	yaml := fmt.Sprintf(`# every key is a kvnode flag name
id: n1
data-dir: %s
grpc-addr: %s
peer-addr: %s
gossip-addr: %s
http-addr: %s
initial-cluster: n1=%s
initial-cluster-token: from-file
partitions: 3
raft-tick: 50ms
shutdown-timeout: 7s
join: []
`, s.dir, fileGRPC, s.peer, s.gossip, s.http, s.peer)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startReady(t, "n1", "--config", cfg, "--grpc-addr", flagGRPC)
	want := fmt.Sprintf("ready id=n1 grpc=%s gossip=%s http=%s peer=%s", flagGRPC, s.gossip, s.http, s.peer)
	if p.readyLine != want {
		t.Errorf("ready line %q, want %q (addresses from the file, gRPC from the flag)", p.readyLine, want)
	}
	// The file's partitions were used, and the node serves.
	r := runKvctl(t, nil, nil, "--endpoints", flagGRPC, "put", "k", "v")
	wantCode(t, r, 0)
	var st jStatus
	decodeJSON(t, runKvctl(t, nil, nil, "--endpoints", flagGRPC, "-o", "json", "status"), &st)
	if st.Partitions != 3 {
		t.Errorf("status: %d partitions, want 3 from the config file", st.Partitions)
	}
	// HTTP from the file.
	resp, err := http.Get("http://" + s.http + "/healthz")
	if err != nil {
		t.Fatalf("healthz at the file's http-addr: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "SERVING" {
		t.Errorf("healthz: %d %q, want 200 SERVING", resp.StatusCode, body)
	}
	p.kill()

	// An unknown key, a bad value, a missing file: exit 2 naming the problem.
	for _, c := range []struct{ yaml, mention string }{
		{"id: n1\ngrpc-adress: 127.0.0.1:1\n", "grpc-adress"},
		{"id: n1\npartitions: many\n", "partitions"},
		{"id: n1\nconfig: other.yaml\n", "config"},
		{"id: [n1\n", cfg + ".bad"},
	} {
		bad := cfg + ".bad"
		if err := os.WriteFile(bad, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := runKvnodeToExit(t, "--config", bad)
		if code != 2 || !strings.Contains(out, c.mention) {
			t.Errorf("config %q: exit %d, want 2 and a message naming %q; output:\n%s", c.yaml, code, c.mention, out)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if code, out := runKvnodeToExit(t, "--config", missing); code != 2 || !strings.Contains(out, missing) {
		t.Errorf("missing config file: exit %d, want 2 naming it; output:\n%s", code, out)
	}
}

func wantCode(t testing.TB, r kvctlResult, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d; %v", code, r)
	}
}

func TestKvnodeRefusals(t *testing.T) {
	t.Run("busy port", func(t *testing.T) {
		for _, which := range []string{"grpc", "http", "gossip"} {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			busy := l.Addr().String()
			s := newSingle(t)
			switch which {
			case "grpc":
				s.grpc = busy
			case "http":
				s.http = busy
			case "gossip":
				s.gossip = busy
			}
			code, out := runKvnodeToExit(t, s.boot()...)
			l.Close()
			if code != 1 || !strings.Contains(out, busy) || !strings.Contains(out, "kvnode: ") {
				t.Errorf("busy %s address %s: exit %d, want 1 and a message naming it; output:\n%s", which, busy, code, out)
			}
		}
	})

	t.Run("data dir", func(t *testing.T) {
		s := newSingle(t)
		first := startReady(t, "first", s.boot()...)
		wantCode(t, runKvctl(t, nil, nil, "--endpoints", s.grpc, "put", "kept", "yes"), 0)

		// A second kvnode on the same data dir, other ports.
		other := newSingle(t)
		other.dir = s.dir
		code, out := runKvnodeToExit(t, other.boot()...)
		if code != 1 || !strings.Contains(out, "in use") || !strings.Contains(out, s.dir) {
			t.Errorf("second kvnode on %s: exit %d, want 1 and \"in use\" naming the dir; output:\n%s", s.dir, code, out)
		}
		if !first.running() {
			t.Fatalf("the first kvnode died when a second one tried its data dir")
		}
		first.signal(os.Interrupt)
		if !first.wait(15 * time.Second) {
			t.Fatalf("first kvnode still running 15s after SIGINT")
		}
		if code, desc := first.exit(); code != 0 {
			t.Fatalf("first kvnode: %s after SIGINT, want exit status 0", desc)
		}

		// The data dir belongs to its cluster: another token, another
		// node id, or no cluster at all are refused.
		code, out = runKvnodeToExit(t, s.boot("--initial-cluster-token", "another")...)
		if code != 1 || !strings.Contains(out, "another cluster") {
			t.Errorf("restart with another --initial-cluster-token: exit %d, want 1 and \"another cluster\"; output:\n%s", code, out)
		}
		code, out = runKvnodeToExit(t, append(s.flags(), "--id", "n2")...)
		if code != 1 || !strings.Contains(out, "n2") {
			t.Errorf("restart as another node: exit %d, want 1 naming it; output:\n%s", code, out)
		}
		empty := newSingle(t)
		code, out = runKvnodeToExit(t, empty.flags()...)
		if code != 1 || !strings.Contains(out, "--initial-cluster") {
			t.Errorf("empty data dir without --initial-cluster: exit %d, want 1 mentioning the flag; output:\n%s", code, out)
		}

		// None of that harmed the data.
		startReady(t, "again", s.flags()...)
		r := runKvctl(t, nil, nil, "--endpoints", s.grpc, "get", "kept")
		if r.code != 0 || r.stdout != "yes\n" {
			t.Errorf("after the refused starts: %v", r)
		}
	})
}
