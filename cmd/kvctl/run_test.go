package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/client/clienttest"
)

type result struct {
	code           int
	stdout, stderr string
}

// kvctl runs the program with env as its whole environment.
func kvctl(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := runEnv(args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return result{code, out.String(), errb.String()}
}

// on runs kvctl against cl.
func on(t *testing.T, cl *clienttest.Cluster, args ...string) result {
	t.Helper()
	return kvctl(t, nil, "", append([]string{"--endpoints", strings.Join(cl.Endpoints(), ",")}, args...)...)
}

func want(t *testing.T, r result, code int, stdout string) {
	t.Helper()
	if r.code != code || r.stdout != stdout {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q", r.code, r.stdout, r.stderr, code, stdout)
	}
}

func decode(t *testing.T, r result, v any) {
	t.Helper()
	if strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("json output is not one line: %q (exit %d, stderr %q)", r.stdout, r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("bad json %q: %v (exit %d, stderr %q)", r.stdout, err, r.code, r.stderr)
	}
}

func TestPutGetDelText(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	want(t, on(t, cl, "put", "k", "v"), 0, "OK\n")
	want(t, on(t, cl, "get", "k"), 0, "v\n")
	want(t, on(t, cl, "get", "k", "--print-key"), 0, "k\nv\n")
	want(t, on(t, cl, "del", "k"), 0, "1\n")
	want(t, on(t, cl, "del", "k"), 0, "0\n")
	r := on(t, cl, "get", "k")
	want(t, r, 1, "")
	if !strings.Contains(r.stderr, "not found") || !strings.HasPrefix(r.stderr, "Error: ") {
		t.Errorf("stderr = %q", r.stderr)
	}
	// The value comes from stdin when omitted.
	r = kvctl(t, nil, "from\nstdin", "--endpoints", strings.Join(cl.Endpoints(), ","), "put", "s")
	want(t, r, 0, "OK\n")
	if kv := cl.Value([]byte("s")); kv == nil || string(kv.Value) != "from\nstdin" {
		t.Errorf("stored %v", kv)
	}
}

func TestJSON(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	cl.SetCutVersion(5)
	var put struct {
		Header map[string]any `json:"header"`
	}
	r := on(t, cl, "-o", "json", "put", "k", "v")
	decode(t, r, &put)
	leader := cl.Leader([]byte("k")).ID
	if put.Header["member_id"] != leader || put.Header["cut_version"] != float64(5) || put.Header["cluster_id"] != cl.ClusterID {
		t.Errorf("put header = %v", put.Header)
	}
	if _, ok := put.Header["raft_term"]; !ok {
		t.Error("header lacks raft_term")
	}

	var get struct {
		Header struct {
			ClusterID  string `json:"cluster_id"`
			MemberID   string `json:"member_id"`
			RaftTerm   uint64 `json:"raft_term"`
			CutVersion uint64 `json:"cut_version"`
		} `json:"header"`
		KVs []struct {
			Key         []byte `json:"key"`
			Value       []byte `json:"value"`
			Version     int64  `json:"version"`
			CreateIndex uint64 `json:"create_index"`
			ModIndex    uint64 `json:"mod_index"`
		} `json:"kvs"`
		Count int `json:"count"`
	}
	r = on(t, cl, "get", "k", "--output=json")
	decode(t, r, &get)
	if r.code != 0 || get.Count != 1 || len(get.KVs) != 1 || string(get.KVs[0].Key) != "k" || string(get.KVs[0].Value) != "v" ||
		get.KVs[0].Version != 1 || get.KVs[0].CreateIndex == 0 || get.KVs[0].ModIndex == 0 || get.Header.MemberID != leader {
		t.Errorf("get json = %+v (exit %d)", get, r.code)
	}
	if !strings.Contains(r.stdout, `"key":"aw=="`) {
		t.Errorf("key not base64 in %s", r.stdout)
	}

	r = on(t, cl, "-o", "json", "get", "missing")
	want(t, r, 1, r.stdout)
	get.Count = -1
	decode(t, r, &get)
	if get.Count != 0 || !strings.Contains(r.stdout, `"kvs":[]`) {
		t.Errorf("missing key json = %s", r.stdout)
	}

	var del struct {
		Header  map[string]any `json:"header"`
		Deleted int            `json:"deleted"`
	}
	decode(t, on(t, cl, "-o", "json", "del", "k"), &del)
	if del.Deleted != 1 || del.Header["member_id"] != leader {
		t.Errorf("del json = %+v", del)
	}
}

func TestBinaryKeysJSON(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	keys := [][]byte{{0x00, 0xff, '\n'}, {0x01}, []byte("plain"), {0xc3, 0x28}}
	for i, k := range keys {
		r := on(t, cl, "put", string(k), string([]byte{byte(i), 0xfe, 0}))
		want(t, r, 0, "OK\n")
	}
	var scan struct {
		KVs []struct {
			Key   []byte `json:"key"`
			Value []byte `json:"value"`
		} `json:"kvs"`
		Count int  `json:"count"`
		More  bool `json:"more"`
	}
	decode(t, on(t, cl, "-o", "json", "scan"), &scan)
	if scan.Count != len(keys) || scan.More {
		t.Fatalf("scan json = %+v", scan)
	}
	got := make(map[string]string)
	for _, kv := range scan.KVs {
		got[string(kv.Key)] = string(kv.Value)
	}
	for i, k := range keys {
		if got[string(k)] != string([]byte{byte(i), 0xfe, 0}) {
			t.Errorf("key %q: value %q did not round-trip", k, got[string(k)])
		}
	}
	for i := 1; i < len(scan.KVs); i++ {
		if bytes.Compare(scan.KVs[i-1].Key, scan.KVs[i].Key) >= 0 {
			t.Errorf("scan out of order at %d", i)
		}
	}
	// The text mode prints raw bytes.
	want(t, on(t, cl, "get", string(keys[0])), 0, string([]byte{0, 0xfe, 0})+"\n")
}

func TestScan(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	for _, k := range []string{"a", "b", "c", "d"} {
		cl.Put([]byte(k), []byte("v"+k))
	}
	want(t, on(t, cl, "scan"), 0, "a\nva\nb\nvb\nc\nvc\nd\nvd\n")
	want(t, on(t, cl, "scan", "b"), 0, "b\nvb\nc\nvc\nd\nvd\n")
	want(t, on(t, cl, "scan", "b", "d"), 0, "b\nvb\nc\nvc\n")
	want(t, on(t, cl, "scan", "--keys-only"), 0, "a\nb\nc\nd\n")
	want(t, on(t, cl, "scan", "--limit", "2"), 0, "a\nva\nb\nvb\n")

	var scan struct {
		KVs   []map[string]any `json:"kvs"`
		Count int              `json:"count"`
		More  bool             `json:"more"`
	}
	decode(t, on(t, cl, "-o", "json", "scan", "--limit", "2"), &scan)
	if scan.Count != 2 || !scan.More {
		t.Errorf("limited scan json = %+v", scan)
	}
	scan.KVs = nil // Unmarshal would merge into the old maps
	decode(t, on(t, cl, "-o", "json", "scan", "--keys-only", "c"), &scan)
	if scan.Count != 2 || scan.More {
		t.Errorf("keys-only scan json = %+v", scan)
	}
	if _, ok := scan.KVs[0]["value"]; ok {
		t.Errorf("keys-only json has values: %v", scan.KVs)
	}

	// More than one page.
	for i := range 2500 {
		cl.Put(fmt.Appendf(nil, "p%05d", i), nil)
	}
	decode(t, on(t, cl, "-o", "json", "scan", "p", "q", "--keys-only"), &scan)
	if scan.Count != 2500 || scan.More {
		t.Errorf("paged scan: count %d more %v", scan.Count, scan.More)
	}
	decode(t, on(t, cl, "-o", "json", "scan", "p", "q", "--limit", "1500"), &scan)
	if scan.Count != 1500 || !scan.More {
		t.Errorf("paged limited scan: count %d more %v", scan.Count, scan.More)
	}
}

func TestMembers(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	r := on(t, cl, "members")
	if r.code != 0 {
		t.Fatalf("members: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "ID STATE GRPC PEER GOSSIP HTTP SINCE" {
		t.Fatalf("members table:\n%s", r.stdout)
	}
	if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "n1" || f[1] != "alive" || f[2] != cl.Nodes[0].Addr || f[6] != "2023-11-14T22:13:20Z" {
		t.Errorf("row %q", lines[1])
	}
	var js struct {
		Members []struct {
			ID          string `json:"id"`
			RaftID      uint64 `json:"raft_id"`
			GRPCAddr    string `json:"grpc_addr"`
			GossipAddr  string `json:"gossip_addr"`
			HTTPAddr    string `json:"http_addr"`
			State       string `json:"state"`
			SinceUnixMs int64  `json:"since_unix_ms"`
		} `json:"members"`
	}
	decode(t, on(t, cl, "members", "-o", "json"), &js)
	if len(js.Members) != 3 || js.Members[1].ID != "n2" || js.Members[1].RaftID != 2 || js.Members[1].State != "alive" ||
		js.Members[1].GRPCAddr != cl.Nodes[1].Addr || js.Members[1].GossipAddr == "" || js.Members[1].HTTPAddr == "" || js.Members[1].SinceUnixMs != 1700000001000 {
		t.Errorf("members json = %+v", js)
	}
}

func TestStatus(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 2})
	cl.Put([]byte("k"), []byte("v"))
	r := on(t, cl, "status")
	if r.code != 0 {
		t.Fatalf("status: %+v", r)
	}
	parts := strings.Split(r.stdout, "\n\n")
	if len(parts) != 2 {
		t.Fatalf("status output:\n%s", r.stdout)
	}
	groups := strings.Split(strings.TrimSpace(parts[0]), "\n")
	if len(groups) != 4 || strings.Join(strings.Fields(groups[0]), " ") != "GROUP LEADER TERM COMMIT APPLIED MATERIALIZED MATS WAL TAIL REPLICAS" ||
		!strings.HasPrefix(groups[1], "0 ") || !strings.HasSuffix(strings.Join(strings.Fields(groups[1]), " "), " - 0 0 (0 B) n1,n2,n3") {
		t.Errorf("group table:\n%s", parts[0])
	}
	nodes := strings.Split(strings.TrimSpace(parts[1]), "\n")
	if len(nodes) != 4 || strings.Join(strings.Fields(nodes[0]), " ") != "NODE SERVING WAL FREE DISK" ||
		strings.Join(strings.Fields(nodes[1]), " ") != "n1 yes 1.5 KiB 20.0 GiB" {
		t.Errorf("node table:\n%s", parts[1])
	}

	var js struct {
		Header     map[string]any `json:"header"`
		ClusterID  string         `json:"cluster_id"`
		Partitions uint32         `json:"partitions"`
		Groups     []struct {
			ID           uint64   `json:"id"`
			Leader       string   `json:"leader"`
			Term         uint64   `json:"term"`
			CommitIndex  uint64   `json:"commit_index"`
			AppliedIndex uint64   `json:"applied_index"`
			Replicas     []string `json:"replicas"`
			Keys         uint64   `json:"keys"`
		} `json:"groups"`
		Nodes []struct {
			ID            string `json:"id"`
			Serving       bool   `json:"serving"`
			WALBytes      int64  `json:"wal_bytes"`
			DiskFreeBytes uint64 `json:"disk_free_bytes"`
		} `json:"nodes"`
	}
	decode(t, on(t, cl, "status", "-o", "json"), &js)
	p := cl.PartitionOf([]byte("k"))
	if js.ClusterID != cl.ClusterID || js.Partitions != 2 || len(js.Groups) != 3 || js.Groups[p].Keys != 1 || js.Groups[p].CommitIndex != 1 ||
		len(js.Groups[0].Replicas) != 3 || len(js.Nodes) != 3 || !js.Nodes[2].Serving || js.Nodes[2].WALBytes != 4608 || js.Nodes[0].DiskFreeBytes != 20<<30 {
		t.Errorf("status json = %+v", js)
	}

	// A node that cannot be asked gets an ERROR column.
	cl.Nodes[2].Stop()
	r = on(t, cl, "status")
	if r.code != 0 || !strings.Contains(r.stdout, "ERROR") || !strings.Contains(r.stdout, "unreachable") {
		t.Errorf("status with a dead node:\n%s%s", r.stdout, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 1})
	for _, args := range [][]string{
		{},
		{"nosuchcommand"},
		{"--bogus", "get", "k"},
		{"get"},
		{"get", "a", "b"},
		{"put"},
		{"put", "a", "b", "c"},
		{"del"},
		{"scan", "a", "b", "c"},
		{"scan", "--limit", "-1"},
		{"scan", "--limit", "x"},
		{"members", "extra"},
		{"-o", "yaml", "get", "k"},
		{"--timeout", "0s", "get", "k"},
		{"--timeout", "soon", "get", "k"},
		{"--endpoints", " , ", "get", "k"},
		{"get", strings.Repeat("k", 5000)},
		{"put", "", "v"},
	} {
		full := append([]string{"--endpoints", strings.Join(cl.Endpoints(), ",")}, args...)
		if len(args) > 0 && args[0] == "--endpoints" {
			full = args
		}
		r := kvctl(t, nil, "", full...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "Error: ") {
			t.Errorf("kvctl %q: exit %d, stderr %q; want 2", args, r.code, r.stderr)
		}
	}
	want(t, kvctl(t, nil, "", "--help"), 0, kvctl(t, nil, "", "--help").stdout)
}

func TestUnavailable(t *testing.T) {
	dead := clienttest.DeadAddr(t) + "," + clienttest.DeadAddr(t)
	r := kvctl(t, nil, "", "--endpoints", dead, "--dial-timeout", "200ms", "get", "k")
	if r.code != 3 || !strings.Contains(r.stderr, "unavailable") || !strings.Contains(r.stderr, "--endpoints") {
		t.Errorf("dead cluster: %+v", r)
	}

	// Reachable, but never able to serve before the deadline. (A write
	// could end in exit 4 if the deadline caught an attempt in flight.)
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 2, Partitions: 1})
	for _, n := range cl.Nodes {
		n.SetHook(func(ctx context.Context, m string, _ proto.Message) error {
			if m == clienttest.MethodGet {
				return clienttest.NotApplied(clienttest.ReasonNoLeader, "")
			}
			return nil
		})
	}
	r = on(t, cl, "--timeout", "2s", "get", "k") // long enough for one answer on a loaded machine
	if r.code != 3 || !strings.Contains(r.stderr, "NO_LEADER") {
		t.Errorf("no leader: %+v", r)
	}
}

func TestOutcomeUnknown(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 2, Partitions: 1})
	for _, n := range cl.Nodes {
		n.SetHook(func(ctx context.Context, m string, _ proto.Message) error {
			if m == clienttest.MethodPut || m == clienttest.MethodDelete {
				return status.Error(codes.Unavailable, "connection reset by peer")
			}
			return nil
		})
	}
	for _, args := range [][]string{{"put", "k", "v"}, {"del", "k"}} {
		r := on(t, cl, args...)
		if r.code != 4 || !strings.Contains(r.stderr, "may or may not have been applied") {
			t.Errorf("%q: %+v", args, r)
		}
	}
	if got := cl.Nodes[0].Calls(clienttest.MethodPut) + cl.Nodes[1].Calls(clienttest.MethodPut); got != 1 {
		t.Errorf("put sent %d times, want 1", got)
	}
}

func TestOtherErrorExit1(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 1})
	cl.Nodes[0].SetHook(func(ctx context.Context, m string, _ proto.Message) error {
		if m == clienttest.MethodGet {
			return status.Error(codes.FailedPrecondition, "partition is being restored")
		}
		return nil
	})
	r := on(t, cl, "get", "k")
	if r.code != 1 || !strings.Contains(r.stderr, "being restored") {
		t.Errorf("%+v", r)
	}
}

func TestEndpointsPrecedence(t *testing.T) {
	a := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 1})
	b := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 1})
	a.Put([]byte("k"), []byte("from-a"))
	b.Put([]byte("k"), []byte("from-b"))
	env := map[string]string{envEndpoints: a.Endpoints()[0]}
	want(t, kvctl(t, env, "", "get", "k"), 0, "from-a\n")
	want(t, kvctl(t, env, "", "--endpoints", b.Endpoints()[0], "get", "k"), 0, "from-b\n")
	want(t, kvctl(t, env, "", "get", "k", "--endpoints="+b.Endpoints()[0]), 0, "from-b\n")

	// Without the variable or the flag, the built-in default applies.
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", nil, defaultEndpoints},
		{" x:1 , y:2 ", nil, "x:1,y:2"},
		{"x:1", []string{"--endpoints", "z:3"}, "z:3"},
	} {
		g := &globals{getenv: func(string) string { return tc.env }}
		root := newRootCmd(g)
		var got []string
		root.AddCommand(&cobra.Command{Use: "probe", RunE: func(cmd *cobra.Command, _ []string) error {
			got = g.endpointList(cmd)
			return nil
		}})
		root.SetArgs(append(tc.args, "probe"))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("env %q args %q: endpoints %q, want %q", tc.env, tc.args, got, tc.want)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, w := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 20 << 30: "20.0 GiB", 5 << 40: "5.0 TiB", 1<<64 - 1: "16.0 EiB",
	} {
		if got := humanBytes(n); got != w {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, w)
		}
	}
}
