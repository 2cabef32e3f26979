package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// The clock-skew fault (issue 17). A kvnode built with -tags failpoints
// adds to its wall clock the offset held in the file CUTKV_CLOCK_SKEW_FILE
// names (internal/clock); every node of a round starts with its own file.
// The fault writes an offset of 1-15 minutes, forward or back, into one
// node's file — beyond rpc.FinishedRetention (10 min) in a third of the
// draws — and proves it took effect twice: the node logs "clock skew set"
// with the offset, and the time its /ui/api/status reports is the
// harness's plus the offset. Heal writes the offset 0 back and waits for
// the node to log it. Both ends log the cluster's transaction counters
// (from every node's /metrics) over the skew and over a window before it,
// so the liveness a skew costs is in the round's log.

// skewRange bounds the offsets drawn.
const (
	minSkew = time.Minute
	maxSkew = 15 * time.Minute
)

// skew is a clock-skew fault in force on a node.
type skew struct {
	offset   time.Duration
	since    time.Time
	at       txnCounters // the cluster's counters when the skew was set
	baseline string      // the counters' rates over the window before
	logf     func(format string, args ...any)
}

// skewFile is the file node nd's clock offset is read from.
func (nd *node) skewFile() string { return nd.data + ".clock-skew" }

// injectClockSkew skews one node's clock by a seeded offset.
func (n *nemesis) injectClockSkew(ctx context.Context) (target string, proven bool, proof string) {
	c := n.c
	i := n.r.IntN(len(c.nodes))
	d := (minSkew + time.Duration(n.r.Int64N(int64(maxSkew-minSkew)+1))).Round(time.Second)
	if n.r.IntN(2) == 0 {
		d = -d
	}
	nd := c.nodes[i]
	target = fmt.Sprintf("%s %+v (%s)", nd.id, d, c.roles(ctx, i))

	// A window before the skew, for comparison.
	const window = 1500 * time.Millisecond
	before := c.scrapeTxns(ctx)
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return target, false, ctx.Err().Error()
	case <-time.After(window):
	}
	at := c.scrapeTxns(ctx)
	baseline := at.sub(before).rates(time.Since(t0))

	logFrom := fileSize(nd.log)
	if err := os.WriteFile(nd.skewFile(), []byte(d.String()+"\n"), 0o644); err != nil {
		return target, false, fmt.Sprintf("write %s: %v", nd.skewFile(), err)
	}
	nd.mu.Lock()
	nd.skew = &skew{offset: d, since: time.Now(), at: at, baseline: baseline, logf: n.logf}
	nd.mu.Unlock()

	logged := waitLogLine(ctx, nd.log, logFrom, skewLogLine(d), 3*time.Second)
	seen, uiErr := c.uiClock(ctx, i, d, 6*time.Second)
	proof = fmt.Sprintf("log %q: %v", skewLogLine(d), logged)
	if uiErr != nil {
		proof += "; " + uiErr.Error()
	} else {
		proof += fmt.Sprintf("; its /ui/api/status reports a time %+v from the harness's", seen.Round(time.Millisecond))
	}
	proof += "; before the skew: " + baseline
	return target, logged && uiErr == nil, proof
}

// unskew sets every skewed node's offset back to 0 and waits for each to
// log it; it returns what failed. The cluster's counters over the skew
// go to the round's log.
func (c *cluster) unskew() []string {
	var errs []string
	for _, nd := range c.nodes {
		nd.mu.Lock()
		s := nd.skew
		nd.skew = nil
		nd.mu.Unlock()
		if s == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		during := c.scrapeTxns(ctx).sub(s.at).rates(time.Since(s.since))
		logFrom := fileSize(nd.log)
		if err := os.WriteFile(nd.skewFile(), []byte("0s\n"), 0o644); err != nil {
			errs = append(errs, fmt.Sprintf("reset %s's clock: write %s: %v", nd.id, nd.skewFile(), err))
			cancel()
			continue
		}
		// A node killed meanwhile reads the file when it starts again.
		if !c.down(c.index(nd)) && !waitLogLine(ctx, nd.log, logFrom, skewLogLine(0), 3*time.Second) {
			errs = append(errs, fmt.Sprintf("%s did not log %q within 3s of its skew file reset to 0s", nd.id, skewLogLine(0)))
		}
		cancel()
		s.logf("clock skew %+v on %s for %v: during it %s (before it %s)", s.offset, nd.id, time.Since(s.since).Round(time.Millisecond), during, s.baseline)
	}
	return errs
}

// index is nd's position in c.nodes.
func (c *cluster) index(nd *node) int {
	for i, x := range c.nodes {
		if x == nd {
			return i
		}
	}
	panic("chaos: a node not of its cluster")
}

// skewLogLine is what internal/clock logs when its offset becomes d.
func skewLogLine(d time.Duration) string {
	return fmt.Sprintf("clock skew set offset=%v", d)
}

// roles says which groups node i leads, as it sees them.
func (c *cluster) roles(ctx context.Context, i int) string {
	st, err := c.status(ctx, i)
	if err != nil {
		return "roles unknown: " + err.Error()
	}
	var led []string
	for _, g := range st.GetGroups() {
		if g.GetLeader() == c.nodes[i].id {
			led = append(led, strconv.FormatUint(g.GetId(), 10))
		}
	}
	if len(led) == 0 {
		return "leads no group"
	}
	return "leads groups " + strings.Join(led, ",")
}

// uiClock reads node i's /ui/api/status, whose time_unix_ms is the
// node's wall clock (internal/clock) when it gathered the status (at most
// a refresh, 1 s, before), until within passes or that time is within 5 s
// of the harness's plus want. It returns the node's time minus the
// harness's.
func (c *cluster) uiClock(ctx context.Context, i int, want, within time.Duration) (time.Duration, error) {
	cl := http.Client{Timeout: 4 * time.Second}
	url := fmt.Sprintf("http://%s:%d/ui/api/status", c.nodes[i].host.IP(), httpPort)
	deadline := time.Now().Add(within)
	last := "no answer"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		sent := time.Now()
		seen, err := func() (time.Duration, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return 0, err
			}
			resp, err := cl.Do(req)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			var st struct {
				TimeUnixMs int64 `json:"time_unix_ms"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.TimeUnixMs == 0 {
				return 0, fmt.Errorf("%s: %s, no time_unix_ms (%v)", url, resp.Status, err)
			}
			return time.UnixMilli(st.TimeUnixMs).Sub(sent), nil
		}()
		switch {
		case err != nil:
			last = err.Error()
		case seen-want > -5*time.Second && seen-want < 5*time.Second:
			return seen, nil
		default:
			last = fmt.Sprintf("time_unix_ms %+v from the harness's", seen.Round(time.Millisecond))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s never reported a time %+v from the harness's within %v; last: %s", url, want, within, last)
}

// txnCounters are the transaction counters summed over the nodes.
type txnCounters struct {
	commits, aborts, unknown, invalid float64
	nodes                             int // nodes that answered
}

func (a txnCounters) sub(b txnCounters) txnCounters {
	return txnCounters{commits: a.commits - b.commits, aborts: a.aborts - b.aborts, unknown: a.unknown - b.unknown,
		invalid: a.invalid - b.invalid, nodes: min(a.nodes, b.nodes)}
}

func (a txnCounters) rates(over time.Duration) string {
	s := over.Seconds()
	return fmt.Sprintf("%.0f commits/s, %.0f aborts/s, %.1f unknown/s, %.1f InvalidArgument/s over %v (%d nodes answered)",
		a.commits/s, a.aborts/s, a.unknown/s, a.invalid/s, over.Round(time.Millisecond), a.nodes)
}

// scrapeTxns reads every node's /metrics: cutkv_txn_commits_total,
// cutkv_txn_aborts_total, cutkv_txn_outcome_unknown_total and the gRPC
// requests answered InvalidArgument. A node that does not answer counts
// nothing (nodes says how many did).
func (c *cluster) scrapeTxns(ctx context.Context) txnCounters {
	var out txnCounters
	cl := http.Client{Timeout: time.Second}
	for _, nd := range c.nodes {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d/metrics", nd.host.IP(), httpPort), nil)
		if err != nil {
			continue
		}
		resp, err := cl.Do(req)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			sp := strings.LastIndexByte(line, ' ')
			if sp < 0 || strings.HasPrefix(line, "#") {
				continue
			}
			v, err := strconv.ParseFloat(line[sp+1:], 64)
			if err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(line, "cutkv_txn_commits_total"):
				out.commits += v
			case strings.HasPrefix(line, "cutkv_txn_aborts_total"):
				out.aborts += v
			case strings.HasPrefix(line, "cutkv_txn_outcome_unknown_total"):
				out.unknown += v
			case strings.HasPrefix(line, "cutkv_grpc_requests_total") && strings.Contains(line, `code="InvalidArgument"`):
				out.invalid += v
			}
		}
		resp.Body.Close()
		if sc.Err() == nil {
			out.nodes++
		}
	}
	return out
}

// waitLogLine waits until the log at path has a line containing want
// after byte from.
func waitLogLine(ctx context.Context, path string, from int64, want string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if strings.Contains(logSince(path, from), want) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
