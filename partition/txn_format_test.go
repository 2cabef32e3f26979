package partition

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// Helpers shared by the transaction tests: builders for commands and ops,
// and a text rendering of results complete enough to compare by string.

func txnSeed(t testing.TB) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}

func rPut(k, v string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
}

func rDel(k string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Delete{Delete: &kvpb.DeleteRequest{Key: []byte(k)}}}
}

func rGet(k string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte(k)}}}
}

// rScan scans [start, end); an empty end is nil, as a decoded request with
// no end has it.
func rScan(start, end string, limit int64, keysOnly bool) *kvpb.RequestOp {
	sc := &kvpb.ScanRequest{Start: []byte(start), Limit: limit, KeysOnly: keysOnly}
	if end != "" {
		sc.End = []byte(end)
	}
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Scan{Scan: sc}}
}

func cmdPrepare(id string, s *internalpb.TxnShare) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: &internalpb.TxnPrepareOp{TxnId: []byte(id), RecordPartition: 1, Share: s}}}
}

func cmdFinish(id string, commit, succeeded bool) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: &internalpb.TxnFinishOp{TxnId: []byte(id), Commit: commit, Succeeded: succeeded}}}
}

func cmdDecide(op *internalpb.TxnDecideOp) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnDecide{TxnDecide: op}}
}

func cmdOnePhase(id string, s *internalpb.TxnShare) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnOnePhase{TxnOnePhase: &internalpb.TxnOnePhaseOp{TxnId: []byte(id), Share: s}}}
}

func fmtKV(kv *kvpb.KeyValue) string {
	if kv == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s=%s v%d c%d m%d", kv.GetKey(), kv.GetValue(), kv.GetVersion(), kv.GetCreateIndex(), kv.GetModIndex())
}

func fmtPartKV(kv *KV) string {
	if kv == nil {
		return "<none>"
	}
	return fmtKV(&kvpb.KeyValue{Key: kv.Key, Value: kv.Value, Version: kv.Version, CreateIndex: kv.CreateIndex, ModIndex: kv.ModIndex})
}

func fmtResponse(r *kvpb.ResponseOp) string {
	switch r := r.GetResponse().(type) {
	case *kvpb.ResponseOp_Get:
		return "get " + fmtKV(r.Get.GetKv())
	case *kvpb.ResponseOp_Put:
		if r.Put.GetPrevKv() != nil {
			return "put prev " + fmtKV(r.Put.GetPrevKv())
		}
		return "put"
	case *kvpb.ResponseOp_Delete:
		s := fmt.Sprintf("delete %d", r.Delete.GetDeleted())
		if r.Delete.GetPrevKv() != nil {
			s += " prev " + fmtKV(r.Delete.GetPrevKv())
		}
		return s
	case *kvpb.ResponseOp_Scan:
		kvs := make([]string, len(r.Scan.GetKvs()))
		for i, kv := range r.Scan.GetKvs() {
			kvs[i] = fmtKV(kv)
		}
		s := "scan [" + strings.Join(kvs, ", ") + "]"
		if r.Scan.GetMore() {
			s += " more"
		}
		return s
	}
	return fmt.Sprintf("unknown response %v", r)
}

func fmtResponses(b *strings.Builder, name string, rs []*kvpb.ResponseOp) {
	for i, r := range rs {
		fmt.Fprintf(b, "\n  %s[%d]: %s", name, i, fmtResponse(r))
	}
}

func fmtVote(v Vote) string {
	var b strings.Builder
	hold := "fail"
	if v.ComparesHold {
		hold = "hold"
	}
	if v.Prepared {
		fmt.Fprintf(&b, "prepared, compares %s", hold)
		if len(v.Conflicts) > 0 {
			fmt.Fprintf(&b, ", conflicts %v", v.Conflicts)
		}
	} else {
		fmt.Fprintf(&b, "refused by %v", v.Conflicts)
		if v.Finished {
			b.WriteString(", finished before")
		}
		if v.ComparesHold {
			b.WriteString(", compares hold")
		}
	}
	if v.Version != 0 {
		fmt.Fprintf(&b, ", version %d", v.Version)
	}
	fmtResponses(&b, "success", v.SuccessReads)
	fmtResponses(&b, "failure", v.FailureReads)
	return b.String()
}

func fmtOnePhase(r OnePhaseResult) string {
	var b strings.Builder
	switch {
	case len(r.Conflicts) > 0:
		fmt.Fprintf(&b, "refused by %v", r.Conflicts)
		if r.Succeeded {
			b.WriteString(", succeeded")
		}
	case r.Succeeded:
		b.WriteString("succeeded")
	default:
		b.WriteString("failed")
	}
	fmtResponses(&b, "resp", r.Responses)
	return b.String()
}

func fmtResult(r Result) string {
	if r.LockedBy != "" {
		s := "locked by " + r.LockedBy
		if r.Prev != nil || r.Deleted != 0 {
			s += fmt.Sprintf(" (but prev %s deleted %d)", fmtPartKV(r.Prev), r.Deleted)
		}
		return s
	}
	s := "ok"
	if r.Prev != nil {
		s += " prev " + fmtPartKV(r.Prev)
	}
	if r.Deleted != 0 {
		s += fmt.Sprintf(" deleted %d", r.Deleted)
	}
	return s
}

func fmtDecision(d *internalpb.TxnDecideOp) string {
	if d == nil {
		return "<nil>"
	}
	s := "abort"
	if d.GetStaging() {
		s = "STAGING"
	} else if d.GetCommit() {
		s = "commit failure"
		if d.GetSucceeded() {
			s = "commit success"
		}
	} else if d.GetSucceeded() {
		s += " (succeeded set)"
	}
	if d.GetStamp() != 0 {
		s += fmt.Sprintf(" stamp %d", d.GetStamp())
	}
	if len(d.GetParticipants()) > 0 {
		s += fmt.Sprintf(" participants %v", d.GetParticipants())
	}
	return s
}

// fmtApplyResult renders whatever ApplyCommand returned.
func fmtApplyResult(v any) string {
	switch v := v.(type) {
	case nil:
		return "<nil>"
	case Result:
		return fmtResult(v)
	case Vote:
		return fmtVote(v)
	case OnePhaseResult:
		return fmtOnePhase(v)
	case *internalpb.TxnDecideOp:
		return "recorded " + fmtDecision(v)
	case Status:
		out := strings.ToLower(strings.TrimPrefix(v.State.String(), "TXN_STATE_"))
		if v.State == internalpb.TxnState_TXN_STATE_PREPARED {
			out += fmt.Sprintf(", compares hold=%v, version %d", v.ComparesHold, v.Version)
		}
		return out
	}
	return fmt.Sprintf("unexpected %T %v", v, v)
}
