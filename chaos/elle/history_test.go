package elle

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHistoryRoundTrip(t *testing.T) {
	h, _ := serialHistory(rand.New(rand.NewPCG(7, 7)), 200, 5)
	h.Start = time.Date(2026, 12, 1, 10, 0, 0, 123, time.UTC)
	h.Ops[0].Error = "client: write outcome unknown: txn"
	var buf bytes.Buffer
	if err := h.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeHistory(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Start.Equal(h.Start) {
		t.Errorf("start %v, want %v", got.Start, h.Start)
	}
	got.Start = h.Start
	if !reflect.DeepEqual(got, h) {
		t.Fatal("the decoded history differs from the encoded one")
	}
	// Empty reads stay empty, unknown reads stay unknown.
	for _, op := range got.Ops {
		for _, m := range op.Mops {
			if m.Kind == MopRead && (m.Read == nil) != (op.Type != TypeOK) {
				t.Fatalf("%v: read result %#v", &op, m.Read)
			}
		}
	}
	if a, b := Check(h), Check(got); !reflect.DeepEqual(a, b) {
		t.Errorf("checks differ:\n%v\n%v", a, b)
	}
}

func TestHistoryEncoding(t *testing.T) {
	h := &History{Ops: []Op{
		{Index: 0, Process: 1, Type: TypeOK, Invoke: 1, Complete: 2, Mops: []Mop{Append("k", 3), Read("k", []int{}), Read("j", []int{1, 2})}},
		{Index: 1, Process: 2, Type: TypeInfo, Invoke: 1, Complete: 9, Mops: []Mop{Read("k", nil)}, Error: "x"},
	}}
	var buf bytes.Buffer
	if err := h.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	want := `{"format":"cutkv-elle-1","start":"0001-01-01T00:00:00Z","ops":[` +
		`{"index":0,"process":1,"type":"ok","invoke":1,"complete":2,"mops":[["append","k",3],["r","k",[]],["r","j",[1,2]]]},` +
		`{"index":1,"process":2,"type":"info","invoke":1,"complete":9,"mops":[["r","k",null]],"error":"x"}]}` + "\n"
	if buf.String() != want {
		t.Errorf("encoded\n%s\nwant\n%s", buf.String(), want)
	}
	// json.Marshal and json.Unmarshal speak the same format.
	b, err := json.Marshal(h)
	if err != nil || string(b)+"\n" != want {
		t.Errorf("json.Marshal: %s, %v", b, err)
	}
	var back History
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(&back, h) {
		t.Errorf("json.Unmarshal: %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"format":"cutkv-elle-1","ops":[{}]}`), &back); !errors.Is(err, ErrBadHistory) {
		t.Errorf("json.Unmarshal of a bad history: %v", err)
	}
	if err := (&History{Ops: []Op{{Mops: []Mop{{Kind: "bogus", Key: "k"}}}}}).Encode(&buf); !errors.Is(err, ErrBadHistory) {
		t.Errorf("encoding a bad micro-op: %v", err)
	}
}

func TestDecodeHistoryRefuses(t *testing.T) {
	const ok = `{"index":0,"process":0,"type":"ok","invoke":0,"complete":1,"mops":[["append","k",1]]}`
	wrap := func(ops ...string) string {
		return `{"format":"cutkv-elle-1","start":"2026-01-01T00:00:00Z","ops":[` + strings.Join(ops, ",") + `]}`
	}
	for name, in := range map[string]string{
		"not json":           `{"format":`,
		"wrong format":       `{"format":"elle-0","ops":[]}`,
		"unknown field":      `{"format":"cutkv-elle-1","ops":[],"extra":1}`,
		"trailing data":      wrap(ok) + `{}`,
		"bad type":           wrap(strings.Replace(ok, `"ok"`, `"maybe"`, 1)),
		"negative index":     wrap(strings.Replace(ok, `"index":0`, `"index":-1`, 1)),
		"duplicate index":    wrap(ok, strings.Replace(ok, `"k",1`, `"k",2`, 1)),
		"complete < invoke":  wrap(strings.Replace(ok, `"complete":1`, `"complete":-1`, 1)),
		"no mops":            wrap(strings.Replace(ok, `[["append","k",1]]`, `[]`, 1)),
		"null mop":           wrap(strings.Replace(ok, `[["append","k",1]]`, `[null]`, 1)),
		"short mop":          wrap(strings.Replace(ok, `["append","k",1]`, `["append","k"]`, 1)),
		"bad mop kind":       wrap(strings.Replace(ok, `"append"`, `"cas"`, 1)),
		"empty key":          wrap(strings.Replace(ok, `"k"`, `""`, 1)),
		"fractional element": wrap(strings.Replace(ok, `"k",1`, `"k",1.5`, 1)),
		"ok read of null":    wrap(strings.Replace(ok, `["append","k",1]`, `["r","k",null]`, 1)),
		"info read result":   wrap(strings.Replace(strings.Replace(ok, `["append","k",1]`, `["r","k",[]]`, 1), `"ok"`, `"info"`, 1)),
		"read of a string":   wrap(strings.Replace(ok, `["append","k",1]`, `["r","k","1,2"]`, 1)),
		"element twice":      wrap(ok, strings.Replace(ok, `"index":0`, `"index":1`, 1)),
	} {
		if _, err := DecodeHistory(strings.NewReader(in)); !errors.Is(err, ErrBadHistory) {
			t.Errorf("%s: %v, want ErrBadHistory", name, err)
		}
	}
	if _, err := DecodeHistory(strings.NewReader(wrap(ok))); err != nil {
		t.Errorf("a good history: %v", err)
	}
}

// FuzzDecodeHistory: DecodeHistory refuses or accepts any input without
// panicking; what it accepts re-encodes stably and can be checked.
func FuzzDecodeHistory(f *testing.F) {
	f.Add([]byte(`{"format":"cutkv-elle-1","start":"2026-01-01T00:00:00Z","ops":[]}`))
	f.Add([]byte(`{"format":"cutkv-elle-1","start":"2026-01-01T00:00:00Z","ops":[` +
		`{"index":0,"process":0,"type":"ok","invoke":0,"complete":1,"mops":[["append","x",1],["r","y",[2]]]},` +
		`{"index":1,"process":1,"type":"ok","invoke":0,"complete":1,"mops":[["append","y",2],["r","x",[1]]]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHistory(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrBadHistory) {
				t.Fatalf("error %v does not wrap ErrBadHistory", err)
			}
			return
		}
		_ = CheckWith(h, Options{ProcessOrder: true, RealTime: true})
		var e1, e2 bytes.Buffer
		if err := h.Encode(&e1); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		h2, err := DecodeHistory(bytes.NewReader(e1.Bytes()))
		if err != nil {
			t.Fatalf("decode of own encoding: %v\n%s", err, e1.Bytes())
		}
		if err := h2.Encode(&e2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e1.Bytes(), e2.Bytes()) {
			t.Fatalf("unstable encoding:\n%s\n%s", e1.Bytes(), e2.Bytes())
		}
	})
}
