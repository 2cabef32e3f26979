package cut

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/kvpb"
)

// Env is what the driver needs from its node. Calls may block on the
// network; each honours ctx.
type Env interface {
	// Partitions lists the partitions a cut covers (1..N).
	Partitions() []uint64
	// Announce raises the node's clock to v and gossips it to every node.
	Announce(v uint64)
	// StartPartition asks the leader of partition p to start cut v and
	// waits a little for its CutFinish. done reports whether the partition
	// has committed CutFinish(v); res is then where the cut fell there.
	StartPartition(ctx context.Context, p, v uint64) (res *kvpb.CutPartition, done bool, err error)
	// Record makes the end of a cut durable in group 0.
	Record(ctx context.Context, c *kvpb.CutInfo) error
	// Now is the wall clock.
	Now() time.Time
}

// ErrTimeout is the reason of a cut that did not finish in time.
var ErrTimeout = errors.New("cut: not finished in every partition before the timeout")

// ErrOvertaken: a partition already runs a newer cut, so this one can no
// longer finish there (Env.StartPartition wraps it).
var ErrOvertaken = errors.New("cut: overtaken by a newer cut")

// Drive runs cut c (Running, as allocated in group 0) to its end: it
// announces the version, asks every partition to start it until each has
// committed CutFinish, and returns the cut Completed, or Failed once
// timeout has passed since the cut started. It returns an error, and
// nothing to record, only when ctx ends first (the node lost group 0's
// leadership or stops; the next leader takes over).
func Drive(ctx context.Context, env Env, c *kvpb.CutInfo, timeout time.Duration) (*kvpb.CutInfo, error) {
	out, _, err := drive(ctx, env, c, timeout)
	return out, err
}

// Why a cut failed (FailReasons).
const (
	failTimeout   = "timeout"
	failOvertaken = "overtaken"
)

// FailReasons lists the reasons a failed cut is reported with
// (Driver.OnEnd).
func FailReasons() []string { return []string{failTimeout, failOvertaken} }

// drive is Drive, and also says why a failed cut failed: overtaken when
// a partition ran a newer cut, else timeout.
func drive(ctx context.Context, env Env, c *kvpb.CutInfo, timeout time.Duration) (*kvpb.CutInfo, string, error) {
	v := c.GetVersion()
	// The deadline counts from the cut's start in group 0 (a take-over
	// keeps it), read on the environment's clock — and is never more than
	// timeout away: a start stamped by a leader whose clock ran ahead
	// would otherwise keep a cut that cannot finish in flight, and every
	// later cut waiting, for as long as that clock was ahead (issue 17).
	left := min(time.UnixMilli(c.GetStartedUnixMs()).Add(timeout).Sub(env.Now()), timeout)
	dctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	env.Announce(v)

	parts := env.Partitions()
	results := make([]*kvpb.CutPartition, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = startUntilDone(dctx, env, p, v)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	out := proto.Clone(c).(*kvpb.CutInfo)
	out.FinishedUnixMs = env.Now().UnixMilli()
	var failed []string
	reason := failTimeout
	for i, p := range parts {
		if errs[i] != nil {
			failed = append(failed, fmt.Sprintf("partition %d: %v", p, errs[i]))
			if errors.Is(errs[i], ErrOvertaken) {
				reason = failOvertaken
			}
		}
	}
	if len(failed) > 0 {
		out.State = kvpb.CutState_CUT_STATE_FAILED
		out.Error = fmt.Sprintf("%v after %v: %s", ErrTimeout, timeout, strings.Join(failed, "; "))
		return out, reason, nil
	}
	sort.Slice(results, func(i, j int) bool { return results[i].GetPartition() < results[j].GetPartition() })
	out.State = kvpb.CutState_CUT_STATE_COMPLETED
	out.Partitions = results
	return out, "", nil
}

// startUntilDone asks partition p to start cut v until it reports
// CutFinish(v) committed, the partition is past v, or ctx ends; it returns
// the latest answer's error then.
func startUntilDone(ctx context.Context, env Env, p, v uint64) (*kvpb.CutPartition, error) {
	backoff := 5 * time.Millisecond
	for {
		res, done, err := env.StartPartition(ctx, p, v)
		if done {
			res.Partition = p
			return res, nil
		}
		if errors.Is(err, ErrOvertaken) {
			return nil, err
		}
		if ctx.Err() != nil {
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				err = errors.New("its leader had not committed CutFinish (transactions still active, or no quorum)")
			}
			return nil, err
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 200*time.Millisecond)
		}
	}
}

// Driver drives the cuts of one node, at most one run per version: a cut
// created twice, or taken over while a run is under way, is driven once.
type Driver struct {
	env     Env
	timeout time.Duration
	log     func(msg string, args ...any)

	mu      sync.Mutex
	driving map[uint64]bool
	ended   func(c *kvpb.CutInfo, reason string)
}

// OnEnd sets fn to be called with each cut this driver recorded as
// ended, and for a failed one why (one of FailReasons; "" for a
// completed one). Call it before the first Ensure.
func (d *Driver) OnEnd(fn func(c *kvpb.CutInfo, reason string)) { d.ended = fn }

// NewDriver returns a driver failing cuts after timeout. logf reports
// each cut's end (slog-style key-value args).
func NewDriver(env Env, timeout time.Duration, logf func(msg string, args ...any)) *Driver {
	return &Driver{env: env, timeout: timeout, log: logf, driving: map[uint64]bool{}}
}

// Timeout returns the cut timeout.
func (d *Driver) Timeout() time.Duration { return d.timeout }

// Ensure starts driving cut c in the background unless this node already
// does; the run ends when the cut is recorded or ctx ends.
func (d *Driver) Ensure(ctx context.Context, c *kvpb.CutInfo) {
	v := c.GetVersion()
	d.mu.Lock()
	if d.driving[v] {
		d.mu.Unlock()
		return
	}
	d.driving[v] = true
	d.mu.Unlock()
	go func() {
		defer func() {
			d.mu.Lock()
			delete(d.driving, v)
			d.mu.Unlock()
		}()
		out, reason, err := drive(ctx, d.env, c, d.timeout)
		if err != nil {
			d.log("cut run stopped before its end; the next leader of group 0 takes it over", "version", v, "err", err)
			return
		}
		if err := d.env.Record(ctx, out); err != nil {
			d.log("cut end not recorded; the next leader of group 0 takes it over", "version", v, "state", out.GetState().String(), "err", err)
			return
		}
		if d.ended != nil {
			d.ended(out, reason)
		}
		d.log("cut ended", "version", v, "state", out.GetState().String(),
			"took", time.Duration(out.GetFinishedUnixMs()-out.GetStartedUnixMs())*time.Millisecond, "error", out.GetError())
	}()
}

// Driving says whether this node drives cut v now.
func (d *Driver) Driving(v uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.driving[v]
}
