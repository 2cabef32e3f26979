package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/client/clienttest"
	"github.com/cutkv/cutkv/internal/clustertest"
)

func TestPrefixEnd(t *testing.T) {
	for in, want := range map[string]string{"a": "b", "ab": "ac", "a\xff": "b", "\xff\xff": "", "": "", "a\x00": "a\x01"} {
		if got := string(prefixEnd([]byte(in))); got != want {
			t.Errorf("prefixEnd(%q) = %q, want %q", in, got, want)
		}
	}
	if prefixEnd([]byte("\xff")) != nil || prefixEnd(nil) != nil {
		t.Error("prefixEnd of a prefix without an end is not nil")
	}
}

// TestGetPrefix: etcdctl's get --prefix is a scan over the prefix.
func TestGetPrefix(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	for _, k := range []string{"a", "app/1", "app/2", "apq", "b"} {
		cl.Put([]byte(k), []byte("v"+k))
	}
	want(t, on(t, cl, "get", "--prefix", "app/"), 0, "app/1\nvapp/1\napp/2\nvapp/2\n")
	want(t, on(t, cl, "get", "--prefix", "ap", "--keys-only"), 0, "app/1\napp/2\napq\n")
	want(t, on(t, cl, "get", "--prefix", "ap", "--limit", "1"), 0, "app/1\nvapp/1\n")
	want(t, on(t, cl, "get", "--prefix", "", "--keys-only"), 0, "a\napp/1\napp/2\napq\nb\n")
	want(t, on(t, cl, "get", "--prefix", "zz"), 0, "") // none: not an error, as a scan
	var js struct {
		Count int  `json:"count"`
		More  bool `json:"more"`
	}
	decode(t, on(t, cl, "-w", "json", "get", "--prefix", "app/"), &js)
	if js.Count != 2 || js.More {
		t.Errorf("get --prefix -w json: %+v", js)
	}
	if r := on(t, cl, "get", "a", "--limit", "1"); r.code != 2 || !strings.Contains(r.stderr, "--prefix") {
		t.Errorf("get --limit without --prefix: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestEtcdctlPointers: etcdctl commands with another meaning in cutkv fail
// with a usage error that names the command to use.
func TestEtcdctlPointers(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"snapshot", "save", "backup.db"}, "kvctl snapshot create"},
		{[]string{"snapshot", "restore", "backup.db", "--data-dir", "x"}, "kvnode restore"},
		{[]string{"snapshot", "status", "backup.db", "-w", "table"}, "kvctl snapshot show"},
		{[]string{"member", "add", "n4", "--peer-urls", "http://x"}, "--initial-cluster"},
		{[]string{"member"}, "kvctl members"},
		{[]string{"endpoint"}, "health"},
		{[]string{"-w", "fields", "members"}, "table"},
		{[]string{"-w", "json", "-o", "text", "members"}, "disagree"},
	} {
		r := kvctl(t, nil, "", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.says) || strings.Count(r.stderr, "\n") > 2 {
			t.Errorf("kvctl %s: exit %d, stderr %q; want exit 2 naming %q", strings.Join(c.args, " "), r.code, r.stderr, c.says)
		}
	}
}

// TestEtcdctlAliasesAgainstRealCluster: member list, endpoint status and
// endpoint health (also with a node down), -w table and -w json on real
// nodes.
func TestEtcdctlAliasesAgainstRealCluster(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 4})
	eps := c.Endpoints()
	ctl := func(args ...string) result {
		var out, errb bytes.Buffer
		code := run(append([]string{"--endpoints=" + strings.Join(eps, ",")}, args...), strings.NewReader(""), &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	members, list := ctl("members"), ctl("member", "list", "-w", "table")
	if members.code != 0 || list.code != 0 || !strings.HasPrefix(list.stdout, "ID ") || strings.Count(list.stdout, "\n") != 4 {
		t.Fatalf("member list: exit %d\n%s%s\nmembers: exit %d\n%s", list.code, list.stdout, list.stderr, members.code, members.stdout)
	}
	var ms jsonMembers
	decode(t, ctl("member", "list", "-w", "json"), &ms)
	if len(ms.Members) != 3 {
		t.Errorf("member list -w json: %+v", ms)
	}
	st := ctl("endpoint", "status")
	if st.code != 0 || !strings.HasPrefix(st.stdout, "GROUP") || !strings.Contains(st.stdout, "NODE") {
		t.Errorf("endpoint status: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	h := ctl("endpoint", "health")
	if h.code != 0 || strings.Count(h.stdout, " is healthy: took = ") != 3 {
		t.Fatalf("endpoint health: exit %d\n%s%s", h.code, h.stdout, h.stderr)
	}
	c.Stop(1)
	h = ctl("endpoint", "health", "--dial-timeout", "500ms")
	if h.code != exitUnavailable || strings.Count(h.stdout, " is healthy") != 2 || !strings.Contains(h.stdout, eps[1]+" is unhealthy: ") ||
		!strings.Contains(h.stderr, "1 of 3 endpoints unhealthy") {
		t.Fatalf("endpoint health with n2 stopped: exit %d\n%s%s", h.code, h.stdout, h.stderr)
	}
	var hj jsonEndpointHealthList
	r := ctl("-o", "json", "endpoint", "health", "--dial-timeout", "500ms")
	if err := json.Unmarshal([]byte(r.stdout), &hj); err != nil || len(hj.Endpoints) != 3 || hj.Endpoints[1].Health || hj.Endpoints[1].Error == "" || !hj.Endpoints[0].Health {
		t.Fatalf("endpoint health -o json: exit %d, %q (%v)", r.code, r.stdout, err)
	}
}
