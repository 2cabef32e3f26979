package cut_test

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt from the actual output")

// The scenario harness is a small, deterministic world without a network:
// nodes (each a cut.Clock), partitions (each a real partition.Partition,
// its log and its leader) and transactions driven step by step, as the
// node code in rpc/ and raftstore/ would drive them, so that the cut's
// interleavings (DESIGN.md, "Consistent cut") can be written down and
// checked. A script is a text file of steps in the format of the
// partition's scripts (partition/txn_script_test.go): a command line,
// optional input lines, "----", and the expected output up to a blank
// line; lines starting with # and blank lines between steps are kept as
// they are. Run with -rewrite to regenerate the expected output (then read
// the diff). A script whose comments hold a "# BUG:" line is skipped,
// naming the bug: its expectation is what the rules demand, not what the
// code does.
//
// What the world models (and how the real node does it):
//
//   - A proposal on partition P is made by P's leader and stamped with
//     max(the command's own version, the leader's clock, the highest
//     version already in P's log), and the leader's clock is raised to the
//     stamp (raftstore Store.Propose, rule 2). Only leaders' clocks are
//     modelled: a node that becomes leader keeps whatever clock it had, and
//     the log's versions make up for it.
//   - Requests (Prepare, Decide, Finish, StartCut) carry the sender's
//     clock as marker; the receiver raises its clock before it acts.
//     Replies carry the replier's clock read after its entry applied; the
//     receiver merges the marker before acting on the reply (rule 1).
//   - A proposal is committed and applied at once, or, with "pending",
//     only appended to the leader's log until "commit P"; with "dropped"
//     it never reaches the log. A leader change overwrites what is pending.
//   - Every committed entry is applied, in log order, to the partition's
//     state machine; its replicas are one state machine (they apply the
//     same log).
//
// Commands:
//
//	setup                         a new world; input: "node N..." and
//	                              "partition P leader N" lines
//	learn N V                     N hears V by gossip (memberlist broadcast)
//	startcut P V                  the driver's StartCut(V) reaches P's leader
//	txn T coord=N parts=P,Q [record=P] [fail=P] [key=K]
//	                              declares a two-phase transaction: each share
//	                              puts K (default T) = T on success, T/failure
//	                              on failure; fail=P makes P's compares fail;
//	                              the record lives on record= (default: the
//	                              first part)
//	prepare T P [pending|dropped] the coordinator's Prepare reaches P's leader,
//	                              which proposes it; once applied, the vote is
//	                              on its way back
//	vote T P                      the coordinator merges P's vote
//	decide T [abort] [lost] [pending|dropped]
//	                              the coordinator stamps its decision (the first
//	                              time; a retry keeps the stamp) and records it
//	                              on the record partition; "lost": the reply
//	                              never arrives; "abort": abort whatever the
//	                              votes say
//	finish T P [pending|dropped]  the coordinator's Finish (the recorded
//	                              decision and stamp) reaches P's leader
//	recover T P                   P's leader resolves its in-doubt intent of T:
//	                              Decide(abort) at the record partition (first
//	                              decision wins), merge the reply, Finish
//	onephase O P [key=K] [pending|dropped]
//	                              a one-partition transaction putting K
//	                              (default O) = O in one entry
//	put P K V [pending|dropped]   a plain write
//	cutstart P [pending|dropped]  P's leader proposes CutStart(known) when P's
//	                              log has not reached its known version
//	cutfinish P [again] [pending|dropped]
//	                              P's leader proposes the pending CutFinish
//	                              ("again": the last one proposed, once more)
//	commit P                      P's pending entries commit and apply
//	leader P N                    N becomes P's leader; pending entries are
//	                              overwritten
//	dump                          clocks, logs and cut progress
//	state V                       where cut V fell in each partition and each
//	                              partition's state at V (rebuilt from the log)
//	check V                       state V, then the rules: cut V finished
//	                              everywhere at the first entry of version >= V;
//	                              each state is what rule 5 defines; every
//	                              transaction in all its partitions' states or
//	                              in none. A broken rule prints a VIOLATION
//	                              line, which fails the test even with -rewrite.

type step struct {
	line  int // of the command, 1-based
	cmd   string
	input []string
	want  []string
}

type item struct {
	raw  string // a comment or blank line, when step is nil
	step *step
}

func parseScript(path, data string) ([]item, error) {
	lines := strings.Split(strings.TrimSuffix(data, "\n"), "\n")
	var items []item
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			items = append(items, item{raw: l})
			continue
		}
		st := &step{line: i + 1, cmd: l}
		for i++; ; i++ {
			if i == len(lines) {
				return nil, fmt.Errorf("%s:%d: step %q has no ----", path, st.line, st.cmd)
			}
			if lines[i] == "----" {
				break
			}
			st.input = append(st.input, lines[i])
		}
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
			i++
			st.want = append(st.want, lines[i])
		}
		items = append(items, item{step: st})
	}
	return items, nil
}

func formatScript(items []item) string {
	var b strings.Builder
	for _, it := range items {
		if it.step == nil {
			b.WriteString(it.raw + "\n")
			continue
		}
		b.WriteString(it.step.cmd + "\n")
		for _, l := range it.step.input {
			b.WriteString(l + "\n")
		}
		b.WriteString("----\n")
		for _, l := range it.step.want {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestCutScenarios runs the cut interleavings in testdata/*.txt.
func TestCutScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) { runScript(t, path) })
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	items, err := parseScript(path, string(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.step == nil && strings.HasPrefix(it.raw, "# BUG:") {
			t.Skip(strings.TrimSpace(strings.TrimPrefix(it.raw, "#")))
		}
	}
	var w *world
	for _, it := range items {
		st := it.step
		if st == nil {
			continue
		}
		if w == nil && !strings.HasPrefix(st.cmd, "setup") {
			t.Fatalf("%s:%d: the first step must be setup", path, st.line)
		}
		if strings.HasPrefix(st.cmd, "setup") {
			w = &world{}
		}
		got, err := w.run(st.cmd, st.input)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, st.line, st.cmd, err)
		}
		if strings.Contains(got, "VIOLATION") {
			t.Errorf("%s:%d: %s: a rule is broken:\n%s", path, st.line, st.cmd, got)
		}
		lines := strings.Split(got, "\n")
		if *rewrite {
			st.want = lines
			continue
		}
		if !slices.Equal(lines, st.want) {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, st.line, st.cmd, got, strings.Join(st.want, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(formatScript(items)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScenarioScriptRoundTrip(t *testing.T) {
	in := "# c\n\nlearn n1 2\n----\nn1 known 0 -> 2 (gossip)\n\nsetup\nnode n1\n----\nok\n"
	items, err := parseScript("x", in)
	if err != nil {
		t.Fatal(err)
	}
	if out := formatScript(items); out != in {
		t.Fatalf("round trip:\n%q\nwant\n%q", out, in)
	}
	if _, err := parseScript("x", "learn n1 2\nok\n"); err == nil {
		t.Fatal("a step without ---- parsed")
	}
}

// --- the world ---------------------------------------------------------

type node struct {
	name  string
	clock *cut.Clock
}

// entry is a raft entry of a partition's log.
type entry struct {
	index uint64
	cmd   *internalpb.Command
	by    *node
	res   any // what applying it returned (committed entries)
	// done runs when the entry applies, with its result: the proposer's
	// answer to whoever asked (nil: nobody waits).
	done func(res any)
}

type part struct {
	name   string
	id     uint64
	sm     *partition.Partition
	log    []*entry // committed and applied, in index order
	tail   []*entry // appended on the leader, not committed yet
	leader *node
	// lastFinish is the last CutFinish proposed here ("cutfinish P again").
	lastFinish *internalpb.CutFinishOp
}

// lastIndex is the index of the last entry in the leader's log.
func (p *part) lastIndex() uint64 { return uint64(len(p.log) + len(p.tail)) }

// logVersion is the highest version in the leader's log.
func (p *part) logVersion() uint64 {
	var v uint64
	for _, e := range p.log {
		v = max(v, e.cmd.GetCutVersion())
	}
	for _, e := range p.tail {
		v = max(v, e.cmd.GetCutVersion())
	}
	return v
}

// truePos is pos_p(v) by its definition (rule 2): the index of the first
// committed entry of version >= v, 0 if none.
func (p *part) truePos(v uint64) uint64 {
	for _, e := range p.log {
		if e.cmd.GetCutVersion() >= v {
			return e.index
		}
	}
	return 0
}

type vote struct {
	v      partition.Vote
	marker uint64
	merged bool
}

// txnState is a transaction as the world knows it.
type txnState struct {
	id     string
	key    string
	coord  *node
	parts  []*part
	record *part
	fail   *part

	votes map[*part]*vote
	// The coordinator's decision: stamped the first time, kept on retry.
	stamped           bool
	commit, succeeded bool
	stamp             uint64
	// recorded is the decision the coordinator got back from the record.
	recorded *internalpb.TxnDecideOp

	// A one-partition transaction: its entry (nil: not applied yet).
	onePhase *part
	opEntry  *entry
}

func (t *txnState) value(succeeded bool) string {
	if succeeded {
		return t.id
	}
	return t.id + "/failure"
}

func (t *txnState) share(p *part) *internalpb.TxnShare {
	s := &internalpb.TxnShare{
		Success:      []*kvpb.RequestOp{reqPut(t.key, t.value(true))},
		SuccessIndex: []uint32{0},
	}
	if t.onePhase != nil {
		return s
	}
	s.Failure, s.FailureIndex = []*kvpb.RequestOp{reqPut(t.key, t.value(false))}, []uint32{0}
	if t.fail == p {
		// The key is written only by this transaction: version 0 now.
		s.Compares = []*kvpb.Compare{{Key: []byte(t.key), Result: kvpb.Compare_GREATER, Target: kvpb.Compare_VERSION, TargetUnion: &kvpb.Compare_Version{Version: 0}}}
	}
	return s
}

func reqPut(k, v string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
}

type world struct {
	nodes map[string]*node
	parts []*part
	txns  []*txnState
	out   []string
}

func (w *world) say(format string, args ...any) { w.out = append(w.out, fmt.Sprintf(format, args...)) }

func (w *world) node(name string) (*node, error) {
	if n := w.nodes[name]; n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("no node %q", name)
}

func (w *world) part(name string) (*part, error) {
	for _, p := range w.parts {
		if p.name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no partition %q", name)
}

func (w *world) txn(id string) (*txnState, error) {
	for _, t := range w.txns {
		if t.id == id {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no transaction %q", id)
}

// raise merges a version into n's clock and says so when it rose.
func (w *world) raise(n *node, v uint64, why string) {
	old := n.clock.Load()
	if n.clock.Raise(v) {
		w.say("%s known %d -> %d (%s)", n.name, old, v, why)
	}
}

// propose has p's leader propose cmd (rule 2's stamping) and commits it
// unless mode is "pending" (appended only) or "dropped" (refused).
func (w *world) propose(p *part, cmd *internalpb.Command, mode string, done func(res any)) {
	l := p.leader
	cmd.CutVersion = max(cmd.GetCutVersion(), l.clock.Load(), p.logVersion())
	if mode == "dropped" {
		w.say("%s v%d by %s: %s dropped (never in the log)", p.name, cmd.GetCutVersion(), l.name, describe(cmd))
		return
	}
	w.raise(l, cmd.GetCutVersion(), "own proposal, over the log's versions")
	e := &entry{index: p.lastIndex() + 1, cmd: cmd, by: l, done: done}
	p.tail = append(p.tail, e)
	if mode == "pending" {
		w.say("%s #%d v%d by %s: %s (appended, not committed)", p.name, e.index, cmd.GetCutVersion(), l.name, describe(cmd))
		return
	}
	w.commit(p)
}

type progress struct {
	version uint64
	running uint64
	active  []string
	pending *internalpb.CutFinishOp
}

func progressOf(p *part) progress {
	pr := progress{version: p.sm.CutVersion()}
	pr.running, pr.active = p.sm.CutActive()
	pr.pending, _ = p.sm.CutPending()
	return pr
}

// commit applies p's pending entries in log order.
func (w *world) commit(p *part) {
	tail := p.tail
	p.tail = nil
	for _, e := range tail {
		before := progressOf(p)
		intents := w.intentsOf(p) // what becomes the active set if a cut starts here
		hadIntent := finishesIntent(p, e.cmd)
		res, err := p.sm.ApplyCommand(e.index, e.cmd)
		if err != nil {
			w.say("ERROR applying %s #%d: %v", p.name, e.index, err)
			continue
		}
		e.res = res
		p.log = append(p.log, e)
		r := describeResult(res)
		if _, ok := e.cmd.GetOp().(*internalpb.Command_TxnFinish); ok && !hadIntent {
			r = "no intent here, nothing to do"
		}
		line := fmt.Sprintf("%s #%d v%d by %s: %s", p.name, e.index, e.cmd.GetCutVersion(), e.by.name, describe(e.cmd))
		if r != "" {
			line += " -> " + r
		}
		w.say("%s", line)
		after := progressOf(p)
		if after.version != before.version {
			s := fmt.Sprintf("%s cut %d starts at #%d, active %v", p.name, after.version, e.index, intents)
			if before.running != 0 {
				s += fmt.Sprintf(" (cut %d overtaken, unfinished)", before.running)
			}
			if f, ok := p.sm.CutResult(after.version); ok && f.Index == e.index {
				s += fmt.Sprintf(" -> finished at #%d: nothing active, nothing to propose", e.index)
			}
			w.say("%s", s)
			before.active = intents
		}
		if after.running != 0 && !slices.Equal(after.active, before.active) {
			w.say("%s cut %d active %v", p.name, after.running, after.active)
		}
		if after.pending != nil && (before.pending == nil || before.pending.GetVersion() != after.pending.GetVersion()) {
			w.say("%s cut %d ready to finish: %s", p.name, after.pending.GetVersion(), describeSets(after.pending))
		}
		if e.done != nil {
			e.done(res)
		}
	}
}

// intentsOf lists the transactions prepared and unfinished on p, sorted.
func (w *world) intentsOf(p *part) []string {
	out := []string{}
	for _, t := range w.txns {
		if _, ok := p.sm.IntentOf(t.id); ok {
			out = append(out, t.id)
		}
	}
	slices.Sort(out)
	return out
}

// finishesIntent says whether cmd is a Finish of an intent p holds.
func finishesIntent(p *part, cmd *internalpb.Command) bool {
	f := cmd.GetTxnFinish()
	if f == nil {
		return false
	}
	_, ok := p.sm.IntentOf(string(f.GetTxnId()))
	return ok
}

func describe(cmd *internalpb.Command) string {
	switch op := cmd.GetOp().(type) {
	case *internalpb.Command_Put:
		return fmt.Sprintf("put %s=%s", op.Put.GetKey(), op.Put.GetValue())
	case *internalpb.Command_TxnPrepare:
		return "prepare " + string(op.TxnPrepare.GetTxnId())
	case *internalpb.Command_TxnFinish:
		f := op.TxnFinish
		return fmt.Sprintf("finish %s %s stamp %d", f.GetTxnId(), outcome(f.GetCommit(), f.GetSucceeded()), f.GetStamp())
	case *internalpb.Command_TxnDecide:
		return "decide " + string(op.TxnDecide.GetTxnId()) + " " + describeDecision(op.TxnDecide)
	case *internalpb.Command_TxnOnePhase:
		return "onephase " + string(op.TxnOnePhase.GetTxnId())
	case *internalpb.Command_CutStart:
		return fmt.Sprintf("cutstart %d", op.CutStart.GetVersion())
	case *internalpb.Command_CutFinish:
		return fmt.Sprintf("cutfinish %d pos #%d %s", op.CutFinish.GetVersion(), op.CutFinish.GetPos(), describeSets(op.CutFinish))
	}
	return fmt.Sprintf("%T", cmd.GetOp())
}

func outcome(commit, succeeded bool) string {
	switch {
	case !commit:
		return "abort"
	case succeeded:
		return "commit success"
	}
	return "commit failure"
}

func describeDecision(d *internalpb.TxnDecideOp) string {
	return fmt.Sprintf("%s stamp %d", outcome(d.GetCommit(), d.GetSucceeded()), d.GetStamp())
}

func describeSets(op *internalpb.CutFinishOp) string {
	txns := func(ts []*internalpb.CutTxn) string {
		var s []string
		for _, t := range ts {
			s = append(s, fmt.Sprintf("%s@%d", t.GetTxnId(), t.GetStamp()))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	var ab []string
	for _, id := range op.GetAborted() {
		ab = append(ab, string(id))
	}
	return fmt.Sprintf("before %s after %s aborted [%s]", txns(op.GetBefore()), txns(op.GetAfter()), strings.Join(ab, " "))
}

func describeResult(res any) string {
	switch r := res.(type) {
	case nil:
		return ""
	case partition.Result:
		if r.LockedBy != "" {
			return "refused: locked by " + r.LockedBy
		}
		return ""
	case partition.Vote:
		switch {
		case len(r.Conflicts) > 0:
			return fmt.Sprintf("refused by %v", r.Conflicts)
		case !r.Prepared:
			return "not prepared"
		case r.ComparesHold:
			return "prepared, compares hold"
		}
		return "prepared, compares fail"
	case *internalpb.TxnDecideOp:
		return "recorded " + describeDecision(r)
	case partition.OnePhaseResult:
		if len(r.Conflicts) > 0 {
			return fmt.Sprintf("refused by %v", r.Conflicts)
		}
		return "committed"
	case bool:
		if r {
			return "closed"
		}
		return "ignored"
	}
	return fmt.Sprintf("%T %v", res, res)
}

// --- steps -------------------------------------------------------------

// splitOpts splits the options named in allowed ("key=value" or plain
// flags) off args.
func splitOpts(args []string, allowed ...string) (kv map[string]string, flags map[string]bool, rest []string) {
	kv, flags = map[string]string{}, map[string]bool{}
	for _, a := range args {
		k, v, isKV := strings.Cut(a, "=")
		switch {
		case !slices.Contains(allowed, k):
			rest = append(rest, a)
		case isKV:
			kv[k] = v
		default:
			flags[k] = true
		}
	}
	return kv, flags, rest
}

func proposalMode(flags map[string]bool) (string, error) {
	switch {
	case flags["pending"] && flags["dropped"]:
		return "", errors.New("pending and dropped together")
	case flags["pending"]:
		return "pending", nil
	case flags["dropped"]:
		return "dropped", nil
	}
	return "", nil
}

// run runs one step and returns its output.
func (w *world) run(cmd string, input []string) (string, error) {
	w.out = nil
	if err := w.step(cmd, input); err != nil {
		return "", err
	}
	if len(w.out) == 0 {
		return "ok", nil
	}
	return strings.Join(w.out, "\n"), nil
}

func (w *world) step(cmd string, input []string) error {
	f := strings.Fields(cmd)
	kv, flags, args := splitOpts(f[1:], "coord", "parts", "record", "fail", "key", "pending", "dropped", "abort", "lost", "again")
	name := f[0]
	m, err := proposalMode(flags)
	if err != nil {
		return err
	}
	need := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%s wants %d arguments, got %d", name, n, len(args))
		}
		return nil
	}
	// Arguments by kind, each looked up on demand.
	partArg := func(i int) (*part, error) { return w.part(args[i]) }
	versionArg := func(i int) (uint64, error) { return strconv.ParseUint(args[i], 10, 64) }

	switch name {
	case "setup":
		return w.setup(input)
	case "learn":
		if err := need(2); err != nil {
			return err
		}
		n, err := w.node(args[0])
		if err != nil {
			return err
		}
		v, err := versionArg(1)
		if err != nil {
			return err
		}
		w.raise(n, v, "gossip")
		if len(w.out) == 0 {
			w.say("%s known stays %d", n.name, n.clock.Load())
		}
		return nil
	case "startcut":
		if err := need(2); err != nil {
			return err
		}
		p, err := partArg(0)
		if err != nil {
			return err
		}
		v, err := versionArg(1)
		if err != nil {
			return err
		}
		w.raise(p.leader, v, fmt.Sprintf("StartCut %d from the driver", v))
		if len(w.out) == 0 {
			w.say("%s known stays %d", p.leader.name, p.leader.clock.Load())
		}
		return nil
	case "txn":
		if err := need(1); err != nil {
			return err
		}
		return w.declare(args[0], kv)
	case "prepare", "vote", "finish", "recover":
		if err := need(2); err != nil {
			return err
		}
		t, err := w.txn(args[0])
		if err != nil {
			return err
		}
		p, err := partArg(1)
		if err != nil {
			return err
		}
		if !slices.Contains(t.parts, p) {
			return fmt.Errorf("%s is not a participant of %s", p.name, t.id)
		}
		switch name {
		case "prepare":
			w.prepare(t, p, m)
			return nil
		case "vote":
			return w.vote(t, p)
		case "finish":
			return w.finish(t, p, m)
		}
		w.recover(t, p)
		return nil
	case "decide":
		if err := need(1); err != nil {
			return err
		}
		t, err := w.txn(args[0])
		if err != nil {
			return err
		}
		return w.decide(t, flags["abort"], flags["lost"], m)
	case "onephase":
		if err := need(2); err != nil {
			return err
		}
		p, err := partArg(1)
		if err != nil {
			return err
		}
		return w.onePhase(args[0], p, kv["key"], m)
	case "put":
		if err := need(3); err != nil {
			return err
		}
		p, err := partArg(0)
		if err != nil {
			return err
		}
		w.propose(p, &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: []byte(args[1]), Value: []byte(args[2])}}}, m, nil)
		return nil
	case "cutstart", "cutfinish", "commit":
		if err := need(1); err != nil {
			return err
		}
		p, err := partArg(0)
		if err != nil {
			return err
		}
		switch name {
		case "cutstart":
			w.cutStart(p, m)
			return nil
		case "cutfinish":
			return w.cutFinish(p, flags["again"], m)
		}
		if len(p.tail) == 0 {
			w.say("%s has nothing pending", p.name)
		}
		w.commit(p)
		return nil
	case "leader":
		if err := need(2); err != nil {
			return err
		}
		p, err := partArg(0)
		if err != nil {
			return err
		}
		n, err := w.node(args[1])
		if err != nil {
			return err
		}
		w.changeLeader(p, n)
		return nil
	case "dump":
		w.dump()
		return nil
	case "state", "check":
		if err := need(1); err != nil {
			return err
		}
		v, err := versionArg(0)
		if err != nil {
			return err
		}
		w.state(v, name == "check")
		return nil
	}
	return fmt.Errorf("unknown command %q", name)
}

func (w *world) setup(input []string) error {
	w.nodes = map[string]*node{}
	for _, l := range input {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "node":
			for _, name := range f[1:] {
				w.nodes[name] = &node{name: name, clock: cut.NewClock()}
			}
		case len(f) == 4 && f[0] == "partition" && f[2] == "leader":
			n, err := w.node(f[3])
			if err != nil {
				return err
			}
			id := uint64(len(w.parts) + 1)
			w.parts = append(w.parts, &part{name: f[1], id: id, sm: partition.New(id), leader: n})
		default:
			return fmt.Errorf("setup: bad line %q", l)
		}
	}
	if len(w.nodes) == 0 || len(w.parts) == 0 {
		return errors.New("setup wants nodes and partitions")
	}
	return nil
}

func (w *world) declare(id string, kv map[string]string) error {
	if _, err := w.txn(id); err == nil {
		return fmt.Errorf("transaction %s declared twice", id)
	}
	t := &txnState{id: id, key: id, votes: map[*part]*vote{}}
	if k := kv["key"]; k != "" {
		t.key = k
	}
	var err error
	if t.coord, err = w.node(kv["coord"]); err != nil {
		return err
	}
	for _, name := range strings.Split(kv["parts"], ",") {
		p, err := w.part(name)
		if err != nil {
			return err
		}
		t.parts = append(t.parts, p)
	}
	t.record = t.parts[0]
	if r := kv["record"]; r != "" {
		if t.record, err = w.part(r); err != nil {
			return err
		}
	}
	if f := kv["fail"]; f != "" {
		if t.fail, err = w.part(f); err != nil {
			return err
		}
	}
	w.txns = append(w.txns, t)
	return nil
}

// prepare: the coordinator's Prepare reaches p's leader (marker first);
// the leader proposes the prepare entry; once it applies, the vote goes
// back with the leader's clock read then (rpc ParticipantServer.Prepare).
func (w *world) prepare(t *txnState, p *part, m string) {
	l := p.leader
	w.raise(l, t.coord.clock.Load(), "Prepare marker from "+t.coord.name)
	op := &internalpb.TxnPrepareOp{TxnId: []byte(t.id), RecordPartition: t.record.id, Share: t.share(p)}
	w.propose(p, &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: op}}, m, func(res any) {
		v, _ := res.(partition.Vote)
		t.votes[p] = &vote{v: v, marker: l.clock.Load()}
		w.say("%s's vote on %s leaves %s with marker %d", p.name, t.id, l.name, l.clock.Load())
	})
}

// vote: the coordinator merges p's vote marker before counting it.
func (w *world) vote(t *txnState, p *part) error {
	v := t.votes[p]
	if v == nil {
		return fmt.Errorf("%s has not voted on %s", p.name, t.id)
	}
	if v.merged {
		return fmt.Errorf("%s's vote on %s merged already", p.name, t.id)
	}
	v.merged = true
	w.raise(t.coord, v.marker, fmt.Sprintf("vote from %s", p.name))
	w.say("%s counts %s's vote on %s: %s", t.coord.name, p.name, t.id, describeResult(v.v))
	return nil
}

// decide: the coordinator stamps its decision the first time (its clock,
// with every vote merged: rule 3) and records it on the record partition
// (first decision wins); a retry sends the same stamp.
func (w *world) decide(t *txnState, abort, lost bool, m string) error {
	c := t.coord
	if !t.stamped {
		commit, succeeded := !abort, true
		if !abort {
			for _, p := range t.parts {
				v := t.votes[p]
				if v == nil || !v.merged {
					return fmt.Errorf("%s has not counted %s's vote on %s", c.name, p.name, t.id)
				}
				switch {
				case !v.v.Prepared:
					commit = false
				case !v.v.ComparesHold:
					succeeded = false
				}
			}
		}
		t.stamped, t.commit, t.succeeded, t.stamp = true, commit, succeeded && commit, c.clock.Load()
		w.say("%s decides %s: %s, stamp %d", c.name, t.id, outcome(t.commit, t.succeeded), t.stamp)
	} else {
		w.say("%s retries %s's decision: %s, stamp %d (kept; %s knows %d)", c.name, t.id, outcome(t.commit, t.succeeded), t.stamp, c.name, c.clock.Load())
	}
	parts := make([]uint64, len(t.parts))
	for i, p := range t.parts {
		parts[i] = p.id
	}
	op := &internalpb.TxnDecideOp{TxnId: []byte(t.id), Commit: t.commit, Succeeded: t.succeeded, Stamp: t.stamp, Participants: parts}
	r := t.record
	rl := r.leader
	w.raise(rl, c.clock.Load(), "Decide marker from "+c.name)
	w.propose(r, &internalpb.Command{Op: &internalpb.Command_TxnDecide{TxnDecide: op}}, m, func(res any) {
		if lost {
			w.say("the reply to %s is lost", c.name)
			return
		}
		w.raise(c, rl.clock.Load(), "Decide reply from "+r.name)
		t.recorded, _ = res.(*internalpb.TxnDecideOp)
		w.say("%s learns %s's decision: %s", c.name, t.id, describeDecision(t.recorded))
	})
	return nil
}

// finish: the coordinator sends the recorded decision; p's leader merges
// the marker and proposes the Finish with version >= its stamp.
func (w *world) finish(t *txnState, p *part, m string) error {
	d := t.recorded
	if d == nil {
		return fmt.Errorf("%s does not know %s's recorded decision", t.coord.name, t.id)
	}
	l := p.leader
	w.raise(l, t.coord.clock.Load(), "Finish marker from "+t.coord.name)
	w.propose(p, finishCmd(d), m, func(any) {
		w.raise(t.coord, l.clock.Load(), "Finish reply from "+p.name)
	})
	return nil
}

func finishCmd(d *internalpb.TxnDecideOp) *internalpb.Command {
	return &internalpb.Command{CutVersion: d.GetStamp(), Op: &internalpb.Command_TxnFinish{TxnFinish: &internalpb.TxnFinishOp{
		TxnId: d.GetTxnId(), Commit: d.GetCommit(), Succeeded: d.GetSucceeded(), Stamp: d.GetStamp(),
	}}}
}

// recover: p's leader resolves its intent of t as rpc.resolve does: it
// asks the record partition, recording ABORT unless a decision exists
// (stamped with its own clock), merges the reply and finishes with the
// recorded decision.
func (w *world) recover(t *txnState, p *part) {
	l := p.leader
	if _, ok := p.sm.IntentOf(t.id); !ok {
		w.say("%s holds no intent of %s: nothing in doubt", p.name, t.id)
		return
	}
	r := t.record
	rl := r.leader
	w.say("%s (leading %s) asks %s for %s's decision", l.name, p.name, r.name, t.id)
	w.raise(rl, l.clock.Load(), "Decide marker from "+l.name)
	var rec *internalpb.TxnDecideOp
	op := &internalpb.TxnDecideOp{TxnId: []byte(t.id), Stamp: l.clock.Load()}
	w.propose(r, &internalpb.Command{Op: &internalpb.Command_TxnDecide{TxnDecide: op}}, "", func(res any) {
		rec, _ = res.(*internalpb.TxnDecideOp)
		w.raise(l, rl.clock.Load(), "Decide reply from "+r.name)
	})
	if rec == nil {
		w.say("no decision came back")
		return
	}
	w.propose(p, finishCmd(rec), "", nil)
}

func (w *world) onePhase(id string, p *part, key, m string) error {
	if _, err := w.txn(id); err == nil {
		return fmt.Errorf("transaction %s declared twice", id)
	}
	t := &txnState{id: id, key: id, parts: []*part{p}, onePhase: p}
	if key != "" {
		t.key = key
	}
	w.txns = append(w.txns, t)
	cmd := &internalpb.Command{Op: &internalpb.Command_TxnOnePhase{TxnOnePhase: &internalpb.TxnOnePhaseOp{TxnId: []byte(id), Share: t.share(p)}}}
	w.propose(p, cmd, m, func(any) {
		t.opEntry = p.log[len(p.log)-1]
	})
	return nil
}

// cutStart is the agent's first duty (rpc RunCutAgent): CutStart(known)
// where the log has not reached the leader's known version.
func (w *world) cutStart(p *part, m string) {
	l := p.leader
	known := l.clock.Load()
	if p.sm.CutVersion() >= known {
		w.say("%s: log at cut %d, %s knows %d: nothing to start", p.name, p.sm.CutVersion(), l.name, known)
		return
	}
	w.propose(p, &internalpb.Command{Op: &internalpb.Command_CutStart{CutStart: &internalpb.CutStartOp{Version: known}}}, m, nil)
}

// cutFinish is the agent's second duty: the pending CutFinish.
func (w *world) cutFinish(p *part, again bool, m string) error {
	op, ok := p.sm.CutPending()
	if again {
		if p.lastFinish == nil {
			return fmt.Errorf("%s: no CutFinish proposed yet", p.name)
		}
		op, ok = proto.Clone(p.lastFinish).(*internalpb.CutFinishOp), true
	}
	if !ok {
		v, active := p.sm.CutActive()
		if v == 0 {
			w.say("%s: no cut running: nothing to finish", p.name)
		} else {
			w.say("%s: cut %d waits for %v", p.name, v, active)
		}
		return nil
	}
	p.lastFinish = proto.Clone(op).(*internalpb.CutFinishOp)
	w.propose(p, &internalpb.Command{Op: &internalpb.Command_CutFinish{CutFinish: op}}, m, nil)
	return nil
}

func (w *world) changeLeader(p *part, n *node) {
	for _, e := range p.tail {
		w.say("%s #%d v%d %s overwritten (never committed)", p.name, e.index, e.cmd.GetCutVersion(), describe(e.cmd))
	}
	p.tail = nil
	w.say("%s leader %s -> %s (%s knows %d; the log's highest version is %d)", p.name, p.leader.name, n.name, n.name, n.clock.Load(), p.logVersion())
	p.leader = n
}

func (w *world) dump() {
	for _, name := range slices.Sorted(maps.Keys(w.nodes)) {
		w.say("%s known %d", name, w.nodes[name].clock.Load())
	}
	for _, p := range w.parts {
		w.say("%s leader %s, %s", p.name, p.leader.name, progressLine(p))
		for _, e := range p.log {
			w.say("  #%d v%d %s", e.index, e.cmd.GetCutVersion(), describe(e.cmd))
		}
		for _, e := range p.tail {
			w.say("  #%d v%d %s (not committed)", e.index, e.cmd.GetCutVersion(), describe(e.cmd))
		}
	}
}

func progressLine(p *part) string {
	v := p.sm.CutVersion()
	if v == 0 {
		return "no cut"
	}
	if rv, active := p.sm.CutActive(); rv != 0 {
		return fmt.Sprintf("cut %d running: pos #%d, active %v", rv, p.truePos(rv), active)
	}
	f, _ := p.sm.CutResult(v)
	return fmt.Sprintf("cut %d finished at #%d: pos #%d, %s", v, f.Index, f.Op.GetPos(), describeSets(f.Op))
}

// stateAt rebuilds p's state at a finished cut (rule 5): a new replica
// applies the entries before pos, then resolves the before set.
func stateAt(p *part, f cut.Finished) (map[string]string, error) {
	c := partition.New(p.id)
	for _, e := range p.log {
		if e.index >= f.Op.GetPos() {
			break
		}
		if _, err := c.ApplyCommand(e.index, proto.Clone(e.cmd).(*internalpb.Command)); err != nil {
			return nil, err
		}
	}
	if err := c.ResolveAtCut(f.Op.GetBefore()); err != nil {
		return nil, err
	}
	out := map[string]string{}
	c.Each(func(kv *partition.KV) bool {
		out[string(kv.Key)] = string(kv.Value)
		return true
	})
	return out, nil
}

// modelAt is the state rule 5 defines for p at cut v, computed from what
// the world knows rather than from the cut's progress: the plain writes
// and one-phase transactions before pos_p(v), and the two-phase
// transactions whose recorded decision is a commit stamped below v.
// Scripts give each transaction its own key, so the order of writes to
// one key does not matter, except among plain writes (log order).
func (w *world) modelAt(p *part, v, pos uint64) map[string]string {
	out := map[string]string{}
	for _, e := range p.log {
		if e.index >= pos {
			break
		}
		switch op := e.cmd.GetOp().(type) {
		case *internalpb.Command_Put:
			if r, _ := e.res.(partition.Result); r.LockedBy == "" {
				out[string(op.Put.GetKey())] = string(op.Put.GetValue())
			}
		case *internalpb.Command_TxnOnePhase:
			if r, _ := e.res.(partition.OnePhaseResult); len(r.Conflicts) == 0 {
				for _, o := range op.TxnOnePhase.GetShare().GetSuccess() {
					out[string(o.GetPut().GetKey())] = string(o.GetPut().GetValue())
				}
			}
		}
	}
	for _, t := range w.txns {
		if t.onePhase != nil || !slices.Contains(t.parts, p) {
			continue
		}
		if d, ok := t.record.sm.Record(t.id); ok && d.GetCommit() && d.GetStamp() < v {
			out[t.key] = t.value(d.GetSucceeded())
		}
	}
	return out
}

func fmtState(s map[string]string) string {
	var kvs []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		kvs = append(kvs, k+"="+s[k])
	}
	return "{" + strings.Join(kvs, " ") + "}"
}

// state prints where cut v fell in every partition and each partition's
// state at v; with check it also verifies the rules (see the commands).
func (w *world) state(v uint64, check bool) {
	states := map[*part]map[string]string{}
	violation := func(format string, args ...any) { w.say("VIOLATION: "+format, args...) }
	for _, p := range w.parts {
		f, ok := p.sm.CutResult(v)
		if !ok {
			cv := p.sm.CutVersion()
			rv, active := p.sm.CutActive()
			switch {
			case rv == v:
				w.say("%s cut %d running: pos #%d, active %v", p.name, v, p.truePos(v), active)
			case cv > v:
				w.say("%s cut %d never finished here (overtaken by cut %d)", p.name, v, cv)
			default:
				w.say("%s cut %d not started (the log is at cut %d)", p.name, v, cv)
			}
			if check {
				violation("cut %d did not finish on %s", v, p.name)
			}
			continue
		}
		w.say("%s cut %d: pos #%d, finished at #%d, %s", p.name, v, f.Op.GetPos(), f.Index, describeSets(f.Op))
		s, err := stateAt(p, f)
		if err != nil {
			violation("%s: state at cut %d: %v", p.name, v, err)
			continue
		}
		states[p] = s
		w.say("  state %s", fmtState(s))
		if !check {
			continue
		}
		if tp := p.truePos(v); tp != f.Op.GetPos() {
			violation("%s: cut %d recorded at #%d, but the first entry of version >= %d is #%d", p.name, v, f.Op.GetPos(), v, tp)
		}
		var last uint64
		for _, e := range p.log {
			if e.cmd.GetCutVersion() < last {
				violation("%s: #%d has version %d after version %d (rule 2)", p.name, e.index, e.cmd.GetCutVersion(), last)
			}
			last = max(last, e.cmd.GetCutVersion())
		}
		if want := w.modelAt(p, v, f.Op.GetPos()); !maps.Equal(s, want) {
			violation("%s: state at cut %d is %s, rule 5 says %s", p.name, v, fmtState(s), fmtState(want))
		}
	}
	if !check {
		return
	}
	for _, t := range w.txns {
		var in []string
		for _, p := range t.parts {
			if s, ok := states[p]; ok && (s[t.key] == t.value(true) || s[t.key] == t.value(false)) {
				in = append(in, p.name)
			}
		}
		where := "in none"
		if len(in) > 0 {
			where = "in " + strings.Join(in, " ")
		}
		var what string
		switch {
		case t.onePhase != nil && t.opEntry == nil:
			what = "onephase, not applied"
		case t.onePhase != nil:
			what = fmt.Sprintf("onephase at #%d (%s)", t.opEntry.index, describeResult(t.opEntry.res))
		default:
			if d, ok := t.record.sm.Record(t.id); ok {
				what = describeDecision(d)
			} else {
				what = "undecided"
			}
		}
		w.say("%s %s: %s", t.id, what, where)
		if len(in) != 0 && len(in) != len(t.parts) {
			violation("%s is in the cut's state of %v but not of all of %d partitions", t.id, in, len(t.parts))
		}
	}
	if !strings.Contains(strings.Join(w.out, "\n"), "VIOLATION") {
		w.say("ok")
	}
}
