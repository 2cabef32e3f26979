package hosts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// toolPath finds ip or nft: on PATH, else in /usr/sbin or /sbin (root's
// PATH under sudo or CI does not always include them).
func toolPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return filepath.Abs(p)
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s not found on PATH, in /usr/sbin or /sbin", ErrCommand, name)
}

var (
	ipPath  = sync.OnceValues(func() (string, error) { return toolPath("ip") })
	nftPath = sync.OnceValues(func() (string, error) { return toolPath("nft") })
)

// run runs a tool with stdin and returns its stdout. A failure wraps
// ErrCommand with the command line and what the tool printed.
func run(stdin string, path string, args ...string) (string, error) {
	cmd := exec.Command(path, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if stdin != "" {
			msg += "\ninput was:\n" + stdin
		}
		return "", fmt.Errorf("%w: %s %s: %v: %s", ErrCommand, filepath.Base(path), strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// ip runs ip with args in the harness's namespace.
func ip(args ...string) (string, error) {
	p, err := ipPath()
	if err != nil {
		return "", err
	}
	return run("", p, args...)
}

// ipBatch runs ip commands (one per line, without the leading "ip") in
// namespace ns, or the harness's namespace if ns is "". It stops at the
// first failing line.
func ipBatch(ns string, lines ...string) error {
	p, err := ipPath()
	if err != nil {
		return err
	}
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	_, err = run(strings.Join(lines, "\n")+"\n", p, args...)
	return err
}

// nft runs an nft script (nft -f -, one transaction: all of it applies or
// none) in namespace ns.
func nft(ns, script string) error {
	p, err := ipPath()
	if err != nil {
		return err
	}
	n, err := nftPath()
	if err != nil {
		return err
	}
	_, err = run(script, p, "netns", "exec", ns, n, "-f", "-")
	return err
}

// nftList prints the fault table of namespace ns.
func nftList(ns string) (string, error) {
	p, err := ipPath()
	if err != nil {
		return "", err
	}
	n, err := nftPath()
	if err != nil {
		return "", err
	}
	return run("", p, "netns", "exec", ns, n, "list", "table", "inet", tableName)
}
