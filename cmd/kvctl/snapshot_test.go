package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/client/clienttest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/restore"
	"github.com/cutkv/cutkv/snapshot"
)

// snapshotFake is one node serving the snapshot calls of the Cluster
// service from a catalogue each test sets, and recording every request.
type snapshotFake struct {
	kvrpc.UnimplementedClusterServer
	addr string

	mu        sync.Mutex
	create    func(*kvpb.CreateSnapshotRequest, grpc.ServerStreamingServer[kvpb.CreateSnapshotResponse]) error
	snapshots []*kvpb.SnapshotInfo // with their partitions; list leaves them out
	store     string               // the store list reports
	check     *kvpb.CheckSnapshotResponse
	checkErr  error // CheckSnapshot's error, when set
	gc        *kvpb.SnapshotGCResponse
	reqs      []proto.Message
	deadline  time.Duration // time left to CreateSnapshot's deadline, last call
}

func startSnapshotFake(t *testing.T) *snapshotFake {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &snapshotFake{addr: l.Addr().String()}
	srv := grpc.NewServer()
	kvrpc.RegisterClusterServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return f
}

// snapCtl runs kvctl against f.
func snapCtl(t *testing.T, f *snapshotFake, args ...string) result {
	t.Helper()
	return kvctl(t, nil, "", append([]string{"--endpoints", f.addr}, args...)...)
}

func (f *snapshotFake) set(fn func(f *snapshotFake)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// record notes a request.
func (f *snapshotFake) record(r proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
}

// Requests returns the requests received, oldest first.
func (f *snapshotFake) Requests() []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]proto.Message(nil), f.reqs...)
}

func (f *snapshotFake) Deadline() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deadline
}

func (f *snapshotFake) find(id string) *kvpb.SnapshotInfo {
	for _, s := range f.snapshots {
		if s.GetId() == id {
			return s
		}
	}
	return nil
}

func notFound(id string) error {
	return status.Errorf(codes.NotFound, "snapshot: not found: snapshot %s", id)
}

func (f *snapshotFake) CreateSnapshot(r *kvpb.CreateSnapshotRequest, s grpc.ServerStreamingServer[kvpb.CreateSnapshotResponse]) error {
	f.record(r)
	f.mu.Lock()
	if dl, ok := s.Context().Deadline(); ok {
		f.deadline = time.Until(dl)
	}
	fn := f.create
	f.mu.Unlock()
	return fn(r, s)
}

func (f *snapshotFake) ListSnapshots(_ context.Context, r *kvpb.ListSnapshotsRequest) (*kvpb.ListSnapshotsResponse, error) {
	f.record(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &kvpb.ListSnapshotsResponse{Header: fakeHeader, Store: f.store}
	for _, s := range f.snapshots {
		s = proto.Clone(s).(*kvpb.SnapshotInfo)
		s.Partitions = nil
		resp.Snapshots = append(resp.Snapshots, s)
	}
	return resp, nil
}

func (f *snapshotFake) GetSnapshot(_ context.Context, r *kvpb.GetSnapshotRequest) (*kvpb.GetSnapshotResponse, error) {
	f.record(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.find(r.GetId())
	if s == nil {
		return nil, notFound(r.GetId())
	}
	return &kvpb.GetSnapshotResponse{Header: fakeHeader, Snapshot: s}, nil
}

func (f *snapshotFake) CheckSnapshot(_ context.Context, r *kvpb.CheckSnapshotRequest) (*kvpb.CheckSnapshotResponse, error) {
	f.record(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.find(r.GetId()) == nil {
		return nil, notFound(r.GetId())
	}
	if f.checkErr != nil {
		return nil, f.checkErr
	}
	return f.check, nil
}

func (f *snapshotFake) DeleteSnapshot(_ context.Context, r *kvpb.DeleteSnapshotRequest) (*kvpb.SnapshotGCResponse, error) {
	f.record(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.find(r.GetId()) == nil {
		return nil, notFound(r.GetId())
	}
	return f.gc, nil
}

func (f *snapshotFake) PruneSnapshots(_ context.Context, r *kvpb.PruneSnapshotsRequest) (*kvpb.SnapshotGCResponse, error) {
	f.record(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gc, nil
}

// Two snapshots of two partitions: 41, and 42, which shares 41's base of
// partition 1 and adds a piece.
var (
	snap41 = &kvpb.SnapshotInfo{
		Id: "cut-00000000000000000041", CutVersion: 41, TimeUnixMs: 1735812000123, PartitionCount: 2,
		KeyHash: "fnv1a64", Cluster: "0000000000000c07", TotalBytes: 1 << 20, Objects: 3,
	}
	snap42 = &kvpb.SnapshotInfo{
		Id: "cut-00000000000000000042", CutVersion: 42, TimeUnixMs: 1735815600999, PartitionCount: 2,
		KeyHash: "fnv1a64", Cluster: "0000000000000c07", TotalBytes: 1<<20 + 6144, Objects: 4,
		Partitions: []*kvpb.SnapshotPartition{
			{Partition: 1, Pos: 1021, End: 1024, BaseIndex: 1000, BaseName: "p0001-00000000000000001000.mat", BaseSize: 1 << 20,
				BaseSha256: "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
				Pieces: []*kvpb.SnapshotPiece{
					{Name: "g0001-00000000000000001001-00000000000000001010.log", Lo: 1001, Hi: 1010, From: 1001, Size: 4096,
						Sha256: "9f3a0c1b2d3e4f5061728394a5b6c7d8e9f00112233445566778899aabbccddee"},
					{Name: "g0001-00000000000000001011-00000000000000001024.log", Lo: 1011, Hi: 1024, From: 1011, Size: 1024,
						Sha256: "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"},
				}},
			{Partition: 2, Pos: 3, End: 3, Pieces: []*kvpb.SnapshotPiece{
				{Name: "g0002-00000000000000000001-00000000000000000003.log", Lo: 1, Hi: 3, From: 1, Size: 1024,
					Sha256: "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"},
			}},
		},
	}
	snapResult = &kvpb.CreateSnapshotResult{
		Snapshot: &kvpb.SnapshotInfo{Id: snap42.Id, CutVersion: 42, TimeUnixMs: snap42.TimeUnixMs, PartitionCount: 2,
			KeyHash: "fnv1a64", Cluster: "0000000000000c07", TotalBytes: snap42.TotalBytes, Objects: 4},
		BytesUploaded: 13107200, PiecesUploaded: 2, PiecesReused: 2, DurationMs: 4250, Store: "s3://backups/cutkv",
		BaseFileBytes: 8 << 20, BaseFilesReused: 5, BaseBytesReused: 3 << 20, BaseCompactedBytes: 2 << 20,
	}
)

// streamCreate returns a CreateSnapshot that sends the progress messages
// and then, unless result is nil, the result, and ends with err.
func streamCreate(result *kvpb.CreateSnapshotResult, err error, progress ...*kvpb.SnapshotProgress) func(*kvpb.CreateSnapshotRequest, grpc.ServerStreamingServer[kvpb.CreateSnapshotResponse]) error {
	return func(_ *kvpb.CreateSnapshotRequest, s grpc.ServerStreamingServer[kvpb.CreateSnapshotResponse]) error {
		for _, p := range progress {
			if err := s.Send(&kvpb.CreateSnapshotResponse{Header: fakeHeader, Progress: p}); err != nil {
				return err
			}
		}
		if result != nil {
			if err := s.Send(&kvpb.CreateSnapshotResponse{Header: fakeHeader, Result: result}); err != nil {
				return err
			}
		}
		return err
	}
}

var snapProgress = []*kvpb.SnapshotProgress{
	{Phase: "cut"},
	{Phase: "upload", CutVersion: 42, PartitionsDone: 1, PartitionsTotal: 2, BytesUploaded: 4096},
	{Phase: "manifest", CutVersion: 42, PartitionsDone: 2, PartitionsTotal: 2, BytesUploaded: 13107200},
}

func TestSnapshotCreate(t *testing.T) {
	f := startSnapshotFake(t)
	f.set(func(f *snapshotFake) { f.create = streamCreate(snapResult, nil, snapProgress...) })
	r := snapCtl(t, f, "snapshot", "create", "--store", "s3://backups/cutkv", "--cut", "42", "--full")
	want(t, r, 0, `id                   cut-00000000000000000042
cut                  42
partitions           2
bytes uploaded       12.5 MiB
pieces uploaded      2
pieces reused        2
base files uploaded  8.0 MiB (2.0 MiB rewritten by compactions)
base files reused    5 (3.0 MiB)
duration             4.25s
store                s3://backups/cutkv
`)
	// Not a terminal: one line per progress message, and nothing else.
	if r.stderr != "cut\n"+
		"upload: cut 42, 1/2 partitions, 4.0 KiB uploaded\n"+
		"manifest: cut 42, 2/2 partitions, 12.5 MiB uploaded\n" {
		t.Errorf("progress on stderr:\n%s", r.stderr)
	}
	reqs := f.Requests()
	if len(reqs) != 1 || !proto.Equal(reqs[0], &kvpb.CreateSnapshotRequest{Header: &kvpb.RequestHeader{}, Store: "s3://backups/cutkv", CutVersion: 42, Full: true}) {
		t.Errorf("requests: %v", reqs)
	}
	// Without --timeout, create waits 30m; with it, as long as it says.
	if d := f.Deadline(); d < 29*time.Minute || d > 30*time.Minute {
		t.Errorf("create without --timeout: deadline in %v, want 30m", d)
	}
	snapCtl(t, f, "--timeout", "3s", "snapshot", "create")
	if d := f.Deadline(); d < time.Second || d > 3*time.Second {
		t.Errorf("create --timeout 3s: deadline in %v", d)
	}
	if reqs := f.Requests(); !proto.Equal(reqs[1], &kvpb.CreateSnapshotRequest{Header: &kvpb.RequestHeader{}}) {
		t.Errorf("create without flags sent %v", reqs[1])
	}

	var js struct {
		Header jsonHeader         `json:"header"`
		Result jsonSnapshotResult `json:"result"`
	}
	r = snapCtl(t, f, "-o", "json", "snapshot", "create")
	decode(t, r, &js)
	if r.code != 0 || js.Header.MemberID != "n1" || js.Result.Snapshot.ID != snap42.Id || js.Result.Snapshot.CutVersion != 42 ||
		js.Result.BytesUploaded != 13107200 || js.Result.PiecesUploaded != 2 || js.Result.PiecesReused != 2 || js.Result.DurationMs != 4250 ||
		js.Result.Store != "s3://backups/cutkv" || js.Result.Snapshot.Partitions != nil ||
		js.Result.BaseFileBytes != 8<<20 || js.Result.BaseFilesReused != 5 || js.Result.BaseBytesReused != 3<<20 {
		t.Errorf("create json: exit %d, %+v", r.code, js)
	}
	if strings.Count(r.stderr, "\n") != 3 {
		t.Errorf("create json: progress on stderr %q", r.stderr)
	}
}

func TestSnapshotCreateNoResult(t *testing.T) {
	f := startSnapshotFake(t)
	for _, tc := range []struct {
		name     string
		create   func(*kvpb.CreateSnapshotRequest, grpc.ServerStreamingServer[kvpb.CreateSnapshotResponse]) error
		code     int
		progress int    // progress lines before the error
		msg      string // in the error line
		hint     string // in the hint line, besides 'kvctl snapshot list'
	}{
		{"progress, then the end", streamCreate(nil, nil, snapProgress...), 4, 3, "the stream ended without a result", "create' again"},
		{"no message at all", streamCreate(nil, nil), 4, 0, "the stream ended without a result", "create' again"},
		{"progress, then an internal error", streamCreate(nil, status.Error(codes.Internal, "upload: disk on fire"), snapProgress[:2]...), 4, 2, "disk on fire", "create' again"},
		{"progress, then a refusal", streamCreate(nil, status.Error(codes.FailedPrecondition, "snapshot: upload lock lost"), snapProgress[:1]...), 1, 1, "upload lock lost", "failed"},
		{"a cut that did not complete", streamCreate(nil, status.Error(codes.FailedPrecondition, "cut 9 is failed, not completed")), 1, 0, "cut 9 is failed", "kvctl cut list"},
		{"a snapshot of the cut exists", streamCreate(nil, status.Error(codes.AlreadyExists, "snapshot: already exists: snapshot cut-9")), 1, 0, "already exists", "already"},
		{"no store", streamCreate(nil, status.Error(codes.NotFound, "snapshot: not found: bucket")), 1, 0, "not found: bucket", "'kvctl snapshot list'"},
	} {
		f.set(func(f *snapshotFake) { f.create, f.reqs = tc.create, nil })
		r := snapCtl(t, f, "snapshot", "create", "--cut", "9")
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != tc.code || r.stdout != "" || len(lines) != tc.progress+2 || !strings.HasPrefix(lines[tc.progress], "Error: ") ||
			!strings.Contains(lines[tc.progress], tc.msg) {
			t.Errorf("%s: %+v; want exit %d, %d progress lines, then the error", tc.name, r, tc.code, tc.progress)
			continue
		}
		if tc.msg == "the stream ended without a result" && !strings.Contains(lines[tc.progress], "the snapshot may not have been written") {
			t.Errorf("%s: error %q", tc.name, lines[tc.progress])
		}
		if hint := lines[tc.progress+1]; !strings.Contains(hint, "'kvctl snapshot list'") || !strings.Contains(hint, tc.hint) {
			t.Errorf("%s: hint %q, want one with %q", tc.name, hint, tc.hint)
		}
		// Once the node took the call, it is not sent again: a second
		// call would take a second snapshot.
		if n := len(f.Requests()); n != 1 {
			t.Errorf("%s: %d CreateSnapshot calls, want 1", tc.name, n)
		}
	}
}

func TestSnapshotCreateRetries(t *testing.T) {
	// The node has no leader for group 0 before it takes the call: kvctl
	// asks again.
	f := startSnapshotFake(t)
	var calls atomic.Int32
	f.set(func(f *snapshotFake) {
		f.create = func(r *kvpb.CreateSnapshotRequest, s grpc.ServerStreamingServer[kvpb.CreateSnapshotResponse]) error {
			if calls.Add(1) == 1 {
				return clienttest.NotApplied(clienttest.ReasonNoLeader, "")
			}
			return streamCreate(snapResult, nil, snapProgress...)(r, s)
		}
	})
	r := snapCtl(t, f, "snapshot", "create")
	if r.code != 0 || len(f.Requests()) != 2 || strings.Count(r.stderr, "\n") != 3 {
		t.Errorf("NO_LEADER, then a snapshot: %d calls, %+v", len(f.Requests()), r)
	}
}

func TestSnapshotProgressLine(t *testing.T) {
	for _, tc := range []struct {
		p    *kvpb.SnapshotProgress
		want string
	}{
		{&kvpb.SnapshotProgress{}, "progress"},
		{snapProgress[0], "cut"},
		{&kvpb.SnapshotProgress{Phase: "prepare", CutVersion: 42, PartitionsTotal: 8}, "prepare: cut 42, 0/8 partitions, 0 B uploaded"},
		{snapProgress[1], "upload: cut 42, 1/2 partitions, 4.0 KiB uploaded"},
		{&kvpb.SnapshotProgress{Phase: "upload", BytesUploaded: 1536}, "upload: 1.5 KiB uploaded"},
	} {
		if got := progressLine(tc.p); got != tc.want {
			t.Errorf("progressLine(%v) = %q, want %q", tc.p, got, tc.want)
		}
	}
	// On a terminal the line is rewritten in place and ended once.
	var b bytes.Buffer
	p := &progressPrinter{w: &b, tty: true}
	p.show(snapProgress[0])
	p.show(snapProgress[1])
	p.finish()
	p.finish()
	if want := "\rcut\x1b[K\rupload: cut 42, 1/2 partitions, 4.0 KiB uploaded\x1b[K\n"; b.String() != want {
		t.Errorf("terminal progress %q, want %q", b.String(), want)
	}
}

func TestSnapshotListShow(t *testing.T) {
	f := startSnapshotFake(t)
	f.set(func(f *snapshotFake) {
		f.snapshots = []*kvpb.SnapshotInfo{snap41, snap42}
		f.store = "file:///var/lib/cutkv/n1/snapshots"
	})
	want(t, snapCtl(t, f, "snapshot", "list"), 0, `store  file:///var/lib/cutkv/n1/snapshots

ID                        CUT  TIME                      PARTITIONS  OBJECTS  SIZE
cut-00000000000000000041  41   2025-01-02T10:00:00.123Z  2           3        1.0 MiB
cut-00000000000000000042  42   2025-01-02T11:00:00.999Z  2           4        1.0 MiB
`)
	var list struct {
		Header    jsonHeader     `json:"header"`
		Snapshots []jsonSnapshot `json:"snapshots"`
		Store     string         `json:"store"`
	}
	r := snapCtl(t, f, "-o", "json", "snapshot", "list")
	decode(t, r, &list)
	if r.code != 0 || list.Header.ClusterID != "0000000000000c07" || list.Store != "file:///var/lib/cutkv/n1/snapshots" || len(list.Snapshots) != 2 ||
		list.Snapshots[1].ID != snap42.Id || list.Snapshots[1].TimeUnixMs != 1735815600999 || list.Snapshots[1].TotalBytes != 1<<20+6144 ||
		list.Snapshots[1].Objects != 4 || list.Snapshots[1].KeyHash != "fnv1a64" || list.Snapshots[1].Partitions != nil {
		t.Errorf("list json: exit %d, %s", r.code, r.stdout)
	}
	f.set(func(f *snapshotFake) { f.snapshots, f.store = nil, "" })
	want(t, snapCtl(t, f, "-o", "json", "snapshot", "list"), 0,
		`{"header":{"cluster_id":"0000000000000c07","member_id":"n1","raft_term":0,"cut_version":7},"snapshots":[],"store":""}`+"\n")
	want(t, snapCtl(t, f, "snapshot", "list"), 0, "ID  CUT  TIME  PARTITIONS  OBJECTS  SIZE\n")
	f.set(func(f *snapshotFake) { f.snapshots = []*kvpb.SnapshotInfo{snap41, snap42} })

	head := `id          cut-00000000000000000042
cut         42
time        2025-01-02T11:00:00.999Z
cluster     0000000000000c07
partitions  2
key hash    fnv1a64
objects     4
size        1.0 MiB

PARTITION  POS   END   BASE                                 PIECES  BYTES
1          1021  1024  1000 p0001-00000000000000001000.mat  2       1.0 MiB
2          3     3     -                                    1       1.0 KiB
`
	want(t, snapCtl(t, f, "snapshot", "show", snap42.Id), 0, head)
	want(t, snapCtl(t, f, "snapshot", "show", "42"), 0, head) // by its cut number
	pieces := head + `
PARTITION  PIECE                                                RANGE      FROM  SIZE     SHA256
1          g0001-00000000000000001001-00000000000000001010.log  1001-1010  1001  4.0 KiB  9f3a0c1b2d3e
1          g0001-00000000000000001011-00000000000000001024.log  1011-1024  1011  1.0 KiB  001122334455
2          g0002-00000000000000000001-00000000000000000003.log  1-3        1     1.0 KiB  ffeeddccbbaa
`
	want(t, snapCtl(t, f, "snapshot", "show", snap42.Id, "-v"), 0, pieces)
	want(t, snapCtl(t, f, "snapshot", "show", "--pieces", snap42.Id), 0, pieces)

	var show struct {
		Header   jsonHeader   `json:"header"`
		Snapshot jsonSnapshot `json:"snapshot"`
	}
	r = snapCtl(t, f, "-o", "json", "snapshot", "show", snap42.Id)
	decode(t, r, &show)
	p1 := show.Snapshot.Partitions
	if r.code != 0 || show.Snapshot.ID != snap42.Id || len(p1) != 2 || p1[0].BaseName != "p0001-00000000000000001000.mat" || p1[0].BaseIndex != 1000 ||
		p1[0].BaseSize != 1<<20 || p1[0].BaseSHA256 != snap42.Partitions[0].BaseSha256 || len(p1[0].Pieces) != 2 ||
		p1[0].Pieces[1] != (jsonSnapshotPiece{Name: "g0001-00000000000000001011-00000000000000001024.log", Lo: 1011, Hi: 1024, From: 1011, Size: 1024,
			SHA256: "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}) ||
		p1[1].Pos != 3 || p1[1].End != 3 || p1[1].BaseName != "" {
		t.Errorf("show json: exit %d, %s", r.code, r.stdout)
	}

	// An unknown snapshot: exit 1, the server's reason, a hint.
	r = snapCtl(t, f, "snapshot", "show", "cut-00000000000000000007")
	want(t, r, 1, "")
	if !strings.HasPrefix(r.stderr, "Error: snapshot cut-00000000000000000007 not found: snapshot: not found: snapshot cut-00000000000000000007\n") ||
		!strings.Contains(r.stderr, "'kvctl snapshot list'") {
		t.Errorf("unknown snapshot: stderr %q", r.stderr)
	}
}

func TestSnapshotCheck(t *testing.T) {
	f := startSnapshotFake(t)
	f.set(func(f *snapshotFake) {
		f.snapshots = []*kvpb.SnapshotInfo{snap41, snap42}
		f.check = &kvpb.CheckSnapshotResponse{Header: fakeHeader, Ok: true, Objects: 4, Bytes: 1<<20 + 6144}
	})
	want(t, snapCtl(t, f, "snapshot", "check", snap42.Id), 0, "snapshot cut-00000000000000000042 ok: 4 objects, 1054720 bytes verified\n")
	want(t, snapCtl(t, f, "snapshot", "check", "42"), 0, "snapshot cut-00000000000000000042 ok: 4 objects, 1054720 bytes verified\n")
	want(t, snapCtl(t, f, "-o", "json", "snapshot", "check", snap42.Id), 0,
		`{"header":{"cluster_id":"0000000000000c07","member_id":"n1","raft_term":0,"cut_version":7},"ok":true,"objects":4,"bytes":1054720}`+"\n")

	// A damaged piece: exit 9, naming the partition, the piece and why,
	// once, though the node's error (a snapshot.CheckError) says where too.
	piece := "g0001-00000000000000001011-00000000000000001024.log"
	f.set(func(f *snapshotFake) {
		f.check = &kvpb.CheckSnapshotResponse{Header: fakeHeader, Partition: 1, Piece: piece, Objects: 2, Bytes: 4096,
			Error: "snapshot cut-00000000000000000042: partition 1: piece " + piece + ": snapshot: corrupt: SHA-256 differs from the manifest's"}
	})
	r := snapCtl(t, f, "snapshot", "check", snap42.Id)
	want(t, r, exitSnapshotDamaged, "")
	lines := strings.Split(r.stderr, "\n")
	if len(lines) != 3 || lines[0] != "Error: snapshot cut-00000000000000000042 is damaged: partition 1, piece "+piece+": snapshot: corrupt: SHA-256 differs from the manifest's" ||
		!strings.Contains(lines[1], "older snapshot") || !strings.Contains(lines[1], "'kvctl snapshot delete cut-00000000000000000042'") {
		t.Errorf("damaged: stderr %q", r.stderr)
	}
	var js jsonSnapshotCheck
	r = snapCtl(t, f, "-o", "json", "snapshot", "check", snap42.Id)
	decode(t, r, &js)
	if r.code != 9 || js.OK || js.Partition != 1 || js.Piece != piece || !strings.Contains(js.Error, "corrupt") || js.Objects != 2 {
		t.Errorf("damaged json: exit %d, %s", r.code, r.stdout)
	}

	// Without a partition and piece, the error alone.
	f.set(func(f *snapshotFake) {
		f.check = &kvpb.CheckSnapshotResponse{Header: fakeHeader, Error: "snapshot: incomplete chain"}
	})
	r = snapCtl(t, f, "snapshot", "check", snap41.Id)
	if r.code != 9 || !strings.HasPrefix(r.stderr, "Error: snapshot cut-00000000000000000041 is damaged: snapshot: incomplete chain\n") {
		t.Errorf("damaged, nowhere in particular: %+v", r)
	}
	// A manifest the node cannot read comes as DataLoss: damaged too.
	f.set(func(f *snapshotFake) {
		f.checkErr = status.Error(codes.DataLoss, `snapshot: corrupt: manifest "cut-00000000000000000041": not JSON`)
	})
	r = snapCtl(t, f, "snapshot", "check", snap41.Id)
	want(t, r, 9, "")
	if !strings.HasPrefix(r.stderr, `Error: snapshot cut-00000000000000000041 is damaged: snapshot: corrupt: manifest "cut-00000000000000000041": not JSON`+"\n") {
		t.Errorf("damaged manifest: stderr %q", r.stderr)
	}
	js = jsonSnapshotCheck{}
	r = snapCtl(t, f, "-o", "json", "snapshot", "check", snap41.Id)
	decode(t, r, &js)
	if r.code != 9 || js.OK || js.Piece != "" || !strings.Contains(js.Error, "not JSON") {
		t.Errorf("damaged manifest json: exit %d, %s", r.code, r.stdout)
	}

	r = snapCtl(t, f, "snapshot", "check", "nope")
	if r.code != 1 || !strings.Contains(r.stderr, "snapshot nope not found") || !strings.Contains(r.stderr, "'kvctl snapshot list'") {
		t.Errorf("unknown snapshot: %+v", r)
	}
}

var snapGC = &kvpb.SnapshotGCResponse{Header: fakeHeader,
	DeletedSnapshots: []string{"cut-00000000000000000041"},
	DeletedPieces:    []string{"g0001-00000000000000000901-00000000000000001000.log", "p0002-00000000000000000500.mat"},
	StaleLocks:       []string{"uploading/cut-00000000000000000040.json"},
}

func TestSnapshotDelete(t *testing.T) {
	f := startSnapshotFake(t)
	f.set(func(f *snapshotFake) {
		f.snapshots = []*kvpb.SnapshotInfo{snap41, snap42}
		f.gc = snapGC
	})
	want(t, snapCtl(t, f, "snapshot", "delete", snap41.Id), 0, `deleted 1 snapshot
  cut-00000000000000000041
deleted 2 pieces
kept 0 unreferenced pieces reserved by uploads in flight
removed 1 stale lock
`)
	want(t, snapCtl(t, f, "snapshot", "delete", snap41.Id, "-v"), 0, `deleted 1 snapshot
  cut-00000000000000000041
deleted 2 pieces
  g0001-00000000000000000901-00000000000000001000.log
  p0002-00000000000000000500.mat
kept 0 unreferenced pieces reserved by uploads in flight
removed 1 stale lock
  uploading/cut-00000000000000000040.json
`)
	want(t, snapCtl(t, f, "-o", "json", "snapshot", "delete", snap41.Id), 0,
		`{"header":{"cluster_id":"0000000000000c07","member_id":"n1","raft_term":0,"cut_version":7},"deleted_snapshots":["cut-00000000000000000041"],`+
			`"deleted_pieces":["g0001-00000000000000000901-00000000000000001000.log","p0002-00000000000000000500.mat"],"reserved":[],`+
			`"stale_locks":["uploading/cut-00000000000000000040.json"]}`+"\n")
	reqs := f.Requests()
	if len(reqs) != 3 || !proto.Equal(reqs[0], &kvpb.DeleteSnapshotRequest{Header: &kvpb.RequestHeader{}, Id: snap41.Id}) {
		t.Errorf("requests %v", reqs)
	}

	r := snapCtl(t, f, "snapshot", "delete", "cut-00000000000000000007")
	want(t, r, 1, "")
	if !strings.HasPrefix(r.stderr, "Error: snapshot cut-00000000000000000007 not found: ") || !strings.Contains(r.stderr, "'kvctl snapshot list'") {
		t.Errorf("unknown snapshot: stderr %q", r.stderr)
	}
	if n := len(f.Requests()); n != 4 {
		t.Errorf("%d calls, want 4 (NotFound is not retried)", n)
	}
}

func TestSnapshotPrune(t *testing.T) {
	f := startSnapshotFake(t)
	f.set(func(f *snapshotFake) {
		f.gc = &kvpb.SnapshotGCResponse{Header: fakeHeader, Reserved: []string{"p0001-00000000000000002000.mat"}}
	})
	for _, args := range [][]string{
		{"snapshot", "prune"},
		{"snapshot", "prune", "--keep-last", "0", "--keep-within", "0s"},
		{"snapshot", "prune", "--keep-last", "-1"},
		{"snapshot", "prune", "--keep-within", "-1h"},
		{"snapshot", "prune", "--keep-within", "1us"},
		{"snapshot", "prune", "--keep-last", "2", "extra"},
	} {
		r := snapCtl(t, f, args...)
		if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, "Error: ") {
			t.Errorf("kvctl %q: %+v; want exit 2", args, r)
		}
	}
	if n := len(f.Requests()); n != 0 {
		t.Fatalf("the server was called %d times for refused prunes", n)
	}
	r := snapCtl(t, f, "snapshot", "prune", "--keep-last", "0", "--keep-within", "0s")
	if !strings.Contains(r.stderr, "--keep-last") {
		t.Errorf("both zero: stderr %q", r.stderr)
	}

	want(t, snapCtl(t, f, "snapshot", "prune", "--keep-last", "3", "-v"), 0, `deleted 0 snapshots
deleted 0 pieces
kept 1 unreferenced piece reserved by uploads in flight
  p0001-00000000000000002000.mat
removed 0 stale locks
`)
	snapCtl(t, f, "snapshot", "prune", "--keep-within", "168h")
	snapCtl(t, f, "snapshot", "prune", "--keep-last", "1", "--keep-within", "1500ms", "--store", "file:///backups")
	reqs := f.Requests()
	wantReqs := []*kvpb.PruneSnapshotsRequest{
		{Header: &kvpb.RequestHeader{}, KeepLast: 3},
		{Header: &kvpb.RequestHeader{}, KeepWithinMs: 168 * 3600 * 1000},
		{Header: &kvpb.RequestHeader{}, KeepLast: 1, KeepWithinMs: 1500, Store: "file:///backups"},
	}
	if len(reqs) != len(wantReqs) {
		t.Fatalf("requests %v", reqs)
	}
	for i, w := range wantReqs {
		if !proto.Equal(reqs[i], w) {
			t.Errorf("request %d: %v, want %v", i, reqs[i], w)
		}
	}
}

// TestSnapshotStore: every command sends --store as it is given, and an
// empty store (the node's default) without it.
func TestSnapshotStore(t *testing.T) {
	f := startSnapshotFake(t)
	f.set(func(f *snapshotFake) {
		f.create = streamCreate(snapResult, nil)
		f.snapshots = []*kvpb.SnapshotInfo{snap42}
		f.check = &kvpb.CheckSnapshotResponse{Header: fakeHeader, Ok: true}
		f.gc = snapGC
	})
	const store = "s3://backups/cutkv?region=eu-west-1"
	for _, args := range [][]string{
		{"create"}, {"list"}, {"show", snap42.Id}, {"check", snap42.Id}, {"delete", snap42.Id}, {"prune", "--keep-last", "1"},
	} {
		for _, s := range []string{store, ""} {
			f.set(func(f *snapshotFake) { f.reqs = nil })
			full := append([]string{"snapshot"}, args...)
			if s != "" {
				full = append(full, "--store", s)
			}
			r := snapCtl(t, f, full...)
			reqs := f.Requests()
			if r.code != 0 || len(reqs) != 1 {
				t.Errorf("%q: %+v, %d requests", full, r, len(reqs))
				continue
			}
			if got := reqs[0].(interface{ GetStore() string }).GetStore(); got != s {
				t.Errorf("%q sent store %q, want %q", full, got, s)
			}
		}
	}
}

func TestSnapshotUsageAndUnavailable(t *testing.T) {
	f := startSnapshotFake(t)
	for _, args := range [][]string{
		{"snapshot"}, {"snapshot", "bogus"}, {"snapshot", "create", "extra"}, {"snapshot", "create", "--cut", "x"},
		{"snapshot", "list", "extra"}, {"snapshot", "show"}, {"snapshot", "show", ""}, {"snapshot", "show", "a", "b"},
		{"snapshot", "check"}, {"snapshot", "delete"}, {"snapshot", "delete", " "},
	} {
		if r := snapCtl(t, f, args...); r.code != 2 || !strings.HasPrefix(r.stderr, "Error: ") || r.stdout != "" {
			t.Errorf("kvctl %q: %+v; want exit 2", args, r)
		}
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("the server was called %d times for usage errors", n)
	}

	// A node that refuses the store URL: exit 2, a hint at --store.
	f.set(func(f *snapshotFake) {
		f.create = func(*kvpb.CreateSnapshotRequest, grpc.ServerStreamingServer[kvpb.CreateSnapshotResponse]) error {
			return status.Error(codes.InvalidArgument, `snapshot: invalid argument: store "ftp://x": want file:// or s3://`)
		}
	})
	r := snapCtl(t, f, "snapshot", "create", "--store", "ftp://x")
	if r.code != 2 || !strings.Contains(r.stderr, "--store") || strings.Contains(r.stderr, "Keys must be") {
		t.Errorf("invalid store: %+v", r)
	}

	dead := clienttest.DeadAddr(t) + "," + clienttest.DeadAddr(t)
	for _, args := range [][]string{
		{"create"}, {"list"}, {"show", "x"}, {"check", "x"}, {"delete", "x"}, {"prune", "--keep-last", "1"},
	} {
		r := kvctl(t, nil, "", append([]string{"--endpoints", dead, "--dial-timeout", "200ms", "--timeout", "500ms", "snapshot"}, args...)...)
		if r.code != 3 || !strings.Contains(r.stderr, "unavailable") || r.stdout != "" {
			t.Errorf("snapshot %q with every node down: %+v; want exit 3", args, r)
		}
	}
}

// TestSnapshotNamesAgreeWithRestore: kvctl prints snapshot times as
// kvnode restore --at reads them, and reads a cut number as the
// snapshot package does.
func TestSnapshotNamesAgreeWithRestore(t *testing.T) {
	if snapshotTimeFormat != restore.TimeFormat {
		t.Errorf("kvctl prints snapshot times as %q, kvnode restore as %q", snapshotTimeFormat, restore.TimeFormat)
	}
	for _, in := range []string{"7", "0042", "cut-00000000000000000007", "x1", "", "99999999999999999999999", "18446744073709551615"} {
		if got, want := resolveSnapshotID(in), snapshot.ResolveID(in); got != want {
			t.Errorf("resolveSnapshotID(%q) = %q, snapshot.ResolveID %q", in, got, want)
		}
	}
}

// TestSnapshotStoreAccessHint: a store that refused the node's
// credentials is not blamed on kvctl's certificate.
func TestSnapshotStoreAccessHint(t *testing.T) {
	f := startSnapshotFake(t)
	st, err := status.New(codes.PermissionDenied, "snapshot: access refused: snapshot store s3://b: no AWS credentials (none found within 2s)").
		WithDetails(&errdetails.ErrorInfo{Reason: reasonStoreAccess, Domain: notAppliedDomain})
	if err != nil {
		t.Fatal(err)
	}
	f.set(func(f *snapshotFake) { f.snapshots, f.checkErr = []*kvpb.SnapshotInfo{snap42}, st.Err() })
	r := snapCtl(t, f, "snapshot", "check", "42")
	if r.code != exitDenied || !strings.Contains(r.stderr, "AWS_ACCESS_KEY_ID") || strings.Contains(r.stderr, "--cert") {
		t.Errorf("store access refused: exit %d, stderr %q", r.code, r.stderr)
	}
}
