package partition

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata/*.txt from the actual output")

// A script is a text file of steps, each a command line, optional input
// lines, a "----" line and the expected output up to a blank line. Lines
// starting with # and blank lines between steps are kept as they are.
// Commands (each applied as the next raft entry unless it ends in at=N;
// a prepare or finish may name its prepare time, Unix ms, with ms=N
// before that):
//
//	reset                     a new, empty partition
//	put K V | delete K        a plain write
//	prepare TXN               input: the share, one item a line (below)
//	onephase TXN              input: the share
//	finish TXN commit success|failure | finish TXN abort
//	decide TXN commit success|failure | decide TXN abort
//	forget TXN...             drop the records of finished transactions
//	horizon MS                raise the transaction horizon
//	dump                      keys, applied index, locks, intents, records
//	finished                  the finished ids with their prepare times, and the horizon
//
// Share lines: "compare version K =|!=|>|< N", "compare value K OP V",
// "success|failure put K V | delete K | get K | scan START END [limit=N]
// [keys-only]", where "" stands for an empty string.
type scriptStep struct {
	line  int // of the command, 1-based
	cmd   string
	input []string
	want  []string
}

type scriptItem struct {
	raw  string // a comment or blank line, when step is nil
	step *scriptStep
}

func parseScript(path string, data string) ([]scriptItem, error) {
	lines := strings.Split(strings.TrimSuffix(data, "\n"), "\n")
	var items []scriptItem
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			items = append(items, scriptItem{raw: l})
			continue
		}
		st := &scriptStep{line: i + 1, cmd: l}
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
		items = append(items, scriptItem{step: st})
	}
	return items, nil
}

func formatScript(items []scriptItem) string {
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

// scriptEnv runs script steps against one partition.
type scriptEnv struct {
	p *Partition
}

func (e *scriptEnv) run(cmd string, input []string) (string, error) {
	args := strings.Fields(cmd)
	var at uint64
	if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "at=") {
		v, err := strconv.ParseUint(strings.TrimPrefix(args[n-1], "at="), 10, 64)
		if err != nil {
			return "", err
		}
		at, args = v, args[:n-1]
	}
	var ms int64
	if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "ms=") {
		v, err := strconv.ParseInt(strings.TrimPrefix(args[n-1], "ms="), 10, 64)
		if err != nil {
			return "", err
		}
		ms, args = v, args[:n-1]
	}
	// Options of the parallel-commit commands: parts=1,2 (the record
	// partition's prepare lists the participants), v=N (the entry's
	// version), finish (a decision that also finishes this partition's
	// intent).
	var parts []uint64
	var version uint64
	var finish bool
	for n := len(args); n > 1; n = len(args) {
		a := args[n-1]
		switch {
		case strings.HasPrefix(a, "parts="):
			for _, f := range strings.Split(strings.TrimPrefix(a, "parts="), ",") {
				v, err := strconv.ParseUint(f, 10, 64)
				if err != nil {
					return "", err
				}
				parts = append(parts, v)
			}
		case strings.HasPrefix(a, "v="):
			v, err := strconv.ParseUint(strings.TrimPrefix(a, "v="), 10, 64)
			if err != nil {
				return "", err
			}
			version = v
		case a == "finish" && args[0] == "decide":
			finish = true
		default:
			n = 0
		}
		if n == 0 {
			break
		}
		args = args[:len(args)-1]
	}
	apply := func(c *internalpb.Command) (string, error) {
		c.CutVersion = version
		idx := at
		if idx == 0 {
			idx = e.p.Applied() + 1
		}
		res, err := e.p.ApplyCommand(idx, c)
		if err != nil {
			return "", err
		}
		return fmtApplyResult(res), nil
	}
	need := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%s wants %d arguments", args[0], n-1)
		}
		return nil
	}
	switch args[0] {
	case "reset":
		e.p = New(1)
		return "ok", nil
	case "put":
		if err := need(3); err != nil {
			return "", err
		}
		return apply(put(args[1], unquote(args[2])))
	case "delete":
		if err := need(2); err != nil {
			return "", err
		}
		return apply(del(args[1]))
	case "prepare", "onephase":
		if err := need(2); err != nil {
			return "", err
		}
		s, err := parseShare(input)
		if err != nil {
			return "", err
		}
		if args[0] == "prepare" {
			c := cmdPrepare(args[1], s)
			c.GetTxnPrepare().PreparedUnixMs = ms
			if len(parts) > 0 {
				c.GetTxnPrepare().Participants = parts
				c.GetTxnPrepare().RecordPartition = e.p.ID()
			}
			return apply(c)
		}
		return apply(cmdOnePhase(args[1], s))
	case "finish", "decide":
		if len(args) < 3 {
			return "", fmt.Errorf("%s TXN commit success|failure or %s TXN abort", args[0], args[0])
		}
		var commit, succeeded bool
		switch strings.Join(args[2:], " ") {
		case "commit success":
			commit, succeeded = true, true
		case "commit failure":
			commit = true
		case "abort":
		default:
			return "", fmt.Errorf("bad outcome %q", strings.Join(args[2:], " "))
		}
		if args[0] == "finish" {
			c := cmdFinish(args[1], commit, succeeded)
			c.GetTxnFinish().PreparedUnixMs = ms
			return apply(c)
		}
		return apply(cmdDecide(&internalpb.TxnDecideOp{TxnId: []byte(args[1]), Commit: commit, Succeeded: succeeded, Stamp: version,
			Finish: finish, PreparedUnixMs: ms}))
	case "finishes": // finishes T1,T2 commit success: one batched entry
		if len(args) < 3 {
			return "", fmt.Errorf("finishes T1,T2 commit success|failure or finishes T1,T2 abort")
		}
		commit, succeeded := args[2] == "commit", len(args) > 3 && args[3] == "success"
		op := &internalpb.TxnFinishBatchOp{}
		for _, id := range strings.Split(args[1], ",") {
			op.Finishes = append(op.Finishes, &internalpb.TxnFinishOp{TxnId: []byte(id), Commit: commit, Succeeded: succeeded, Stamp: version})
		}
		return apply(&internalpb.Command{Op: &internalpb.Command_TxnFinishes{TxnFinishes: op}})
	case "status":
		if err := need(2); err != nil {
			return "", err
		}
		return apply(&internalpb.Command{Op: &internalpb.Command_TxnStatus{TxnStatus: &internalpb.TxnStatusOp{TxnId: []byte(args[1]), PreparedUnixMs: ms}}})
	case "forget":
		op := &internalpb.TxnForgetOp{}
		for _, id := range args[1:] {
			op.TxnIds = append(op.TxnIds, []byte(id))
		}
		return apply(&internalpb.Command{Op: &internalpb.Command_TxnForget{TxnForget: op}})
	case "horizon":
		if err := need(2); err != nil {
			return "", err
		}
		v, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return "", err
		}
		return apply(horizon(v))
	case "dump":
		return e.dump(), nil
	case "finished":
		return e.finished(), nil
	}
	return "", fmt.Errorf("unknown command %q", args[0])
}

func (e *scriptEnv) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "applied %d", e.p.Applied())
	kvs, _, _ := e.p.Scan(nil, nil, 0)
	for _, kv := range kvs {
		fmt.Fprintf(&b, "\nkv %s", fmtPartKV(kv))
	}
	holders := e.p.LockHolders()
	fmt.Fprintf(&b, "\nlocks %v", holders)
	e.p.mu.RLock()
	var ids, recs []string
	for id := range e.p.intents {
		ids = append(ids, id)
	}
	for id := range e.p.records {
		recs = append(recs, id)
	}
	e.p.mu.RUnlock()
	slices.Sort(ids)
	slices.Sort(recs)
	for _, id := range ids {
		in, _ := e.p.IntentOf(id)
		fmt.Fprintf(&b, "\nintent %s at %d", id, in.Index)
	}
	for _, id := range recs {
		r, _ := e.p.Record(id)
		fmt.Fprintf(&b, "\nrecord %s %s", id, fmtDecision(r))
	}
	return b.String()
}

func (e *scriptEnv) finished() string {
	e.p.mu.RLock()
	defer e.p.mu.RUnlock()
	var ids []string
	for id, at := range e.p.finished {
		ids = append(ids, fmt.Sprintf("%s@%d", id, at))
	}
	slices.Sort(ids)
	return fmt.Sprintf("finished %v, horizon %d", ids, e.p.horizon)
}

func unquote(s string) string {
	if s == `""` {
		return ""
	}
	return s
}

func parseShare(lines []string) (*internalpb.TxnShare, error) {
	s := &internalpb.TxnShare{}
	results := map[string]kvpb.Compare_Result{"=": kvpb.Compare_EQUAL, "!=": kvpb.Compare_NOT_EQUAL, ">": kvpb.Compare_GREATER, "<": kvpb.Compare_LESS}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 {
			return nil, fmt.Errorf("bad share line %q", l)
		}
		if f[0] == "compare" {
			if len(f) != 5 {
				return nil, fmt.Errorf("compare version|value K OP X: %q", l)
			}
			res, ok := results[f[3]]
			if !ok {
				return nil, fmt.Errorf("bad compare result in %q", l)
			}
			c := &kvpb.Compare{Key: []byte(f[2]), Result: res}
			switch f[1] {
			case "version":
				v, err := strconv.ParseInt(f[4], 10, 64)
				if err != nil {
					return nil, err
				}
				c.Target, c.TargetUnion = kvpb.Compare_VERSION, &kvpb.Compare_Version{Version: v}
			case "value":
				c.Target, c.TargetUnion = kvpb.Compare_VALUE, &kvpb.Compare_Value{Value: []byte(unquote(f[4]))}
			default:
				return nil, fmt.Errorf("bad compare target in %q", l)
			}
			s.Compares = append(s.Compares, c)
			continue
		}
		var op *kvpb.RequestOp
		switch {
		case f[1] == "put" && len(f) == 4:
			op = rPut(f[2], unquote(f[3]))
		case f[1] == "delete" && len(f) == 3:
			op = rDel(f[2])
		case f[1] == "get" && len(f) == 3:
			op = rGet(f[2])
		case f[1] == "scan" && len(f) >= 4:
			var limit int64
			keysOnly := false
			for _, o := range f[4:] {
				switch {
				case strings.HasPrefix(o, "limit="):
					n, err := strconv.ParseInt(strings.TrimPrefix(o, "limit="), 10, 64)
					if err != nil {
						return nil, err
					}
					limit = n
				case o == "keys-only":
					keysOnly = true
				default:
					return nil, fmt.Errorf("bad scan option %q", o)
				}
			}
			op = rScan(unquote(f[2]), unquote(f[3]), limit, keysOnly)
		default:
			return nil, fmt.Errorf("bad op line %q", l)
		}
		switch f[0] {
		case "success":
			s.SuccessIndex = append(s.SuccessIndex, uint32(len(s.Success)))
			s.Success = append(s.Success, op)
		case "failure":
			s.FailureIndex = append(s.FailureIndex, uint32(len(s.Failure)))
			s.Failure = append(s.Failure, op)
		default:
			return nil, fmt.Errorf("bad branch in %q", l)
		}
	}
	return s, nil
}

// TestTxnScripts runs the 2PC interleavings in testdata/txn_*.txt; run
// with -rewrite to regenerate the expected output (then read the diff).
func TestTxnScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "txn_*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			items, err := parseScript(path, string(data))
			if err != nil {
				t.Fatal(err)
			}
			env := &scriptEnv{p: New(1)}
			for _, it := range items {
				st := it.step
				if st == nil {
					continue
				}
				got, err := env.run(st.cmd, st.input)
				if err != nil {
					t.Fatalf("%s:%d: %s: %v", path, st.line, st.cmd, err)
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
		})
	}
}

func TestScriptRoundTrip(t *testing.T) {
	in := "# c\n\nput a 1\n----\nok\n\nprepare T\nsuccess put a 2\n----\nline 1\n  line 2\n"
	items, err := parseScript("x", in)
	if err != nil {
		t.Fatal(err)
	}
	if out := formatScript(items); out != in {
		t.Fatalf("round trip:\n%q\nwant\n%q", out, in)
	}
	if _, err := parseScript("x", "put a 1\nok\n"); err == nil {
		t.Fatal("a step without ---- parsed")
	}
}
