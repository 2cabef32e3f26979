package cut_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// fakeEnv is a driver environment without a network. Its StartPartition
// behaves like rpc's StartCut: it answers at once when the partition has
// finished the cut, else waits (up to a second, honouring ctx) and says
// "not yet" — or fails at once with the partition's error. Tests run it
// inside a synctest bubble, so waits take no real time.
type fakeEnv struct {
	parts []uint64

	mu        sync.Mutex
	doneAt    map[uint64]time.Time // partition finishes the cut at this time; absent: never
	errs      map[uint64]error     // StartPartition fails at once with this
	announced []uint64
	calls     map[uint64]int
	records   []*kvpb.CutInfo
	recordErr error
	recorded  chan struct{} // receives one value per Record call
}

func newFakeEnv(parts ...uint64) *fakeEnv {
	return &fakeEnv{
		parts:    parts,
		doneAt:   map[uint64]time.Time{},
		errs:     map[uint64]error{},
		calls:    map[uint64]int{},
		recorded: make(chan struct{}, 16),
	}
}

func (e *fakeEnv) Partitions() []uint64 { return slices.Clone(e.parts) }

func (e *fakeEnv) Announce(v uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.announced = append(e.announced, v)
}

func (e *fakeEnv) StartPartition(ctx context.Context, p, v uint64) (*kvpb.CutPartition, bool, error) {
	e.mu.Lock()
	e.calls[p]++
	at, finishes := e.doneAt[p]
	err := e.errs[p]
	e.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	now := time.Now()
	if finishes && !now.Before(at) {
		return &kvpb.CutPartition{Pos: 100 * p, FinishIndex: 100*p + 1, Before: uint32(p)}, true, nil
	}
	wait := time.Second
	if finishes {
		wait = min(wait, at.Sub(now))
	}
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-time.After(wait):
		return nil, false, nil
	}
}

func (e *fakeEnv) Record(ctx context.Context, c *kvpb.CutInfo) error {
	e.mu.Lock()
	e.records = append(e.records, c)
	err := e.recordErr
	e.mu.Unlock()
	e.recorded <- struct{}{}
	return err
}

func (e *fakeEnv) Now() time.Time { return time.Now() }

func runningCut(v uint64) *kvpb.CutInfo {
	return &kvpb.CutInfo{Version: v, State: kvpb.CutState_CUT_STATE_RUNNING, StartedUnixMs: time.Now().UnixMilli()}
}

func TestDriveCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv(3, 1, 2)
		start := time.Now()
		env.doneAt[1] = start
		env.doneAt[2] = start.Add(2500 * time.Millisecond)
		env.doneAt[3] = start.Add(700 * time.Millisecond)
		c := runningCut(7)
		out, err := cut.Drive(t.Context(), env, c, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if out.GetState() != kvpb.CutState_CUT_STATE_COMPLETED || out.GetError() != "" {
			t.Fatalf("state %v error %q", out.GetState(), out.GetError())
		}
		if c.GetState() != kvpb.CutState_CUT_STATE_RUNNING || len(c.GetPartitions()) != 0 {
			t.Fatal("Drive modified the cut it was given")
		}
		if out.GetVersion() != 7 || out.GetStartedUnixMs() != c.GetStartedUnixMs() {
			t.Fatalf("version %d started %d", out.GetVersion(), out.GetStartedUnixMs())
		}
		// It ends when the last partition (2, at 2.5 s) reports done.
		if got, want := out.GetFinishedUnixMs()-out.GetStartedUnixMs(), int64(2500); got != want {
			t.Fatalf("took %d ms, want %d", got, want)
		}
		var parts []string
		for _, p := range out.GetPartitions() {
			parts = append(parts, fmt.Sprintf("%d:pos=%d,finish=%d,before=%d", p.GetPartition(), p.GetPos(), p.GetFinishIndex(), p.GetBefore()))
		}
		if want := []string{"1:pos=100,finish=101,before=1", "2:pos=200,finish=201,before=2", "3:pos=300,finish=301,before=3"}; !slices.Equal(parts, want) {
			t.Fatalf("partitions %v, want %v", parts, want)
		}
		if !slices.Equal(env.announced, []uint64{7}) {
			t.Fatalf("announced %v, want [7]", env.announced)
		}
		if env.calls[1] != 1 {
			t.Fatalf("partition 1 (done at once) asked %d times", env.calls[1])
		}
		if len(env.records) != 0 {
			t.Fatal("Drive recorded the cut itself")
		}
	})
}

func TestDriveTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv(1, 2, 3)
		env.doneAt[1] = time.Now().Add(300 * time.Millisecond)
		// 2 never finishes; 3 has no leader to ask.
		env.errs[3] = errors.New("no leader for partition 3")
		const timeout = 4 * time.Second
		start := time.Now()
		out, err := cut.Drive(t.Context(), env, runningCut(9), timeout)
		if err != nil {
			t.Fatal(err)
		}
		if out.GetState() != kvpb.CutState_CUT_STATE_FAILED {
			t.Fatalf("state %v, want failed", out.GetState())
		}
		if took := time.Since(start); took != timeout {
			t.Fatalf("failed after %v, want the timeout %v", took, timeout)
		}
		if got := out.GetFinishedUnixMs() - out.GetStartedUnixMs(); got != timeout.Milliseconds() {
			t.Fatalf("finished %d ms after the start", got)
		}
		msg := out.GetError()
		for _, want := range []string{cut.ErrTimeout.Error(), "partition 2:", "partition 3: no leader for partition 3"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not say %q", msg, want)
			}
		}
		if strings.Contains(msg, "partition 1") {
			t.Errorf("error %q names partition 1, which finished", msg)
		}
		if len(out.GetPartitions()) != 0 {
			t.Errorf("a failed cut lists partitions: %v", out.GetPartitions())
		}
		// The failing partition is retried with a backoff, not in a loop.
		if n := env.calls[3]; n < 5 || n > 100 {
			t.Errorf("partition 3 asked %d times in %v", n, timeout)
		}
	})
}

func TestDriveTimeoutCountsFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv(1)
		// Taken over by a new leader 3 s into a 4 s timeout: 1 s is left.
		c := runningCut(4)
		c.StartedUnixMs = time.Now().Add(-3 * time.Second).UnixMilli()
		start := time.Now()
		out, err := cut.Drive(t.Context(), env, c, 4*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if out.GetState() != kvpb.CutState_CUT_STATE_FAILED || time.Since(start) != time.Second {
			t.Fatalf("state %v after %v, want failed after 1s", out.GetState(), time.Since(start))
		}
	})
}

// TestDriveTimeoutFromAClockAhead: a cut whose start was stamped by a
// group 0 leader whose clock ran 15 min ahead still fails after the
// timeout, not 15 min later.
func TestDriveTimeoutFromAClockAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv(1)
		c := runningCut(5)
		c.StartedUnixMs = time.Now().Add(15 * time.Minute).UnixMilli()
		start := time.Now()
		out, err := cut.Drive(t.Context(), env, c, 4*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if out.GetState() != kvpb.CutState_CUT_STATE_FAILED || time.Since(start) != 4*time.Second {
			t.Fatalf("state %v after %v, want failed after the timeout, 4s", out.GetState(), time.Since(start))
		}
	})
}

func TestDriveCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv(1, 2)
		env.doneAt[1] = time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(1500*time.Millisecond, cancel)
		start := time.Now()
		out, err := cut.Drive(ctx, env, runningCut(3), 10*time.Second)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if out != nil {
			t.Fatalf("a cancelled run returned a cut to record: %v", out)
		}
		if took := time.Since(start); took != 1500*time.Millisecond {
			t.Fatalf("returned after %v, want at the cancel", took)
		}
	})
}

type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(append([]any{msg}, args...)...))
}

func (l *logLines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func TestDriverEnsureOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv(1, 2)
		env.doneAt[1] = time.Now().Add(time.Second)
		env.doneAt[2] = time.Now().Add(2 * time.Second)
		var log logLines
		d := cut.NewDriver(env, 10*time.Second, log.logf)
		if d.Timeout() != 10*time.Second {
			t.Fatalf("timeout %v", d.Timeout())
		}
		c := runningCut(5)
		d.Ensure(t.Context(), c)
		d.Ensure(t.Context(), c) // created twice, or taken over: one run
		if !d.Driving(5) {
			t.Fatal("not driving cut 5")
		}
		time.Sleep(500 * time.Millisecond) // fake time: half-way through
		d.Ensure(t.Context(), c)
		<-env.recorded
		synctest.Wait() // the run's goroutine ends
		if d.Driving(5) {
			t.Fatal("still driving cut 5 after recording it")
		}
		if len(env.records) != 1 || env.records[0].GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
			t.Fatalf("records %v, want one completed cut", env.records)
		}
		if !slices.Equal(env.announced, []uint64{5}) {
			t.Fatalf("announced %v, want [5]: one run", env.announced)
		}
		if n := env.calls[1]; n != 2 {
			t.Fatalf("partition 1 asked %d times, want 2 (one run)", n)
		}
		if !strings.Contains(log.all(), "cut ended") {
			t.Fatalf("log:\n%s", log.all())
		}

		// Once a run has ended, a cut still running in group 0 (its end
		// was not recorded) is driven again.
		env.recordErr = errors.New("not leader of group 0")
		d.Ensure(t.Context(), c)
		<-env.recorded
		synctest.Wait()
		if len(env.records) != 2 || len(env.announced) != 2 {
			t.Fatalf("records %d announced %v", len(env.records), env.announced)
		}
		if !strings.Contains(log.all(), "cut end not recorded") {
			t.Fatalf("log:\n%s", log.all())
		}
	})
}

func TestDriverEnsureStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv(1)
		var log logLines
		d := cut.NewDriver(env, time.Minute, log.logf)
		ctx, cancel := context.WithCancel(t.Context())
		d.Ensure(ctx, runningCut(2))
		synctest.Wait() // the run waits on partition 1
		cancel()
		synctest.Wait()
		if d.Driving(2) {
			t.Fatal("still driving after ctx ended")
		}
		if len(env.records) != 0 {
			t.Fatal("a run stopped by its ctx recorded the cut")
		}
		if !strings.Contains(log.all(), "stopped before its end") {
			t.Fatalf("log:\n%s", log.all())
		}
	})
}

// TestDriverOnEnd: the observer hears each cut whose end was recorded,
// once, with the reason of a failure (overtaken before timeout: a
// partition that ran a newer cut can never finish this one), and nothing
// of an end that was not recorded.
func TestDriverOnEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv(1, 2)
		env.doneAt[1] = time.Now()
		var log logLines
		d := cut.NewDriver(env, time.Second, log.logf)
		type end struct {
			v      uint64
			state  kvpb.CutState
			reason string
		}
		var mu sync.Mutex
		var ends []end
		d.OnEnd(func(c *kvpb.CutInfo, reason string) {
			mu.Lock()
			defer mu.Unlock()
			ends = append(ends, end{c.GetVersion(), c.GetState(), reason})
		})
		run := func(v uint64) {
			d.Ensure(t.Context(), runningCut(v))
			<-env.recorded
			synctest.Wait()
		}
		run(1) // partition 2 never finishes: timeout
		env.mu.Lock()
		env.errs[2] = fmt.Errorf("%w: partition 2 already started cut 9", cut.ErrOvertaken)
		env.mu.Unlock()
		run(2)
		env.mu.Lock()
		delete(env.errs, 2)
		env.doneAt[2] = time.Now()
		env.mu.Unlock()
		run(3)
		env.recordErr = errors.New("not leader of group 0")
		run(4)
		want := []end{
			{1, kvpb.CutState_CUT_STATE_FAILED, "timeout"},
			{2, kvpb.CutState_CUT_STATE_FAILED, "overtaken"},
			{3, kvpb.CutState_CUT_STATE_COMPLETED, ""},
		}
		if !slices.Equal(ends, want) {
			t.Fatalf("ends %v, want %v", ends, want)
		}
		if !slices.Contains(cut.FailReasons(), "timeout") || !slices.Contains(cut.FailReasons(), "overtaken") {
			t.Fatalf("FailReasons %v", cut.FailReasons())
		}
	})
}
