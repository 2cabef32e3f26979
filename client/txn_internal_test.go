package client

import (
	"testing"
)

func TestValidateTxnMessages(t *testing.T) {
	k, l := []byte("k"), []byte("l")
	for _, tc := range []struct {
		name      string
		cmps      []Cmp
		then, els []Op
		want      string // "" means valid

	}{
		{name: "empty txn"},
		{name: "cas", cmps: []Cmp{Compare(Value(k), "=", "old")}, then: []Op{OpPut(k, []byte("new"))}, els: []Op{OpGet(k)}},
		{name: "bad op", cmps: []Cmp{KeyExists(k), Compare(Version(k), "<=", 1)}, want: `compare 2: unknown operator "<=": want =, !=, < or >`},
		{name: "empty cmp key", cmps: []Cmp{KeyMissing(nil)}, want: `compare 1 (ver("") = 0): empty key`},
		{name: "too many", then: []Op{OpGet(k), OpGet(l), OpGet(k)}, want: "then: 3 ops, more than 2"},
		{name: "double write", els: []Op{OpPut(k, nil), OpDelete(k)}, want: `else ops 1 and 2 both write "k"`},
		{name: "read own write", then: []Op{OpDelete(k), OpGet(k)}, want: `then op 2 (get "k") reads "k", which op 1 writes`},
		{name: "scan own write", then: []Op{OpScan([]byte("a"), []byte("z"), 5), OpPut(k, []byte("v"))},
			want: `then op 1 (scan "a" "z" --limit 5) reads "k", which op 2 writes`},
		{name: "scan end is exclusive", then: []Op{OpScan([]byte("a"), k, 0), OpPut(k, nil)}},
		{name: "zero op", els: []Op{{}}, want: "else op 1 ((no op)): no operation: use OpGet, OpPut, OpDelete or OpScan"},
	} {
		err := validateTxn(tc.cmps, tc.then, tc.els, 2)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

func TestTxnStrings(t *testing.T) {
	for got, want := range map[string]string{
		Compare(Version([]byte("a")), "=", 3).String():               `ver("a") = 3`,
		Compare(Value([]byte("a\x00")), "!=", "x y").String():        `val("a\x00") != "x y"`,
		KeyExists([]byte("k")).String():                              `ver("k") > 0`,
		Compare(Value([]byte("k")), "<", []byte{0xff}).String():      `val("k") < "\xff"`,
		OpPut([]byte("k"), []byte("v")).String():                     `put "k" "v"`,
		OpGet([]byte("k")).String():                                  `get "k"`,
		OpDelete([]byte("k")).String():                               `del "k"`,
		OpScan(nil, nil, 0).String():                                 `scan ""`,
		OpScan([]byte("a"), []byte("b"), 7).String():                 `scan "a" "b" --limit 7`,
		KindScan.String() + KindDelete.String() + OpKind(0).String(): "scandeletenone",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

func TestTxnSmallestKey(t *testing.T) {
	c := &Client{}
	txn := c.Txn(t.Context()).If(KeyExists([]byte("m"))).Then(OpScan(nil, nil, 0), OpPut([]byte("q"), nil)).Else(OpGet([]byte("c")))
	if got := txn.smallestKey(); got == nil || len(got) != 0 {
		t.Errorf("smallestKey = %q, want the empty scan start", got)
	}
	txn = c.Txn(t.Context()).If(KeyExists([]byte("m"))).Then(OpScan([]byte("d"), nil, 0), OpPut([]byte("q"), nil)).Else(OpGet([]byte("c")))
	if got := string(txn.smallestKey()); got != "c" {
		t.Errorf("smallestKey = %q, want c", got)
	}
	if got := c.Txn(t.Context()).smallestKey(); got != nil {
		t.Errorf("smallestKey of an empty txn = %q, want nil (any node)", got)
	}
}

func TestConfigMaxTxnOps(t *testing.T) {
	c := Config{Endpoints: []string{"a:1"}}
	if err := c.Validate(); err != nil || c.MaxTxnOps != DefaultMaxTxnOps {
		t.Errorf("MaxTxnOps = %d, %v; want the default %d", c.MaxTxnOps, err, DefaultMaxTxnOps)
	}
	c = Config{Endpoints: []string{"a:1"}, MaxTxnOps: -1}
	if err := c.Validate(); err == nil {
		t.Error("Validate accepted a negative MaxTxnOps")
	}
}
