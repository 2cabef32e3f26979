package linearizability

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// Op names a single-key operation of the KV API.
type Op string

// The operations the model knows.
const (
	OpGet    Op = "get"
	OpPut    Op = "put"
	OpDelete Op = "delete"
)

// Input is what a client asked for. Value is set for OpPut only; the test
// makes every written value unique, so a value read names the write that
// produced it.
type Input struct {
	Op    Op
	Key   string
	Value string
}

// Output is what the server answered. For OpGet it describes the key;
// for OpPut and OpDelete (always sent with prev_kv) the key as it was just
// before the write. Version 0 means absent; Version -1 marks an answer
// that contradicts itself (a Delete whose count and prev_kv disagree), which
// no state can produce.
//
// Unknown marks a write whose outcome the client never learned (deadline,
// broken connection, ...): the model accepts any output for it, and the
// history gives it a return time after everything else, so porcupine may
// apply it at any point after its call, or never (last, unseen).
type Output struct {
	Value   string
	Version int64
	Unknown bool
}

// keyState is the model's state of one key: its value and version (the
// number of writes since the key was created; 0 when absent). After a
// write of unknown outcome the version is not known (anyVersion): the next
// answer that shows the key fixes it. It is comparable, so porcupine's
// default == equality applies.
type keyState struct {
	value      string
	version    int64
	anyVersion bool
}

// Model is a key-value map of independent keys. Because single-key
// linearizability composes (Herlihy & Wing's locality), the history is
// partitioned by key and each key is checked as one register, which keeps
// porcupine fast. Feed it histories through Prepare.
var Model = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return keyState{} },
	Step:      step,
	DescribeOperation: func(in, out any) string {
		return describe(in.(Input), out.(Output))
	},
	DescribeState: func(s any) string {
		st := s.(keyState)
		switch {
		case st.anyVersion:
			return fmt.Sprintf("%q v?", st.value)
		case st.version == 0:
			return "absent"
		}
		return fmt.Sprintf("%q v%d", st.value, st.version)
	},
}

func step(s, in, out any) (bool, any) {
	st, i, o := s.(keyState), in.(Input), out.(Output)
	if o.Unknown {
		// Any answer goes. The version a put leaves behind is left open
		// so that dropping an unobserved write (Prepare) cannot change
		// what later answers must show.
		switch i.Op {
		case OpPut:
			return true, keyState{value: i.Value, anyVersion: true}
		case OpDelete:
			return true, keyState{}
		}
		return true, st
	}
	var ok bool
	if st.anyVersion {
		ok = o.Version >= 1 && o.Value == st.value
		st.version, st.anyVersion = o.Version, false
	} else {
		ok = o.Version == st.version && (st.version == 0 || o.Value == st.value)
	}
	switch i.Op {
	case OpGet:
		return ok, st
	case OpPut:
		return ok, keyState{value: i.Value, version: st.version + 1}
	case OpDelete:
		return ok, keyState{}
	default:
		panic(fmt.Sprintf("linearizability: unknown op %q", i.Op))
	}
}

// Prepare tightens the writes of unknown outcome in a history before it
// is checked, without changing the verdict. It relies on every Put
// writing a value no other Put writes.
//
//   - A Put of unknown outcome whose value no answer shows is dropped: in
//     any linearization it could only be followed by other writes of
//     unknown outcome, whose resulting state does not depend on it, so the
//     history is linearizable with it if and only if without it.
//   - A Put of unknown outcome whose value some answer shows must take
//     effect before that answer's operation: its return time becomes the
//     earliest return among those operations (unless that is before its
//     call, which is illegal anyway and left for the checker to find).
//
// Deletes of unknown outcome stay open: their effect, absence, is not
// unique. Without this, each open write multiplies porcupine's search.
// The input is not modified.
func Prepare(history []porcupine.Operation) []porcupine.Operation {
	type keyValue struct{ key, value string }
	firstSeen := map[keyValue]int64{}
	for _, op := range history {
		o := op.Output.(Output)
		if o.Unknown || o.Version < 1 {
			continue
		}
		kv := keyValue{op.Input.(Input).Key, o.Value}
		if at, ok := firstSeen[kv]; !ok || op.Return < at {
			firstSeen[kv] = op.Return
		}
	}
	out := make([]porcupine.Operation, 0, len(history))
	for _, op := range history {
		i := op.Input.(Input)
		if op.Output.(Output).Unknown && i.Op == OpPut {
			at, seen := firstSeen[keyValue{i.Key, i.Value}]
			if !seen {
				continue
			}
			if at >= op.Call {
				op.Return = at
			}
		}
		out = append(out, op)
	}
	return out
}

func describe(i Input, o Output) string {
	var call string
	switch i.Op {
	case OpPut:
		call = fmt.Sprintf("put(%s, %q)", i.Key, i.Value)
	default:
		call = fmt.Sprintf("%s(%s)", i.Op, i.Key)
	}
	switch {
	case o.Unknown:
		return call + " -> ?"
	case o.Version == 0:
		return call + " -> absent"
	case i.Op == OpGet:
		return fmt.Sprintf("%s -> %q v%d", call, o.Value, o.Version)
	default:
		return fmt.Sprintf("%s -> prev %q v%d", call, o.Value, o.Version)
	}
}

// partitionByKey splits a history into one sub-history per key, in key
// order (so a failure report is stable).
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(Input).Key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}
