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
	"github.com/cutkv/cutkv/txn"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt from the actual output")

// The scenario harness is a small, deterministic world without a network:
// nodes (each a cut.Clock), partitions (each a real partition.Partition,
// its log and its leader) and cross-partition transactions, each
// coordinated by the real protocol core (a txn.Coordinator, parallel
// commits) and recovered by the real recovery decision (txn.Recover). The
// harness plays the node: it carries each message the core asks for as the
// entry the node would propose on a partition's leader (rpc/coordinate.go,
// rpc/txn.go, rpc/finishbatch.go), feeds the answer back to the core, and
// lets a script choose the order, delay some proposals, drop or overwrite
// others and lose answers — so that the cut's interleavings (DESIGN.md,
// "Consistent cut") can be written down and checked against an
// independent reading of the logs. Nothing in the harness decides a
// transaction: a script can only carry what a core asked for.
//
// A script is a text file of steps in the format of the partition's
// scripts (partition/txn_script_test.go): a command line, optional input
// lines, "----", and the expected output up to a blank line; lines
// starting with # and blank lines between steps are kept as they are. Run
// with -rewrite to regenerate the expected output (then read the diff).
// A script whose comments hold a "# BUG:" line is skipped, naming the bug:
// its expectation is what the rules demand, not what the code does.
//
// What the world models (and how the real node does it):
//
//   - A proposal on partition P is made by P's leader and stamped with
//     max(the command's own version, the leader's clock, the highest
//     version already in P's log), and the leader's clock is raised to the
//     stamp (raftstore Store.Propose, rule 2). Only leaders' and
//     coordinators' clocks are modelled: a node that becomes leader keeps
//     whatever clock it had, and the log's versions make up for it.
//   - Requests (Prepare, Status, Record, Decide, Finish, StartCut) carry
//     the sender's clock as marker; the receiver raises its clock before
//     it acts (a Decide's and a Finish's stamp are admitted like markers:
//     rpc checkDecide, checkFinish). Replies carry the replier's clock
//     read after its entry applied; the receiver merges the marker before
//     acting on the reply (rule 1), and a vote's (or a STAGING record's)
//     prepare version too before the core counts it (coordination.voted).
//   - The core's messages become entries: SendPrepare a TxnPrepare (the
//     ops of txn.PrepareOps: the record partition's lists the
//     participants and writes a STAGING record), AskStatus a TxnStatus,
//     ReadRecord a TxnStatus on the record partition followed by reading
//     its record (none reads ABORTED, unrecorded), ProposeDecision a
//     TxnDecide with finish (the decision, and the record partition's own
//     Finish, in one entry of version >= the stamp), SendFinish a Finish
//     through the leader's batcher, Forget a TxnForget. A message is a
//     call: it stays open — carried again, a retry, as the node's
//     callLeader retries — until its answer reaches the core or the call
//     times out (the core hears VoteLost, StatusLost, RecordLost or
//     FinishLost).
//   - A partition leader's Finishes share entries (rpc finishBatcher):
//     one arriving while the leader's last Finish entry has not applied
//     waits in a queue, and "flush P" proposes the queue as one entry (a
//     TxnFinishes batch when it holds several) of version >= every stamp
//     in it.
//   - Recovery ("recover T P") is rpc.resolve run by P's leader in one
//     go: the record read through r's log, each listed participant's
//     status through its log (which prevents a prepare still on its way),
//     txn.Recover's decision proposed on r (first decision wins, finishing
//     r's intent) unless already decided, and a Finish to every
//     participant with what r recorded.
//   - A proposal is committed and applied at once, or, with "pending",
//     only appended to the leader's log until "commit P"; with "dropped"
//     it never reaches the log. A leader change overwrites what is
//     pending (and fails the old leader's Finish queue: its senders
//     retry).
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
//	                              declares a cross-partition transaction and
//	                              starts its core on N: each share puts K
//	                              (default T) = T on success, T/failure on
//	                              failure; fail=P makes P's compares fail; the
//	                              record lives on record= (default: the first
//	                              part)
//
//	The core's messages (each needs an open call the core asked for; the
//	modes pending and dropped are the proposal's, as for any entry; "lost":
//	the entry applies but the answer never arrives, the call stays open):
//
//	prepare T P [pending|dropped] [lost] [late]
//	                              the coordinator's Prepare reaches P's
//	                              leader, which proposes it; once applied, the
//	                              vote is on its way back ("late": a stray
//	                              copy of the prepare after its call ended;
//	                              nobody waits for its answer)
//	vote T P                      the vote reaches the coordinator, which
//	                              merges it and feeds it to the core
//	status T P [pending|dropped] [lost]
//	                              the core's status question (after a lost
//	                              vote) settles T's prepare in P's log
//	read-record T [pending|dropped] [lost]
//	                              the core reads T's record (after a vote that
//	                              says T finished on P before)
//	decide T [pending|dropped] [lost]
//	                              the core's decision is proposed on the
//	                              record partition, finishing its intent
//	finish T P [pending|dropped] [lost]
//	                              the core's Finish reaches P's leader, which
//	                              proposes it, or queues it behind its Finish
//	                              entry not applied yet
//	forget T [pending|dropped]    the core's Forget: T's record may go
//	timeout T KIND [P]            the open call of that kind (prepare, status,
//	                              read-record, decide, finish) ends unanswered
//	recover T P                   P's leader resolves its in-doubt intent of T
//	                              (rpc.resolve with txn.Recover)
//
//	flush P [pending|dropped]     P's leader proposes the Finishes queued for
//	                              it as one entry
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
//	dump                          clocks, logs, records and cut progress
//	state V                       where cut V fell in each partition and each
//	                              partition's state at V (rebuilt from the log)
//	check V                       state V, then the rules (below). A broken
//	                              rule prints a VIOLATION line, which fails
//	                              the test even with -rewrite (so do the
//	                              checks made as a client is answered).
//
// The checks read the logs, not the cores. At "check V": cut V finished
// everywhere at the first entry of version >= V, and versions never
// decrease along a log (rule 2); each partition's state at V, rebuilt
// from its log, is what rule 5 defines from the logs and the decisions
// recorded on the record partitions (modelAt); every transaction is in
// all its partitions' states or in none; every entry that finishes a
// transaction has a version >= its stamp (rule 4); a transaction recorded
// committed had an effective prepare (read from the log, see effective)
// that created an intent on every participant, its stamp is the highest
// of their versions and its branch what their compares say (rule 3),
// while one recorded aborted had a participant where it did not; and each
// client's answer agrees: told committed, the record holds that decision
// and the transaction is in the states of every cut above its stamp and
// in none at or below it; told aborted, it is in no state. When a client
// is answered: committed only once every effective prepare had created an
// intent, with their branch and stamp, and a reply marker at least the
// stamp (rule 8); aborted only when one had not. Always: the first
// decision recorded never changes, and a core that finds a record other
// than its own decision (Ready.Conflict) is a violation.

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

// worldOptions change the world for a whole script.
type worldOptions struct {
	// answerEarly starts every core with WithAnswerBeforeDurable: the
	// mutation the checks must catch.
	answerEarly bool
}

// played is one step of a script with what it printed.
type played struct {
	step *step
	got  string
}

// playScript runs the script at path and returns its items and each
// step's output, in order. An error is a step that could not run (a bad
// command, or one carrying a message no core asked for).
func playScript(path string, opts worldOptions) ([]item, []played, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	items, err := parseScript(path, string(data))
	if err != nil {
		return nil, nil, err
	}
	var (
		w   *world
		out []played
	)
	for _, it := range items {
		st := it.step
		if st == nil {
			continue
		}
		if w == nil && !strings.HasPrefix(st.cmd, "setup") {
			return nil, nil, fmt.Errorf("%s:%d: the first step must be setup", path, st.line)
		}
		if strings.HasPrefix(st.cmd, "setup") {
			w = &world{opts: opts}
		}
		got, err := w.run(st.cmd, st.input)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %s: %v", path, st.line, st.cmd, err)
		}
		out = append(out, played{step: st, got: got})
	}
	return items, out, nil
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "# BUG:") {
			t.Skip(strings.TrimSpace(strings.TrimPrefix(l, "#")))
		}
	}
	items, steps, err := playScript(path, worldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		st := s.step
		if strings.Contains(s.got, "VIOLATION") {
			t.Errorf("%s:%d: %s: a rule is broken:\n%s", path, st.line, st.cmd, s.got)
		}
		lines := strings.Split(s.got, "\n")
		if *rewrite {
			st.want = lines
			continue
		}
		if !slices.Equal(lines, st.want) {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, st.line, st.cmd, s.got, strings.Join(st.want, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(formatScript(items)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestScenarioMutationAnswerBeforeDurable is the harness's mutation test:
// with every core answering committed as soon as the record partition's
// vote is in (Coordinator.WithAnswerBeforeDurable), the scenarios in
// which another participant refuses tell a client "committed" for a
// transaction that aborts, and the checks must say so — from the logs at
// the answer, from the record, and from the cut's states, which lack it.
// Should the checks stop catching it, this test fails.
func TestScenarioMutationAnswerBeforeDurable(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   []string
	}{
		{"refused.txt", []string{
			"T1's client was told commit success stamp 0, but the state at cut 1 lacks it on P1 P2", // the cut's states
			"T1's client was told commit success stamp 0, but T1 is recorded abort stamp 0",         // the record
			"n3 answered T1 committed before P2's effective prepare created an intent",              // the logs at the answer
		}},
		{"aborts.txt", []string{
			"T0's client was told commit success stamp 0, but the state at cut 1 lacks it on P1 P2",
			"T2's client was told commit success stamp 0, but the state at cut 2 lacks it on P1 P2",
		}},
	} {
		t.Run(tc.script, func(t *testing.T) {
			path := filepath.Join("testdata", tc.script)
			_, clean, err := playScript(path, worldOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range clean {
				if strings.Contains(s.got, "VIOLATION") {
					t.Fatalf("%s:%d: %s: a violation without the mutation:\n%s", path, s.step.line, s.step.cmd, s.got)
				}
			}
			_, mutated, err := playScript(path, worldOptions{answerEarly: true})
			if err != nil {
				t.Fatalf("the script does not run under the mutation: %v", err)
			}
			var violations []string
			for _, s := range mutated {
				for _, l := range strings.Split(s.got, "\n") {
					if strings.Contains(l, "VIOLATION") {
						violations = append(violations, fmt.Sprintf("%d: %s: %s", s.step.line, s.step.cmd, l))
					}
				}
			}
			for _, want := range tc.want {
				found := false
				for _, v := range violations {
					found = found || strings.Contains(v, want)
				}
				if !found {
					t.Errorf("under the mutation, no violation says %q; the violations:\n%s", want, strings.Join(violations, "\n"))
				}
			}
			t.Logf("caught as expected:\n%s", strings.Join(violations, "\n"))
		})
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
	// The leader's Finish batcher (rpc finishBatcher): the Finish entry
	// being proposed (appended, not applied) and the Finishes queued
	// behind it.
	finishing *entry
	queue     []*waiter
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

type world struct {
	opts  worldOptions
	nodes map[string]*node
	parts []*part
	txns  []*txnState
	out   []string
}

func (w *world) say(format string, args ...any) { w.out = append(w.out, fmt.Sprintf(format, args...)) }

func (w *world) violation(format string, args ...any) { w.say("VIOLATION: "+format, args...) }

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

func (w *world) partByID(id uint64) *part {
	for _, p := range w.parts {
		if p.id == id {
			return p
		}
	}
	panic(fmt.Sprintf("no partition %d", id))
}

func (w *world) partNames(ids []uint64) string {
	var s []string
	for _, id := range ids {
		s = append(s, w.partByID(id).name)
	}
	return strings.Join(s, " ")
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
// unless mode is "pending" (appended only) or "dropped" (refused). It
// returns the entry, nil when dropped.
func (w *world) propose(p *part, cmd *internalpb.Command, mode string, done func(res any)) *entry {
	l := p.leader
	cmd.CutVersion = max(cmd.GetCutVersion(), l.clock.Load(), p.logVersion())
	if mode == "dropped" {
		w.say("%s v%d by %s: %s dropped (never in the log)", p.name, cmd.GetCutVersion(), l.name, w.describe(cmd))
		return nil
	}
	w.raise(l, cmd.GetCutVersion(), "own proposal, over the log's versions")
	e := &entry{index: p.lastIndex() + 1, cmd: cmd, by: l, done: done}
	p.tail = append(p.tail, e)
	if mode == "pending" {
		w.say("%s #%d v%d by %s: %s (appended, not committed)", p.name, e.index, cmd.GetCutVersion(), l.name, w.describe(cmd))
		return e
	}
	w.commit(p)
	return e
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
		records := w.recordsOn(p)
		res, err := p.sm.ApplyCommand(e.index, e.cmd)
		if err != nil {
			w.say("ERROR applying %s #%d: %v", p.name, e.index, err)
			continue
		}
		e.res = res
		p.log = append(p.log, e)
		line := fmt.Sprintf("%s #%d v%d by %s: %s", p.name, e.index, e.cmd.GetCutVersion(), e.by.name, w.describe(e.cmd))
		if r := w.describeApplied(p, e, intents, records); r != "" {
			line += " -> " + r
		}
		w.say("%s", line)
		w.noteDecisions(p)
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

// recordsOn copies the records p holds of the world's transactions.
func (w *world) recordsOn(p *part) map[string]*internalpb.TxnDecideOp {
	out := map[string]*internalpb.TxnDecideOp{}
	for _, t := range w.txns {
		if rec, ok := p.sm.Record(t.id); ok {
			out[t.id] = proto.Clone(rec).(*internalpb.TxnDecideOp)
		}
	}
	return out
}

// noteDecisions keeps, for each transaction recorded on p, the first
// decision its record held (a STAGING record is none): the checks read
// it even after a Forget dropped the record, and it must never change
// (the first decision recorded wins).
func (w *world) noteDecisions(p *part) {
	for _, t := range w.txns {
		if t.record != p {
			continue
		}
		rec, ok := p.sm.Record(t.id)
		if !ok || rec.GetStaging() {
			continue
		}
		switch {
		case t.decided == nil:
			t.decided = proto.Clone(rec).(*internalpb.TxnDecideOp)
		case !sameDecision(t.decided, rec):
			w.violation("%s's record on %s changed from %s to %s (the first decision must win)", t.id, p.name, describeDecision(t.decided), describeDecision(rec))
		}
	}
}

func sameDecision(a, b *internalpb.TxnDecideOp) bool {
	return a.GetCommit() == b.GetCommit() && a.GetSucceeded() == b.GetSucceeded() && a.GetStamp() == b.GetStamp()
}

// describeApplied says what applying e did, from its result and the
// partition's intents and records before and after it.
func (w *world) describeApplied(p *part, e *entry, intents []string, records map[string]*internalpb.TxnDecideOp) string {
	had := func(id string) bool { return slices.Contains(intents, id) }
	has := func(id string) bool { _, ok := p.sm.IntentOf(id); return ok }
	// recordNote says how a finish changed a STAGING record.
	recordNote := func(id string) string {
		old, now := records[id], (*internalpb.TxnDecideOp)(nil)
		if r, ok := p.sm.Record(id); ok {
			now = r
		}
		if old.GetStaging() && now != nil && !now.GetStaging() {
			return fmt.Sprintf("%s's record: STAGING -> %s", id, describeDecision(now))
		}
		return ""
	}
	switch op := e.cmd.GetOp().(type) {
	case *internalpb.Command_TxnPrepare:
		id := string(op.TxnPrepare.GetTxnId())
		v, _ := e.res.(partition.Vote)
		s := describeVote(v)
		if v.Prepared && had(id) {
			s = fmt.Sprintf("a copy: the effective prepare's vote, %s, version %d", s, v.Version)
		}
		if rec, ok := p.sm.Record(id); ok && rec.GetStaging() && records[id] == nil {
			s += fmt.Sprintf("; record STAGING [%s]", w.partNames(rec.GetParticipants()))
		}
		return s
	case *internalpb.Command_TxnStatus:
		st, _ := e.res.(partition.Status)
		return describeStatus(st)
	case *internalpb.Command_TxnDecide:
		id := string(op.TxnDecide.GetTxnId())
		rec, _ := e.res.(*internalpb.TxnDecideOp)
		s := "recorded " + describeDecision(rec)
		if old := records[id]; old != nil && !old.GetStaging() {
			s = "kept " + describeDecision(rec)
		}
		if op.TxnDecide.GetFinish() {
			if had(id) && !has(id) {
				s += ", finishes " + id + " here"
			} else {
				s += ", no intent here to finish"
			}
		}
		return s
	case *internalpb.Command_TxnFinish:
		id := string(op.TxnFinish.GetTxnId())
		var notes []string
		if !had(id) {
			notes = append(notes, "no intent here, nothing to do")
		}
		if n := recordNote(id); n != "" {
			notes = append(notes, n)
		}
		return strings.Join(notes, "; ")
	case *internalpb.Command_TxnFinishes:
		var notes []string
		for _, f := range op.TxnFinishes.GetFinishes() {
			id := string(f.GetTxnId())
			if !had(id) {
				notes = append(notes, id+": no intent here, nothing to do")
			}
			if n := recordNote(id); n != "" {
				notes = append(notes, n)
			}
		}
		return strings.Join(notes, "; ")
	case *internalpb.Command_TxnForget:
		var notes []string
		for _, b := range op.TxnForget.GetTxnIds() {
			id := string(b)
			_, now := p.sm.Record(id)
			switch {
			case records[id] == nil:
				notes = append(notes, id+": no record")
			case now:
				notes = append(notes, id+"'s STAGING record kept")
			default:
				notes = append(notes, id+"'s record dropped")
			}
		}
		return strings.Join(notes, "; ")
	}
	return describeResult(e.res)
}

func (w *world) describe(cmd *internalpb.Command) string {
	switch op := cmd.GetOp().(type) {
	case *internalpb.Command_Put:
		return fmt.Sprintf("put %s=%s", op.Put.GetKey(), op.Put.GetValue())
	case *internalpb.Command_TxnPrepare:
		return "prepare " + string(op.TxnPrepare.GetTxnId())
	case *internalpb.Command_TxnStatus:
		return "status " + string(op.TxnStatus.GetTxnId())
	case *internalpb.Command_TxnFinish:
		return "finish " + describeFinish(op.TxnFinish)
	case *internalpb.Command_TxnFinishes:
		var s []string
		for _, f := range op.TxnFinishes.GetFinishes() {
			s = append(s, describeFinish(f))
		}
		return "finishes [" + strings.Join(s, ", ") + "]"
	case *internalpb.Command_TxnDecide:
		s := "decide " + string(op.TxnDecide.GetTxnId()) + " " + describeDecision(op.TxnDecide)
		if op.TxnDecide.GetFinish() {
			s += " +finish"
		}
		return s
	case *internalpb.Command_TxnForget:
		var ids []string
		for _, id := range op.TxnForget.GetTxnIds() {
			ids = append(ids, string(id))
		}
		return "forget " + strings.Join(ids, " ")
	case *internalpb.Command_TxnOnePhase:
		return "onephase " + string(op.TxnOnePhase.GetTxnId())
	case *internalpb.Command_CutStart:
		return fmt.Sprintf("cutstart %d", op.CutStart.GetVersion())
	case *internalpb.Command_CutFinish:
		return fmt.Sprintf("cutfinish %d pos #%d %s", op.CutFinish.GetVersion(), op.CutFinish.GetPos(), describeSets(op.CutFinish))
	}
	return fmt.Sprintf("%T", cmd.GetOp())
}

func describeFinish(f *internalpb.TxnFinishOp) string {
	return fmt.Sprintf("%s %s stamp %d", f.GetTxnId(), outcome(f.GetCommit(), f.GetSucceeded()), f.GetStamp())
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

func describeVote(v partition.Vote) string {
	switch {
	case len(v.Conflicts) > 0:
		return fmt.Sprintf("refused by %v", v.Conflicts)
	case v.Finished:
		return "refused: finished here before"
	case !v.Prepared:
		return "refused"
	case v.ComparesHold:
		return "prepared, compares hold"
	}
	return "prepared, compares fail"
}

func describeStatus(s partition.Status) string {
	switch s.State {
	case internalpb.TxnState_TXN_STATE_PREPARED:
		c := "compares hold"
		if !s.ComparesHold {
			c = "compares fail"
		}
		return fmt.Sprintf("prepared, %s, version %d", c, s.Version)
	case internalpb.TxnState_TXN_STATE_FINISHED:
		return "finished here before"
	}
	return "no prepare applied: refused, a tombstone stays (prevented)"
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
	kv, flags, args := splitOpts(f[1:], "coord", "parts", "record", "fail", "key", "pending", "dropped", "lost", "late", "again")
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
	// txnPart is a transaction and one of its participants.
	txnPart := func() (*txnState, *part, error) {
		if err := need(2); err != nil {
			return nil, nil, err
		}
		t, err := w.txn(args[0])
		if err != nil {
			return nil, nil, err
		}
		p, err := partArg(1)
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains(t.parts, p) {
			return nil, nil, fmt.Errorf("%s is not a participant of %s", p.name, t.id)
		}
		return t, p, nil
	}
	txnOnly := func() (*txnState, error) {
		if err := need(1); err != nil {
			return nil, err
		}
		t, err := w.txn(args[0])
		if err == nil && t.c == nil {
			err = fmt.Errorf("%s is a one-partition transaction", t.id)
		}
		return t, err
	}

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
	case "prepare", "vote", "status", "finish", "recover":
		t, p, err := txnPart()
		if err != nil {
			return err
		}
		if t.c == nil {
			return fmt.Errorf("%s is a one-partition transaction", t.id)
		}
		switch name {
		case "prepare":
			return w.carryPrepare(t, p, m, flags["lost"], flags["late"])
		case "vote":
			return w.deliverVote(t, p)
		case "status":
			return w.carryStatus(t, p, m, flags["lost"])
		case "finish":
			return w.carryFinish(t, p, m, flags["lost"])
		}
		w.recover(t, p)
		return nil
	case "read-record", "decide", "forget":
		t, err := txnOnly()
		if err != nil {
			return err
		}
		switch name {
		case "read-record":
			return w.carryReadRecord(t, m, flags["lost"])
		case "decide":
			return w.carryDecide(t, m, flags["lost"])
		}
		return w.carryForget(t, m)
	case "timeout":
		if len(args) != 2 && len(args) != 3 {
			return fmt.Errorf("timeout wants T KIND [P], got %v", args)
		}
		t, err := w.txn(args[0])
		if err != nil {
			return err
		}
		if t.c == nil {
			return fmt.Errorf("%s is a one-partition transaction", t.id)
		}
		p := t.record
		if len(args) == 3 {
			if p, err = partArg(2); err != nil {
				return err
			}
		}
		return w.timeout(t, args[1], p)
	case "flush":
		if err := need(1); err != nil {
			return err
		}
		p, err := partArg(0)
		if err != nil {
			return err
		}
		return w.flush(p, m)
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

// cutStart is the agent's first duty (node: the cut agent): CutStart(known)
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
		w.say("%s #%d v%d %s overwritten (never committed)", p.name, e.index, e.cmd.GetCutVersion(), w.describe(e.cmd))
	}
	p.tail = nil
	if len(p.queue) > 0 {
		var ids []string
		for _, f := range p.queue {
			ids = append(ids, string(f.op.GetTxnId()))
		}
		w.say("%s's Finishes queued on %s (%s) fail with its leadership: their senders retry", p.name, p.leader.name, strings.Join(ids, " "))
	}
	p.finishing, p.queue = nil, nil
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
			w.say("  #%d v%d %s", e.index, e.cmd.GetCutVersion(), w.describe(e.cmd))
		}
		for _, e := range p.tail {
			w.say("  #%d v%d %s (not committed)", e.index, e.cmd.GetCutVersion(), w.describe(e.cmd))
		}
		for _, t := range w.txns {
			rec, ok := p.sm.Record(t.id)
			switch {
			case !ok:
			case rec.GetStaging():
				w.say("  record %s STAGING [%s]", t.id, w.partNames(rec.GetParticipants()))
			default:
				w.say("  record %s %s", t.id, describeDecision(rec))
			}
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

// --- the checks ----------------------------------------------------------

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
// and one-phase transactions before pos_p(v), and the cross-partition
// transactions whose first recorded decision is a commit stamped below v.
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
		if d := t.decided; d != nil && d.GetCommit() && d.GetStamp() < v {
			out[t.key] = t.value(d.GetSucceeded())
		}
	}
	return out
}

// effective reads, from p's log alone, what T's effective prepare on p
// was (DESIGN.md, "Transactions", effective prepare): the first entry of
// T that settles p's vote. A prepare that applied as prepared created the
// intent (its version is T's part of the stamp); one that refused, a
// status, an abort Finish or a decision before any prepare left a
// tombstone or a record that refuses every later copy. VoteNone: nothing
// of T applied here yet. This reading is the checks' own, independent of
// the state machine's bookkeeping. For a prepared one, v holds the entry's
// version and whether the share's compares held.
func effective(p *part, id string) (v txn.Vote) {
	refused := txn.Vote{State: txn.Refused}
	for _, e := range p.log {
		switch op := e.cmd.GetOp().(type) {
		case *internalpb.Command_TxnPrepare:
			if string(op.TxnPrepare.GetTxnId()) != id {
				continue
			}
			if r, _ := e.res.(partition.Vote); r.Prepared {
				return txn.Vote{State: txn.Prepared, ComparesHold: r.ComparesHold, Version: e.cmd.GetCutVersion()}
			}
			return refused
		case *internalpb.Command_TxnStatus:
			if string(op.TxnStatus.GetTxnId()) == id {
				return refused
			}
		case *internalpb.Command_TxnDecide:
			if string(op.TxnDecide.GetTxnId()) == id {
				return refused
			}
		case *internalpb.Command_TxnFinish:
			if string(op.TxnFinish.GetTxnId()) == id && !op.TxnFinish.GetCommit() {
				return refused
			}
		case *internalpb.Command_TxnFinishes:
			for _, f := range op.TxnFinishes.GetFinishes() {
				if string(f.GetTxnId()) == id && !f.GetCommit() {
					return refused
				}
			}
		}
	}
	return txn.Vote{}
}

// committedInLogs says whether T is committed as a fact of the logs
// (every participant's effective prepare created an intent), naming a
// participant where it is not, and the decision those prepares make: the
// success branch iff every share's compares held, the stamp their highest
// version (rule 3).
func (w *world) committedInLogs(t *txnState) (ok bool, missing *part, d txn.Decision) {
	d = txn.Decision{Commit: true, Succeeded: true}
	for _, p := range t.parts {
		v := effective(p, t.id)
		if v.State != txn.Prepared {
			return false, p, txn.Decision{}
		}
		d.Succeeded = d.Succeeded && v.ComparesHold
		d.Stamp = max(d.Stamp, v.Version)
	}
	return true, nil, d
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
				w.violation("cut %d did not finish on %s", v, p.name)
			}
			continue
		}
		w.say("%s cut %d: pos #%d, finished at #%d, %s", p.name, v, f.Op.GetPos(), f.Index, describeSets(f.Op))
		s, err := stateAt(p, f)
		if err != nil {
			w.violation("%s: state at cut %d: %v", p.name, v, err)
			continue
		}
		states[p] = s
		w.say("  state %s", fmtState(s))
		if !check {
			continue
		}
		if tp := p.truePos(v); tp != f.Op.GetPos() {
			w.violation("%s: cut %d recorded at #%d, but the first entry of version >= %d is #%d", p.name, v, f.Op.GetPos(), v, tp)
		}
		var last uint64
		for _, e := range p.log {
			if e.cmd.GetCutVersion() < last {
				w.violation("%s: #%d has version %d after version %d (rule 2)", p.name, e.index, e.cmd.GetCutVersion(), last)
			}
			last = max(last, e.cmd.GetCutVersion())
			w.checkFinishVersion(p, e)
		}
		if want := w.modelAt(p, v, f.Op.GetPos()); !maps.Equal(s, want) {
			w.violation("%s: state at cut %d is %s, rule 5 says %s", p.name, v, fmtState(s), fmtState(want))
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
			what = w.recordLine(t) + " (" + t.told() + ")"
		}
		w.say("%s %s: %s", t.id, what, where)
		if len(in) != 0 && len(in) != len(t.parts) {
			w.violation("%s is in the cut's state of %v but not of all of %d partitions", t.id, in, len(t.parts))
		}
		if t.c != nil {
			w.checkCommitRule(t)
			w.checkTold(t, v, states)
		}
	}
	if !strings.Contains(strings.Join(w.out, "\n"), "VIOLATION") {
		w.say("ok")
	}
}

// recordLine is what T's record partition says of it.
func (w *world) recordLine(t *txnState) string {
	if t.decided != nil {
		return describeDecision(t.decided)
	}
	if rec, ok := t.record.sm.Record(t.id); ok && rec.GetStaging() {
		return "staging"
	}
	return "undecided"
}

// checkFinishVersion checks rule 4's second fact on entry e: an entry
// that finishes a transaction has a version at least its stamp (so a
// Finish stamped at or after a cut lies after the cut's position).
func (w *world) checkFinishVersion(p *part, e *entry) {
	var stamps []*internalpb.TxnFinishOp
	switch op := e.cmd.GetOp().(type) {
	case *internalpb.Command_TxnFinish:
		stamps = append(stamps, op.TxnFinish)
	case *internalpb.Command_TxnFinishes:
		stamps = append(stamps, op.TxnFinishes.GetFinishes()...)
	case *internalpb.Command_TxnDecide:
		if op.TxnDecide.GetFinish() {
			rec, _ := e.res.(*internalpb.TxnDecideOp)
			stamps = append(stamps, &internalpb.TxnFinishOp{TxnId: op.TxnDecide.GetTxnId(), Stamp: max(op.TxnDecide.GetStamp(), rec.GetStamp())})
		}
	}
	for _, f := range stamps {
		if f.GetStamp() > e.cmd.GetCutVersion() {
			w.violation("%s: #%d finishes %s with stamp %d but has version %d (rule 4)", p.name, e.index, f.GetTxnId(), f.GetStamp(), e.cmd.GetCutVersion())
		}
	}
}

// checkCommitRule checks T's recorded decision against the logs (the
// commit rule and rule 3's stamp).
func (w *world) checkCommitRule(t *txnState) {
	d := t.decided
	if d == nil {
		return
	}
	ok, missing, logs := w.committedInLogs(t)
	switch {
	case d.GetCommit() && !ok:
		w.violation("%s is recorded %s, but %s's effective prepare of it created no intent", t.id, describeDecision(d), missing.name)
	case d.GetCommit() && (d.GetStamp() != logs.Stamp || d.GetSucceeded() != logs.Succeeded):
		w.violation("%s is recorded %s, but its effective prepares make %s (rule 3)", t.id, describeDecision(d), describeTxnDecision(logs))
	case !d.GetCommit() && ok:
		w.violation("%s is recorded aborted, but every participant's effective prepare created an intent: it was committed", t.id)
	}
}

// checkTold checks what T's client heard against the record and the
// states at cut v.
func (w *world) checkTold(t *txnState, v uint64, states map[*part]map[string]string) {
	switch t.outcome {
	case txn.Committed:
		told := describeTxnDecision(t.answer)
		if d := t.decided; d != nil && (!d.GetCommit() || d.GetSucceeded() != t.answer.Succeeded || d.GetStamp() != t.answer.Stamp) {
			w.violation("%s's client was told %s, but %s is recorded %s", t.id, told, t.id, describeDecision(d))
		}
		var lack, have []string
		for _, p := range t.parts {
			s, ok := states[p]
			if !ok {
				continue
			}
			if s[t.key] == t.value(t.answer.Succeeded) {
				have = append(have, p.name)
			} else {
				lack = append(lack, p.name)
			}
		}
		if t.answer.Stamp < v && len(lack) > 0 {
			w.violation("%s's client was told %s, but the state at cut %d lacks it on %s", t.id, told, v, strings.Join(lack, " "))
		}
		if t.answer.Stamp >= v && len(have) > 0 {
			w.violation("%s's client was told %s, yet it is in the state at cut %d on %s", t.id, told, v, strings.Join(have, " "))
		}
	case txn.Aborted:
		if d := t.decided; d != nil && d.GetCommit() {
			w.violation("%s's client was told aborted, but %s is recorded %s", t.id, t.id, describeDecision(d))
		}
		for _, p := range t.parts {
			if s, ok := states[p]; ok && (s[t.key] == t.value(true) || s[t.key] == t.value(false)) {
				w.violation("%s's client was told aborted, but it is in the state at cut %d on %s", t.id, v, p.name)
			}
		}
	}
}
