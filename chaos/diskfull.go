package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/cutkv/cutkv/chaos/hosts"
)

// nodeDisk is the size of the tmpfs each node's data dir is (a
// hosts.MountDisk), so that only a disk-full fault fills it and a fill
// costs memory, not a disk. A data dir grows by up to 12 MiB a minute
// under the full load while its WAL is not truncated (sampled every 10 s
// at 2026-12-07 in a 3-minute round of 3 nodes with restart-all and
// crash-point faults: a node that restarts every few seconds never
// reaches its first materialization, 45 s after its start, so nothing
// truncates its WAL), and the 96 MiB this was before ran out in the
// verification after an 8-minute round (round seed
// 10843351665710126561). 512 MiB holds 40 minutes of that.
const nodeDisk = 512 << 20

// fillerName is the file a disk-full fault fills a node's disk with, in
// the root of its data dir; heal removes it before the node restarts.
const fillerName = "chaos-disk-full.filler"

// diskFullExit bounds how long a node whose disk is full may take to
// exit by itself: its next WAL append or Pebble flush fails at once, and
// the load writes to every node many times a second.
const diskFullExit = 20 * time.Second

// noSpace is how the kernel's ENOSPC reads in an error message.
var noSpace = syscall.ENOSPC.Error()

// injectDiskFull fills one node's disk (its data dir's tmpfs) and proves
// that the node stopped for it as the rule says (README.md: a WAL write
// or fsync error is sticky, and so is a Pebble one; the node stops
// acknowledging and exits with status 1 naming the file): the process
// exits by itself with status 1, and the fatal line of its log names a
// file in its data dir and the no-space error. The node is then down
// ("killed") until heal frees the disk and restarts it.
func (n *nemesis) injectDiskFull(ctx context.Context) (target string, proven bool, proof string) {
	c := n.c
	i := n.r.IntN(len(c.nodes))
	nd := c.nodes[i]
	nd.mu.Lock()
	p, st := nd.proc, nd.state
	nd.mu.Unlock()
	if p == nil || st != "up" {
		return nd.id, false, fmt.Sprintf("%s is %s, not up", nd.id, st)
	}
	logFrom := fileSize(nd.log)
	filler := filepath.Join(nd.data, fillerName)
	nd.mu.Lock()
	nd.filler = filler // whatever happens next, heal removes it
	nd.mu.Unlock()
	free, _ := hosts.DiskFree(nd.data)
	began := time.Now()
	// The node may free space meanwhile (a WAL truncation, a compaction),
	// so the filler is topped up until the node is gone.
	filled, err := fillUp(filler)
	if err != nil {
		_ = c.freeDisk(i) // the node runs on: no fault
		return nd.id, false, err.Error()
	}
	exited := false
	for time.Since(began) < diskFullExit && ctx.Err() == nil {
		if exited, _ = p.Wait(100 * time.Millisecond); exited {
			break
		}
		more, err := fillUp(filler)
		if err != nil {
			_ = c.freeDisk(i)
			return nd.id, false, err.Error()
		}
		filled += more
	}
	took := time.Since(began).Round(time.Millisecond)
	what := fmt.Sprintf("filled %s with %d MiB (%d MiB were free)", nd.id, filled>>20, free>>20)
	if !exited {
		serving := c.serving(i)
		if err := c.kill(i); err != nil {
			return nd.id, false, what + fmt.Sprintf("; still running after %v (/healthz SERVING: %v), and the kill failed: %v", took, serving, err)
		}
		return nd.id, false, what + fmt.Sprintf("; still running after %v (/healthz SERVING: %v): killed (a node must exit on a write error)", took, serving)
	}
	c.exited(i, p)
	code := -1
	if s := p.State(); s != nil {
		code = s.ExitCode()
	}
	logText := logSince(nd.log, logFrom)
	line, ok := fatalNoSpace(logText, nd.data)
	if !ok {
		return nd.id, false, what + fmt.Sprintf("; exited by itself after %v (code %d), but no fatal line names a file in %s and %q; its log ends:\n%s",
			took, code, nd.data, noSpace, lastLines(logText, 8))
	}
	return nd.id, code == 1, what + fmt.Sprintf("; exited by itself after %v with code %d: %s", took, code, clip(line, 400))
}

// fillUp appends to the filler until the disk has no room left, and
// returns how much it wrote; running out of room is the point, not an
// error.
func fillUp(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return 0, nil // not even an inode left
		}
		return 0, fmt.Errorf("chaos: fill the disk: %w", err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	var total int64
	for {
		k, err := f.Write(chunk)
		total += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("chaos: fill the disk: %w", err)
		}
	}
}

// freeDisk removes node i's filler, if a disk-full fault left one, so
// that the node can restart.
func (c *cluster) freeDisk(i int) error {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.filler == "" {
		return nil
	}
	if err := os.Remove(nd.filler); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("chaos: free %s's disk: %w", nd.id, err)
	}
	nd.filler = ""
	return nil
}

// exited marks node i down after its process p exited by itself, as a
// kill would (heal restarts it).
func (c *cluster) exited(i int, p *hosts.Proc) {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.proc == p {
		nd.proc, nd.state = nil, "killed"
	}
}

// fatalNoSpace finds the line in a node's log that says why it stopped
// ("kvnode: fatal: ...", cmd/kvnode) and reports whether it names the
// no-space error and a file under the data dir.
func fatalNoSpace(log string, dataDir string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "kvnode: fatal: ") {
			continue
		}
		return line, strings.Contains(line, noSpace) && strings.Contains(line, filepath.Clean(dataDir)+string(filepath.Separator))
	}
	return "", false
}

// clip cuts s to at most max bytes, on a rune boundary.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max] + "…"
}
