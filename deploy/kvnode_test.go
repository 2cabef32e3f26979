package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain removes the kvnode these tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// kvnodeFlags builds kvnode from the main module (one directory up) and
// returns the flags its --help lists: the real flag set, whatever this
// directory's files say. Built once per test binary.
func kvnodeFlags(t *testing.T) map[string]bool {
	t.Helper()
	kvnode(t)
	return flagSet
}

// kvnode returns the path of the kvnode built from the main module.
func kvnode(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "cutkv-deploy-test-"); buildErr == nil {
			flagSet, buildErr = loadKvnodeFlags(binDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "kvnode")
}

var (
	buildOnce sync.Once
	binDir    string
	flagSet   map[string]bool
	buildErr  error
)

// helpFlag matches a flag line of Go's flag.PrintDefaults: "  -name" and,
// unless it is a boolean, its type.
var helpFlag = regexp.MustCompile(`^  -([a-z0-9][a-z0-9-]*)(\s|$)`)

func loadKvnodeFlags(dir string) (map[string]bool, error) {
	bin := filepath.Join(dir, "kvnode")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kvnode")
	build.Dir = ".." // the main module
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build kvnode from the main module: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	help := exec.Command(bin, "--help")
	help.Stdout, help.Stderr = &stdout, &stderr
	if err := help.Run(); err != nil {
		return nil, fmt.Errorf("kvnode --help: %v\n%s", err, stderr.String())
	}
	flags := map[string]bool{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if m := helpFlag.FindStringSubmatch(sc.Text()); m != nil {
			flags[m[1]] = true
		}
	}
	// A sanity check of the parsing itself: flags every kvnode has.
	for _, f := range []string{"id", "data-dir", "grpc-addr", "peer-addr", "gossip-addr", "http-addr", "config", "snapshot-interval"} {
		if !flags[f] {
			return nil, fmt.Errorf("kvnode --help lists no --%s: the help format changed and this parser (%s) needs to follow (found %d flags)", f, helpFlag, len(flags))
		}
	}
	return flags, nil
}

// parseFlags reads kvnode arguments, "--name=value" or "--name value" (a
// boolean flag may stand alone), into a map; it fails on anything that is
// not a flag, and on a flag given twice.
func parseFlags(t *testing.T, where string, args []string, real map[string]bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: argument %q is not a flag (kvnode takes no positional arguments)", where, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !real[name] {
			t.Errorf("%s: --%s is not a kvnode flag (kvnode --help lists it nowhere)", where, name)
		}
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value = args[i+1]
			i++
		}
		if _, dup := out[name]; dup {
			t.Errorf("%s: --%s given twice", where, name)
		}
		out[name] = value
	}
	return out
}

// portOf returns the port of a host:port flag value.
func portOf(t *testing.T, where, flag, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: --%s %q: %v", where, flag, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		t.Fatalf("%s: --%s %q: port %q", where, flag, addr, p)
	}
	return int32(n)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kvnodeRefusesOnlyTLS runs kvnode with args, which must pass every
// check of flags and bootstrap settings (exit 2 is a refused flag or
// setting) and get as far as loading the certificates, which do not
// exist on this machine: exit 1 naming the peer certificate. The data
// dir is replaced by a scratch one. It proves that kvnode itself accepts
// the addresses, advertised names, --initial-cluster and limits given.
func kvnodeRefusesOnlyTLS(t *testing.T, where string, args []string, certFile string) {
	t.Helper()
	if _, err := os.Stat(certFile); err == nil {
		t.Skipf("%s exists on this machine: kvnode would start for real", certFile)
	}
	run := setFlag(args, "data-dir", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kvnode(t), run...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "peer TLS") || !strings.Contains(string(out), certFile) {
		t.Fatalf("%s: kvnode %s\n%v; want exit 1 at the missing certificate %s, after every flag was accepted; output:\n%s",
			where, strings.Join(run, " "), err, certFile, out)
	}
}

// setFlag returns args with flag name's value replaced ("--name=value" or
// "--name value").
func setFlag(args []string, name, value string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		switch {
		case a == "--"+name && i+1 < len(out):
			out[i+1] = value
		case strings.HasPrefix(a, "--"+name+"="):
			out[i] = "--" + name + "=" + value
		}
	}
	return out
}
