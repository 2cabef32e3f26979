// Package s3test runs a real S3-compatible server for tests: Versity's S3
// gateway (versitygw) over a POSIX directory on the loopback.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The S3 test runs the store against a real S3-compatible server on the
// loopback: Versity's S3 gateway (versitygw) over a POSIX directory. The
// gateway is built from its module with `go install` the first time and
// kept under os.UserCacheDir()/cutkv-test/versitygw/<version>/, so later
// runs start at once. If it cannot be had the test is skipped, unless the
// CI environment variable is set: then it fails.

const (
	versitygwModule  = "github.com/versity/versitygw"
	versitygwVersion = "v1.8.0"
	// Bucket exists in every gateway Start starts.
	Bucket = "cutkv-snapshots"
	// AccessKey and SecretKey are the gateway's root credentials.
	AccessKey = "cutkvtestaccess"
	SecretKey = "cutkvtestsecret0123456789"
)

// Start starts a gateway over a fresh directory holding Bucket (building
// the gateway first if no earlier run did), points the AWS SDK at its
// credentials (Env) and returns its endpoint, "http://127.0.0.1:PORT". It
// skips the test when the gateway cannot be had, except with CI set: then
// it fails. The gateway stops with the test.
func Start(t testing.TB) string {
	t.Helper()
	endpoint := startVersitygw(t, versitygw(t))
	Env(t, AccessKey, SecretKey)
	return endpoint
}

// URL is the s3:// store URL of bucket at endpoint (path style, as local
// servers need).
func URL(endpoint, bucket string) string {
	return "s3://" + bucket + "?endpoint=" + endpoint + "&region=us-east-1&use_path_style=true"
}

// versitygw returns the gateway's binary, building it if no run before
// did; it skips (or, under CI, fails) the test when that is impossible.
func versitygw(t testing.TB) string {
	t.Helper()
	bin, err := installVersitygw(t)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot install Versity's S3 gateway for the S3 test: %v", err)
		}
		t.Skipf("S3 test skipped: cannot install Versity's S3 gateway (%v); with CI set this fails", err)
	}
	return bin
}

func installVersitygw(t testing.TB) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "cutkv-test", "versitygw")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Test binaries of several packages run at once: one builds, the
	// others wait for it and find the binary.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	var errs []error
	for _, version := range []string{versitygwVersion, "latest"} {
		if version == "latest" {
			v, err := goCommand(t, 30*time.Second, nil, "list", "-m", "-f", "{{.Version}}", versitygwModule+"@latest")
			if err != nil {
				errs = append(errs, fmt.Errorf("finding the newest version: %w\n%s", err, lastLines(v, 5)))
				break
			}
			if version = strings.TrimSpace(v); version == versitygwVersion {
				break
			}
		}
		bin := filepath.Join(dir, version, "versitygw")
		if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
			return bin, nil
		}
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return "", err
		}
		// Build into a private directory beside the cache entry, then
		// rename: a concurrent run never sees half a binary.
		gobin, err := os.MkdirTemp(filepath.Dir(bin), "build-")
		if err != nil {
			return "", err
		}
		start := time.Now()
		out, err := goCommand(t, 9*time.Minute, []string{"GOBIN=" + gobin}, "install", versitygwModule+"/cmd/versitygw@"+version)
		if err == nil {
			err = os.Rename(filepath.Join(gobin, "versitygw"), bin)
		}
		os.RemoveAll(gobin)
		if err != nil {
			errs = append(errs, fmt.Errorf("go install %s@%s: %w\n%s", versitygwModule, version, err, lastLines(out, 20)))
			continue
		}
		t.Logf("built versitygw %s in %v into %s", version, time.Since(start).Round(time.Second), bin)
		return bin, nil
	}
	return "", errors.Join(errs...)
}

// goCommand runs the go command outside this module (a temporary working
// directory, no workspace) and returns its combined output.
func goCommand(t testing.TB, timeout time.Duration, env []string, args ...string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false", "GO111MODULE=on")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// startVersitygw starts the gateway over a new directory holding the
// bucket Bucket and returns its endpoint. The process ends with the test.
func startVersitygw(t testing.TB, bin string) string {
	t.Helper()
	root := t.TempDir()
	// The posix backend serves each directory under root as a bucket.
	if err := os.Mkdir(filepath.Join(root, Bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "versitygw.log")
	for attempt := 1; ; attempt++ {
		addr := freeLoopbackAddr(t)
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", root)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+AccessKey, "ROOT_SECRET_KEY="+SecretKey)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			t.Fatalf("starting versitygw: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait(); logf.Close() }()
		if waitListening(addr, exited, 20*time.Second) {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			return "http://" + addr
		}
		cmd.Process.Kill()
		<-exited
		out, _ := os.ReadFile(logPath)
		if attempt == 3 {
			t.Fatalf("versitygw did not start listening on %s:\n%s", addr, lastLines(string(out), 30))
		}
		t.Logf("versitygw did not start on %s (attempt %d), trying another port:\n%s", addr, attempt, lastLines(string(out), 10))
	}
}

// freeLoopbackAddr returns a loopback address with a port free just now.
func freeLoopbackAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitListening polls until addr accepts connections, the process exits
// or the deadline passes.
func waitListening(addr string, exited <-chan error, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Env points the AWS SDK at the test's credentials and nothing else:
// no shared config or credentials files, no instance metadata service.
func Env(t testing.TB, access, secret string) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":           access,
		"AWS_SECRET_ACCESS_KEY":       secret,
		"AWS_SESSION_TOKEN":           "",
		"AWS_PROFILE":                 "",
		"AWS_ENDPOINT_URL":            "",
		"AWS_ENDPOINT_URL_S3":         "",
		"AWS_CONFIG_FILE":             none,
		"AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
}
