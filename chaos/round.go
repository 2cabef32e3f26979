package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cutkv/cutkv/chaos/elle"
	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/restore"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/tests/bank"
	"github.com/cutkv/cutkv/tests/linearizability"
)

// Workload sizes (two shared cores run five nodes and every client).
const (
	bankAccounts   = 24
	bankInitial    = 100
	bankTransfers  = 4
	bankReaders    = 2
	registerKeys   = 6
	registerProcs  = 4
	appendKeys     = 8
	appendClients  = 3
	cutEvery       = 500 * time.Millisecond
	snapshotEvery  = 5 * time.Second
	verifyEvery    = 4 * time.Second
	porcupineLimit = 2 * time.Minute
)

// roundResult is what a round did and found; one journal line.
type roundResult struct {
	Time       time.Time         `json:"time"`
	Commit     string            `json:"commit"`
	Seed       uint64            `json:"seed"`
	Nodes      int               `json:"nodes"`
	Soak       string            `json:"soak"`
	Kinds      []Kind            `json:"kinds"`
	Faults     []fault           `json:"faults"`
	Ops        map[string]int    `json:"ops"`
	Cuts       cutCounts         `json:"cuts"`
	Snapshots  snapCounts        `json:"snapshots"`
	RecoveryMs int64             `json:"recovery_ms"`
	Anomalies  []string          `json:"anomalies"`
	Problems   []string          `json:"problems"` // not anomalies, but a failed round all the same
	OK         bool              `json:"ok"`
	Dir        string            `json:"dir,omitempty"`
	Replay     string            `json:"replay,omitempty"`
	Details    map[string]string `json:"details,omitempty"`
}

type cutCounts struct {
	Calls, Completed, Failed, Errors int
	Verified, Unverified             int
	// UnknownRecords: transactions a verified cut included whose record
	// was gone from every log copied (their atomicity was not judged).
	UnknownRecords int `json:",omitempty"`
}

type snapCounts struct {
	Taken, Errors, Restored, RestoredOK int
}

// runRound runs one round: a fresh cluster, the workloads and the
// nemesis, then every check.
func runRound(t *testing.T, cfg Config, rd round, idx int, kvnode, out string) *roundResult {
	res := &roundResult{Time: time.Now().UTC(), Commit: cfg.Commit, Seed: rd.seed, Nodes: rd.nodes, Soak: rd.soak.String(),
		Kinds: rd.kinds, Ops: map[string]int{}, RecoveryMs: -1, Details: map[string]string{}}
	dir := filepath.Join(out, fmt.Sprintf("round-%d-%dnodes", idx, rd.nodes))
	res.Dir = dir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	logPath := filepath.Join(dir, "harness.log")
	lf, _ := os.Create(logPath)
	var logMu sync.Mutex
	began := time.Now()
	logf := func(format string, args ...any) {
		msg := fmt.Sprintf("%8s  ", time.Since(began).Round(time.Millisecond)) + fmt.Sprintf(format, args...)
		logMu.Lock()
		defer logMu.Unlock()
		if lf != nil {
			fmt.Fprintln(lf, msg)
		}
		t.Log(msg)
	}
	defer func() {
		if lf != nil {
			lf.Close()
		}
	}()
	r := rand.New(rand.NewPCG(rd.seed, uint64(rd.nodes)))
	logf("round %d: %d nodes, kinds %v, seed %d, soak %v, recovery bound %v", idx, rd.nodes, rd.kinds, rd.seed, rd.soak, cfg.RecoveryBound)

	c, err := startCluster(dir, kvnode, rd.nodes, byte(40+idx), fmt.Sprintf("ck%d", idx), proxiedPorts(rd.kinds))
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	defer c.close()
	logf("cluster up: %v", c.endpoints())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loadUntil := time.Now().Add(rd.soak)

	// The bank.
	router, err := bank.NewRouter(c.endpoints())
	if err != nil {
		res.Problems = append(res.Problems, "bank router: "+err.Error())
		return res
	}
	defer router.Close()
	b := bank.NewBank(router, partitions, bankAccounts, bankInitial)
	if err := b.Init(r.Uint64()); err != nil {
		res.Problems = append(res.Problems, "bank init: "+err.Error())
		return res
	}
	stopBank := make(chan struct{})
	waitBank := b.Run(stopBank, bankTransfers, bankReaders, r.Uint64())
	bankStopped := false
	stopBankOnce := func() {
		if !bankStopped {
			bankStopped = true
			close(stopBank)
			waitBank()
		}
	}
	defer stopBankOnce()

	// The registers.
	kvs := make([]kvrpc.KVClient, len(c.conns))
	for i, cc := range c.conns {
		kvs[i] = kvrpc.NewKVClient(cc)
	}
	reg, err := linearizability.NewWorkload(linearizability.Config{Nodes: kvs, Keys: linearizability.PickKeys(registerKeys, partitions),
		Seed: r.Uint64(), Clients: registerProcs, Skip: c.down})
	if err != nil {
		res.Problems = append(res.Problems, "register workload: "+err.Error())
		return res
	}
	regDone := make(chan struct{})
	var regOps []porcupine.Operation
	var regStats linearizability.Stats
	regCtx, regCancel := context.WithDeadline(ctx, loadUntil)
	defer regCancel()
	go func() {
		defer close(regDone)
		regOps, regStats = reg.Run(regCtx)
	}()

	// The lists.
	lc, err := client.NewWithConfig(ctx, client.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		res.Problems = append(res.Problems, "append client: "+err.Error())
		return res
	}
	defer lc.Close()
	la := elle.New(lc, elle.Config{Keys: appendKeys, MaxOpsPerTxn: 4, Clients: appendClients, Seed: r.Uint64(), KeyPrefix: "la"})
	laCtx, laCancel := context.WithDeadline(ctx, loadUntil)
	defer laCancel()
	laDone := make(chan struct{})
	go func() {
		defer close(laDone)
		la.Run(laCtx)
	}()

	// Cuts, snapshots, the live verifier.
	bg, bgCancel := context.WithCancel(ctx)
	defer bgCancel()
	calls := &gate{}
	cu := newCutter(c, r.Uint64(), calls)
	sn := &snapshotter{c: c, r: rand.New(rand.NewPCG(r.Uint64(), 5)), gate: calls}
	lv := newLiveVerifier(c, filepath.Join(dir, "verify"), b, logf)
	var bgWG sync.WaitGroup
	bgWG.Add(3)
	go func() { defer bgWG.Done(); cu.run(bg, cutEvery) }()
	go func() { defer bgWG.Done(); sn.run(bg, snapshotEvery) }()
	go func() { defer bgWG.Done(); lv.run(bg, verifyEvery) }()

	// The nemesis, until the load stops.
	endpoints := c.endpoints()
	nm := &nemesis{c: c, r: rand.New(rand.NewPCG(r.Uint64(), 7)), kinds: rd.kinds, cuts: cu, bound: cfg.RecoveryBound, start: began, logf: logf,
		coord: func(i int) int64 { return router.MultiPartitionTxns(endpoints[i]) }, verifyNow: lv.pass, calls: calls}
	res.Faults = nm.run(ctx, loadUntil)
	time.Sleep(time.Until(loadUntil))

	// Recovery after the last fault.
	healed := time.Now()
	if err := c.heal(); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	for i := range c.nodes {
		if err := c.waitServing(i, cfg.RecoveryBound); err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
	}
	if rec, ok := cu.completedAfter(ctx, healed, cfg.RecoveryBound); ok {
		res.RecoveryMs = time.Since(healed).Milliseconds()
		logf("healthy and a cut completed %v after the last heal (cut %v after)", time.Since(healed).Round(time.Millisecond), rec.Round(time.Millisecond))
	} else {
		res.Problems = append(res.Problems, fmt.Sprintf("no cut completed within %v of the last heal", cfg.RecoveryBound))
	}

	// Stop the load; the last cuts and snapshots, then the checks.
	<-regDone
	laCancel()
	<-laDone
	stopBankOnce()
	time.Sleep(2 * cutEvery) // a cut or two after the last write
	bgCancel()
	bgWG.Wait()
	// The last passes: a cut completed just before the load stopped may
	// not be in every copied WAL yet; copies taken a little later reach it.
	for range 4 {
		if err := lv.pass(ctx); err != nil {
			res.Problems = append(res.Problems, "last verifier pass: "+err.Error())
			break
		}
		if lv.waiting() == 0 {
			break
		}
		if err := flushCommits(ctx, c); err != nil {
			logf("%v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	checkRound(t, c, res, reg, regOps, regStats, b, la, cu, sn, lv, dir, logf)
	res.OK = len(res.Anomalies) == 0 && len(res.Problems) == 0
	if !res.OK {
		res.Replay = fmt.Sprintf("sudo make chaos CUTKV_CHAOS_ROUND_SEED=%d CUTKV_SOAK=%v CUTKV_CHAOS_NODES=%d CUTKV_CHAOS_KINDS=%s  # at commit %s; interleavings may differ",
			rd.seed, rd.soak, rd.nodes, kindList(rd.kinds), short(cfg.Commit))
		writeFailure(dir, res, nm.schedule)
	}
	return res
}

func kindList(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// writeFailure keeps what a failed round needs to be understood and
// replayed.
func writeFailure(dir string, res *roundResult, schedule []string) {
	b, _ := json.MarshalIndent(res, "", "  ")
	_ = os.WriteFile(filepath.Join(dir, "result.json"), b, 0o640)
	_ = os.WriteFile(filepath.Join(dir, "schedule.txt"), []byte(strings.Join(schedule, "\n")+"\n"), 0o640)
	_ = os.WriteFile(filepath.Join(dir, "REPLAY"), []byte(res.Replay+"\n"), 0o640)
}

// checkRound runs the checks after the load stopped.
func checkRound(t *testing.T, c *cluster, res *roundResult, reg *linearizability.Workload, regOps []porcupine.Operation, regStats linearizability.Stats, b *bank.Bank, la *elle.Workload,
	cu *cutter, sn *snapshotter, lv *liveVerifier, dir string, logf func(string, ...any)) {
	anomaly := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		res.Anomalies = append(res.Anomalies, msg)
		logf("ANOMALY: %s", msg)
	}
	problem := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		res.Problems = append(res.Problems, msg)
		logf("PROBLEM: %s", msg)
	}
	ctx := context.Background()

	// Registers: final reads (a lost acknowledged write fails), porcupine.
	final, ferr := reg.FinalReads(ctx)
	if ferr != nil {
		problem("registers: %v", ferr)
	}
	ops := append(regOps, final...)
	res.Ops["register"] = len(ops)
	lin, err := linearizability.Check(ops, porcupineLimit, filepath.Join(dir, "porcupine.html"))
	if err != nil {
		anomaly("registers: %v (%s)", err, lin)
	} else {
		logf("registers: %s", lin)
	}
	res.Details["register"] = regStats.String()

	// The bank: no lock left, all-or-nothing, totals.
	if took, err := b.Settle(time.Now().Add(30*time.Second), 1); err != nil {
		problem("bank did not settle: %v", err)
	} else {
		logf("bank settled in %v", took.Round(time.Millisecond))
		for _, e := range b.Check() {
			anomaly("bank: %v", e)
		}
	}
	res.Ops["bank-transfers"] = int(b.Stats.Transfers.Load() + b.Stats.CompareFailed.Load())
	res.Ops["bank-reads"] = int(b.Stats.Reads.Load())
	res.Details["bank"] = b.Summary()

	// The lists.
	h := la.History()
	_ = os.WriteFile(filepath.Join(dir, "append-history.json"), mustJSON(h), 0o640)
	// Strict serializability: the cluster is linearizable, so a stale
	// read (a real-time cycle) is an anomaly too.
	er := elle.CheckWith(h, elle.Options{ProcessOrder: true, RealTime: true})
	res.Ops["append-txns"] = er.Committed
	for _, a := range er.Anomalies {
		anomaly("append: %s", a)
	}
	logf("append: %s", er.Summary())

	// Replicas agree.
	if err := checkReplicas(ctx, c); err != nil {
		anomaly("replicas: %v", err)
	}

	// Cuts: every completed one verified.
	calls, completed, failed, errors, last := cu.summary()
	examined, verified, unverified, violations, passes, verrs, vlast := lv.result()
	unknownRecords, skippedReplicas, oneReplica := lv.unjudged()
	res.Cuts = cutCounts{Calls: calls, Completed: completed, Failed: failed, Errors: errors, Verified: verified, Unverified: len(unverified), UnknownRecords: unknownRecords}
	logf("verifier: %d transactions included with their record gone from every log (not judged), %d replicas passed over (truncated past a cut), %d cuts verified on one replica per partition (passes behind)", unknownRecords, skippedReplicas, oneReplica)
	logf("cuts: %d calls, %d completed, %d failed, %d errors (last: %s); verifier: %d passes (%d errors, last: %s), %d examined, %d verified, %d never whole in the copies %v",
		calls, completed, failed, errors, last, passes, verrs, vlast, examined, verified, len(unverified), unverified)
	for _, v := range violations {
		anomaly("cut: %s", v)
	}
	if completed == 0 {
		problem("no cut completed")
	}
	if len(unverified) > 0 {
		problem("%d completed cuts were never whole in the copies of the WALs: %v", len(unverified), unverified)
	}

	// Snapshots: the last three restored, equal to their cut's state.
	taken, serrs, slast := sn.snapshots()
	res.Snapshots.Taken, res.Snapshots.Errors = len(taken), serrs
	logf("snapshots: %d taken, %d errors (last: %s)", len(taken), serrs, slast)
	if len(taken) == 0 {
		problem("no snapshot taken")
	}
	sort.Slice(taken, func(i, j int) bool { return taken[i].Cut < taken[j].Cut })
	if len(taken) > 3 {
		taken = taken[len(taken)-3:]
	}
	for i, s := range taken {
		want, ok := lv.digest(s.Cut)
		if !ok {
			problem("snapshot %s: the verifier has no state for cut %d", s.ID, s.Cut)
			continue
		}
		nodes := 1
		if i == len(taken)-1 {
			nodes = 3
		}
		res.Snapshots.Restored++
		got, err := restoreAndDigest(t, c.store, s.ID, nodes, b)
		if err != nil {
			anomaly("snapshot %s (cut %d) restored onto %d nodes: %v", s.ID, s.Cut, nodes, err)
			continue
		}
		if got != want {
			anomaly("snapshot %s (cut %d) restored onto %d nodes holds %d keys (digest %s), the cut's state %d keys (%s)",
				s.ID, s.Cut, nodes, got.Keys, got.Sum[:12], want.Keys, want.Sum[:12])
			continue
		}
		res.Snapshots.RestoredOK++
		logf("snapshot %s (cut %d) restored onto %d nodes: %d keys, equal to the cut's state, bank total exact", s.ID, s.Cut, nodes, got.Keys)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(err.Error())
	}
	return b
}

// checkReplicas asks for every partition's replica hashes (kvctl check),
// retrying while the cluster settles.
func checkReplicas(ctx context.Context, c *cluster) error {
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		resp, err := kvrpc.NewClusterClient(c.conns[0]).Check(cctx, &kvpb.CheckRequest{})
		cancel()
		if err == nil {
			last = nil
			for _, p := range resp.GetPartitions() {
				if !p.GetConsistent() {
					last = fmt.Errorf("partition %d: %v", p.GetPartition(), p)
					break
				}
			}
			if last == nil {
				return nil
			}
			// Diverged replicas stay diverged; an unreachable one may
			// come back.
			for _, p := range resp.GetPartitions() {
				var sums []uint64
				for _, rh := range p.GetReplicas() {
					if rh.GetError() == "" {
						sums = append(sums, rh.GetHash())
					}
				}
				for _, s := range sums {
					if s != sums[0] {
						return fmt.Errorf("partition %d diverged: %v", p.GetPartition(), p)
					}
				}
			}
		} else {
			last = err
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("not every partition could be checked: %v", last)
}

// restoreAndDigest restores snapshot id from store onto a fresh
// in-process cluster of n nodes and returns the digest of everything it
// serves; the bank total must be exact.
func restoreAndDigest(t *testing.T, store, id string, n int, b *bank.Bank) (stateDigest, error) {
	var got stateDigest
	var rerr error
	t.Run(fmt.Sprintf("restore-%s-onto-%d", id, n), func(t *testing.T) {
		c := clustertest.Start(t, n, clustertest.Options{Partitions: partitions, Prepare: func(i int, cfg server.Config) error {
			_, err := restore.Run(context.Background(), restore.Options{
				StoreURL: store, Snapshot: id, DataDir: cfg.DataDir, NodeID: cfg.ID, InitialCluster: cfg.InitialCluster,
			})
			return err
		}})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl, err := client.New(ctx, c.Endpoints()...)
		if err != nil {
			rerr = err
			return
		}
		defer cl.Close()
		state := map[string][]byte{}
		var start []byte
		for {
			kvs, more, err := cl.Scan(ctx, start, nil, 1000)
			if err != nil {
				rerr = fmt.Errorf("scan: %w", err)
				return
			}
			for _, kv := range kvs {
				state[string(kv.Key)] = kv.Value
			}
			if !more || len(kvs) == 0 {
				break
			}
			start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
		}
		if err := b.CheckTotal(state); err != nil {
			rerr = err
			return
		}
		got = digestOf(state)
	})
	return got, rerr
}
