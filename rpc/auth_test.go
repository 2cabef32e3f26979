package rpc

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/topology"
)

// registered lists the full method names a server serves.
func registered(s *grpc.Server) []string {
	var out []string
	for svc, info := range s.GetServiceInfo() {
		for _, m := range info.Methods {
			out = append(out, "/"+svc+"/"+m.Name)
		}
	}
	return out
}

// TestEveryMethodHasARole registers exactly what the two listeners serve
// and fails on any method without a role: a client method missing from
// clientRoles, or a peer method that is neither a node-to-node service nor
// the forwarded copy of a client method with a role.
func TestEveryMethodHasARole(t *testing.T) {
	n := &Node{Layout: &topology.Layout{ClusterID: 1}}
	client := grpc.NewServer()
	RegisterClientServices(client, n, health.NewServer())
	for _, m := range registered(client) {
		if _, ok := ClientRole(m, nil); !ok {
			t.Errorf("client listener method %s has no role in clientRoles", m)
		}
		if IsPeerMethod(m) {
			t.Errorf("client listener serves peer method %s", m)
		}
	}
	peer := grpc.NewServer()
	RegisterPeerServices(peer, n, NewRaftServer(n.Layout, 1, nil, slog.New(slog.DiscardHandler)))
	forwarded := 0
	for _, m := range registered(peer) {
		if !IsPeerMethod(m) {
			t.Errorf("peer listener method %s is not a peer method", m)
		}
		if orig, ok := strings.CutPrefix(m, "/"+forwardPrefix); ok {
			forwarded++
			if _, ok := ClientRole("/"+orig, nil); !ok {
				t.Errorf("forwarded method %s: %s has no role", m, orig)
			}
		}
	}
	if forwarded == 0 {
		t.Error("the peer listener forwards no client method")
	}
	// Every role in the table is one a certificate can carry (or none).
	for m, r := range clientRoles {
		if r != pki.RoleNone && r.String() == "" {
			t.Errorf("%s needs an unnamed role %d", m, r)
		}
	}
}

func TestClientRoles(t *testing.T) {
	get := &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte("k")}}}
	put := &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte("k")}}}
	for _, tc := range []struct {
		method string
		req    any
		want   pki.Role
	}{
		{"/cutkv.kv.v1.KV/Get", nil, pki.RoleRead},
		{"/cutkv.kv.v1.KV/Put", nil, pki.RoleWrite},
		{"/cutkv.kv.v1.KV/Txn", &kvpb.TxnRequest{Success: []*kvpb.RequestOp{get}, Failure: []*kvpb.RequestOp{get}}, pki.RoleRead},
		{"/cutkv.kv.v1.KV/Txn", &kvpb.TxnRequest{Success: []*kvpb.RequestOp{get}, Failure: []*kvpb.RequestOp{put}}, pki.RoleWrite},
		{"/cutkv.kv.v1.KV/Txn", &kvpb.TxnRequest{Success: []*kvpb.RequestOp{{}}}, pki.RoleWrite}, // an op of unknown kind
		{"/cutkv.kv.v1.Cluster/Status", nil, pki.RoleRead},
		{"/cutkv.kv.v1.Cluster/ListSnapshots", nil, pki.RoleRead},
		{"/cutkv.kv.v1.Cluster/CreateSnapshot", nil, pki.RoleAdmin},
		{"/cutkv.kv.v1.Cluster/Checkpoint", nil, pki.RoleAdmin},
		{"/grpc.health.v1.Health/Check", nil, pki.RoleNone},
	} {
		if got, ok := ClientRole(tc.method, tc.req); !ok || got != tc.want {
			t.Errorf("ClientRole(%s, %v) = %v, %v; want %v", tc.method, tc.req, got, ok, tc.want)
		}
	}
	if _, ok := ClientRole("/cutkv.internal.v1.Participant/Prepare", nil); ok {
		t.Error("a peer method has a client role")
	}
}

// TestPeerAuthForwarded: a forwarded call's role and hop count come from
// its metadata and are checked; a call for another cluster, or without a
// cluster id, is refused.
func TestPeerAuthForwarded(t *testing.T) {
	a := PeerAuth{Layout: &topology.Layout{ClusterID: 0xabc}}
	md := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	}
	ok := []string{clusterIDKey, topology.FormatClusterID(0xabc)}
	put := "/" + forwardPrefix + "cutkv.kv.v1.KV/Put"
	for name, tc := range map[string]struct {
		ctx    context.Context
		method string
		code   codes.Code
	}{
		"write forwards Put":     {md(append(ok, roleKey, "write", forwardedKey, "1")...), put, codes.OK},
		"read forwards Put":      {md(append(ok, roleKey, "read", forwardedKey, "1")...), put, codes.PermissionDenied},
		"no role":                {md(append(ok, forwardedKey, "1")...), put, codes.InvalidArgument},
		"hops out of range":      {md(append(ok, roleKey, "admin", forwardedKey, "9")...), put, codes.InvalidArgument},
		"no hops":                {md(append(ok, roleKey, "admin")...), put, codes.InvalidArgument},
		"another cluster":        {md(clusterIDKey, topology.FormatClusterID(0xdef), roleKey, "admin", forwardedKey, "1"), put, codes.FailedPrecondition},
		"no cluster id":          {md(roleKey, "admin", forwardedKey, "1"), put, codes.FailedPrecondition},
		"bootstrap needs no id":  {md(), "/cutkv.internal.v1.Bootstrap/ClusterID", codes.OK},
		"client method refused":  {md(ok...), "/cutkv.kv.v1.KV/Put", codes.Unimplemented},
		"peer method, this id":   {md(ok...), "/cutkv.internal.v1.Participant/Prepare", codes.OK},
		"garbage cluster id":     {md(clusterIDKey, "zz"), "/cutkv.internal.v1.Participant/Prepare", codes.FailedPrecondition},
		"unknown forward target": {md(append(ok, roleKey, "admin", forwardedKey, "1")...), "/" + forwardPrefix + "cutkv.kv.v1.KV/Nope", codes.Unimplemented},
	} {
		ctx, err := a.authorize(tc.ctx, tc.method, nil)
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", name, err, tc.code)
			continue
		}
		if err == nil && strings.HasPrefix(tc.method, "/"+forwardPrefix) {
			if c := callerOf(ctx); c.hops != 1 || c.role != pki.RoleWrite {
				t.Errorf("%s: caller %+v", name, c)
			}
		}
	}
}

// TestClientAuth: without a CA every caller is admin; with one, a caller
// without a certificate reaches only health, and the hop count a client
// sends is never read.
func TestClientAuth(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(forwardedKey, "1", roleKey, "admin"))
	open, err := ClientAuth{}.authorize(ctx, "/cutkv.kv.v1.Cluster/CreateCut", nil)
	if err != nil || callerOf(open).role != pki.RoleAdmin || callerOf(open).hops != 0 {
		t.Fatalf("open listener: %+v, %v", callerOf(open), err)
	}
	strict := ClientAuth{RequireCerts: true}
	if _, err := strict.authorize(ctx, "/cutkv.kv.v1.KV/Get", nil); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "read") {
		t.Errorf("Get without a certificate: %v, want PermissionDenied naming read", err)
	}
	if _, err := strict.authorize(ctx, "/grpc.health.v1.Health/Check", nil); err != nil {
		t.Errorf("health without a certificate: %v", err)
	}
	if _, err := strict.authorize(ctx, "/cutkv.internal.v1.Participant/Prepare", nil); status.Code(err) != codes.Unimplemented {
		t.Errorf("a peer method on the client port: %v, want Unimplemented", err)
	}
}

func TestSameStore(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"file:///a/b", "file:///a/b/", true},
		{"file:///a/../b", "file:///b", true},
		{"FILE:///b", "file:///b", true},
		{"file:///b-other", "file:///b", false},
		{"file:///b/c", "file:///b", false},
		{"s3://bkt?region=x&endpoint=http://h:1", "s3://bkt?endpoint=http://h:1&region=x", true},
		{"s3://bkt?region=x&endpoint=http://evil:1", "s3://bkt?region=x&endpoint=http://h:1", false},
		{"s3://bkt?region=x", "s3://bkt?region=x&endpoint=http://h:1", false},
		{"s3://other", "s3://bkt", false},
		{"s3://u:p@bkt", "s3://bkt", false},
	} {
		got, err := sameStore(tc.a, tc.b)
		if err != nil || got != tc.same {
			t.Errorf("sameStore(%q, %q) = %v, %v; want %v", tc.a, tc.b, got, err, tc.same)
		}
	}
	for _, bad := range []string{"", "no-scheme", "file:rel/path", "file:///x#frag", "%zz"} {
		if _, err := sameStore(bad, "file:///b"); err == nil {
			t.Errorf("sameStore(%q) accepted", bad)
		}
	}
}

// TestResolveStore: a request's store URL must be the default or allowed.
func TestResolveStore(t *testing.T) {
	s := &Snapshots{DefaultStore: "file:///var/snap", Allowed: []string{"s3://backup?region=eu"}}
	for raw, want := range map[string]string{
		"":                          "file:///var/snap",
		"file:///var//snap/":        "file:///var/snap",
		"s3://backup?region=eu":     "s3://backup?region=eu",
		"s3://backup?region=us":     "",
		"file:///var/snap/../other": "",
	} {
		got, err := s.resolve(raw)
		if want == "" {
			if !strings.Contains(err.Error(), "snapshot-store-allow") {
				t.Errorf("resolve(%q) = %q, %v; want refused", raw, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

// FuzzSameStore: comparing store URLs never panics, is symmetric, and a
// URL is the same store as itself whenever it parses.
func FuzzSameStore(f *testing.F) {
	for _, s := range []string{"file:///a/b", "s3://bkt?region=x&endpoint=http://h:1", "file:///a/../b", "s3://u:p@b", "%zz", "file:rel", ""} {
		f.Add(s, "file:///a/b")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, errA := sameStore(a, b)
		ba, errB := sameStore(b, a)
		if (errA == nil) && (errB == nil) && ab != ba {
			t.Fatalf("sameStore not symmetric for %q, %q", a, b)
		}
		if _, err := canonicalStore(a); err == nil {
			if same, err := sameStore(a, a); err != nil || !same {
				t.Fatalf("%q is not the same store as itself: %v", a, err)
			}
		}
	})
}
