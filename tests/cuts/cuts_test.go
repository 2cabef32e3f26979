package cuts

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/cut/verify"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/internal/dirstate"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/tests/bank"
	"github.com/cutkv/cutkv/tests/process"
	"github.com/cutkv/cutkv/wal"
)

// Shape of the run (doc.go).
const (
	nodes           = 3
	partitions      = 4
	accounts        = 20
	initialBalance  = 100
	transferClients = 8
	readers         = 2

	// minCompletedCuts makes a run mean something: completed cuts, not
	// speed.
	minCompletedCuts = 20
	// The cutter waits a random time in [cutGapMin, cutGapMax) between
	// cuts.
	cutGapMin = 100 * time.Millisecond
	cutGapMax = 500 * time.Millisecond
	// cutCallTimeout bounds one CreateCut: above the cut timeout
	// (rpc.DefaultCutTimeout, 10 s), so that a cut ends before its call.
	cutCallTimeout = 15 * time.Second
	// overtime is how long the load may go on past the soak while fewer
	// than minCompletedCuts cuts have completed.
	overtime = 40 * time.Second
	// settleBound: once traffic has stopped, the bank settles within it.
	settleBound = 15 * time.Second
	// maxShown bounds the verifier's violations printed.
	maxShown = 30
)

func TestCutsUnderBankLoad(t *testing.T) {
	runCutsUnderLoad(t, false, false)
}

func TestCutsUnderBankLoadWithKill(t *testing.T) {
	runCutsUnderLoad(t, true, false)
}

// TestCutsUnderBankLoadWithCheckpoints materializes every group every
// second during the first two thirds of the run (small WAL segments, so
// the WALs are truncated): the verifier rebuilds the later cuts from the
// materializations plus the WAL tails.
func TestCutsUnderBankLoadWithCheckpoints(t *testing.T) {
	runCutsUnderLoad(t, false, true)
}

func runCutsUnderLoad(t *testing.T, kill, checkpoints bool) {
	soak := process.SoakDuration(t)
	rng := process.NewRand(t)
	opts := clustertest.Options{Partitions: partitions}
	if checkpoints {
		opts.Configure = func(_ int, cfg *server.Config) {
			cfg.WALSegmentSize = 32 << 10
			cfg.CatchUpEntries = 50
		}
	}
	c := clustertest.Start(t, nodes, opts)
	r, err := bank.NewRouter(c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := bank.NewBank(r, partitions, accounts, initialBalance)
	if err := b.Init(rng.Uint64()); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	at := func() string { return time.Since(began).Round(time.Millisecond).String() }

	stopLoad := make(chan struct{})
	waitLoad := b.Run(stopLoad, transferClients, readers, rng.Uint64())
	conns := make([]*grpc.ClientConn, nodes)
	for i := range conns {
		conns[i] = c.Conn(i)
	}
	cu := &cutter{conns: conns, rng: rand.New(rand.NewPCG(rng.Uint64(), 3))}
	stopCuts := make(chan struct{})
	cutsDone := make(chan struct{})
	go func() {
		defer close(cutsDone)
		cu.run(stopCuts)
	}()
	var once sync.Once
	halt := func() {
		once.Do(func() {
			close(stopCuts)
			<-cutsDone
			close(stopLoad)
			waitLoad()
		})
	}
	defer halt() // also when a step below fails the test

	if kill {
		// The victim is group 0's leader, the driver of the cuts, killed a
		// few milliseconds after a CreateCut was sent: most likely with a
		// cut in flight, which the next leader takes over (rule 7). It
		// leads some partitions too.
		time.Sleep(soak / 3)
		victim, why := rng.IntN(nodes), "at random"
		if l, err := metaLeader(c, conns); err == nil {
			victim, why = l, "group 0's leader"
		} else {
			t.Logf("group 0's leader unknown (%v): killing a node at random", err)
		}
		sent := cu.nextCall()
		select {
		case <-sent:
		case <-time.After(5 * time.Second):
			t.Logf("no CreateCut sent within 5s")
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		c.Kill(victim)
		t.Logf("%s: n%d (%s) killed; %d cuts completed so far", at(), victim+1, why, cu.completedCount())
		time.Sleep(soak / 3)
		c.Restart(victim)
		t.Logf("%s: n%d restarted and ready; %d cuts completed so far", at(), victim+1, cu.completedCount())
	}
	var verifyFrom uint64 // checkpoints: the cuts after it lie after every base
	if checkpoints {
		cl := kvrpc.NewClusterClient(conns[0])
		n := 0
		for time.Since(began) < 2*soak/3 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := cl.Checkpoint(ctx, &kvpb.CheckpointRequest{}); err != nil {
				t.Logf("checkpoint: %v", err)
			} else {
				n++
			}
			cancel()
			time.Sleep(time.Second)
		}
		// The second newest materialization (the oldest kept) was taken
		// before this: later cuts fall after it.
		verifyFrom = cu.highestVersion()
		t.Logf("%s: %d checkpoints; verifying the cuts after %d", at(), n, verifyFrom)
	}
	time.Sleep(time.Until(began.Add(soak)))
	for cu.completedCount() < minCompletedCuts && time.Since(began) < soak+overtime {
		time.Sleep(50 * time.Millisecond)
	}
	halt()
	t.Logf("%s: cuts and traffic stopped; %s", at(), cu.summary())
	for _, f := range cu.failedCuts() {
		t.Logf("failed cut %d: %s", f.GetVersion(), f.GetError())
	}

	// The replicas of every partition hold the same state.
	cl := kvrpc.NewClusterClient(conns[0])
	clustertest.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		chk, err := cl.Check(ctx, &kvpb.CheckRequest{})
		if err != nil {
			return err
		}
		for _, p := range chk.GetPartitions() {
			if !p.GetConsistent() {
				return fmt.Errorf("partition %d not consistent: %v", p.GetPartition(), p)
			}
		}
		return nil
	})

	// No lock outlives the run, and the clients' history checks out.
	took, err := b.Settle(time.Now().Add(settleBound), rng.Uint64())
	if err != nil {
		t.Errorf("bank did not settle: %v", err)
	} else {
		t.Logf("bank settled in %v", took.Round(time.Millisecond))
		for _, e := range b.Check() {
			t.Error(e)
		}
	}
	t.Log(b.Summary())

	// What group 0 recorded.
	var listed []*kvpb.CutInfo
	clustertest.Eventually(t, 20*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cl.ListCuts(ctx, &kvpb.ListCutsRequest{})
		listed = resp.GetCuts()
		return err
	})
	completed := map[uint64]bool{}
	for _, ci := range listed {
		if ci.GetState() == kvpb.CutState_CUT_STATE_COMPLETED {
			completed[ci.GetVersion()] = true
		}
	}
	for _, v := range cu.completedVersions() {
		if !completed[v] {
			t.Errorf("CreateCut reported cut %d completed; group 0 lists it as %v", v, stateOf(listed, v))
		}
	}
	if len(completed) < minCompletedCuts {
		t.Errorf("only %d cuts completed (group 0 lists %d cuts); want at least %d", len(completed), len(listed), minCompletedCuts)
	}

	// Stop every node cleanly, so the WALs are complete and quiescent,
	// and rebuild every completed cut from them.
	dirs := map[string]string{}
	for i := 0; i < nodes; i++ {
		c.Stop(i)
		dir := filepath.Join(c.Config(i).DataDir, datadir.WALDir)
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("node n%d's WAL: %v", i+1, err)
		}
		dirs[c.Config(i).ID] = dir
	}
	vbegan := time.Now()
	vopts := verify.Options{
		Invariant: func(_ uint64, state map[string][]byte) error { return b.CheckTotal(state) },
	}
	if checkpoints {
		for _, ci := range listed {
			if ci.GetState() == kvpb.CutState_CUT_STATE_COMPLETED && ci.GetVersion() > verifyFrom {
				vopts.Cuts = append(vopts.Cuts, ci)
			} else {
				delete(completed, ci.GetVersion())
			}
		}
		for i := 0; i < nodes; i++ {
			if first := walFirstFile(t, dirs[c.Config(i).ID]); first <= 1 {
				t.Errorf("n%d: WAL not truncated by the checkpoints (starts at %d)", i+1, first)
			}
		}
		if len(vopts.Cuts) < minCompletedCuts/4 {
			t.Errorf("only %d completed cuts after the checkpoints", len(vopts.Cuts))
		}
	}
	var mats map[string]string // node's materializations dir -> its files
	if checkpoints {
		mats = map[string]string{}
		for i := 0; i < nodes; i++ {
			dir := filepath.Join(c.Config(i).DataDir, datadir.MaterializeDir)
			mats[dir] = dirstate.Must(t, dir)
		}
		startsOnPebble(t, dirs)
	}
	rep, err := verify.Verify(verify.WALSource{Dirs: dirs}, vopts)
	if rep == nil {
		t.Fatalf("verify: %v", err)
	}
	t.Logf("verifier took %v: %v", time.Since(vbegan).Round(time.Millisecond), rep)
	for dir, before := range mats {
		// The verifier replays onto clones; a materialization is never
		// opened read-write, and the clones are gone.
		if after := dirstate.Must(t, dir); after != before {
			t.Errorf("the verifier changed the materializations in %s:\nbefore:\n%s\nafter:\n%s", dir, before, after)
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(dir)), "scratch-*"))
		if len(left) > 0 {
			t.Errorf("the verifier left its scratch states: %v", left)
		}
	}
	if err != nil {
		shown := 0
		for _, cr := range rep.Cuts {
			for _, v := range cr.Violations {
				if shown < maxShown {
					t.Error(v)
				}
				shown++
			}
			shown += cr.Dropped
		}
		if shown > maxShown {
			t.Errorf("and %d more violations", shown-maxShown)
		}
	}
	verified := map[uint64]bool{}
	for _, v := range rep.Verified() {
		verified[v] = true
	}
	var missing []uint64
	for v := range completed {
		if !verified[v] {
			missing = append(missing, v)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	if len(missing) > 0 {
		t.Errorf("completed cuts %v did not verify", missing)
	}
	if len(rep.Cuts) != len(completed) {
		t.Errorf("the verifier examined %d completed cuts in the WALs, group 0 listed %d", len(rep.Cuts), len(completed))
	}
	var txns int
	for _, cr := range rep.Cuts {
		txns += cr.TxnsChecked
	}
	t.Logf("%d completed cuts verified (%d failed, %d unfinished), %d transaction checks", len(rep.Verified()), len(rep.Failed), len(rep.Unfinished), txns)
}

// metaLeader returns the index of the node leading group 0, as some
// node sees it.
func metaLeader(c *clustertest.Cluster, conns []*grpc.ClientConn) (int, error) {
	var last error
	for _, cc := range conns {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := kvrpc.NewClusterClient(cc).Status(ctx, &kvpb.StatusRequest{LocalOnly: true})
		cancel()
		if err != nil {
			last = err
			continue
		}
		for _, g := range st.GetGroups() {
			if g.GetId() != 0 || g.GetLeader() == "" {
				continue
			}
			for i := 0; i < c.N(); i++ {
				if c.Config(i).ID == g.GetLeader() {
					return i, nil
				}
			}
		}
		last = fmt.Errorf("no leader of group 0 known")
	}
	return 0, last
}

func stateOf(cuts []*kvpb.CutInfo, v uint64) string {
	for _, c := range cuts {
		if c.GetVersion() == v {
			return c.GetState().String()
		}
	}
	return "unknown"
}

// cutter takes cuts through CreateCut on random nodes until stopped.
type cutter struct {
	conns []*grpc.ClientConn
	rng   *rand.Rand // used by run only

	mu        sync.Mutex
	notify    chan struct{} // closed when the next CreateCut is sent
	completed []*kvpb.CutInfo
	failed    []*kvpb.CutInfo
	errors    int // CreateCut calls that returned an error
	lastErr   error
}

// run takes a cut, waits a random gap, and again, until stop closes.
// After an error (the node it asked is down, or the cut's driver died)
// it asks another node soon, without the gap.
func (c *cutter) run(stop <-chan struct{}) {
	gap := time.Duration(0)
	for {
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
		i := c.rng.IntN(len(c.conns))
		c.mu.Lock()
		if c.notify != nil {
			close(c.notify)
			c.notify = nil
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), cutCallTimeout)
		resp, err := kvrpc.NewClusterClient(c.conns[i]).CreateCut(ctx, &kvpb.CreateCutRequest{})
		cancel()
		gap = cutGapMin + time.Duration(c.rng.Int64N(int64(cutGapMax-cutGapMin)))
		c.mu.Lock()
		switch {
		case err != nil:
			c.errors++
			c.lastErr = err
			gap = 50 * time.Millisecond
		case resp.GetCut().GetState() == kvpb.CutState_CUT_STATE_COMPLETED:
			c.completed = append(c.completed, resp.GetCut())
		default:
			c.failed = append(c.failed, resp.GetCut())
		}
		c.mu.Unlock()
	}
}

// nextCall returns a channel closed when the next CreateCut is sent.
func (c *cutter) nextCall() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notify = make(chan struct{})
	return c.notify
}

func (c *cutter) completedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.completed)
}

// completedVersions returns the distinct versions CreateCut reported
// completed (two calls may join one cut).
func (c *cutter) completedVersions() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[uint64]bool{}
	var out []uint64
	for _, ci := range c.completed {
		if !seen[ci.GetVersion()] {
			seen[ci.GetVersion()] = true
			out = append(out, ci.GetVersion())
		}
	}
	return out
}

func (c *cutter) failedCuts() []*kvpb.CutInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*kvpb.CutInfo(nil), c.failed...)
}

func (c *cutter) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var took []time.Duration
	for _, ci := range c.completed {
		took = append(took, time.Duration(ci.GetFinishedUnixMs()-ci.GetStartedUnixMs())*time.Millisecond)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	s := fmt.Sprintf("CreateCut: %d completed, %d failed, %d errors", len(c.completed), len(c.failed), c.errors)
	if len(took) > 0 {
		s += fmt.Sprintf("; completed cuts took %v (median), %v (max)", took[len(took)/2], took[len(took)-1])
	}
	if c.lastErr != nil {
		s += fmt.Sprintf("; last error: %v", c.lastErr)
	}
	return s
}

// walFirstFile returns the first index of a stopped node's WAL.
// startsOnPebble checks that every partition replica the verifier reads
// from a materialization starts from a scratch Pebble (a clone of the
// checkpoint), not from a copy of the state decoded into memory.
func startsOnPebble(t *testing.T, dirs map[string]string) {
	t.Helper()
	reps, err := verify.WALSource{Dirs: dirs}.Replicas()
	if err != nil {
		t.Fatal(err)
	}
	var based int
	for _, r := range reps {
		if r.Group == 0 || r.Start == nil {
			continue
		}
		p, err := r.Start()
		if err != nil {
			t.Fatalf("%s group %d: base at %d: %v", r.Node, r.Group, r.BaseIndex, err)
		}
		if !p.Checkpoints() {
			t.Errorf("%s group %d: the base at %d is in memory, not a scratch Pebble", r.Node, r.Group, r.BaseIndex)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		based++
	}
	if based == 0 {
		t.Error("no replica starts from a materialization")
	}
}

func walFirstFile(t *testing.T, dir string) uint64 {
	t.Helper()
	w, err := wal.Open(dir, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.FirstIndex()
}

// highestVersion is the highest cut version the cutter saw completed.
func (c *cutter) highestVersion() uint64 {
	var v uint64
	for _, x := range c.completedVersions() {
		v = max(v, x)
	}
	return v
}
