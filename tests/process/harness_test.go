package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// kvctlTimeout bounds one kvctl run, whatever its --timeout.
const kvctlTimeout = 30 * time.Second

// Kvctl runs kvctl with --endpoints naming every node.
func (c *Cluster) Kvctl(t testing.TB, args ...string) kvctlResult {
	t.Helper()
	return runKvctl(t, nil, nil, append([]string{"--endpoints", strings.Join(c.Endpoints(), ",")}, args...)...)
}

// kvctlResult is what one kvctl run printed and its exit code.
type kvctlResult struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r kvctlResult) String() string {
	return fmt.Sprintf("kvctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// runKvctl runs the kvctl binary with env added to a clean environment
// and stdin (nil: empty) as its input.
func runKvctl(t testing.TB, env []string, stdin []byte, args ...string) kvctlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kvctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.Kvctl, args...)
	cmd.Env = ChildEnv(env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := kvctlResult{args: args, stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("kvctl %v: %v (stderr: %s)", args, err, errb.String())
	}
	return r
}
