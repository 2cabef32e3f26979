package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/client/clienttest"
)

func TestParseTxn(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	ver := func(k string, op string, n int64) client.Cmp { return client.Compare(client.Version(b(k)), op, n) }
	val := func(k string, op string, v string) client.Cmp { return client.Compare(client.Value(b(k)), op, b(v)) }
	type ops = []client.Op
	for _, tc := range []struct {
		name      string
		src       string
		cmps      []client.Cmp
		then, els ops
	}{
		{name: "empty"},
		{name: "bank transfer", src: `# move 10 from alice to bob
ver(acct/alice) = 4
ver(acct/bob) = 7

put acct/alice 90
put acct/bob 60

get acct/alice
get acct/bob
`,
			cmps: []client.Cmp{ver("acct/alice", "=", 4), ver("acct/bob", "=", 7)},
			then: ops{client.OpPut(b("acct/alice"), b("90")), client.OpPut(b("acct/bob"), b("60"))},
			els:  ops{client.OpGet(b("acct/alice")), client.OpGet(b("acct/bob"))}},
		{name: "every compare", src: "ver(a)=0\nver( a ) != 1\n  ver(\"a b\") < 2\t\nver(a) > 9223372036854775807\nval(k) = v\nval(\"k)\") != \"x y\"\nval(k)<\"\\x00\\xff\"\nval(k) > \"\"\n",
			cmps: []client.Cmp{ver("a", "=", 0), ver("a", "!=", 1), ver("a b", "<", 2), ver("a", ">", 1<<63-1),
				val("k", "=", "v"), val("k)", "!=", "x y"), val("k", "<", "\x00\xff"), val("k", ">", "")}},
		{name: "every op", src: "\nput k v\nget g\ndel d\ndelete e\n\nscan a\nscan \"\" z --limit 5\nscan b --limit=2 c\nscan \"--limit\" --limit 0\n",
			then: ops{client.OpPut(b("k"), b("v")), client.OpGet(b("g")), client.OpDelete(b("d")), client.OpDelete(b("e"))},
			els:  ops{client.OpScan(b("a"), nil, 0), client.OpScan(b(""), b("z"), 5), client.OpScan(b("b"), b("c"), 2), client.OpScan(b("--limit"), nil, 0)}},
		{name: "quoting and binary", src: "\nput \"a\\x00b\" \"line\\nbreak\\t\\\"q\\\"\"\nput raw\xff\x01 \xfe\nput e \"\"\n",
			then: ops{client.OpPut(b("a\x00b"), b("line\nbreak\t\"q\"")), client.OpPut(b("raw\xff\x01"), b("\xfe")), client.OpPut(b("e"), b(""))}},
		{name: "comments", src: "# header\nval(k) = v # trailing\n# between\n\nput k \"#v\"  # a value that starts with #\nput j v#x\n   # indented comment\n",
			cmps: []client.Cmp{val("k", "=", "v")}, then: ops{client.OpPut(b("k"), b("#v")), client.OpPut(b("j"), b("v#x"))}},
		{name: "only failure ops", src: "ver(k) = 0\n\n\nput k v\n", cmps: []client.Cmp{ver("k", "=", 0)}, els: ops{client.OpPut(b("k"), b("v"))}},
		{name: "crlf and trailing blank lines", src: "ver(k) = 1\r\n\r\nget k\r\n\r\nget j\r\n\r\n\r\n\n",
			cmps: []client.Cmp{ver("k", "=", 1)}, then: ops{client.OpGet(b("k"))}, els: ops{client.OpGet(b("j"))}},
		{name: "scan end is exclusive", src: "\nscan a k\nput k v\n", then: ops{client.OpScan(b("a"), b("k"), 0), client.OpPut(b("k"), b("v"))}},
		{name: "branches apart", src: "\nput k 1\n\nput k 2\nget j\n", then: ops{client.OpPut(b("k"), b("1"))}, els: ops{client.OpPut(b("k"), b("2")), client.OpGet(b("j"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := parseTxn([]byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if got := spec.cmps; len(got) != len(tc.cmps) || (len(got) > 0 && !reflect.DeepEqual(got, tc.cmps)) {
				t.Errorf("compares %v\nwant      %v", got, tc.cmps)
			}
			for i, w := range []ops{tc.then, tc.els} {
				if got := spec.ops(i); len(got) != len(w) || (len(got) > 0 && !reflect.DeepEqual(got, w)) {
					t.Errorf("branch %d: %v\nwant      %v", i, got, w)
				}
			}
		})
	}
}

func TestParseTxnErrors(t *testing.T) {
	big := strings.Repeat("k", client.MaxKeySize+1)
	for _, tc := range []struct{ src, want string }{
		{"put k v\n", `line 1: "put" is an op, but compares come first`},
		{"ver(k) = 1\nver(k) == 1\n", `line 2: unknown operator "=="`},
		{"ver(k) = x", `line 1: version "x" is not an integer`},
		{"ver(k) = -1", `line 1: version "-1" is not an integer ≥ 0`},
		{"ver(k = 1", `line 1: missing ')' after the key`},
		{"ver() = 1", `line 1: missing key in ver()`},
		{`ver("") = 1`, `line 1: empty key`},
		{"ver(" + big + ") = 1", `line 1: key is 4097 bytes`},
		{"ver(k) 1", `line 1: missing operator`},
		{"val(k) =", `line 1: missing operand after "="`},
		{"val(k) = # comment", `line 1: missing operand`},
		{"val(k) = a b", `line 1: unexpected "b" after the operand`},
		{"value(k) = a", `line 1: want a compare, ver(KEY) OP N or val(KEY) OP VALUE`},
		{"# c\n\nver(k) = 1", `line 3: a compare among the success ops`},
		{"\n\nval(k) = 1", `line 3: a compare among the failure ops`},
		{"\nput k", `line 2: put takes KEY VALUE, got 1 words`},
		{"\nput k a b", `line 2: put takes KEY VALUE, got 3 words`},
		{"\nget", `line 2: get takes one KEY`},
		{"\ndel a b", `line 2: del takes one KEY`},
		{"\nfrob k", `line 2: unknown op "frob"`},
		{"\n\"put\" k v", `line 2: unknown op "put"`},
		{"\nput \"k v", `line 2: unterminated quoted string`},
		{"\nput \"k\"x v", `line 2: unexpected 'x' right after the quoted string`},
		{"\nput a\"b v", `line 2: a quote inside the bare word a"b`},
		{"\nput k \"\\q\"", `line 2: bad quoted string`},
		{"\nput k \"\xff\"", `line 2: bytes that are not UTF-8 inside a quoted string`},
		{"\nget \"\"", `line 2: empty key`},
		{"\nput k " + strings.Repeat("v", client.MaxValueSize+1), `line 2: value is 1048577 bytes`},
		{"\nscan", `line 2: scan takes FROM [TO]`},
		{"\nscan a b c", `line 2: scan takes FROM [TO], got 3 bounds`},
		{"\nscan a --limit", `line 2: --limit needs a number`},
		{"\nscan a --limit -1", `line 2: invalid --limit "-1"`},
		{"\nscan a --limit=x", `line 2: invalid --limit "x"`},
		{"\nscan a --keys-only", `line 2: unknown scan flag "--keys-only"`},
		{"\nget a\n\nget b\n\nget c\n", `line 6: a fourth section`},
		{"\nput k 1\n# x\ndel k\n", `line 4: delete writes "k", which line 2 already writes`},
		{"\n\nput j 1\nget k\nput k 2\n", `line 4: get reads "k", which line 5 writes`},
		{"\nscan a z\nget x\nput m 1\n", `line 2: scan covers "m", which line 4 writes`},
		{"\nput m 1\nscan m\n", `line 3: scan covers "m", which line 2 writes`},
	} {
		_, err := parseTxn([]byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("parseTxn(%.40q) = %v\nwant prefix %s", tc.src, err, tc.want)
		}
	}
}

// onIn runs kvctl against cl with stdin.
func onIn(t *testing.T, cl *clienttest.Cluster, stdin string, args ...string) result {
	t.Helper()
	return kvctl(t, nil, stdin, append([]string{"--endpoints", strings.Join(cl.Endpoints(), ",")}, args...)...)
}

const transfer = `# move 10 from alice to bob if neither changed since read at version 1
ver(acct/alice) = 1
val(acct/bob) = 50

put acct/alice 90
put acct/bob 60
del acct/pending
get acct/carol
scan log/ log0

get acct/alice
get acct/bob
`

func TestTxnText(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	cl.Put([]byte("acct/alice"), []byte("100"))
	cl.Put([]byte("acct/bob"), []byte("50"))
	cl.Put([]byte("acct/pending"), []byte("x"))
	cl.Put([]byte("log/1"), []byte("a"))
	cl.Put([]byte("log/2"), []byte("b"))
	want(t, onIn(t, cl, transfer, "txn"), 0, "SUCCESS\nOK\nOK\n1\nlog/1\na\nlog/2\nb\n")
	if a, b := cl.Value([]byte("acct/alice")), cl.Value([]byte("acct/bob")); string(a.GetValue()) != "90" || string(b.GetValue()) != "60" {
		t.Errorf("after the transfer: %v %v", a, b)
	}
	// Run again: the compares fail now, the failure ops read.
	want(t, onIn(t, cl, transfer, "txn"), 0, "FAILURE\nacct/alice\n90\nacct/bob\n60\n")

	// From a file, with binary keys and values through quoting.
	path := filepath.Join(t.TempDir(), "bin.txn")
	src := "val(\"b\\x00in\") != \"x\"\n\nput flag 1\n\nput \"b\\x00in\" \"\\xff\\x00\\n\"\nget flag\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// The key is absent, so the value compare is false; get prints nothing
	// for the absent flag.
	want(t, on(t, cl, "txn", "-f", path), 0, "FAILURE\nOK\n")
	if kv := cl.Value([]byte("b\x00in")); kv == nil || string(kv.GetValue()) != "\xff\x00\n" {
		t.Errorf("stored %v", kv)
	}
	want(t, on(t, cl, "txn", "--file", path), 0, "SUCCESS\nOK\n")
	want(t, onIn(t, cl, "", "txn"), 0, "SUCCESS\n")
	want(t, onIn(t, cl, "\nget flag\n", "txn", "-f", "-"), 0, "SUCCESS\nflag\n1\n")
}

func TestTxnJSON(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 4})
	cl.SetCutVersion(3)
	cl.Put([]byte("acct/alice"), []byte("100"))
	cl.Put([]byte("acct/bob"), []byte("50"))
	cl.Put([]byte("acct/pending"), []byte("x"))
	cl.Put([]byte("log/1"), []byte("a"))
	var out struct {
		Header struct {
			ClusterID  string `json:"cluster_id"`
			MemberID   string `json:"member_id"`
			CutVersion uint64 `json:"cut_version"`
		} `json:"header"`
		Succeeded *bool `json:"succeeded"`
		Responses []map[string]struct {
			KVs []struct {
				Key     []byte `json:"key"`
				Value   []byte `json:"value"`
				Version int64  `json:"version"`
			} `json:"kvs"`
			Count   *int  `json:"count"`
			More    *bool `json:"more"`
			Deleted *int  `json:"deleted"`
		} `json:"responses"`
	}
	r := onIn(t, cl, transfer, "-o", "json", "txn")
	decode(t, r, &out)
	if r.code != 0 || out.Succeeded == nil || !*out.Succeeded || out.Header.ClusterID != cl.ClusterID || out.Header.CutVersion != 3 || out.Header.MemberID == "" {
		t.Fatalf("exit %d, %s", r.code, r.stdout)
	}
	rs := out.Responses
	if len(rs) != 5 {
		t.Fatalf("%d responses, want 5: %s", len(rs), r.stdout)
	}
	for i, kind := range []string{"put", "put", "delete", "get", "scan"} {
		if _, ok := rs[i][kind]; !ok || len(rs[i]) != 1 {
			t.Errorf("response %d = %v, want one %q field", i, rs[i], kind)
		}
	}
	if !strings.Contains(r.stdout, `{"put":{}}`) {
		t.Errorf("put is not {\"put\":{}}: %s", r.stdout)
	}
	if d := rs[2]["delete"].Deleted; d == nil || *d != 1 {
		t.Errorf("delete = %+v", rs[2])
	}
	if g := rs[3]["get"]; g.Count == nil || *g.Count != 0 || g.KVs == nil || len(g.KVs) != 0 || g.More != nil {
		t.Errorf("get of an absent key = %+v (want kvs [] and count 0)", g)
	}
	if s := rs[4]["scan"]; len(s.KVs) != 1 || string(s.KVs[0].Key) != "log/1" || string(s.KVs[0].Value) != "a" || s.More == nil || *s.More || *s.Count != 1 {
		t.Errorf("scan = %+v", s)
	}
	if !strings.Contains(r.stdout, `"key":"bG9nLzE="`) {
		t.Errorf("keys are not base64: %s", r.stdout)
	}

	out.Responses = nil
	r = onIn(t, cl, transfer, "-o", "json", "txn")
	decode(t, r, &out)
	if r.code != 0 || *out.Succeeded || len(out.Responses) != 2 {
		t.Fatalf("second run: exit %d, %s", r.code, r.stdout)
	}
	if g := out.Responses[0]["get"]; len(g.KVs) != 1 || string(g.KVs[0].Value) != "90" || g.KVs[0].Version != 2 || *g.Count != 1 {
		t.Errorf("get = %+v", g)
	}
	if !strings.Contains(r.stdout, `"succeeded":false`) {
		t.Errorf("succeeded:false is left out: %s", r.stdout)
	}
}

func TestTxnUsageErrors(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 1})
	for _, tc := range []struct {
		stdin  string
		args   []string
		stderr string
	}{
		{"ver(k) = 1\n\nput k\n", []string{"txn"}, "Error: stdin: line 3: put takes KEY VALUE"},
		{"", []string{"txn", "-f", filepath.Join(t.TempDir(), "nope.txn")}, "Error: reading the transaction:"},
		{"", []string{"txn", "extra"}, "Error: unknown command"},
		{"", []string{"txn", "--max-ops", "0"}, "Error: invalid --max-ops 0"},
		{"\nput a 1\nput b 2\nput c 3\n", []string{"txn", "--max-ops", "2"}, "Error: client: invalid argument: txn: then: 3 ops, more than 2"},
	} {
		r := onIn(t, cl, tc.stdin, tc.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, tc.stderr) || r.stdout != "" {
			t.Errorf("kvctl %q: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.stderr)
		}
	}
	if n := cl.Nodes[0].Calls(clienttest.MethodTxn); n != 0 {
		t.Errorf("%d invalid txns were sent", n)
	}
	// A line-numbered error names the file.
	path := filepath.Join(t.TempDir(), "bad.txn")
	if err := os.WriteFile(path, []byte("ver(k) = 1\n\nfrob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := on(t, cl, "txn", "-f", path); r.code != 2 || !strings.HasPrefix(r.stderr, "Error: "+path+": line 3: unknown op") || !strings.Contains(r.stderr, "kvctl txn --help") {
		t.Errorf("bad file: %+v", r)
	}
	// The server's InvalidArgument: exit 2, sent once.
	cl.Nodes[0].SetHook(func(ctx context.Context, m string, _ proto.Message) error {
		if m == clienttest.MethodTxn {
			return status.Error(codes.InvalidArgument, "cutkv: txn: too big")
		}
		return nil
	})
	if r := onIn(t, cl, "\nput k v\n", "txn"); r.code != 2 || !strings.Contains(r.stderr, "too big") || !strings.Contains(r.stderr, "--max-ops") {
		t.Errorf("server InvalidArgument: %+v", r)
	}
	if n := cl.Nodes[0].Calls(clienttest.MethodTxn); n != 1 {
		t.Errorf("txn sent %d times, want 1", n)
	}
}

// onTxnUntilSettled runs a txn that fails until --timeout; the deadline
// may, rarely, catch an attempt in flight, which rightly exits 4 (outcome
// unknown): then it tries again.
func onTxnUntilSettled(t *testing.T, cl *clienttest.Cluster, stdin string) result {
	t.Helper()
	for try := 0; ; try++ {
		r := onIn(t, cl, stdin, "--timeout", "300ms", "txn")
		if r.code != exitUnknown || try == 3 {
			return r
		}
		t.Logf("the deadline caught an attempt in flight: %s", r.stderr)
	}
}

func TestTxnExitCodes(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 2, Partitions: 2})
	setTxnHook := func(h func() error) {
		for _, n := range cl.Nodes {
			n.SetHook(func(ctx context.Context, m string, _ proto.Message) error {
				if m == clienttest.MethodTxn {
					return h()
				}
				return nil
			})
		}
	}

	setTxnHook(func() error { return status.Error(codes.Aborted, "cutkv: txn: conflict") })
	r := onTxnUntilSettled(t, cl, "\nput k v\n")
	if r.code != exitConflict || !strings.Contains(r.stderr, "transaction conflict") || !strings.Contains(r.stderr, "kept conflicting") || r.stdout != "" {
		t.Errorf("conflict: %+v", r)
	}

	setTxnHook(func() error { return clienttest.NotApplied(clienttest.ReasonNoLeader, "") })
	r = onTxnUntilSettled(t, cl, "\nput k v\n")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "NO_LEADER") {
		t.Errorf("no leader: %+v", r)
	}

	setTxnHook(func() error { return status.Error(codes.Unavailable, "connection reset by peer") })
	before := len(cl.TxnRequests())
	r = onIn(t, cl, "\nput k v\n", "txn")
	if r.code != exitUnknown || !strings.Contains(r.stderr, "transaction may or may not have been applied") {
		t.Errorf("outcome unknown: %+v", r)
	}
	if n := len(cl.TxnRequests()) - before; n != 1 {
		t.Errorf("an ambiguous txn was sent %d times, want 1", n)
	}
	if cl.Value([]byte("k")) != nil {
		t.Error("k was written")
	}

	setTxnHook(func() error { return nil })
	want(t, onIn(t, cl, "ver(k) > 0\n\nget k\n\nput k v\n", "txn"), 0, "FAILURE\nOK\n")
}
