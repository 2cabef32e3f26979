package rpc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/snapshot"
)

// Snapshots at cuts (DESIGN.md, "Snapshots"). Group 0's leader runs
// create, delete and prune, one at a time (Snapshots.run); the store is
// authoritative for everything else. A snapshot of completed cut v is made
// in four steps:
//
//  1. prepare: per partition, a node holding a replica that applied the
//     CutFinish(v) entry pins its log from its newest materialization m <
//     pos (or builds one at pos-1 for a full snapshot) and reports m;
//  2. plan: the base is the newest of m and any stored materialization
//     below pos the node's log can extend; the chain from base+1 to the
//     CutFinish entry reuses stored pieces and ends with one new piece;
//  3. reserve: an upload lock in the store lists every object the
//     manifest will name, so a prune in another process keeps them;
//  4. upload: each node stores its partition's missing objects, then the
//     manifest makes the snapshot visible.

// snapshotUploaders bounds the partitions prepared and uploaded at once.
const snapshotUploaders = 4

func sortManifests(ms []*snapshot.Manifest) {
	slices.SortFunc(ms, func(a, b *snapshot.Manifest) int {
		return cmp.Or(cmp.Compare(a.CutVersion, b.CutVersion), cmp.Compare(a.ID, b.ID))
	})
}

// SnapshotResult is what CreateSnapshot did.
type SnapshotResult struct {
	Manifest       *snapshot.Manifest
	Store          string
	BytesUploaded  uint64
	PiecesUploaded int
	PiecesReused   int
	// BaseFilesReused and BaseBytesReused count the files of checkpoint
	// bases uploaded by an earlier snapshot, referenced and not sent.
	BaseFilesReused int
	BaseBytesReused uint64
	// BaseFileBytes is the part of BytesUploaded that is checkpoint
	// files (new SSTs: flushes, and the files compactions rewrote);
	// BaseCompactedBytes the part of it that compactions wrote.
	BaseFileBytes      uint64
	BaseCompactedBytes uint64
	Duration           time.Duration
}

// partPlan is one partition's part of a snapshot being made: the replica
// that uploads it, its pin, and the handle planned (snapshot.PlanPartition).
type partPlan struct {
	cp     *kvpb.CutPartition
	member string // the node that uploads it
	pin    string
	snapshot.PartitionPlan
}

// baseName is the object name of p's base (Base > 0).
func (p *partPlan) baseName() string {
	if !p.UploadBase {
		return p.BaseObject.Name
	}
	return checkpoint.Materialization{Partition: p.cp.GetPartition(), Index: p.Base, Dir: len(p.BaseFiles) > 0}.Name()
}

// CreateSnapshot takes (or uses) a completed cut and stores a snapshot of
// it. Group 0's leader only. progress, if set, is called as it goes.
func CreateSnapshot(ctx context.Context, n *Node, req *kvpb.CreateSnapshotRequest, progress func(*kvpb.SnapshotProgress)) (res *SnapshotResult, err error) {
	if progress == nil {
		progress = func(*kvpb.SnapshotProgress) {}
	}
	start := time.Now()
	// phase names what failed, for the metrics; plans are recorded with
	// the result.
	phase := snapFailStore
	var plans []*partPlan
	defer func() {
		if err != nil {
			res = nil
		}
		n.Metrics.snapshotEnded(res, plans, phase, time.Since(start))
	}()
	sn := n.Snapshots
	st, err := sn.Store(ctx, req.GetStore(), n.Layout.ClusterID)
	if err != nil {
		return nil, err
	}
	sn.run.Lock()
	defer sn.run.Unlock()
	phase = snapFailCut

	var c *kvpb.CutInfo
	if v := req.GetCutVersion(); v > 0 {
		got, ok := n.Meta.Cut(v)
		if !ok {
			return nil, fmt.Errorf("%w: no cut %d in group 0", ErrFailedPrecondition, v)
		}
		c = got
	} else {
		progress(&kvpb.SnapshotProgress{Phase: "cut"})
		running, err := StartCut(ctx, n)
		if err != nil {
			return nil, err
		}
		if c, err = WaitCut(ctx, n, running.GetVersion()); err != nil {
			return nil, err
		}
	}
	if c.GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
		return nil, fmt.Errorf("%w: cut %d is %s, not completed (%s); a snapshot needs a completed cut", ErrFailedPrecondition,
			c.GetVersion(), c.GetState(), c.GetError())
	}
	phase = snapFailPrepare
	v := c.GetVersion()
	id := snapshot.IDForCut(v)
	if _, err := st.Get(ctx, id); err == nil {
		return nil, fmt.Errorf("%w: snapshot %s of cut %d in %s", snapshot.ErrExists, id, v, st.URL())
	} else if !errors.Is(err, snapshot.ErrNotFound) {
		return nil, err
	}
	ms, err := sn.manifestsOf(ctx, st)
	if err != nil {
		return nil, err
	}
	stored := snapshot.IndexStored(ms)
	total := uint32(len(c.GetPartitions()))
	progress(&kvpb.SnapshotProgress{Phase: "prepare", PartitionsTotal: total, CutVersion: v})

	plans = make([]*partPlan, len(c.GetPartitions()))
	for i, cp := range c.GetPartitions() {
		plans[i] = &partPlan{cp: cp}
	}
	defer func() {
		// Pins not consumed by an upload (an error on the way).
		for _, p := range plans {
			if p.pin != "" {
				n.releaseSnapshotPin(p)
			}
		}
	}()
	err = forEachPlan(ctx, plans, func(ctx context.Context, p *partPlan) error {
		return n.prepareSnapshot(ctx, p, v, req.GetFull(), stored[p.cp.GetPartition()])
	})
	if err != nil {
		return nil, err
	}
	// A node that lost group 0's leadership meanwhile leaves the snapshot
	// to the new leader rather than uploading one beside it.
	if st, ok := n.Store.Status(0); !ok || !st.IsLeader {
		return nil, fmt.Errorf("%w: this node no longer leads group 0; snapshot %s not uploaded", ErrFailedPrecondition, id)
	}
	var names []string
	for _, p := range plans {
		if p.Base > 0 {
			names = append(names, p.baseName())
			for _, f := range p.BaseFiles {
				names = append(names, f.Name)
			}
		}
		for _, pc := range p.Pieces {
			names = append(names, pc.Name)
		}
	}
	phase = snapFailUpload
	u, err := st.BeginUpload(ctx, id, names)
	if err != nil {
		return nil, err
	}
	finished := false
	defer func() {
		if !finished {
			_ = u.Abort(context.WithoutCancel(ctx))
		}
	}()
	refreshCtx, stopRefresh := context.WithCancel(ctx)
	defer stopRefresh()
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-refreshCtx.Done():
				return
			case <-t.C:
				_ = u.Refresh(refreshCtx)
			}
		}
	}()

	res = &SnapshotResult{Store: st.URL()}
	var mu sync.Mutex
	var done uint32
	err = forEachPlan(ctx, plans, func(ctx context.Context, p *partPlan) error {
		up, err := n.uploadSnapshot(ctx, p, st.URL())
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		done++
		res.BytesUploaded += up.bytes
		res.PiecesUploaded += up.objects
		res.BaseFileBytes += up.fileBytes
		res.BaseCompactedBytes += up.compactedBytes
		res.BaseFilesReused += up.filesStored
		res.BaseBytesReused += up.bytesStored
		progress(&kvpb.SnapshotProgress{Phase: "upload", PartitionsDone: done, PartitionsTotal: total, BytesUploaded: res.BytesUploaded, CutVersion: v})
		return nil
	})
	if err != nil {
		return nil, err
	}
	stopRefresh()
	m := &snapshot.Manifest{
		ID: id, CutVersion: v, Time: time.UnixMilli(c.GetFinishedUnixMs()).UTC(),
		PartitionCount: n.Layout.Partitions, KeyHash: keyspace.HashName,
	}
	if c.GetFinishedUnixMs() == 0 {
		m.Time = clock.Now().UTC()
	}
	for _, p := range plans {
		mp := snapshot.Partition{Partition: p.cp.GetPartition(), Pos: p.cp.GetPos(), End: p.cp.GetFinishIndex(), Pieces: p.Pieces}
		if p.Base > 0 {
			mp.Base = &snapshot.Base{Object: p.BaseObject, Index: p.Base, Files: p.BaseFiles}
			if !p.UploadBase {
				res.PiecesReused++
			}
		}
		res.PiecesReused += len(p.Pieces) - len(p.New)
		m.Partitions = append(m.Partitions, mp)
	}
	slices.SortFunc(m.Partitions, func(a, b snapshot.Partition) int { return cmp.Compare(a.Partition, b.Partition) })
	phase = snapFailManifest
	progress(&kvpb.SnapshotProgress{Phase: "manifest", PartitionsDone: total, PartitionsTotal: total, BytesUploaded: res.BytesUploaded, CutVersion: v})
	if err := failpoint.Inject(failpoint.SnapshotBeforeManifest); err != nil {
		return nil, fmt.Errorf("snapshot %s of cut %d: manifest not written: %w", id, v, err)
	}
	if err := u.Finish(ctx, m); err != nil {
		return nil, err
	}
	finished = true
	res.Manifest = m
	res.Duration = time.Since(start)
	sn.Log.Info("snapshot created", "id", id, "cut", v, "store", st.URL(), "bytes_uploaded", res.BytesUploaded,
		"pieces_uploaded", res.PiecesUploaded, "pieces_reused", res.PiecesReused, "base_file_bytes", res.BaseFileBytes, "base_compacted_bytes", res.BaseCompactedBytes,
		"base_files_reused", res.BaseFilesReused, "base_bytes_reused", res.BaseBytesReused, "took", res.Duration)
	return res, nil
}

// forEachPlan runs fn on every plan, snapshotUploaders at a time, and
// returns the first error (the others are cancelled).
func forEachPlan(ctx context.Context, plans []*partPlan, fn func(context.Context, *partPlan) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, snapshotUploaders)
	var wg sync.WaitGroup
	for _, p := range plans {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, p); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// snapshotMembers lists the nodes to ask for partition p: the one that
// prepared it last time (its base is stored), then the leader as this
// node knows it, then the other replicas.
func (n *Node) snapshotMembers(p uint64) []string {
	var out []string
	lead := uint64(0)
	if n.Store != nil {
		if st, ok := n.Store.Status(p); ok {
			lead = st.Leader
		}
	}
	ids := slices.Clone(n.Layout.Groups[p])
	sort.SliceStable(ids, func(i, j int) bool { return ids[i] == lead && ids[j] != lead })
	last := n.Snapshots.lastUploader(p)
	for _, id := range ids {
		if m, ok := n.Layout.MemberByRaftID(id); ok {
			out = append(out, m.ID)
		}
	}
	if i := slices.Index(out, last); i > 0 {
		out = append(append([]string{last}, out[:i]...), out[i+1:]...)
	}
	return out
}

// prepareSnapshot pins partition p.cp on one of its replicas and plans its
// handle from what the store holds.
func (n *Node) prepareSnapshot(ctx context.Context, p *partPlan, v uint64, full bool, stored *snapshot.Stored) error {
	g, pos, end := p.cp.GetPartition(), p.cp.GetPos(), p.cp.GetFinishIndex()
	var errs []error
	var resp *internalpb.PrepareSnapshotResponse
	for _, m := range n.snapshotMembers(g) {
		conn, err := n.peerConn(m)
		if err == nil {
			resp, err = internalrpc.NewSnapshotPartitionsClient(conn).PrepareSnapshot(ctx, &internalpb.PrepareSnapshotRequest{
				ClusterId: n.Layout.ClusterID, Group: g, Version: v, Pos: pos, FinishIndex: end, Full: full,
				LeaseMs: defaultPinLease.Milliseconds(),
			})
		}
		if err == nil {
			p.member, p.pin = m, resp.GetPin()
			n.Snapshots.setUploader(g, m)
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", m, err))
		if ctx.Err() != nil {
			break
		}
	}
	if p.pin == "" {
		return fmt.Errorf("partition %d: no replica could prepare its part of cut %d: %w", g, v, errors.Join(errs...))
	}
	p.PartitionPlan = snapshot.PlanPartition(g, pos, end, snapshot.Offer{Base: resp.GetBaseIndex(), LogFrom: resp.GetLogFrom()}, full, stored)
	if p.UploadBase {
		files, err := baseFiles(resp.GetBaseFiles())
		if err != nil {
			return fmt.Errorf("partition %d: %s: %w", g, p.member, err)
		}
		p.BaseFiles = files
	}
	return nil
}

// baseFiles checks the file list of a checkpoint base that a replica
// offers and names each file's object by its content.
func baseFiles(in []*internalpb.BaseFile) ([]snapshot.BaseFile, error) {
	if len(in) > checkpoint.MaxDirFiles {
		return nil, fmt.Errorf("%w: base of %d files, at most %d", ErrInvalidArgument, len(in), checkpoint.MaxDirFiles)
	}
	var out []snapshot.BaseFile
	for i, f := range in {
		if !checkpoint.ValidFileName(f.GetFile()) || (i > 0 && in[i-1].GetFile() >= f.GetFile()) ||
			f.GetSize() < 0 || f.GetSize() > checkpoint.MaxDirFileSize || !snapshot.ValidSHA256(f.GetSha256()) {
			return nil, fmt.Errorf("%w: base file %q (%d bytes, SHA-256 %q): not a checkpoint file, or not sorted", ErrInvalidArgument, f.GetFile(), f.GetSize(), f.GetSha256())
		}
		out = append(out, snapshot.BaseFile{File: f.GetFile(), Object: snapshot.Object{Name: snapshot.FileObjectName(f.GetSha256()), Size: f.GetSize(), SHA256: f.GetSha256()}})
	}
	return out, nil
}

// uploaded is what one partition's upload did.
type uploaded struct {
	bytes     uint64 // written to the store
	objects   int
	fileBytes uint64 // of bytes, checkpoint files
	// of fileBytes, those compactions wrote (bounded by fileBytes)
	compactedBytes uint64
	filesStored    int // checkpoint files the store held already
	bytesStored    uint64
}

// uploadSnapshot has p's node store its missing objects; it returns the
// bytes and objects uploaded.
func (n *Node) uploadSnapshot(ctx context.Context, p *partPlan, store string) (uploaded, error) {
	req := &internalpb.UploadSnapshotRequest{ClusterId: n.Layout.ClusterID, Pin: p.pin, Store: store, Group: p.cp.GetPartition()}
	if p.UploadBase {
		req.BaseIndex = p.Base
	}
	for _, i := range p.New {
		req.Pieces = append(req.Pieces, &internalpb.LogRange{Lo: p.Pieces[i].Lo, Hi: p.Pieces[i].Hi})
	}
	conn, err := n.peerConn(p.member)
	if err != nil {
		return uploaded{}, err
	}
	p.pin = "" // consumed by the call, whatever it answers
	resp, err := internalrpc.NewSnapshotPartitionsClient(conn).UploadSnapshot(ctx, req)
	if err != nil {
		return uploaded{}, fmt.Errorf("partition %d: upload on %s: %w", p.cp.GetPartition(), p.member, err)
	}
	got := map[string]*internalpb.UploadedObject{}
	up := uploaded{objects: len(resp.GetObjects()), filesStored: int(resp.GetBaseFilesStored()), bytesStored: uint64(max(0, resp.GetBaseBytesStored()))}
	for _, o := range resp.GetObjects() {
		got[o.GetName()] = o
		up.bytes += uint64(o.GetSize())
	}
	for _, f := range p.BaseFiles {
		if o := got[f.Name]; o != nil {
			if o.GetSha256() != f.SHA256 || o.GetSize() != f.Size {
				return uploaded{}, fmt.Errorf("partition %d: %s uploaded %s as %d bytes with SHA-256 %s, not the file it offered", p.cp.GetPartition(), p.member, f.File, o.GetSize(), o.GetSha256())
			}
			up.fileBytes += uint64(f.Size)
		}
	}
	if c := resp.GetBaseCompactedBytes(); c < 0 || uint64(c) > up.fileBytes {
		return uploaded{}, fmt.Errorf("partition %d: %s reported %d bytes of compacted files among %d bytes of files uploaded", p.cp.GetPartition(), p.member, c, up.fileBytes)
	}
	up.compactedBytes = uint64(resp.GetBaseCompactedBytes())
	obj := func(name string) (snapshot.Object, error) {
		o := got[name]
		if o == nil {
			return snapshot.Object{}, fmt.Errorf("partition %d: %s did not report uploading %s", p.cp.GetPartition(), p.member, name)
		}
		return snapshot.Object{Name: name, Size: o.GetSize(), SHA256: o.GetSha256()}, nil
	}
	if p.UploadBase {
		if p.BaseObject, err = obj(p.baseName()); err != nil {
			return uploaded{}, err
		}
	}
	for _, i := range p.New {
		if p.Pieces[i].Object, err = obj(p.Pieces[i].Name); err != nil {
			return uploaded{}, err
		}
	}
	return up, nil
}

func (n *Node) releaseSnapshotPin(p *partPlan) {
	conn, err := n.peerConn(p.member)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = internalrpc.NewSnapshotPartitionsClient(conn).ReleaseSnapshot(ctx, &internalpb.ReleaseSnapshotRequest{ClusterId: n.Layout.ClusterID, Pin: p.pin})
	p.pin = ""
}

// snapshotInfo describes a manifest for the admin API; with parts, every
// partition's handle too.
func snapshotInfo(m *snapshot.Manifest, parts bool) *kvpb.SnapshotInfo {
	info := &kvpb.SnapshotInfo{
		Id: m.ID, CutVersion: m.CutVersion, TimeUnixMs: m.Time.UnixMilli(), PartitionCount: m.PartitionCount,
		KeyHash: m.KeyHash, Cluster: m.Cluster,
	}
	for _, o := range m.Objects() {
		info.Objects++
		info.TotalBytes += uint64(o.Size)
	}
	if !parts {
		return info
	}
	for _, p := range m.Partitions {
		sp := &kvpb.SnapshotPartition{Partition: p.Partition, Pos: p.Pos, End: p.End}
		if p.Base != nil {
			sp.BaseIndex, sp.BaseName, sp.BaseSize, sp.BaseSha256 = p.Base.Index, p.Base.Name, p.Base.Size, p.Base.SHA256
			for _, f := range p.Base.Files {
				sp.BaseFiles = append(sp.BaseFiles, &kvpb.SnapshotBaseFile{File: f.File, Name: f.Name, Size: f.Size, Sha256: f.SHA256})
			}
		}
		for _, pc := range p.Pieces {
			sp.Pieces = append(sp.Pieces, &kvpb.SnapshotPiece{Name: pc.Name, Lo: pc.Lo, Hi: pc.Hi, From: pc.From, Size: pc.Size, Sha256: pc.SHA256})
		}
		info.Partitions = append(info.Partitions, sp)
	}
	return info
}

// CreateSnapshot runs on group 0's leader (forwarded there) and streams
// its progress.
func (s *ClusterServer) CreateSnapshot(req *kvpb.CreateSnapshotRequest, stream kvrpc.Cluster_CreateSnapshotServer) error {
	ctx := stream.Context()
	n := s.n
	conn, err := n.route(ctx, 0)
	if err != nil {
		return toStatus(err, n.leaderHintOf(0))
	}
	if conn != nil {
		fwd, err := kvrpc.NewClusterClient(conn).CreateSnapshot(forwardCtx(ctx), req)
		if err != nil {
			return err
		}
		for {
			m, err := fwd.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := stream.Send(m); err != nil {
				return err
			}
		}
	}
	res, err := CreateSnapshot(ctx, n, req, func(p *kvpb.SnapshotProgress) {
		// A client gone away cancels ctx, which ends the snapshot.
		_ = stream.Send(&kvpb.CreateSnapshotResponse{Header: n.header(0), Progress: p})
	})
	if err != nil {
		return toStatus(err, "")
	}
	return stream.Send(&kvpb.CreateSnapshotResponse{Header: n.header(0), Result: &kvpb.CreateSnapshotResult{
		Snapshot: snapshotInfo(res.Manifest, false), BytesUploaded: res.BytesUploaded,
		PiecesUploaded: uint32(res.PiecesUploaded), PiecesReused: uint32(res.PiecesReused),
		DurationMs: res.Duration.Milliseconds(), Store: res.Store,
		BaseFileBytes: res.BaseFileBytes, BaseFilesReused: uint32(res.BaseFilesReused), BaseBytesReused: res.BaseBytesReused,
		BaseCompactedBytes: res.BaseCompactedBytes,
	}})
}

// onMetaStore runs a snapshot call on group 0's leader with the store the
// request names (or the default), mapping the store's errors.
func onMetaStore[R any](ctx context.Context, n *Node, raw string, forward func(kvrpc.ClusterClient, context.Context) (R, error), local func(*snapshot.Store) (R, error)) (R, error) {
	r, err := onMeta(ctx, n, forward, func() (R, error) {
		var zero R
		st, err := n.Snapshots.Store(ctx, raw, n.Layout.ClusterID)
		if err != nil {
			return zero, toStatus(err, "")
		}
		r, err := local(st)
		return r, toStatus(err, "")
	})
	return r, err
}

// ListSnapshots lists the store's snapshots of this cluster.
func (s *ClusterServer) ListSnapshots(ctx context.Context, req *kvpb.ListSnapshotsRequest) (*kvpb.ListSnapshotsResponse, error) {
	return onMetaStore(ctx, s.n, req.GetStore(), func(c kvrpc.ClusterClient, fctx context.Context) (*kvpb.ListSnapshotsResponse, error) {
		return c.ListSnapshots(fctx, req)
	}, func(st *snapshot.Store) (*kvpb.ListSnapshotsResponse, error) {
		ms, err := s.n.Snapshots.manifestsOf(ctx, st)
		if err != nil {
			return nil, err
		}
		out := &kvpb.ListSnapshotsResponse{Header: s.n.header(0), Store: st.URL()}
		for _, m := range ms {
			out.Snapshots = append(out.Snapshots, snapshotInfo(m, false))
		}
		return out, nil
	})
}

// GetSnapshot describes one snapshot with its partitions' handles.
func (s *ClusterServer) GetSnapshot(ctx context.Context, req *kvpb.GetSnapshotRequest) (*kvpb.GetSnapshotResponse, error) {
	return onMetaStore(ctx, s.n, req.GetStore(), func(c kvrpc.ClusterClient, fctx context.Context) (*kvpb.GetSnapshotResponse, error) {
		return c.GetSnapshot(fctx, req)
	}, func(st *snapshot.Store) (*kvpb.GetSnapshotResponse, error) {
		m, err := st.Get(ctx, req.GetId())
		if err != nil {
			return nil, err
		}
		return &kvpb.GetSnapshotResponse{Header: s.n.header(0), Snapshot: snapshotInfo(m, true)}, nil
	})
}

// CheckSnapshot reads and verifies every piece of a snapshot.
func (s *ClusterServer) CheckSnapshot(ctx context.Context, req *kvpb.CheckSnapshotRequest) (*kvpb.CheckSnapshotResponse, error) {
	return onMetaStore(ctx, s.n, req.GetStore(), func(c kvrpc.ClusterClient, fctx context.Context) (*kvpb.CheckSnapshotResponse, error) {
		return c.CheckSnapshot(fctx, req)
	}, func(st *snapshot.Store) (*kvpb.CheckSnapshotResponse, error) {
		m, err := st.Get(ctx, req.GetId())
		if err != nil {
			return nil, err
		}
		out := &kvpb.CheckSnapshotResponse{Header: s.n.header(0), Ok: true}
		for _, o := range m.Objects() {
			out.Objects++
			out.Bytes += uint64(o.Size)
		}
		var ce *snapshot.CheckError
		switch err := st.Check(ctx, req.GetId()); {
		case err == nil:
		case errors.As(err, &ce):
			out.Ok, out.Partition, out.Piece, out.Error = false, ce.Partition, ce.Piece, ce.Err.Error()
		default:
			return nil, err
		}
		return out, nil
	})
}

func gcResponse(n *Node, gc snapshot.GC) *kvpb.SnapshotGCResponse {
	return &kvpb.SnapshotGCResponse{Header: n.header(0), DeletedSnapshots: gc.Snapshots, DeletedPieces: gc.Pieces,
		Reserved: gc.Reserved, StaleLocks: gc.StaleLocks}
}

// DeleteSnapshot deletes one snapshot and every piece no other snapshot
// references.
func (s *ClusterServer) DeleteSnapshot(ctx context.Context, req *kvpb.DeleteSnapshotRequest) (*kvpb.SnapshotGCResponse, error) {
	return onMetaStore(ctx, s.n, req.GetStore(), func(c kvrpc.ClusterClient, fctx context.Context) (*kvpb.SnapshotGCResponse, error) {
		return c.DeleteSnapshot(fctx, req)
	}, func(st *snapshot.Store) (*kvpb.SnapshotGCResponse, error) {
		s.n.Snapshots.run.Lock()
		defer s.n.Snapshots.run.Unlock()
		gc, err := st.Delete(ctx, req.GetId())
		if err != nil {
			return nil, err
		}
		return gcResponse(s.n, gc), nil
	})
}

// PruneSnapshots expires snapshots by count and age.
func (s *ClusterServer) PruneSnapshots(ctx context.Context, req *kvpb.PruneSnapshotsRequest) (*kvpb.SnapshotGCResponse, error) {
	if req.GetKeepLast() == 0 && req.GetKeepWithinMs() <= 0 {
		return nil, toStatus(fmt.Errorf("%w: prune needs keep_last or keep_within: with neither it would delete every snapshot", ErrInvalidArgument), "")
	}
	return onMetaStore(ctx, s.n, req.GetStore(), func(c kvrpc.ClusterClient, fctx context.Context) (*kvpb.SnapshotGCResponse, error) {
		return c.PruneSnapshots(fctx, req)
	}, func(st *snapshot.Store) (*kvpb.SnapshotGCResponse, error) {
		return PruneSnapshots(ctx, s.n, st, int(req.GetKeepLast()), time.Duration(req.GetKeepWithinMs())*time.Millisecond)
	})
}

// PruneSnapshots expires the snapshots of st beyond the newest keepLast
// and older than keepWithin. Group 0's leader only.
func PruneSnapshots(ctx context.Context, n *Node, st *snapshot.Store, keepLast int, keepWithin time.Duration) (*kvpb.SnapshotGCResponse, error) {
	n.Snapshots.run.Lock()
	defer n.Snapshots.run.Unlock()
	gc, err := st.Prune(ctx, keepLast, keepWithin, clock.Now())
	if err != nil {
		return nil, err
	}
	return gcResponse(n, gc), nil
}
