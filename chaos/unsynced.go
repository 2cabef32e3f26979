package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cutkv/cutkv/internal/synclog"
)

// Lost unsynced writes: the nodes are built with -tags failpoints and
// record the length of each file they fsync (package synclog, the WAL's
// files and Pebble's through its vfs). The fault stops a node at a moment
// it holds bytes written but not yet fsynced, kills it, and cuts every
// file back to its fsynced length, as a power failure would have left it.
// The heal restarts the node from what is left; the round's checks then
// show that nothing acknowledged was lost.

// unsyncedTries bounds the stops (SIGSTOP, look, SIGCONT) spent waiting
// for a moment with unsynced bytes.
const unsyncedTries = 80

// injectLoseUnsynced is the fault; proven when at least one file lost
// bytes.
func (n *nemesis) injectLoseUnsynced(ctx context.Context) (target string, proven bool, proof string) {
	c := n.c
	i := n.r.IntN(len(c.nodes))
	nd := c.nodes[i]
	target = nd.id
	var pending []synclog.Loss
	tries := 0
	for tries < unsyncedTries && ctx.Err() == nil {
		tries++
		if ok, err := c.pause(i); err != nil || !ok {
			return target, false, pauseProof(ok, err)
		}
		var err error
		if pending, err = synclog.Unsynced(nd.data, nd.synced); err != nil {
			_ = c.resume(i)
			return target, false, err.Error()
		}
		if len(pending) > 0 {
			break
		}
		if err := c.resume(i); err != nil {
			return target, false, err.Error()
		}
		time.Sleep(time.Duration(5+n.r.IntN(40)) * time.Millisecond)
	}
	if err := c.kill(i); err != nil { // SIGKILL reaches a stopped process
		return target, false, err.Error()
	}
	lost, err := synclog.Truncate(nd.data, nd.synced)
	if err != nil {
		return target, false, fmt.Sprintf("killed; cutting its files to their fsynced lengths: %v", err)
	}
	if len(lost) == 0 {
		return target, false, fmt.Sprintf("killed after %d stops found no unsynced bytes: a plain kill", tries)
	}
	return target, true, describeLoss(nd.data, lost, tries)
}

// describeLoss says what a node lost: files, bytes, the first few.
func describeLoss(dir string, lost []synclog.Loss, tries int) string {
	var total int64
	var first []string
	for i, l := range lost {
		total += l.Lost()
		if i < 3 {
			rel, err := filepath.Rel(dir, l.Path)
			if err != nil {
				rel = l.Path
			}
			first = append(first, fmt.Sprintf("%s %d->%d B", rel, l.Size, l.Synced))
		}
	}
	more := ""
	if len(lost) > 3 {
		more = fmt.Sprintf(" and %d more", len(lost)-3)
	}
	return fmt.Sprintf("stopped with unsynced bytes (stop %d), SIGKILL, %d files cut to their fsynced length, %d B lost: %s%s",
		tries, len(lost), total, strings.Join(first, ", "), more)
}
