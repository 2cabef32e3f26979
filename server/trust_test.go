package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/pki/grpctls"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/topology"
)

// The attacks of issue 12, each performed against a real in-process
// cluster the way an outside client could; and the TLS and role checks.

// withHTTP gives every node an HTTP address (metrics).
func withHTTP(_ int, cfg *server.Config) { cfg.HTTPAddr = "127.0.0.1:0" }

// metric reads one sample of node's /metrics ("name{labels}" as printed),
// 0 when absent.
func metric(t *testing.T, n *server.Node, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.Addrs().HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return sampleIn(string(b), series)
}

// httpsMetric is metric from a node whose HTTP port speaks TLS (client
// TLS configured), trusting p's CA.
func httpsMetric(t *testing.T, p *testPKI, n *server.Node, series string) float64 {
	t.Helper()
	pem, err := os.ReadFile(p.ca())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	code, body := probe(t, hc, "https", n, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("https /metrics: %d %q", code, body)
	}
	return sampleIn(body, series)
}

// sampleIn reads series' value in a text exposition, 0 when absent.
func sampleIn(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}

// plainConn dials addr without TLS.
func plainConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// asPeer is ctx with the metadata a member puts on its calls.
func asPeer(ctx context.Context, cluster uint64) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "cutkv-cluster-id", topology.FormatClusterID(cluster))
}

// TestServicesStayOnTheirListener: every peer service is Unimplemented on
// the client listener (where anyone could call it before), and the client
// services are not on the peer listener under their own names.
func TestServicesStayOnTheirListener(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2})
	n := c.Node(0)
	client := plainConn(t, n.Addrs().GRPC)
	for method, req := range map[string]proto.Message{
		"/cutkv.internal.v1.Participant/Prepare":               &internalpb.PrepareRequest{Partition: 1},
		"/cutkv.internal.v1.Participant/Finish":                &internalpb.FinishRequest{Partition: 1},
		"/cutkv.internal.v1.CutService/StartCut":               &internalpb.StartCutRequest{Partition: 1, Version: 1 << 40},
		"/cutkv.internal.v1.CutService/AllocatedCut":           &internalpb.AllocatedCutRequest{},
		"/cutkv.internal.v1.SnapshotPartitions/UploadSnapshot": &internalpb.UploadSnapshotRequest{},
		"/cutkv.internal.v1.Raft/Materialize":                  &internalpb.MaterializeRequest{},
		"/cutkv.internal.v1.Bootstrap/ClusterID":               &internalpb.ClusterIDRequest{},
		"/cutkv.forward.cutkv.kv.v1.KV/Put":                    &kvpb.PutRequest{Key: []byte("k")},
	} {
		err := client.Invoke(ctxT(t, 5*time.Second), method, req, &internalpb.PrepareResponse{})
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("%s on the client port: %v, want Unimplemented", method, err)
		}
	}
	stream, err := internalrpc.NewRaftClient(client).Send(ctxT(t, 5*time.Second))
	if err == nil {
		_ = stream.Send(&internalpb.RaftBatch{})
		_, err = stream.CloseAndRecv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Raft/Send on the client port: %v, want Unimplemented", err)
	}
	peerConn := plainConn(t, n.Addrs().Peer)
	_, err = kvrpc.NewKVClient(peerConn).Put(asPeer(ctxT(t, 5*time.Second), n.ClusterID()), &kvpb.PutRequest{Key: []byte("k")})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("KV/Put on the peer port: %v, want Unimplemented", err)
	}
}

// TestNonMemberRaftMessage sends, to the peer port of a cluster without
// peer TLS, a heartbeat with an absurd term from a raft id that is no
// member: it is dropped and counted, the cluster keeps its leaders and
// serves, also after a restart (before, every node panicked, and again on
// every restart).
func TestNonMemberRaftMessage(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 2, Configure: withHTTP})
	put(t, c, 0, "before", "1")
	for i := 0; i < 3; i++ {
		n := c.Node(i)
		self := uint64(i + 1)
		m, _ := proto.Marshal(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(99)), To: new(self), Term: new(uint64(1 << 62)), Commit: new(uint64(1 << 40))})
		app, _ := proto.Marshal(&raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(uint64(99)), To: new(self), Term: new(uint64(1 << 62)), Index: new(uint64(1)), LogTerm: new(uint64(1)),
			Entries: []*raftpb.Entry{{Term: new(uint64(1 << 62)), Index: new(uint64(2)), Data: []byte("forged")}}})
		stream, err := internalrpc.NewRaftClient(plainConn(t, n.Addrs().Peer)).Send(asPeer(ctxT(t, 5*time.Second), n.ClusterID()))
		if err != nil {
			t.Fatal(err)
		}
		for g := uint64(0); g <= 2; g++ {
			if err := stream.Send(&internalpb.RaftBatch{ClusterId: n.ClusterID(), From: 99, To: self,
				Messages: []*internalpb.GroupMessage{{Group: g, Message: m}, {Group: g, Message: app}}}); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = stream.CloseAndRecv()
		clustertest.Eventually(t, 5*time.Second, func() error {
			if v := metric(t, n, `cutkv_peer_rejected_total{reason="not_a_member"}`); v < 1 {
				return fmt.Errorf("n%d counted %v rejected messages", i+1, v)
			}
			return nil
		})
	}
	put(t, c, 1, "after", "2")
	for g := uint64(0); g <= 2; g++ {
		if st, ok := c.Node(0).Store().Status(g); ok && st.Term >= 1<<62 {
			t.Fatalf("group %d took the forged term: %+v", g, st)
		}
	}
	for i := 0; i < 3; i++ {
		c.Kill(i)
	}
	for i := 0; i < 3; i++ {
		c.StartNode(i)
	}
	for i := 0; i < 3; i++ {
		c.WaitReady(i)
	}
	put(t, c, 2, "restarted", "3")
}

// TestOutsideParticipantCall: a Participant call reaches the node only on
// the peer port, and even there (without peer TLS on loopback, any local
// process is a peer) a share with keys of another partition, an empty key
// or an oversized value is refused, naming the field, and stores nothing.
func TestOutsideParticipantCall(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 4, Configure: withHTTP})
	n := c.Node(0)
	pc := internalrpc.NewParticipantClient(plainConn(t, n.Addrs().Peer))
	key := []byte("outside")
	p := keyspace.PartitionOf(key, 4)
	other := p%4 + 1
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	share := func(k, v []byte) *internalpb.TxnShare {
		return &internalpb.TxnShare{Success: []*kvpb.RequestOp{{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: k, Value: v}}}}, SuccessIndex: []uint32{0}}
	}
	for name, tc := range map[string]struct {
		partition uint64
		share     *internalpb.TxnShare
		says      string
	}{
		"key of another partition": {other, share(key, []byte("v")), "partition"},
		"empty key":                {p, share(nil, []byte("v")), "empty key"},
		"oversized value":          {p, share(key, make([]byte, 2<<20)), "exceeds"},
	} {
		op := &internalpb.TxnPrepareOp{TxnId: id, Priority: time.Now().UnixNano(), RecordPartition: tc.partition, Share: tc.share, PreparedUnixMs: time.Now().UnixMilli()}
		_, err := pc.Prepare(asPeer(ctxT(t, 5*time.Second), n.ClusterID()), &internalpb.PrepareRequest{Partition: tc.partition, Op: op})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want InvalidArgument saying %q", name, err, tc.says)
		}
	}
	// A Finish(commit) for a transaction never prepared applies nothing.
	_, err := pc.Finish(asPeer(ctxT(t, 5*time.Second), n.ClusterID()), &internalpb.FinishRequest{Partition: p,
		Op: &internalpb.TxnFinishOp{TxnId: id, Commit: true, Succeeded: true, PreparedUnixMs: time.Now().UnixMilli()}})
	if err != nil {
		t.Fatalf("finish of an unknown transaction: %v", err)
	}
	resp, err := c.KV(0).Scan(ctxT(t, 5*time.Second), &kvpb.ScanRequest{})
	if err != nil || len(resp.GetKvs()) != 0 {
		t.Fatalf("scan after the outside calls: %v, %v; want nothing stored", resp.GetKvs(), err)
	}
	// A call without the cluster id, or with another one, is refused.
	for _, ctx := range []context.Context{ctxT(t, 5*time.Second), asPeer(ctxT(t, 5*time.Second), n.ClusterID()+1)} {
		_, err := pc.Forget(ctx, &internalpb.ForgetRequest{Partition: p, Op: &internalpb.TxnForgetOp{}})
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("peer call without this cluster's id: %v, want FailedPrecondition", err)
		}
	}
	if v := metric(t, n, `cutkv_peer_calls_rejected_total{reason="cluster_id"}`); v != 2 {
		t.Errorf("%v peer calls counted as refused for their cluster id, want 2", v)
	}
}

// TestUnallocatedCutVersion: a client's header naming a cut version group
// 0 never allocated is refused, and so is a peer's; cuts and snapshots
// keep working (before, one such Put failed every later cut, for good).
func TestUnallocatedCutVersion(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 2})
	put(t, c, 0, "k", "v")
	for i := 0; i < 3; i++ {
		_, err := c.KV(i).Put(ctxT(t, 5*time.Second), &kvpb.PutRequest{Header: &kvpb.RequestHeader{CutVersion: 1 << 40}, Key: []byte("k"), Value: []byte("x")})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "never allocated") {
			t.Fatalf("Put with cut_version 2^40 via n%d: %v, want InvalidArgument", i+1, err)
		}
	}
	cut := createCut(t, c)
	if cut.GetState() != kvpb.CutState_CUT_STATE_COMPLETED || cut.GetVersion() > 10 {
		t.Fatalf("cut after the refused versions: %v", cut)
	}
	// The allocated version is accepted from a client.
	if _, err := c.KV(1).Put(ctxT(t, 5*time.Second), &kvpb.PutRequest{Header: &kvpb.RequestHeader{CutVersion: cut.GetVersion()}, Key: []byte("k"), Value: []byte("y")}); err != nil {
		t.Fatalf("Put with the allocated version: %v", err)
	}
	// A peer's marker is bounded the same way.
	n := c.Node(0)
	cc := internalrpc.NewCutServiceClient(plainConn(t, n.Addrs().Peer))
	for p := uint64(1); p <= 2; p++ {
		_, err := cc.StartCut(asPeer(ctxT(t, 5*time.Second), n.ClusterID()), &internalpb.StartCutRequest{Partition: p, Version: 1 << 40})
		if c := status.Code(err); c != codes.InvalidArgument && c != codes.Unavailable {
			t.Fatalf("StartCut(2^40) on partition %d: %v, want InvalidArgument (or NOT_LEADER)", p, err)
		}
	}
	// Every peer request's marker passes the same admission, in the peer
	// server's marker interceptor (not in each handler): a participant
	// call carrying 2^40 is refused before it is served.
	pc := internalrpc.NewParticipantClient(plainConn(t, n.Addrs().Peer))
	_, err := pc.Status(asPeer(ctxT(t, 5*time.Second), n.ClusterID()), &internalpb.StatusRequest{Partition: 1, CutVersion: 1 << 40,
		Op: &internalpb.TxnStatusOp{TxnId: make([]byte, 16), PreparedUnixMs: time.Now().UnixMilli()}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "never allocated") {
		t.Fatalf("Participant.Status with cut_version 2^40: %v, want InvalidArgument (never allocated)", err)
	}
	if cut := createCut(t, c); cut.GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
		t.Fatalf("cut after a peer's bogus version: %v", cut)
	}
}

// TestPoisonedClusterHeals: a cluster whose log took a version that was
// never allocated (as clusters could before versions were checked) fails
// at most one cut, whose partitions report the version, and the next
// allocation goes above it.
func TestPoisonedClusterHeals(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 2})
	put(t, c, 0, "k", "v")
	const bogus = 1 << 40
	clustertest.Eventually(t, 10*time.Second, func() error {
		for i := 0; i < 3; i++ {
			if st, ok := c.Node(i).Store().Status(1); ok && st.IsLeader {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := c.Node(i).Store().Propose(ctx, 1, &internalpb.Command{CutVersion: bogus, Op: &internalpb.Command_Noop{Noop: &internalpb.NoopOp{}}})
				return err
			}
		}
		return errors.New("no leader of partition 1")
	})
	var last *kvpb.CutInfo
	for try := 0; try < 3; try++ {
		if last = createCut(t, c); last.GetState() == kvpb.CutState_CUT_STATE_COMPLETED {
			break
		}
	}
	if last.GetState() != kvpb.CutState_CUT_STATE_COMPLETED || last.GetVersion() <= bogus {
		t.Fatalf("cuts after the poisoned entry: last %v, want one completed above %d", last, uint64(bogus))
	}
}

func createCut(t *testing.T, c *clustertest.Cluster) *kvpb.CutInfo {
	t.Helper()
	var resp *kvpb.CreateCutResponse
	clustertest.Eventually(t, 30*time.Second, func() error {
		var err error
		resp, err = kvrpc.NewClusterClient(c.Conn(0)).CreateCut(ctxT(t, 20*time.Second), &kvpb.CreateCutRequest{})
		return err
	})
	return resp.GetCut()
}

// TestClientStoreURLRefused: a snapshot request naming a store the nodes
// are not configured with is refused before anything is opened: no
// directory is created, nothing is deleted.
func TestClientStoreURLRefused(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2})
	evil := filepath.Join(t.TempDir(), "made-by-a-client")
	cl := kvrpc.NewClusterClient(c.Conn(0))
	for _, store := range []string{
		(&url.URL{Scheme: "file", Path: evil}).String(),
		"s3://bucket?endpoint=http://127.0.0.1:1&region=us-east-1",
		c.Config(0).SnapshotStore + "-other",
	} {
		_, err := cl.ListSnapshots(ctxT(t, 5*time.Second), &kvpb.ListSnapshotsRequest{Store: store})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "snapshot-store-allow") {
			t.Errorf("list of %s: %v, want PermissionDenied", store, err)
		}
		_, err = cl.DeleteSnapshot(ctxT(t, 5*time.Second), &kvpb.DeleteSnapshotRequest{Store: store, Id: "cut-00000000000000000001"})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("delete in %s: %v, want PermissionDenied", store, err)
		}
	}
	if _, err := os.Stat(evil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the node created the client's directory: %v", err)
	}
	// The configured store, however spelled, works.
	st := c.Config(0).SnapshotStore
	if _, err := cl.ListSnapshots(ctxT(t, 5*time.Second), &kvpb.ListSnapshotsRequest{Store: st + "/./"}); err != nil {
		t.Fatalf("list of the configured store: %v", err)
	}
}

// TestClientTxnID: a client's txn_id is refused (ids are the server's):
// two transactions with the same id can no longer both report success.
func TestClientTxnID(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 4})
	req := &kvpb.TxnRequest{TxnId: []byte("0123456789abcdef"), Success: []*kvpb.RequestOp{
		{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte("a"), Value: []byte("1")}}},
		{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte("b"), Value: []byte("2")}}},
	}}
	_, err := c.KV(0).Txn(ctxT(t, 5*time.Second), req)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "txn_id") {
		t.Fatalf("Txn with a client's id: %v, want InvalidArgument naming txn_id", err)
	}
	req.TxnId = nil
	for i := 0; i < 2; i++ {
		// The first one's locks go a raft round after its answer: the
		// second may meet them (Aborted, not applied) and is sent again,
		// as a client does.
		clustertest.Eventually(t, 10*time.Second, func() error {
			resp, err := c.KV(0).Txn(ctxT(t, 5*time.Second), req)
			if status.Code(err) == codes.Aborted {
				return err
			}
			if err != nil || !resp.GetSucceeded() {
				t.Fatalf("Txn %d: %v, %v", i, resp, err)
			}
			return nil
		})
	}
	// A priority from long ago (to win every conflict) counts as a
	// minute old (rpc TestTxnPriority): served, not refused — a node
	// whose clock is off must not refuse correct clients (issue 17).
	req.Priority = time.Now().Add(-time.Hour).UnixNano()
	clustertest.Eventually(t, 10*time.Second, func() error {
		resp, err := c.KV(0).Txn(ctxT(t, 5*time.Second), req)
		if status.Code(err) == codes.Aborted {
			return err
		}
		if err != nil || !resp.GetSucceeded() {
			t.Fatalf("Txn with a priority an hour old: %v, %v; want it served", resp, err)
		}
		return nil
	})
}

// TestConnectionFlood opens ten times --max-connections connections to
// both listeners: the node keeps serving the client connected before, its
// WAL stays healthy, and the connections over the limit are closed and
// counted.
func TestConnectionFlood(t *testing.T) {
	const max = 32
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2, Configure: func(i int, cfg *server.Config) {
		withHTTP(i, cfg)
		cfg.MaxConnections = max
	}})
	n := c.Node(0)
	kv := c.KV(0)
	put(t, c, 0, "before", "flood")
	var conns []net.Conn
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	for _, addr := range []string{n.Addrs().GRPC, n.Addrs().Peer} {
		for i := 0; i < 10*max; i++ {
			cn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				t.Fatalf("dial %d to %s: %v", i, addr, err)
			}
			conns = append(conns, cn)
		}
	}
	clustertest.Eventually(t, 10*time.Second, func() error {
		if v := metric(t, n, `cutkv_connections_rejected_total{listener="client"}`); v < 8*max {
			return fmt.Errorf("client listener rejected %v connections", v)
		}
		if v := metric(t, n, `cutkv_connections_rejected_total{listener="peer"}`); v < 8*max {
			return fmt.Errorf("peer listener rejected %v connections", v)
		}
		return nil
	})
	for i := 0; i < 50; i++ {
		if _, err := kv.Put(ctxT(t, 5*time.Second), &kvpb.PutRequest{Key: []byte(fmt.Sprintf("during-%d", i)), Value: []byte("x")}); err != nil {
			t.Fatalf("put %d during the flood: %v", i, err)
		}
	}
	select {
	case err := <-n.Fatal():
		t.Fatalf("the node stopped: %v", err)
	default:
	}
	if open := metric(t, n, `cutkv_connections_open{listener="client"}`); open > max {
		t.Fatalf("client listener holds %v connections, limit %d", open, max)
	}
}

// TestWALRollbackRefused: a stopped node whose WAL directory got an old
// segment under the newest one's name, or lost its newest segment, refuses
// to start and names the file (before, it served a rolled-back log).
func TestWALRollbackRefused(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, dir string, segs []string){
		"old segment copied in": func(t *testing.T, dir string, segs []string) {
			b, err := os.ReadFile(filepath.Join(dir, segs[0]))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, segs[len(segs)-1]), b, 0o640); err != nil {
				t.Fatal(err)
			}
		},
		"newest segment missing": func(t *testing.T, dir string, segs []string) {
			if err := os.Remove(filepath.Join(dir, segs[len(segs)-1])); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2, Configure: func(_ int, cfg *server.Config) {
				cfg.WALSegmentSize = 16 << 10
				cfg.MaterializeInterval = time.Hour
			}})
			v := strings.Repeat("v", 1<<10)
			for i := 0; i < 80; i++ {
				put(t, c, 0, fmt.Sprintf("k%03d", i), v)
			}
			c.Kill(0)
			dir := filepath.Join(c.Config(0).DataDir, datadir.WALDir)
			segs := segments(t, dir)
			if len(segs) < 3 {
				t.Fatalf("only %d WAL segments", len(segs))
			}
			damage(t, dir, segs)
			_, err := server.Start(c.Config(0), quiet)
			if err == nil || !strings.Contains(err.Error(), segs[len(segs)-1]) {
				t.Fatalf("start over a damaged WAL: %v, want an error naming %s", err, segs[len(segs)-1])
			}
		})
	}
}

// segments lists the WAL's segment files, oldest first.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if len(e.Name()) == 20 && strings.Trim(e.Name(), "0123456789") == "" {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// TestMissingIdentityRefused: a data dir with a WAL but no cluster.json
// refuses to start, even with --initial-cluster (before, it bootstrapped a
// new cluster over the old log).
func TestMissingIdentityRefused(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2})
	put(t, c, 0, "k", "v")
	c.Stop(0)
	if err := os.Remove(filepath.Join(c.Config(0).DataDir, "cluster.json")); err != nil {
		t.Fatal(err)
	}
	_, err := server.Start(c.Config(0), quiet)
	if !errors.Is(err, server.ErrNoIdentity) || !strings.Contains(err.Error(), "cluster.json") {
		t.Fatalf("start without cluster.json: %v, want ErrNoIdentity", err)
	}
}

// TestFailedBootstrapRetry: a first start that fails (a busy port) leaves
// an empty data dir, and the corrected retry bootstraps.
func TestFailedBootstrapRetry(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	cfg := nodeConfig(dir, "n1=127.0.0.1:7301", 2, "retry")
	cfg.HTTPAddr = busy.Addr().String()
	if _, err := server.Start(cfg, quiet); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("start on a busy port: %v", err)
	}
	for _, f := range []string{"cluster.json", datadir.WALDir, datadir.MaterializeDir} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the failed first start left %s: %v", f, err)
		}
	}
	cfg.HTTPAddr = ""
	n, err := server.Start(cfg, quiet)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	n.Kill()
}

// TestClusterIDsAreRandom: two clusters bootstrapped from the same flags
// get different ids; the members of one agree on its id.
func TestClusterIDsAreRandom(t *testing.T) {
	a := clustertest.Start(t, 3, clustertest.Options{Partitions: 2})
	b := clustertest.Start(t, 1, clustertest.Options{Partitions: 2})
	for i := 1; i < 3; i++ {
		if a.Node(i).ClusterID() != a.Node(0).ClusterID() {
			t.Fatalf("n%d runs cluster %x, n1 %x", i+1, a.Node(i).ClusterID(), a.Node(0).ClusterID())
		}
	}
	dir1, dir2 := t.TempDir(), t.TempDir()
	var ids []uint64
	for _, d := range []string{dir1, dir2} {
		n, err := server.Start(nodeConfig(d, "n1=127.0.0.1:7301", 2, "same"), quiet)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n.ClusterID())
		n.Kill()
	}
	if ids[0] == ids[1] || a.Node(0).ClusterID() == b.Node(0).ClusterID() {
		t.Fatalf("clusters bootstrapped alike share an id: %x %x", ids, []uint64{a.Node(0).ClusterID(), b.Node(0).ClusterID()})
	}
	// The headers carry it as 16 hex digits.
	resp, err := a.KV(0).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte("k")})
	if err != nil || resp.GetHeader().GetClusterId() != topology.FormatClusterID(a.Node(0).ClusterID()) || len(resp.GetHeader().GetClusterId()) != 16 {
		t.Fatalf("header %v, %v", resp.GetHeader(), err)
	}
}

// TestClusterIDRefusedToOtherSettings: a member asks for the cluster id
// with the digest of its own flags; a member bootstrapped with other
// settings refuses it, and the asker stops at once with ErrWrongCluster
// naming who refused, instead of waiting out the bootstrap wait, and
// leaves its data dir empty for the corrected retry.
func TestClusterIDRefusedToOtherSettings(t *testing.T) {
	a1, a2 := clustertest.FreeAddr(t), clustertest.FreeAddr(t)
	initial := "n1=" + a1 + ",n2=" + a2
	cfg1 := nodeConfig(t.TempDir(), initial, 2, "one")
	cfg1.PeerAddr = a1
	n1, err := server.Start(cfg1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Kill()
	dir2 := t.TempDir()
	cfg2 := nodeConfig(dir2, initial, 2, "another")
	cfg2.ID, cfg2.PeerAddr = "n2", a2
	start := time.Now()
	n2, err := server.Start(cfg2, quiet)
	if err == nil {
		n2.Kill()
		t.Fatal("n2 with another --initial-cluster-token learned n1's cluster id")
	}
	if !errors.Is(err, server.ErrWrongCluster) || !strings.Contains(err.Error(), "n1 at "+a1) || !strings.Contains(err.Error(), "--initial-cluster-token") {
		t.Errorf("n2 with another token: %v, want ErrWrongCluster naming n1 and the settings", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the refusal took %v: waited instead of stopping", d)
	}
	if left, _ := os.ReadDir(dir2); len(left) > 1 { // the lock file may stay
		t.Errorf("the refused first start left %v in the data dir", left)
	}
}

// --- TLS ---------------------------------------------------------------

// testPKI is a CA with node and client certificates in a directory.
type testPKI struct {
	t   *testing.T
	dir string
}

var certOpts = pki.Options{ValidFor: time.Hour}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{t: t, dir: t.TempDir()}
	if _, err := pki.CreateCA(p.dir, "test CA", pki.Options{ValidFor: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *testPKI) ca() string { return filepath.Join(p.dir, pki.CACertFile) }

func (p *testPKI) node(id string) pki.Files {
	p.t.Helper()
	f, err := pki.CreateNode(p.dir, p.dir, id, []string{"127.0.0.1", "localhost"}, certOpts)
	if err != nil {
		p.t.Fatal(err)
	}
	return f
}

func (p *testPKI) client(name string, role pki.Role) pki.Files {
	p.t.Helper()
	f, err := pki.CreateClient(p.dir, p.dir, name, role, certOpts)
	if err != nil {
		p.t.Fatal(err)
	}
	return f
}

// expiredClient signs, with the CA's key, a client certificate with role
// admin that expired an hour ago.
func (p *testPKI) expiredClient() pki.Files {
	p.t.Helper()
	t := p.t
	caPair, err := tls.LoadX509KeyPair(p.ca(), filepath.Join(p.dir, pki.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caPair.Certificate[0])
	key, _ := ecdsa.GenerateKey(caCert.PublicKey.(*ecdsa.PublicKey).Curve, rand.Reader)
	u, _ := url.Parse("cutkv://role/admin")
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "expired", OrganizationalUnit: []string{"admin"}},
		NotBefore:    time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs: []*url.URL{u},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caPair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	f := pki.Files{Cert: filepath.Join(p.dir, "expired.crt"), Key: filepath.Join(p.dir, "expired.key"), CA: p.ca()}
	_ = os.WriteFile(f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(f.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
	return f
}

// tlsConn dials addr with TLS, presenting f's certificate (none when
// f.Cert is "") and trusting f.CA.
func tlsConn(t *testing.T, addr string, f pki.Files, peer bool) *grpc.ClientConn {
	t.Helper()
	r, err := pki.NewReloader(f, quiet)
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.ClientConfig
	if peer {
		cfg = r.PeerClientConfig
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(grpctls.Client(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// secureCluster starts n nodes with TLS everywhere: mutual TLS between
// peers, client certificates required, encrypted gossip.
func secureCluster(t *testing.T, n int, p *testPKI) *clustertest.Cluster {
	t.Helper()
	return secureClusterWith(t, n, p, nil)
}

// secureClusterWith is secureCluster with more configuration (nil: none).
func secureClusterWith(t *testing.T, n int, p *testPKI, more func(int, *server.Config)) *clustertest.Cluster {
	t.Helper()
	keyFile := filepath.Join(p.dir, "gossip.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := make([]pki.Files, n)
	for i := range nodes {
		nodes[i] = p.node(fmt.Sprintf("n%d", i+1))
	}
	return clustertest.Start(t, n, clustertest.Options{Partitions: 2, Configure: func(i int, cfg *server.Config) {
		f := nodes[i]
		cfg.PeerCertFile, cfg.PeerKeyFile, cfg.PeerTrustedCAFile = f.Cert, f.Key, p.ca()
		cfg.CertFile, cfg.KeyFile, cfg.TrustedCAFile = f.Cert, f.Key, p.ca()
		cfg.GossipKeyFile = keyFile
		if more != nil {
			more(i, cfg)
		}
	}})
}

// TestTLSRoles: with client certificates required, each role reaches
// what docs/cli.md says, a client without a certificate only health, an
// expired certificate nothing; the cluster itself runs over mutual TLS.
func TestTLSRoles(t *testing.T) {
	p := newPKI(t)
	c := secureCluster(t, 3, p)
	addr := c.Config(1).GRPCAddr
	conn := func(f pki.Files) *grpc.ClientConn { return tlsConn(t, addr, f, false) }
	admin := conn(p.client("admin", pki.RoleAdmin))
	writer := conn(p.client("writer", pki.RoleWrite))
	reader := conn(p.client("reader", pki.RoleRead))
	anon := conn(pki.Files{CA: p.ca()})

	clustertest.Eventually(t, 10*time.Second, func() error {
		_, err := kvrpc.NewKVClient(writer).Put(ctxT(t, 2*time.Second), &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")})
		return err
	})
	if _, err := kvrpc.NewKVClient(reader).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte("k")}); err != nil {
		t.Fatalf("read role Get: %v", err)
	}
	readTxn := &kvpb.TxnRequest{Success: []*kvpb.RequestOp{{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte("k")}}}}}
	if _, err := kvrpc.NewKVClient(reader).Txn(ctxT(t, 5*time.Second), readTxn); err != nil {
		t.Fatalf("read role, read-only Txn: %v", err)
	}
	denied := func(what string, err error, need string) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), need) {
			t.Errorf("%s: %v, want PermissionDenied naming role %s", what, err, need)
		}
	}
	_, err := kvrpc.NewKVClient(reader).Put(ctxT(t, 5*time.Second), &kvpb.PutRequest{Key: []byte("k"), Value: []byte("r")})
	denied("read role Put", err, "write")
	_, err = kvrpc.NewKVClient(reader).Txn(ctxT(t, 5*time.Second), &kvpb.TxnRequest{Success: []*kvpb.RequestOp{{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte("k")}}}}})
	denied("read role writing Txn", err, "write")
	stream, err := kvrpc.NewClusterClient(writer).CreateSnapshot(ctxT(t, 30*time.Second), &kvpb.CreateSnapshotRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	denied("write role CreateSnapshot", err, "admin")
	_, err = kvrpc.NewClusterClient(writer).CreateCut(ctxT(t, 5*time.Second), &kvpb.CreateCutRequest{})
	denied("write role CreateCut", err, "admin")
	stream, err = kvrpc.NewClusterClient(admin).CreateSnapshot(ctxT(t, 60*time.Second), &kvpb.CreateSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("admin CreateSnapshot: %v", err)
		}
		if m.GetResult() != nil {
			break
		}
	}
	// Without a certificate: health only.
	if _, err := kvrpc.NewClusterClient(anon).Members(ctxT(t, 5*time.Second), &kvpb.MembersRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Members without a certificate: %v, want PermissionDenied", err)
	}
	if err := anon.Invoke(ctxT(t, 5*time.Second), "/grpc.health.v1.Health/Check", &kvpb.MembersRequest{}, &kvpb.MembersResponse{}); err != nil {
		t.Errorf("health without a certificate: %v", err)
	}
	// An expired certificate never gets a connection: the server refuses
	// it in the handshake (with TLS 1.3 the client may only see the
	// connection closed), so the call is Unavailable, never served.
	_, err = kvrpc.NewKVClient(conn(p.expiredClient())).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte("k")})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("expired certificate: %v, want the connection refused (Unavailable)", err)
	}
	r, err := pki.NewReloader(p.expiredClient(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tls.Dial("tcp", addr, r.ClientConfig())
	if err == nil {
		raw.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = raw.Read(make([]byte, 1))
		raw.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("expired certificate, raw TLS: %v, want the server's alert about the certificate", err)
	}
}

// TestTLSPeers: the peer port refuses a certificate of another CA and a
// client certificate of the cluster's CA; a member cannot send raft
// messages as another; a plaintext client of a TLS node gets a clear
// error at once.
func TestTLSPeers(t *testing.T) {
	p := newPKI(t)
	c := secureClusterWith(t, 3, p, withHTTP)
	n1 := c.Node(0)
	ctx := asPeer(ctxT(t, 5*time.Second), n1.ClusterID())
	stranger := newPKI(t)
	for name, f := range map[string]pki.Files{
		"node certificate of another CA": {Cert: stranger.node("n2").Cert, Key: filepath.Join(stranger.dir, "n2.key"), CA: p.ca()},
		"client certificate":             p.client("intruder", pki.RoleAdmin),
	} {
		f.CA = p.ca()
		cc := tlsConn(t, n1.Addrs().Peer, f, false)
		_, err := internalrpc.NewCutServiceClient(cc).AllocatedCut(ctx, &internalpb.AllocatedCutRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s on the peer port: %v, want the handshake refused", name, err)
		}
	}
	// The server may fail its side of a handshake after the client gave up.
	clustertest.Eventually(t, 5*time.Second, func() error {
		if v := httpsMetric(t, p, n1, `cutkv_peer_calls_rejected_total{reason="tls_handshake"}`); v < 2 {
			return fmt.Errorf("%v failed handshakes counted on the peer port, want at least 2", v)
		}
		return nil
	})
	// n3, a member, claims to be n1 in a raft batch.
	f3 := pki.Files{Cert: filepath.Join(p.dir, "n3.crt"), Key: filepath.Join(p.dir, "n3.key"), CA: p.ca()}
	cc := tlsConn(t, c.Node(1).Addrs().Peer, f3, true)
	stream, err := internalrpc.NewRaftClient(cc).Send(asPeer(ctxT(t, 5*time.Second), n1.ClusterID()))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := proto.Marshal(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(1 << 40))})
	_ = stream.Send(&internalpb.RaftBatch{ClusterId: n1.ClusterID(), From: 1, To: 2, Messages: []*internalpb.GroupMessage{{Group: 0, Message: m}}})
	if _, err := stream.CloseAndRecv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("n3 sending as n1: %v, want PermissionDenied", err)
	}
	// A plaintext client gives up within its dial timeout, saying why.
	start := time.Now()
	_, err = client.NewWithConfig(ctxT(t, 10*time.Second), client.Config{Endpoints: []string{c.Config(0).GRPCAddr}, DialTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "TLS") || time.Since(start) > 3*time.Second {
		t.Fatalf("plaintext client against TLS: %v after %v, want an error naming TLS within the dial timeout", err, time.Since(start))
	}
	// The TLS client of the library works, with the same files kvctl takes.
	f := p.client("lib", pki.RoleWrite)
	cl, err := client.NewWithConfig(ctxT(t, 10*time.Second), client.Config{Endpoints: []string{c.Config(0).GRPCAddr},
		TLS: &client.TLSFiles{CACert: p.ca(), Cert: f.Cert, Key: f.Key}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Put(ctxT(t, 10*time.Second), []byte("lib"), []byte("tls")); err != nil {
		t.Fatalf("Put through the TLS client: %v", err)
	}
}

// TestTLSReload: new certificate files are served after a reload
// (kvnode calls Node.Reload on SIGHUP) without a restart; a reloaded peer
// certificate that names another node is refused and the old one kept.
func TestTLSReload(t *testing.T) {
	p := newPKI(t)
	c := secureCluster(t, 1, p)
	n := c.Node(0)
	servedSerial := func(addr string, f pki.Files) string {
		t.Helper()
		r, err := pki.NewReloader(f, quiet)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.Dial("tcp", addr, r.ClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	admin := p.client("admin", pki.RoleAdmin)
	before := servedSerial(n.Addrs().GRPC, admin)
	if _, err := pki.CreateNode(p.dir, p.dir, "n1", []string{"127.0.0.1"}, pki.Options{ValidFor: time.Hour, Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if after := servedSerial(n.Addrs().GRPC, admin); after == before {
		t.Fatalf("the client listener serves serial %s after the reload, as before", after)
	}
	peerBefore := servedSerial(n.Addrs().Peer, p.node("n9"))
	// n1's files now hold a certificate of node n2: refused at reload.
	other := p.node("n2")
	for _, f := range [][2]string{{other.Cert, filepath.Join(p.dir, "n1.crt")}, {other.Key, filepath.Join(p.dir, "n1.key")}} {
		b, _ := os.ReadFile(f[0])
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Reload(); err == nil || !strings.Contains(err.Error(), `"n2"`) {
		t.Fatalf("reload of another node's certificate: %v, want refused", err)
	}
	if got := servedSerial(n.Addrs().Peer, p.node("n8")); got != peerBefore {
		t.Fatalf("the peer listener serves %s after a refused reload, %s before", got, peerBefore)
	}
}
