package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
)

func TestBackoffDelay(t *testing.T) {
	base, max := 10*time.Millisecond, 100*time.Millisecond
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, 10 * time.Millisecond},
		{1, 20 * time.Millisecond},
		{2, 40 * time.Millisecond},
		{3, 80 * time.Millisecond},
		{4, 100 * time.Millisecond},
		{60, 100 * time.Millisecond},
	} {
		if got := backoffDelay(base, max, tc.n); got != tc.want {
			t.Errorf("backoffDelay(%v, %v, %d) = %v, want %v", base, max, tc.n, got, tc.want)
		}
	}
}

func withInfo(reason string, md map[string]string) error {
	st, err := status.New(codes.Unavailable, reason).WithDetails(&errdetails.ErrorInfo{Domain: errorDomain, Reason: reason, Metadata: md})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func TestClassify(t *testing.T) {
	foreign, _ := status.New(codes.Unavailable, "x").WithDetails(&errdetails.ErrorInfo{Domain: "example.com", Reason: reasonNotLeader})
	for _, tc := range []struct {
		name  string
		err   error
		write bool
		want  failure
	}{
		{"not sent write", &errNotSent{addr: "a"}, true, failure{verdict: retry, elsewhere: true}},
		{"invalid", status.Error(codes.InvalidArgument, "x"), false, failure{verdict: fail, kind: ErrInvalidArgument}},
		{"invalid write", status.Error(codes.InvalidArgument, "x"), true, failure{verdict: fail, kind: ErrInvalidArgument}},
		{"not leader hint", withInfo(reasonNotLeader, map[string]string{"leader": "n2"}), true, failure{verdict: retry, reason: reasonNotLeader, leader: "n2"}},
		{"not leader no hint", withInfo(reasonNotLeader, nil), true, failure{verdict: retry, reason: reasonNotLeader, wait: true}},
		{"no leader", withInfo(reasonNoLeader, nil), true, failure{verdict: retry, reason: reasonNoLeader, wait: true}},
		{"dropped", withInfo(reasonProposalDropped, nil), true, failure{verdict: retry, reason: reasonProposalDropped, wait: true}},
		{"locked", withInfo(reasonLocked, nil), true, failure{verdict: retry, reason: reasonLocked, wait: true}},
		{"not serving", withInfo(reasonNotServing, nil), true, failure{verdict: retry, reason: reasonNotServing, elsewhere: true}},
		{"shutting down", withInfo(reasonShuttingDown, nil), true, failure{verdict: retry, reason: reasonShuttingDown, elsewhere: true}},
		{"unknown reason write", withInfo("SOMETHING_ELSE", nil), true, failure{verdict: unknown}},
		{"foreign domain write", foreign.Err(), true, failure{verdict: unknown}},
		{"bare unavailable write", status.Error(codes.Unavailable, "reset"), true, failure{verdict: unknown}},
		{"bare unavailable read", status.Error(codes.Unavailable, "reset"), false, failure{verdict: retry, elsewhere: true}},
		{"deadline write", status.Error(codes.DeadlineExceeded, "x"), true, failure{verdict: unknown}},
		{"deadline read", status.Error(codes.DeadlineExceeded, "x"), false, failure{verdict: retry, elsewhere: true}},
		{"canceled write", status.Error(codes.Canceled, "x"), true, failure{verdict: unknown}},
		{"aborted write", status.Error(codes.Aborted, "x"), true, failure{verdict: retry, wait: true}},
		{"internal write", status.Error(codes.Internal, "x"), true, failure{verdict: unknown}},
		{"internal read", status.Error(codes.Internal, "x"), false, failure{verdict: fail}},
		{"precondition write", status.Error(codes.FailedPrecondition, "x"), true, failure{verdict: fail}},
		{"non-grpc write", errors.New("eof"), true, failure{verdict: unknown}},
		{"non-grpc read", errors.New("eof"), false, failure{verdict: retry, elsewhere: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err, tc.write); got != tc.want {
				t.Errorf("classify = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	var c Config
	if err := c.Validate(); err == nil {
		t.Fatal("Validate accepted a config without endpoints")
	}
	c = Config{Endpoints: []string{" a:1 ", "", "b:2"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Endpoints) != 2 || c.Endpoints[0] != "a:1" {
		t.Errorf("Endpoints = %q", c.Endpoints)
	}
	if c.RequestTimeout != DefaultRequestTimeout || c.DialTimeout != DefaultDialTimeout || c.Logger == nil ||
		c.BackoffBase != DefaultBackoffBase || c.BackoffMax != DefaultBackoffMax || c.OperationTimeout != DefaultOperationTimeout {
		t.Errorf("defaults not filled: %+v", c)
	}
	for _, bad := range []Config{
		{Endpoints: []string{"a:1"}, RequestTimeout: -1},
		{Endpoints: []string{"a:1"}, BackoffBase: time.Second, BackoffMax: time.Millisecond},
		{Endpoints: []string{"a:1"}, MaxCallRecvMsgSize: -1},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate accepted %+v", bad)
		}
	}
}

func TestRouteTable(t *testing.T) {
	r := &kvpb.RoutingResponse{
		Partitions: 3,
		Hash:       keyspace.HashName,
		Members: []*kvpb.Member{
			{Id: "n1", GrpcAddr: "a:1", State: kvpb.MemberState_MEMBER_STATE_ALIVE},
			{Id: "n2", GrpcAddr: "a:2", State: kvpb.MemberState_MEMBER_STATE_FAILED},
			{Id: "n3", GrpcAddr: "a:3", State: kvpb.MemberState_MEMBER_STATE_SUSPECT},
		},
		Leaders: []string{"n1", "", "n3"},
	}
	tab, err := newRouteTable(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tab.members); got != 2 {
		t.Errorf("members = %q, want the 2 not failed", tab.members)
	}
	byPart := map[uint64]string{1: "a:1", 2: "", 3: "a:3"}
	for i := range 50 {
		k := []byte{byte(i)}
		if got, want := tab.leaderAddr(k), byPart[keyspace.PartitionOf(k, 3)]; got != want {
			t.Errorf("leaderAddr(%q) = %q, want %q", k, got, want)
		}
	}
	k := []byte{0}
	n := tab.withLeader(k, "z:9")
	if n.leaderAddr(k) != "z:9" || tab.leaderAddr(k) == "z:9" {
		t.Errorf("withLeader must copy: new %q old %q", n.leaderAddr(k), tab.leaderAddr(k))
	}

	r.Hash = "crc32"
	tab, err = newRouteTable(r)
	if err == nil || tab.partitions != 0 || len(tab.members) != 2 {
		t.Errorf("unknown hash: err %v, table %+v", err, tab)
	}
	if tab.leaderAddr(k) != "" {
		t.Error("a table with an unknown hash must not route")
	}
}

func TestOpErrorUnwrap(t *testing.T) {
	cause := status.Error(codes.DeadlineExceeded, "slow")
	err := error(&OpError{Op: "put", Key: []byte("k"), Addr: "a:1", Kind: ErrOutcomeUnknown, Err: cause})
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, cause) || errors.Is(err, ErrUnavailable) {
		t.Errorf("errors.Is does not see the sentinel and the cause: %v", err)
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("status.Code = %v", status.Code(err))
	}
	want := `client: write outcome unknown: put "k" (last tried a:1): rpc error: code = DeadlineExceeded desc = slow`
	if err.Error() != want {
		t.Errorf("Error() = %q\nwant      %q", err.Error(), want)
	}
}

// TestObserveCutVersionPerCluster: the cut version only grows while the
// replies come from one cluster, and starts over when they come from
// another (a cluster restored from a snapshot on the same endpoints).
func TestObserveCutVersionPerCluster(t *testing.T) {
	c := &Client{}
	for _, step := range []struct {
		cluster string
		v, want uint64
	}{
		{"0000000000000007", 5, 5}, {"0000000000000007", 3, 5}, {"0000000000000007", 9, 9}, {"", 2, 9}, // "": a header without an id
		{"0000000000000008", 2, 2}, {"0000000000000008", 4, 4}, {"0000000000000008", 1, 4},
	} {
		c.observe(&kvpb.ResponseHeader{ClusterId: step.cluster, CutVersion: step.v})
		if got := c.CutVersion(); got != step.want {
			t.Fatalf("after cluster %q version %d: CutVersion %d, want %d", step.cluster, step.v, got, step.want)
		}
	}
}

// TestTransportHint: the connection errors of a TLS mismatch or a full
// listener get a hint saying what to do; others none.
func TestTransportHint(t *testing.T) {
	for msg, says := range map[string]string{
		`connection error: desc = "error reading server preface: EOF"`:                                     "speak TLS",
		`transport: authentication handshake failed: tls: first record does not look like a TLS handshake`: "plaintext",
		`x509: certificate signed by unknown authority`:                                                    "--cacert",
		`remote error: tls: certificate required`:                                                          "--cert",
		`write tcp 127.0.0.1:1->127.0.0.1:2: write: broken pipe`:                                           "max-connections",
		`dial tcp 127.0.0.1:1: connect: connection refused`:                                                "",
	} {
		got := transportHint(msg)
		if (says == "") != (got == "") || !strings.Contains(got, says) {
			t.Errorf("transportHint(%q) = %q, want one saying %q", msg, got, says)
		}
	}
	if !TLSMismatch("x509: certificate has expired") || TLSMismatch("error reading server preface: EOF") || TLSMismatch("connection refused") {
		t.Error("TLSMismatch")
	}
}
