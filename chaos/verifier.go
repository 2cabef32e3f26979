package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/cut/verify"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/internal/command"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/tests/bank"
)

// stateDigest identifies a whole cluster's committed key-values.
type stateDigest struct {
	Keys int
	Sum  string
}

// digestOf hashes a state in key order.
func digestOf(state map[string][]byte) stateDigest {
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(state[k]))
		h.Write(state[k])
	}
	return stateDigest{Keys: len(keys), Sum: hex.EncodeToString(h.Sum(nil))}
}

// liveBehind is the number of cuts to verify from which a pass rebuilds
// one replica per partition (verify.Options.OneReplica) instead of all:
// each rebuild replays a partition from its base, three replicas took
// 1.8 s a cut on 2 cores under the load, and cuts complete up to twice a
// second, so a pass that fell behind fell further behind until the logs
// were truncated past cuts it had not copied yet (68 cuts never verified
// in a 10-minute round, seed 326479934259596503). The replicas of every
// partition are compared at the end of the round (kvctl check).
const liveBehind = 8

// A pass's copies are kept, in the round's files, when a cut it had to
// verify was not whole in the copies of keepPendingAt passes in a row (a
// cut completed just before a pass is often not whole in its copies,
// seldom in two); at most keptCopiesMax passes' are kept. A cut not whole
// in four is counted as never verified (round seed 12247301927978929663:
// cut 209, whose logs were truncated by the round's end).
const (
	keepPendingAt = 2
	keptCopiesMax = 2
)

// liveVerifier rebuilds every completed cut from copies of the running
// nodes' WALs and materializations soon after it completes: the WALs are
// truncated behind materializations, so a cut left for the end of the
// round could no longer be rebuilt.
type liveVerifier struct {
	c       *cluster
	scratch string
	bank    *bank.Bank
	logf    func(format string, args ...any)

	// passMu makes passes one at a time: the nemesis asks for one of its
	// own (pass) before it truncates the logs on purpose.
	passMu sync.Mutex

	mu         sync.Mutex
	upTo       uint64 // cuts up to it were examined
	pending    map[uint64]int
	verified   int
	examined   int
	unverified []uint64 // completed, but never found whole in the copies
	violations []string
	digests    map[uint64]stateDigest
	// known are the transaction decisions every pass saw: a record
	// forgotten and truncated away since is still known to later passes.
	// Never a STAGING record (parallel commits): it is no decision, and
	// the first one kept wins over the decision that follows it.
	known   map[string]*internalpb.TxnDecideOp
	skipped int // replicas passed over: truncated past a cut's position
	// keptCopies counts the passes whose copies were kept for a cut not
	// whole in them (keepPendingAt).
	keptCopies int
	// oneReplica counts the cuts verified on one replica per partition,
	// in passes that were behind (liveBehind).
	oneReplica int
	unknown    int // transactions whose record was gone from every log (not judged)
	passes     int
	errors     int
	lastErr    string
}

func newLiveVerifier(c *cluster, scratch string, b *bank.Bank, logf func(string, ...any)) *liveVerifier {
	return &liveVerifier{c: c, scratch: scratch, bank: b, logf: logf, pending: map[uint64]int{}, digests: map[uint64]stateDigest{},
		known: map[string]*internalpb.TxnDecideOp{}}
}

func (v *liveVerifier) run(ctx context.Context, every time.Duration) {
	everyTick(ctx, every, func() {
		if err := v.pass(ctx); err != nil && ctx.Err() == nil {
			v.mu.Lock()
			v.errors++
			v.lastErr = err.Error()
			v.mu.Unlock()
		}
	})
}

// listCuts asks the nodes in turn for the cuts group 0 remembers.
func (v *liveVerifier) listCuts(ctx context.Context) ([]*kvpb.CutInfo, error) {
	var last error
	for i := range v.c.conns {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := kvrpc.NewClusterClient(v.c.conns[i]).ListCuts(cctx, &kvpb.ListCutsRequest{})
		cancel()
		if err == nil {
			return resp.GetCuts(), nil
		}
		last = err
	}
	return nil, fmt.Errorf("chaos: no node listed the cuts: %w", last)
}

// pass verifies the cuts completed since the last pass. A cut the copies
// do not hold whole yet (a CutFinish not yet in every WAL copied) is
// tried again in the next passes. Every pass also collects the
// transaction decisions the logs show, also when group 0 cannot list the
// cuts (it has no leader): a record is forgotten soon after its
// transaction finished everywhere and later truncated out of the log,
// and a cut verified after that still needs it.
func (v *liveVerifier) pass(ctx context.Context) error {
	v.passMu.Lock()
	defer v.passMu.Unlock()
	cuts, listErr := v.listCuts(ctx)
	v.mu.Lock()
	var todo []*kvpb.CutInfo
	for _, ci := range cuts {
		if ci.GetState() == kvpb.CutState_CUT_STATE_COMPLETED && (ci.GetVersion() > v.upTo || v.pending[ci.GetVersion()] > 0) {
			todo = append(todo, ci)
		}
	}
	v.passes++
	pass := v.passes
	known := make(map[string]*internalpb.TxnDecideOp, len(v.known))
	for id, d := range v.known {
		known[id] = d
	}
	v.mu.Unlock()
	if todo == nil {
		todo = []*kvpb.CutInfo{} // none to verify: only the decisions
	}
	dir := filepath.Join(v.scratch, fmt.Sprintf("pass-%d", pass))
	keep := false // the copies stay for a cut that is still not whole
	defer func() {
		if !keep {
			_ = os.RemoveAll(dir)
		}
	}()
	dirs, err := copyDataDirs(v.c, dir)
	if err != nil {
		return err
	}
	digests := map[uint64]stateDigest{}
	var dmu sync.Mutex
	began := time.Now()
	defer func() {
		v.logf("verifier pass %d: %d cuts to verify, %d decisions known, took %v", pass, len(todo), len(known), time.Since(began).Round(time.Millisecond))
	}()
	behind := len(todo) >= liveBehind
	rep, err := verify.Verify(verify.WALSource{Dirs: dirs}, verify.Options{
		Cuts:       todo,
		Parallel:   1,
		Known:      known,
		OneReplica: behind,
		Invariant: func(version uint64, state map[string][]byte) error {
			d := digestOf(state)
			dmu.Lock()
			digests[version] = d
			dmu.Unlock()
			return v.bank.CheckTotal(state)
		},
	})
	if rep == nil {
		return fmt.Errorf("chaos: verify: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, d := range rep.Decisions {
		// The first decision seen wins; verify never reports a STAGING
		// record, and one kept here would shadow the decision for good.
		if _, ok := v.known[id]; !ok && command.IsDecision(d) {
			v.known[id] = d
		}
	}
	if listErr != nil {
		return listErr
	}
	v.skipped += rep.Skipped
	seen := map[uint64]bool{}
	for _, cr := range rep.Cuts {
		if cr.NotWhole() {
			continue // pending: the next pass's copies may reach it
		}
		seen[cr.Version] = true
		delete(v.pending, cr.Version)
		v.examined++
		v.unknown += cr.UnknownRecords
		if cr.OK() {
			v.verified++
			if behind {
				v.oneReplica++
			}
			if d, ok := digests[cr.Version]; ok {
				v.digests[cr.Version] = d
			}
		} else {
			for _, viol := range cr.Violations {
				v.violations = append(v.violations, viol.Error())
			}
			if cr.Dropped > 0 {
				v.violations = append(v.violations, fmt.Sprintf("cut %d: %d more violations", cr.Version, cr.Dropped))
			}
		}
		v.upTo = max(v.upTo, cr.Version)
	}
	for _, ci := range todo {
		ver := ci.GetVersion()
		if seen[ver] {
			continue
		}
		v.pending[ver]++
		if v.pending[ver] == keepPendingAt && v.keptCopies < keptCopiesMax && !keep {
			keep = true
			v.keptCopies++
			v.logf("verifier pass %d: cut %d not whole in %d passes' copies; keeping these in %s", pass, ver, keepPendingAt, dir)
		}
		if v.pending[ver] > 3 {
			delete(v.pending, ver)
			v.unverified = append(v.unverified, ver)
		}
		v.upTo = max(v.upTo, ver)
	}
	return nil
}

// waiting says how many completed cuts the copies did not hold whole yet.
func (v *liveVerifier) waiting() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.pending)
}

// result returns the counts and what went wrong.
func (v *liveVerifier) result() (examined, verified int, unverified []uint64, violations []string, passes, errors int, lastErr string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.examined, v.verified, append([]uint64(nil), v.unverified...), append([]string(nil), v.violations...), v.passes, v.errors, v.lastErr
}

// unjudged returns how many transactions the cuts included whose record
// was gone from every log copied, how many replicas were passed over, and
// how many cuts were verified on one replica per partition.
func (v *liveVerifier) unjudged() (unknownRecords, skippedReplicas, oneReplica int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.unknown, v.skipped, v.oneReplica
}

func (v *liveVerifier) digest(version uint64) (stateDigest, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	d, ok := v.digests[version]
	return d, ok
}

// copyDataDirs copies every node's WAL and materializations into dir, in
// an order that a WAL open accepts however the copy races the node: the
// progress file first, then the segments (a torn last record is cut off at
// open, as after a crash), then the materializations (written by rename,
// so each is whole). It returns each node's copied WAL directory.
func copyDataDirs(c *cluster, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, nd := range c.nodes {
		src, dst := filepath.Join(nd.data, datadir.WALDir), filepath.Join(dir, nd.id, datadir.WALDir)
		if err := os.MkdirAll(dst, 0o750); err != nil {
			return nil, err
		}
		if err := copyFile(filepath.Join(src, "progress"), filepath.Join(dst, "progress")); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() || name == "progress" || strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".TEMP") {
				continue
			}
			if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil && !os.IsNotExist(err) {
				return nil, err
			}
		}
		msrc, mdst := filepath.Join(nd.data, checkpoint.DirName), filepath.Join(dir, nd.id, checkpoint.DirName)
		if err := os.MkdirAll(mdst, 0o750); err != nil {
			return nil, err
		}
		if ents, err := os.ReadDir(msrc); err == nil {
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp") {
					continue
				}
				if e.IsDir() {
					if m, ok := checkpoint.ParseName(e.Name()); ok && m.Dir {
						if err := linkDir(filepath.Join(msrc, e.Name()), filepath.Join(mdst, e.Name())); err != nil {
							return nil, err
						}
					}
					continue
				}
				if err := copyFile(filepath.Join(msrc, e.Name()), filepath.Join(mdst, e.Name())); err != nil && !os.IsNotExist(err) {
					return nil, err
				}
			}
		}
		out[nd.id] = dst
	}
	return out, nil
}

// linkDir copies the checkpoint directory src as hard links of its files
// (a checkpoint's files are never changed once sealed). A checkpoint the
// node removes meanwhile leaves a partial copy, which fails its manifest's
// check and is not used.
func linkDir(src, dst string) error {
	ents, err := os.ReadDir(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if err := os.Link(from, to); err != nil {
			if os.IsNotExist(err) {
				continue
			}
			if err := copyFile(from, to); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
