package elle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// ErrBadHistory marks a history that cannot be checked: malformed JSON, an
// unknown field or op type, a read without a result in a committed op, or
// an element appended twice to one key. Match it with errors.Is.
var ErrBadHistory = errors.New("elle: bad history")

// Format names the JSON encoding of a History (doc.go, "History format").
const Format = "cutkv-elle-1"

// OpType says how a transaction ended.
type OpType string

// The op types, as Jepsen names them.
const (
	// TypeOK: committed. Its reads are what it saw, its appends happened.
	TypeOK OpType = "ok"
	// TypeFail: certainly not applied. Its appends must never be seen.
	TypeFail OpType = "fail"
	// TypeInfo: the outcome is unknown (the commit was sent, no definite
	// answer came back). Its appends may or may not be seen; its reads
	// are unknown.
	TypeInfo OpType = "info"
)

// MopKind says what a micro-op does.
type MopKind string

// The micro-op kinds, as Jepsen's list-append workload names them.
const (
	MopAppend MopKind = "append"
	MopRead   MopKind = "r"
)

// Mop is one micro-operation of a transaction: append Value to the list
// at Key, or read the list at Key.
type Mop struct {
	Kind MopKind
	Key  string
	// Value is the element an append adds (unused for reads). Within one
	// history each element is appended at most once per key.
	Value int
	// Read is the list a read returned, oldest element first (unused for
	// appends). A non-nil empty slice is an empty list (the key is
	// absent); nil means unknown, which only fail and info ops may have.
	Read []int
}

// Append returns the micro-op append(key, v).
func Append(key string, v int) Mop { return Mop{Kind: MopAppend, Key: key, Value: v} }

// Read returns the micro-op read(key) that returned list; nil list means
// the result is unknown. Read keeps list.
func Read(key string, list []int) Mop { return Mop{Kind: MopRead, Key: key, Read: list} }

// String renders m in Elle's notation: [append k 3] or [r k [1 2 3]] (nil for an
// unknown read).
func (m Mop) String() string {
	switch m.Kind {
	case MopAppend:
		return fmt.Sprintf("[append %s %d]", m.Key, m.Value)
	case MopRead:
		if m.Read == nil {
			return fmt.Sprintf("[r %s nil]", m.Key)
		}
		return fmt.Sprintf("[r %s %v]", m.Key, m.Read)
	}
	return fmt.Sprintf("[%q %s]", string(m.Kind), m.Key)
}

// MarshalJSON encodes m as a three-element array: ["append", key, v] or
// ["r", key, [elements...]] (null for an unknown read).
func (m Mop) MarshalJSON() ([]byte, error) {
	switch m.Kind {
	case MopAppend:
		return json.Marshal([]any{m.Kind, m.Key, m.Value})
	case MopRead:
		return json.Marshal([]any{m.Kind, m.Key, m.Read})
	}
	return nil, fmt.Errorf("%w: micro-op kind %q", ErrBadHistory, string(m.Kind))
}

// UnmarshalJSON decodes what MarshalJSON encodes. JSON null leaves m
// unchanged, as encoding/json expects.
func (m *Mop) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil {
		return fmt.Errorf("%w: micro-op: %v", ErrBadHistory, err)
	}
	if len(parts) != 3 {
		return fmt.Errorf("%w: micro-op has %d elements, want 3", ErrBadHistory, len(parts))
	}
	var kind, key string
	if err := json.Unmarshal(parts[0], &kind); err != nil {
		return fmt.Errorf("%w: micro-op kind: %v", ErrBadHistory, err)
	}
	if err := json.Unmarshal(parts[1], &key); err != nil {
		return fmt.Errorf("%w: micro-op key: %v", ErrBadHistory, err)
	}
	out := Mop{Kind: MopKind(kind), Key: key}
	switch out.Kind {
	case MopAppend:
		if err := json.Unmarshal(parts[2], &out.Value); err != nil {
			return fmt.Errorf("%w: append value: %v", ErrBadHistory, err)
		}
	case MopRead:
		if string(bytes.TrimSpace(parts[2])) != "null" {
			out.Read = []int{}
			if err := json.Unmarshal(parts[2], &out.Read); err != nil {
				return fmt.Errorf("%w: read result: %v", ErrBadHistory, err)
			}
		}
	default:
		return fmt.Errorf("%w: micro-op kind %q, want append or r", ErrBadHistory, kind)
	}
	*m = out
	return nil
}

// Op is one transaction of a history.
type Op struct {
	// Index names the op in reports ("T12"); unique within a history.
	Index int `json:"index"`
	// Process is the client that ran it. A process runs one op at a time;
	// after an info op the workload gives the client a new process (the
	// op may still be in flight).
	Process int    `json:"process"`
	Type    OpType `json:"type"`
	// Invoke and Complete are nanoseconds since History.Start, read from
	// a monotonic clock just before the commit was sent and just after its
	// answer came. For an info op Complete is when the client gave up: the
	// op may take effect later.
	Invoke   int64 `json:"invoke"`
	Complete int64 `json:"complete"`
	Mops     []Mop `json:"mops"`
	// Error is why a fail or info op failed (informational).
	Error string `json:"error,omitempty"`
}

// String renders op as "T12 p3 ok [append k 3] [r k [1 3]]".
func (op *Op) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "T%d p%d %s", op.Index, op.Process, op.Type)
	for _, m := range op.Mops {
		b.WriteByte(' ')
		b.WriteString(m.String())
	}
	return b.String()
}

// History is what a workload did: every transaction it ran to an outcome,
// in the order they completed.
type History struct {
	// Start is the wall-clock time of the first op's time origin
	// (informational: op times are monotonic offsets from it).
	Start time.Time
	Ops   []Op
}

// historyJSON is the encoding of a History.
type historyJSON struct {
	Format string    `json:"format"`
	Start  time.Time `json:"start"`
	Ops    []Op      `json:"ops"`
}

// MarshalJSON encodes h in the format doc.go describes ("History
// format"), so json.Marshal of a History writes what DecodeHistory reads.
func (h History) MarshalJSON() ([]byte, error) {
	ops := h.Ops
	if ops == nil {
		ops = []Op{}
	}
	return json.Marshal(historyJSON{Format: Format, Start: h.Start, Ops: ops})
}

// UnmarshalJSON decodes what MarshalJSON encodes, as DecodeHistory does
// (unknown fields refused, the history validated).
func (h *History) UnmarshalJSON(b []byte) error {
	out, err := DecodeHistory(bytes.NewReader(b))
	if err != nil {
		return err
	}
	*h = *out
	return nil
}

// Encode writes h as JSON, one line.
func (h *History) Encode(w io.Writer) error {
	return json.NewEncoder(w).Encode(h)
}

// MaxHistoryBytes bounds the encoding DecodeHistory reads, and so the
// memory a decode takes: far more than a long soak writes (a few MB).
const MaxHistoryBytes = 256 << 20

// cappedReader reads at most n more bytes of r, then fails (wrapping
// ErrBadHistory) if r has more.
type cappedReader struct {
	r      io.Reader
	n, max int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if int64(len(p)) > c.n+1 {
		p = p[:c.n+1]
	}
	k, err := c.r.Read(p)
	if c.n -= int64(k); c.n < 0 {
		return 0, fmt.Errorf("%w: longer than %d bytes", ErrBadHistory, c.max)
	}
	return k, err
}

// DecodeHistory reads one history that Encode (or json.Marshal) wrote and
// validates it (History.Validate). Unknown fields, trailing data and more
// than MaxHistoryBytes are refused. Errors wrap ErrBadHistory.
func DecodeHistory(r io.Reader) (*History, error) { return decodeHistory(r, MaxHistoryBytes) }

// decodeHistory is DecodeHistory reading at most max bytes.
func decodeHistory(r io.Reader, max int64) (*History, error) {
	dec := json.NewDecoder(&cappedReader{r: r, n: max, max: max})
	dec.DisallowUnknownFields()
	var hj historyJSON
	if err := dec.Decode(&hj); err != nil {
		if errors.Is(err, ErrBadHistory) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrBadHistory, err)
	}
	switch _, err := dec.Token(); {
	case errors.Is(err, ErrBadHistory): // too long
		return nil, err
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%w: data after the history", ErrBadHistory)
	}
	if hj.Format != Format {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrBadHistory, hj.Format, Format)
	}
	h := &History{Start: hj.Start, Ops: hj.Ops}
	if err := h.Validate(); err != nil {
		return nil, err
	}
	return h, nil
}

// Validate checks what Check relies on: unique op indices, known types and
// micro-op kinds, 0 ≤ Invoke ≤ Complete, non-negative processes, at least
// one micro-op per op, non-empty keys, a result for every read of an ok op
// and none for reads of fail and info ops, and no element appended twice
// to one key. Errors wrap ErrBadHistory and name the op.
func (h *History) Validate() error {
	seen := make(map[int]bool, len(h.Ops))
	type elem struct {
		key string
		v   int
	}
	appended := make(map[elem]int)
	for i := range h.Ops {
		op := &h.Ops[i]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: op %d (T%d): %s", ErrBadHistory, i, op.Index, fmt.Sprintf(format, args...))
		}
		if op.Index < 0 {
			return bad("negative index")
		}
		if seen[op.Index] {
			return bad("index used twice")
		}
		seen[op.Index] = true
		switch op.Type {
		case TypeOK, TypeFail, TypeInfo:
		default:
			return bad("type %q, want ok, fail or info", string(op.Type))
		}
		if op.Process < 0 {
			return bad("negative process")
		}
		if op.Invoke < 0 || op.Complete < op.Invoke {
			return bad("times %d..%d, want 0 ≤ invoke ≤ complete", op.Invoke, op.Complete)
		}
		if len(op.Mops) == 0 {
			return bad("no micro-ops")
		}
		for j, m := range op.Mops {
			if m.Key == "" {
				return bad("micro-op %d: empty key", j)
			}
			switch m.Kind {
			case MopAppend:
				e := elem{m.Key, m.Value}
				if prev, dup := appended[e]; dup {
					return bad("micro-op %d appends %d to %s, which T%d appends too", j, m.Value, m.Key, prev)
				}
				appended[e] = op.Index
			case MopRead:
				if op.Type == TypeOK && m.Read == nil {
					return bad("micro-op %d: a committed read without a result", j)
				}
				if op.Type != TypeOK && m.Read != nil {
					return bad("micro-op %d: a %s op's read has a result (reads of fail and info ops are unknown)", j, op.Type)
				}
			default:
				return bad("micro-op %d: kind %q, want append or r", j, string(m.Kind))
			}
		}
	}
	return nil
}

// Clone returns a deep copy of h.
func (h *History) Clone() *History {
	out := &History{Start: h.Start, Ops: make([]Op, len(h.Ops))}
	for i, op := range h.Ops {
		op.Mops = slices.Clone(op.Mops)
		for j := range op.Mops {
			if op.Mops[j].Read != nil {
				op.Mops[j].Read = slices.Clone(op.Mops[j].Read)
			}
		}
		out.Ops[i] = op
	}
	return out
}
