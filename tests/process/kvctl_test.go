package process

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/keyspace"
)

// The JSON shapes of docs/cli.md, decoded by the test independently of
// kvctl's own types.
type (
	jHeader struct {
		ClusterID  string `json:"cluster_id"`
		MemberID   string `json:"member_id"`
		RaftTerm   uint64 `json:"raft_term"`
		CutVersion uint64 `json:"cut_version"`
	}
	jKV struct {
		Key         []byte `json:"key"`
		Value       []byte `json:"value"`
		Version     int64  `json:"version"`
		CreateIndex uint64 `json:"create_index"`
		ModIndex    uint64 `json:"mod_index"`
	}
	jKVs struct {
		Header jHeader `json:"header"`
		KVs    []jKV   `json:"kvs"`
		Count  int     `json:"count"`
		More   bool    `json:"more"`
	}
	jDel struct {
		Header  jHeader `json:"header"`
		Deleted int     `json:"deleted"`
	}
	jMember struct {
		ID          string `json:"id"`
		RaftID      uint64 `json:"raft_id"`
		GRPCAddr    string `json:"grpc_addr"`
		PeerAddr    string `json:"peer_addr"`
		GossipAddr  string `json:"gossip_addr"`
		HTTPAddr    string `json:"http_addr"`
		State       string `json:"state"`
		SinceUnixMs int64  `json:"since_unix_ms"`
	}
	jMembers struct {
		Header  jHeader   `json:"header"`
		Members []jMember `json:"members"`
	}
	jGroup struct {
		ID           uint64   `json:"id"`
		Leader       string   `json:"leader"`
		Term         uint64   `json:"term"`
		CommitIndex  uint64   `json:"commit_index"`
		AppliedIndex uint64   `json:"applied_index"`
		Replicas     []string `json:"replicas"`
		ReportedBy   string   `json:"reported_by"`
		Keys         uint64   `json:"keys"`
		// Checkpoints.
		MaterializedIndex uint64 `json:"materialized_index"`
		Materializations  uint32 `json:"materializations"`
		WALTailEntries    uint64 `json:"wal_tail_entries"`
		WALTailBytes      uint64 `json:"wal_tail_bytes"`
	}
	jNode struct {
		ID             string `json:"id"`
		Serving        bool   `json:"serving"`
		WALBytes       int64  `json:"wal_bytes"`
		WALFirstIndex  uint64 `json:"wal_first_index"`
		WALLastIndex   uint64 `json:"wal_last_index"`
		DiskFreeBytes  uint64 `json:"disk_free_bytes"`
		DiskTotalBytes uint64 `json:"disk_total_bytes"`
		Version        string `json:"version"`
		Error          string `json:"error"`
	}
	jStatus struct {
		Header     jHeader  `json:"header"`
		ClusterID  string   `json:"cluster_id"`
		Partitions uint32   `json:"partitions"`
		Groups     []jGroup `json:"groups"`
		Nodes      []jNode  `json:"nodes"`
	}
)

// Field sets of docs/cli.md.
var (
	headerFields = []string{"cluster_id", "cut_version", "member_id", "raft_term"}
	kvFields     = []string{"create_index", "key", "mod_index", "value", "version"}
	memberFields = []string{"gossip_addr", "grpc_addr", "http_addr", "id", "peer_addr", "raft_id", "since_unix_ms", "state"}
	groupFields  = []string{"applied_index", "commit_index", "id", "keys", "leader", "materializations", "materialized_index", "replicas", "reported_by", "term", "wal_tail_bytes", "wal_tail_entries"}
	nodeFields   = []string{"disk_free_bytes", "disk_total_bytes", "id", "serving", "version", "wal_bytes", "wal_first_index", "wal_last_index"}
)

// decodeJSON checks that r printed exactly one JSON object on one line,
// decodes it into v and returns its top-level fields.
func decodeJSON(t testing.TB, r kvctlResult, v any) map[string]json.RawMessage {
	t.Helper()
	if !strings.HasSuffix(r.stdout, "\n") || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("want one line of JSON; %v", r)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("not a JSON object: %v; %v", err, r)
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("JSON does not fit docs/cli.md: %v; %v", err, r)
	}
	return raw
}

// checkFields asserts that the JSON object raw has exactly the fields want.
func checkFields(t testing.TB, what string, raw json.RawMessage, want []string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: not an object: %s", what, raw)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: fields %v, docs/cli.md says %v (%s)", what, got, want, raw)
	}
}

// checkArrayFields applies checkFields to every element of the array raw.
func checkArrayFields(t testing.TB, what string, raw json.RawMessage, want []string) {
	t.Helper()
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		t.Fatalf("%s: not an array: %s", what, raw)
	}
	for i, it := range items {
		checkFields(t, fmt.Sprintf("%s[%d]", what, i), it, want)
	}
}

// want asserts an exit code and, if stdout is not nil, the exact output.
func want(t testing.TB, r kvctlResult, code int, stdout *string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d; %v", code, r)
	}
	if stdout != nil && r.stdout != *stdout {
		t.Fatalf("want stdout %q; %v", *stdout, r)
	}
	if code == 0 && r.stderr != "" {
		t.Errorf("stderr not empty on success; %v", r)
	}
}

func ptr(s string) *string { return &s }

// memberStates asks one node for the members and returns id -> state.
func memberStates(t testing.TB, endpoint string) (map[string]string, kvctlResult) {
	t.Helper()
	r := runKvctl(t, nil, nil, "--endpoints", endpoint, "-o", "json", "members")
	if r.code != 0 {
		return nil, r
	}
	var ms jMembers
	decodeJSON(t, r, &ms)
	states := map[string]string{}
	for _, m := range ms.Members {
		states[m.ID] = m.State
	}
	return states, r
}

// waitState waits until the node at endpoint reports member id in state.
func waitState(t testing.TB, endpoint, id, state string, d time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	ok, last := WaitFor(d, func() (bool, string) {
		states, r := memberStates(t, endpoint)
		return states[id] == state, r.String()
	})
	if !ok {
		t.Fatalf("%s not %q within %v as seen by %s; last answer: %s", id, state, d, endpoint, last)
	}
	return time.Since(began)
}

// TestKvctl drives every kvctl command against a 3-process cluster and
// checks outputs, JSON fields and exit codes against docs/cli.md.
func TestKvctl(t *testing.T) {
	c := NewCluster(t, Spec{Bin: bin.Kvnode})
	all := strings.Join(c.Endpoints(), ",")
	eps := []string{"--endpoints", all}
	ctl := func(t testing.TB, args ...string) kvctlResult { t.Helper(); return c.Kvctl(t, args...) }

	// Keys spread over the partitions: the scan merges them in key order.
	var keys []string
	for i := 1; i <= 12; i++ {
		keys = append(keys, fmt.Sprintf("user/%02d", i))
	}
	keys = append(keys, "alpha", "zeta", "user0")
	parts := map[uint64]bool{}
	for _, k := range keys {
		parts[keyspace.PartitionOf([]byte(k), 4)] = true
	}
	if len(parts) < 3 {
		t.Fatalf("test keys cover only %d of 4 partitions", len(parts))
	}
	for _, k := range keys {
		want(t, ctl(t, "put", k, "v-"+k), 0, ptr("OK\n"))
	}
	sort.Strings(keys)

	t.Run("get", func(t *testing.T) {
		want(t, ctl(t, "get", "user/03"), 0, ptr("v-user/03\n"))
		want(t, ctl(t, "get", "alpha", "--print-key"), 0, ptr("alpha\nv-alpha\n"))
		r := ctl(t, "get", "nope")
		want(t, r, 1, ptr(""))
		if r.stderr != "Error: key \"nope\" not found\n" {
			t.Errorf("stderr %q, want the docs/cli.md message", r.stderr)
		}
	})

	t.Run("scan", func(t *testing.T) {
		var all strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&all, "%s\nv-%s\n", k, k)
		}
		want(t, ctl(t, "scan"), 0, ptr(all.String()))
		want(t, ctl(t, "scan", "--keys-only"), 0, ptr(strings.Join(keys, "\n")+"\n"))
		// FROM <= key < TO, and a limit.
		want(t, ctl(t, "scan", "user/03", "user/07", "--keys-only"), 0, ptr("user/03\nuser/04\nuser/05\nuser/06\n"))
		want(t, ctl(t, "scan", "user/", "user0", "--limit", "2"), 0, ptr("user/01\nv-user/01\nuser/02\nv-user/02\n"))
		want(t, ctl(t, "scan", "user/10", "--keys-only"), 0, ptr("user/10\nuser/11\nuser/12\nuser0\nzeta\n"))
		want(t, ctl(t, "scan", "zz"), 0, ptr(""))
	})

	t.Run("json", func(t *testing.T) {
		// Binary bytes from stdin survive base64.
		value := []byte{0, 1, 2, 0xff, 0xfe, '\n', 'x', '\n'}
		r := runKvctl(t, nil, value, append(eps, "-o", "json", "put", "bin")...)
		want(t, r, 0, nil)
		var put struct {
			Header jHeader `json:"header"`
		}
		raw := decodeJSON(t, r, &put)
		checkFields(t, "put", mustMarshal(t, raw), []string{"header"})
		checkFields(t, "put.header", raw["header"], headerFields)
		if len(put.Header.ClusterID) != 16 || !slices.Contains([]string{"n1", "n2", "n3"}, put.Header.MemberID) || put.Header.RaftTerm == 0 {
			t.Errorf("put header %+v: want a cluster id, a member id and a raft term", put.Header)
		}
		clusterID := put.Header.ClusterID

		var get jKVs
		r = ctl(t, "-o", "json", "get", "bin")
		want(t, r, 0, nil)
		raw = decodeJSON(t, r, &get)
		checkFields(t, "get", mustMarshal(t, raw), []string{"count", "header", "kvs"})
		checkArrayFields(t, "get.kvs", raw["kvs"], kvFields)
		if get.Count != 1 || len(get.KVs) != 1 {
			t.Fatalf("get: count %d, %d kvs; want 1", get.Count, len(get.KVs))
		}
		kv := get.KVs[0]
		if string(kv.Key) != "bin" || !bytes.Equal(kv.Value, value) {
			t.Errorf("get: key %q value %q; want %q %q", kv.Key, kv.Value, "bin", value)
		}
		if kv.Version != 1 || kv.CreateIndex == 0 || kv.ModIndex != kv.CreateIndex {
			t.Errorf("get after one put: version %d create %d mod %d; want 1, n, n", kv.Version, kv.CreateIndex, kv.ModIndex)
		}
		if get.Header.ClusterID != clusterID || get.Header.RaftTerm == 0 {
			t.Errorf("get header %+v: want cluster %s and a raft term", get.Header, clusterID)
		}

		// A second write bumps version and mod_index, not create_index.
		want(t, ctl(t, "put", "bin", "second"), 0, ptr("OK\n"))
		var get2 jKVs
		decodeJSON(t, ctl(t, "-o", "json", "get", "bin"), &get2)
		if k2 := get2.KVs[0]; string(k2.Value) != "second" || k2.Version != 2 || k2.CreateIndex != kv.CreateIndex || k2.ModIndex <= kv.ModIndex {
			t.Errorf("after a second put: %+v; first was %+v", k2, kv)
		}

		// A missing key: JSON with count 0 and exit 1.
		var miss jKVs
		r = ctl(t, "-o", "json", "get", "nope")
		want(t, r, 1, nil)
		raw = decodeJSON(t, r, &miss)
		if string(raw["kvs"]) != "[]" || miss.Count != 0 {
			t.Errorf("missing key: kvs %s count %d; want [] and 0", raw["kvs"], miss.Count)
		}
		if !strings.HasPrefix(r.stderr, "Error: key \"nope\" not found") {
			t.Errorf("missing key: stderr %q", r.stderr)
		}

		// Scan: keys only, a limit, "more".
		var sc jKVs
		r = ctl(t, "-o", "json", "scan", "user/", "user0", "--limit", "2", "--keys-only")
		want(t, r, 0, nil)
		raw = decodeJSON(t, r, &sc)
		checkFields(t, "scan", mustMarshal(t, raw), []string{"count", "header", "kvs", "more"})
		checkArrayFields(t, "scan.kvs (keys only)", raw["kvs"], []string{"create_index", "key", "mod_index", "version"})
		if sc.Count != 2 || len(sc.KVs) != 2 || string(sc.KVs[0].Key) != "user/01" || string(sc.KVs[1].Key) != "user/02" || !sc.More {
			t.Errorf("scan --limit 2: %s", r.stdout)
		}
		if sc.Header.RaftTerm != 0 {
			t.Errorf("scan: raft_term %d, want 0 (several partitions served)", sc.Header.RaftTerm)
		}
		var scAll jKVs
		r = ctl(t, "-o", "json", "scan", "user/", "user0")
		raw = decodeJSON(t, r, &scAll)
		checkArrayFields(t, "scan.kvs", raw["kvs"], kvFields)
		if scAll.Count != 12 || len(scAll.KVs) != 12 || scAll.More {
			t.Errorf("scan user/ to user0: count %d, %d kvs, more %v; want 12, 12, false", scAll.Count, len(scAll.KVs), scAll.More)
		}
		for i, kv := range scAll.KVs {
			if k := fmt.Sprintf("user/%02d", i+1); string(kv.Key) != k || string(kv.Value) != "v-"+k {
				t.Errorf("scan item %d: %q = %q", i, kv.Key, kv.Value)
			}
		}

		// Delete: 1, then 0.
		for _, n := range []int{1, 0} {
			var del jDel
			r = ctl(t, "-o", "json", "del", "bin")
			want(t, r, 0, nil)
			raw = decodeJSON(t, r, &del)
			checkFields(t, "del", mustMarshal(t, raw), []string{"deleted", "header"})
			if del.Deleted != n {
				t.Errorf("del: deleted %d, want %d", del.Deleted, n)
			}
		}
		want(t, ctl(t, "get", "bin"), 1, ptr(""))
	})

	t.Run("del", func(t *testing.T) {
		want(t, ctl(t, "put", "gone", "x"), 0, ptr("OK\n"))
		want(t, ctl(t, "del", "gone"), 0, ptr("1\n"))
		want(t, ctl(t, "delete", "gone"), 0, ptr("0\n"))
		want(t, ctl(t, "get", "gone"), 1, ptr(""))
	})

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"frobnicate"},
			{"get"},
			{"get", "a", "b"},
			{"scan", "--limit", "x"},
			{"--no-such-flag", "get", "a"},
			{"-o", "yaml", "get", "a"},
			{"--timeout", "0s", "get", "a"},
			{"put", "", "v"},                        // empty key
			{"put", strings.Repeat("k", 4097), "v"}, // key over 4 KiB
		} {
			r := ctl(t, args...)
			if r.code != 2 || !strings.HasPrefix(r.stderr, "Error: ") || r.stdout != "" {
				t.Errorf("want exit 2, an Error: line on stderr and nothing on stdout; %v", r)
			}
		}
	})

	t.Run("unavailable", func(t *testing.T) {
		closed := FreeAddr(t) + "," + FreeAddr(t)
		for _, args := range [][]string{{"get", "alpha"}, {"put", "never", "x"}, {"members"}} {
			r := runKvctl(t, nil, nil, append([]string{"--endpoints", closed, "--timeout", "2s", "--dial-timeout", "300ms"}, args...)...)
			if r.code != 3 || !strings.HasPrefix(r.stderr, "Error: ") {
				t.Errorf("every endpoint closed: want exit 3; %v", r)
			}
		}
		// The refused write was not applied.
		want(t, ctl(t, "get", "never"), 1, ptr(""))
	})

	t.Run("CUTKV_ENDPOINTS", func(t *testing.T) {
		closed := "CUTKV_ENDPOINTS=" + FreeAddr(t)
		good := "CUTKV_ENDPOINTS=" + all
		// The environment replaces the default...
		want(t, runKvctl(t, []string{good}, nil, "get", "alpha"), 0, ptr("v-alpha\n"))
		r := runKvctl(t, []string{closed}, nil, "--timeout", "2s", "--dial-timeout", "300ms", "get", "alpha")
		if r.code != 3 || !strings.Contains(r.stderr, strings.TrimPrefix(closed, "CUTKV_ENDPOINTS=")) {
			t.Errorf("CUTKV_ENDPOINTS at a closed port: want exit 3 naming it; %v", r)
		}
		// ...and the flag wins over it.
		want(t, runKvctl(t, []string{closed}, nil, "--endpoints", c.Nodes[1].GRPC, "get", "alpha"), 0, ptr("v-alpha\n"))
	})

	t.Run("status", func(t *testing.T) {
		r := ctl(t, "status")
		want(t, r, 0, nil)
		for _, h := range []string{"GROUP  LEADER  TERM  COMMIT  APPLIED  MATERIALIZED  MATS  WAL TAIL", "NODE  SERVING  WAL"} {
			if !strings.Contains(r.stdout, h) {
				t.Errorf("status text lacks %q:\n%s", h, r.stdout)
			}
		}
		var st jStatus
		r = ctl(t, "-o", "json", "status")
		want(t, r, 0, nil)
		raw := decodeJSON(t, r, &st)
		checkFields(t, "status", mustMarshal(t, raw), []string{"cluster_id", "groups", "header", "nodes", "partitions"})
		checkArrayFields(t, "status.groups", raw["groups"], groupFields)
		checkArrayFields(t, "status.nodes", raw["nodes"], nodeFields)
		if st.Partitions != 4 || len(st.Groups) != 5 || len(st.Nodes) != 3 || len(st.ClusterID) != 16 || st.ClusterID != st.Header.ClusterID {
			t.Fatalf("status: %d partitions, %d groups, %d nodes, cluster %q (header %q); want 4, 5, 3 and 16 hex digits", st.Partitions, len(st.Groups), len(st.Nodes), st.ClusterID, st.Header.ClusterID)
		}
		var keysStored uint64
		for i, g := range st.Groups {
			if g.ID != uint64(i) || g.Leader == "" || g.Term == 0 || g.CommitIndex == 0 || g.AppliedIndex == 0 || len(g.Replicas) != 3 || g.ReportedBy == "" {
				t.Errorf("status group row %d: %+v; want ids in order, a leader, a term, indexes and 3 replicas", i, g)
			}
			if g.ID > 0 {
				keysStored += g.Keys
			}
		}
		// 15 keys put; "bin" and "gone" were deleted again.
		if keysStored != uint64(len(keys)) {
			t.Errorf("status: partitions hold %d keys, want %d", keysStored, len(keys))
		}
		for i, n := range st.Nodes {
			if n.ID != fmt.Sprintf("n%d", i+1) || !n.Serving || n.WALBytes <= 0 || n.WALLastIndex == 0 || n.DiskTotalBytes == 0 || n.Version == "" || n.Error != "" {
				t.Errorf("status node row %d: %+v; want serving, WAL bytes > 0, no error", i, n)
			}
		}
	})

	// Members, also with a node failed and a node left. Not a subtest:
	// it kills and restarts nodes, which belong to the top-level test.
	r := ctl(t, "members")
	want(t, r, 0, nil)
	if !strings.HasPrefix(r.stdout, "ID  STATE  GRPC") {
		t.Errorf("members text:\n%s", r.stdout)
	}
	var ms jMembers
	r = ctl(t, "-o", "json", "members")
	raw := decodeJSON(t, r, &ms)
	checkArrayFields(t, "members.members", raw["members"], memberFields)
	if len(ms.Members) != 3 {
		t.Fatalf("members: %d, want 3", len(ms.Members))
	}
	for i, m := range ms.Members {
		n := c.Nodes[i]
		if m.ID != n.ID || m.State != "alive" || m.RaftID == 0 || m.GRPCAddr != n.GRPC || m.PeerAddr != n.Peer || m.GossipAddr != n.Gossip || m.HTTPAddr != n.HTTP || m.SinceUnixMs <= 0 {
			t.Errorf("member %d: %+v; want %s alive at %s/%s/%s/%s", i, m, n.ID, n.GRPC, n.Peer, n.Gossip, n.HTTP)
		}
	}

	// SIGKILL: failed within 5 s, as seen by a survivor.
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	n3.Kill9()
	took := waitState(t, n1.GRPC, "n3", "failed", 5*time.Second)
	t.Logf("SIGKILLed n3 reported failed after %v", took.Round(time.Millisecond))
	// status names the node it could not ask; the others still serve.
	var st jStatus
	r = runKvctl(t, nil, nil, "--endpoints", n1.GRPC, "-o", "json", "status")
	want(t, r, 0, nil)
	decodeJSON(t, r, &st)
	for _, n := range st.Nodes {
		if (n.ID == "n3") != (n.Error != "") {
			t.Errorf("status with n3 down: node %+v", n)
		}
	}
	if tr := ctl(t, "status"); !strings.Contains(tr.stdout, "ERROR") {
		t.Errorf("status text with n3 down has no ERROR column:\n%s", tr.stdout)
	}
	want(t, ctl(t, "put", "two-alive", "yes"), 0, ptr("OK\n"))

	// Back: alive again. Then SIGTERM another one (n1 and n3 keep the
	// quorum): left, not failed.
	n3.Restart()
	waitState(t, n1.GRPC, "n3", "alive", 10*time.Second)
	if code, took := n2.Term(10 * time.Second); code != 0 {
		t.Fatalf("n2: SIGTERM: exit %d after %v", code, took)
	}
	took = waitState(t, n1.GRPC, "n2", "left", 5*time.Second)
	t.Logf("SIGTERMed n2 reported left after %v", took.Round(time.Millisecond))
	if states, r := memberStates(t, n3.GRPC); states["n2"] != "left" || states["n1"] != "alive" || states["n3"] != "alive" {
		t.Errorf("members as n3 sees them: %v", r)
	}
	want(t, ctl(t, "get", "two-alive"), 0, ptr("yes\n"))
	n2.Restart()
	waitState(t, n1.GRPC, "n2", "alive", 10*time.Second)
}

func mustMarshal(t testing.TB, m map[string]json.RawMessage) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
