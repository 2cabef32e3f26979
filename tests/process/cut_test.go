package process

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The JSON shapes of kvctl cut and kvctl check (docs/cli.md), decoded
// independently of kvctl's own types.
type (
	jCutPartition struct {
		Partition   uint64 `json:"partition"`
		Pos         uint64 `json:"pos"`
		FinishIndex uint64 `json:"finish_index"`
		Before      uint32 `json:"before"`
		After       uint32 `json:"after"`
		Aborted     uint32 `json:"aborted"`
	}
	jCut struct {
		Version        uint64          `json:"version"`
		State          string          `json:"state"`
		StartedUnixMs  int64           `json:"started_unix_ms"`
		FinishedUnixMs int64           `json:"finished_unix_ms"`
		Partitions     []jCutPartition `json:"partitions"`
		Error          string          `json:"error"`
	}
	jCutResponse struct {
		Header jHeader `json:"header"`
		Cut    jCut    `json:"cut"`
	}
	jCutList struct {
		Header jHeader `json:"header"`
		Cuts   []jCut  `json:"cuts"`
	}
	jReplicaHash struct {
		Node  string `json:"node"`
		Hash  string `json:"hash"`
		Keys  uint64 `json:"keys"`
		Error string `json:"error"`
	}
	jPartitionCheck struct {
		Partition  uint64         `json:"partition"`
		Index      uint64         `json:"index"`
		Replicas   []jReplicaHash `json:"replicas"`
		Consistent bool           `json:"consistent"`
		Error      string         `json:"error"`
	}
	jCheck struct {
		Header     jHeader           `json:"header"`
		Partitions []jPartitionCheck `json:"partitions"`
	}
)

// Field sets of docs/cli.md ("error" only when set).
var (
	cutFields            = []string{"finished_unix_ms", "partitions", "started_unix_ms", "state", "version"}
	cutPartitionFields   = []string{"aborted", "after", "before", "finish_index", "partition", "pos"}
	partitionCheckFields = []string{"consistent", "index", "partition", "replicas"}
	replicaFields        = []string{"hash", "keys", "node"}
)

var hexHash = regexp.MustCompile(`^[0-9a-f]{16}$`)

// TestKvctlCuts runs a 3-process cluster that takes a cut every 300ms
// and checks kvctl cut list, cut create, cut show and check against
// docs/cli.md.
func TestKvctlCuts(t *testing.T) {
	const partitions = 4
	c := NewCluster(t, Spec{Bin: bin.Kvnode, Partitions: partitions, Configure: func(n *Node) {
		n.Flags = append(n.Flags, "--cut-interval", "300ms")
	}})
	ctl := func(t testing.TB, args ...string) kvctlResult { t.Helper(); return c.Kvctl(t, args...) }
	const keys = 10
	for i := range keys {
		want(t, ctl(t, "put", fmt.Sprintf("cut/%02d", i), "v"), 0, ptr("OK\n"))
	}

	// The nodes take cuts by themselves.
	var list jCutList
	ok, last := WaitFor(10*time.Second, func() (bool, string) {
		r := ctl(t, "-o", "json", "cut", "list")
		if r.code != 0 {
			return false, r.String()
		}
		list = jCutList{}
		decodeJSON(t, r, &list)
		completed := 0
		for _, cut := range list.Cuts {
			if cut.State == "completed" {
				completed++
			}
		}
		return completed >= 3, r.String()
	})
	if !ok {
		t.Fatalf("fewer than 3 completed cuts within 10s with --cut-interval 300ms; last: %s", last)
	}
	for i, cut := range list.Cuts {
		if i > 0 && cut.Version >= list.Cuts[i-1].Version {
			t.Errorf("cut list not newest first: %d after %d", cut.Version, list.Cuts[i-1].Version)
		}
	}
	newest := list.Cuts[0].Version

	// cut create: a new cut, completed in every partition.
	r := ctl(t, "-o", "json", "cut", "create")
	want(t, r, 0, nil)
	var created jCutResponse
	raw := decodeJSON(t, r, &created)
	checkFields(t, "cut create", mustMarshal(t, raw), []string{"cut", "header"})
	checkFields(t, "cut create.header", raw["header"], headerFields)
	cutRaw := decodeRaw(t, raw["cut"])
	checkFields(t, "cut create.cut", raw["cut"], cutFields)
	checkArrayFields(t, "cut create.cut.partitions", cutRaw["partitions"], cutPartitionFields)
	cut := created.Cut
	if cut.State != "completed" || cut.Version < newest || cut.StartedUnixMs <= 0 || cut.FinishedUnixMs < cut.StartedUnixMs || len(cut.Partitions) != partitions {
		t.Fatalf("cut create: %+v; want a completed cut from version %d on, over %d partitions", cut, newest, partitions)
	}
	for i, p := range cut.Partitions {
		if p.Partition != uint64(i+1) || p.Pos == 0 || p.FinishIndex < p.Pos {
			t.Errorf("cut %d partition row %d: %+v; want partitions in order, pos > 0, finish_index >= pos", cut.Version, i, p)
		}
	}
	if len(created.Header.ClusterID) != 16 || created.Header.MemberID == "" {
		t.Errorf("cut create header: %+v", created.Header)
	}

	// cut show: the same cut, in JSON and in text.
	v := fmt.Sprint(cut.Version)
	var shown jCutResponse
	r = ctl(t, "-o", "json", "cut", "show", v)
	want(t, r, 0, nil)
	decodeJSON(t, r, &shown)
	if fmt.Sprint(shown.Cut) != fmt.Sprint(cut) {
		t.Errorf("cut show %s: %+v; cut create printed %+v", v, shown.Cut, cut)
	}
	r = ctl(t, "cut", "show", v)
	want(t, r, 0, nil)
	for _, s := range []string{"version   " + v + "\n", "state     completed\n", "PARTITION  POS  ", "\n4  "} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("cut show text lacks %q:\n%s", s, r.stdout)
		}
	}
	r = ctl(t, "cut", "show", "999999999")
	want(t, r, 1, ptr(""))
	if !strings.HasPrefix(r.stderr, "Error: cut 999999999 not found") {
		t.Errorf("cut show of an unknown cut: %v", r)
	}

	// The created cut is in the list.
	r = ctl(t, "cut", "list", "--limit", "0")
	want(t, r, 0, nil)
	if !regexp.MustCompile(`(?m)^` + v + `\s+completed\s`).MatchString(r.stdout) {
		t.Errorf("cut list text lacks cut %s completed:\n%s", v, r.stdout)
	}

	// check: every partition's replicas agree, and hold the keys put.
	r = ctl(t, "-o", "json", "check")
	want(t, r, 0, nil)
	var check jCheck
	raw = decodeJSON(t, r, &check)
	checkFields(t, "check", mustMarshal(t, raw), []string{"header", "partitions"})
	checkArrayFields(t, "check.partitions", raw["partitions"], partitionCheckFields)
	var rawParts []json.RawMessage
	if err := json.Unmarshal(raw["partitions"], &rawParts); err != nil {
		t.Fatalf("check.partitions: %v", err)
	}
	for i, rp := range rawParts {
		checkArrayFields(t, fmt.Sprintf("check.partitions[%d].replicas", i), decodeRaw(t, rp)["replicas"], replicaFields)
	}
	if len(check.Partitions) != partitions {
		t.Fatalf("check: %d partitions, want %d", len(check.Partitions), partitions)
	}
	var stored uint64
	for i, p := range check.Partitions {
		if p.Partition != uint64(i+1) || !p.Consistent || p.Index == 0 || p.Error != "" || len(p.Replicas) != 3 {
			t.Errorf("check partition row %d: %+v; want consistent, an index, 3 replicas", i, p)
			continue
		}
		for _, rep := range p.Replicas {
			if !hexHash.MatchString(rep.Hash) || rep.Hash != p.Replicas[0].Hash || rep.Keys != p.Replicas[0].Keys || rep.Error != "" {
				t.Errorf("check partition %d replica %+v; first replica %+v", p.Partition, rep, p.Replicas[0])
			}
		}
		stored += p.Replicas[0].Keys
	}
	if stored != keys {
		t.Errorf("check: partitions hold %d keys, want %d", stored, keys)
	}
	r = ctl(t, "check")
	want(t, r, 0, nil)
	if n := strings.Count(r.stdout, " OK\n"); n != 3*partitions || !strings.HasPrefix(r.stdout, "PARTITION  INDEX  NODE  HASH") {
		t.Errorf("check text: %d OK rows, want %d:\n%s", n, 3*partitions, r.stdout)
	}

	// With a node down its replicas cannot be hashed: exit 7, and every
	// partition UNCHECKED (the two others agree), not DIVERGED.
	c.Nodes[2].Kill9()
	r = runKvctl(t, nil, nil, "--endpoints", c.Nodes[0].GRPC+","+c.Nodes[1].GRPC, "check")
	if r.code != 7 || strings.Count(r.stdout, " UNCHECKED ") != 3*partitions || strings.Contains(r.stdout, "DIVERGED") ||
		!strings.HasPrefix(r.stderr, "Error: partitions 1, 2, 3, 4 could not be checked\n") {
		t.Errorf("check with n3 down: want exit 7 and every partition UNCHECKED; %v", r)
	}
}

// decodeRaw decodes a JSON object into its fields.
func decodeRaw(t testing.TB, b json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, b)
	}
	return m
}
