package rpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/internal/command"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/snapshot"
)

// Snapshots is a node's side of snapshots (DESIGN.md, "Snapshots"): the
// stores it has opened, the pins that hold partitions' logs and bases
// until their upload, and the lock that runs create, delete and prune one
// at a time on group 0's leader.
type Snapshots struct {
	// DefaultStore is the store a request without one uses: a URL, or
	// empty for file:// + DefaultDir.
	DefaultStore string
	// DefaultDir is the directory of the default file:// store (created
	// on first use).
	DefaultDir string
	// Allowed lists the other stores a request may name
	// (--snapshot-store-allow); any other URL is refused before anything
	// is opened. URLs are compared parsed (see sameStore), never as
	// strings.
	Allowed []string
	// TmpDir holds materializations built for full snapshots until they
	// are uploaded.
	TmpDir string
	// UploadRate paces what this node uploads, and what it reads and
	// writes to build a full snapshot's images (nil: no limit).
	UploadRate *snapshot.RateLimit
	// Log receives progress and results.
	Log *slog.Logger
	// OnStoreError, if set, is told of each failed operation on a store
	// this node opened (snapshot.Options.OnError).
	OnStoreError func(snapshot.Op)

	run sync.Mutex // create, delete and prune: one at a time

	mu        sync.Mutex
	stores    map[string]*snapshot.Store               // by URL
	manifests map[string]map[string]*snapshot.Manifest // by URL, then id: manifests never change
	pins      map[string]*snapshotPin                  // by token
	working   int                                      // uploads and full builds in flight
	// uploader is, by partition, the node that prepared it last: asked
	// first next time, so that its base, already stored, stays the base
	// when the partition's leader moves (another replica's base sits at
	// another index and would be uploaded whole).
	uploader map[uint64]string
}

func (s *Snapshots) lastUploader(p uint64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uploader[p]
}

func (s *Snapshots) setUploader(p uint64, member string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uploader == nil {
		s.uploader = map[uint64]string{}
	}
	s.uploader[p] = member
}

// snapshotPin holds one partition's log and base on this node until its
// pieces are uploaded (or the lease ends).
type snapshotPin struct {
	group, pos, finish uint64
	// full is the materialization built at pos-1 for a full snapshot, ""
	// when none.
	full    string
	release func()
	timer   *time.Timer
}

// defaultPinLease bounds how long an upload may hold a partition's WAL.
const defaultPinLease = 10 * time.Minute

// Close releases every pin and store.
func (s *Snapshots) Close() {
	s.mu.Lock()
	pins := s.pins
	s.pins = nil
	stores := s.stores
	s.stores = nil
	s.mu.Unlock()
	for _, p := range pins {
		p.timer.Stop()
		p.drop()
	}
	for _, st := range stores {
		st.Close()
	}
}

func (p *snapshotPin) drop() {
	p.release()
	if p.full != "" {
		os.RemoveAll(filepath.Dir(p.full))
	}
}

// resolve returns the store URL a request means: the default, or the one
// it names if that is the default or one of Allowed. The store is the
// server's choice: a client never makes a node create directories, send
// its credentials to an endpoint, or delete snapshots anywhere else.
func (s *Snapshots) resolve(raw string) (string, error) {
	def, err := s.defaultURL()
	if err != nil || raw == "" {
		return def, err
	}
	for _, ok := range append([]string{def}, s.Allowed...) {
		if same, err := sameStore(raw, ok); err != nil {
			return "", fmt.Errorf("%w: store %q: %v", ErrInvalidArgument, raw, err)
		} else if same {
			return ok, nil
		}
	}
	return "", fmt.Errorf("%w: store %s is not this node's snapshot store (%s) nor in its --snapshot-store-allow list; "+
		"leave --store out, or add the URL to --snapshot-store-allow on every node", ErrPermissionDenied, raw, def)
}

// defaultURL is the default store's URL.
func (s *Snapshots) defaultURL() (string, error) {
	if s.DefaultStore != "" {
		return s.DefaultStore, nil
	}
	dir, err := filepath.Abs(s.DefaultDir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("rpc: create the default snapshot store %s: %w", dir, err)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String(), nil
}

// canonicalStore is a store URL's parsed form: scheme (lower case), user,
// host, cleaned path and the whole query in a canonical order.
func canonicalStore(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme == "" || u.Opaque != "" || u.Fragment != "" {
		return "", fmt.Errorf("not an absolute URL of the form scheme://bucket/path?query")
	}
	p := u.Path
	if p != "" {
		p = path.Clean(p)
	}
	user := ""
	if u.User != nil {
		user = u.User.String() + "@"
	}
	return strings.ToLower(u.Scheme) + "://" + user + u.Host + p + "?" + u.Query().Encode(), nil
}

// sameStore says whether two store URLs name the same store: equal after
// parsing (canonicalStore), so "file:///a/../b" is "file:///b" but
// "file:///b-other" is not "file:///b", and an s3 URL whose endpoint or
// region differs is another store.
func sameStore(a, b string) (bool, error) {
	ca, err := canonicalStore(a)
	if err != nil {
		return false, err
	}
	cb, err := canonicalStore(b)
	if err != nil {
		return false, fmt.Errorf("configured store %q: %v", b, err)
	}
	return ca == cb, nil
}

// Store opens (once) the store at raw for cluster: the default when raw
// is empty, else one of Allowed (resolve).
func (s *Snapshots) Store(ctx context.Context, raw string, cluster uint64) (*snapshot.Store, error) {
	u, err := s.resolve(raw)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	st := s.stores[u]
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err = snapshot.OpenStoreOptions(ctx, u, cluster, snapshot.Options{OnError: s.OnStoreError})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stores == nil {
		s.stores = map[string]*snapshot.Store{}
	}
	if old := s.stores[u]; old != nil {
		st.Close()
		return old, nil
	}
	s.stores[u] = st
	return st, nil
}

// manifestsOf returns every snapshot of the store, oldest cut first,
// reading only manifests not seen before. The cache keeps just the ids
// listed now, so deleted snapshots leave it, whoever deleted them.
func (s *Snapshots) manifestsOf(ctx context.Context, st *snapshot.Store) ([]*snapshot.Manifest, error) {
	ids, err := st.IDs(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	old := s.manifests[st.URL()]
	s.mu.Unlock()
	cur := make(map[string]*snapshot.Manifest, len(ids))
	out := make([]*snapshot.Manifest, 0, len(ids))
	for _, id := range ids {
		m := old[id]
		if m == nil {
			if m, err = st.Get(ctx, id); errors.Is(err, snapshot.ErrNotFound) {
				continue // deleted since the listing
			} else if err != nil {
				return nil, err
			}
		}
		cur[id] = m
		out = append(out, m)
	}
	s.mu.Lock()
	if s.manifests == nil {
		s.manifests = map[string]map[string]*snapshot.Manifest{}
	}
	s.manifests[st.URL()] = cur
	s.mu.Unlock()
	sortManifests(out)
	return out, nil
}

func (s *Snapshots) addPin(p *snapshotPin, lease time.Duration) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pins == nil {
		s.pins = map[string]*snapshotPin{}
	}
	s.pins[token] = p
	p.timer = time.AfterFunc(lease, func() { s.leaseEnded(token, lease) })
	return token
}

// leaseEnded releases a pin whose upload has not come — unless this node
// is uploading or building a full snapshot's image meanwhile: the
// snapshot is alive, its work only paced (UploadRate) or large, and the
// pins wait their turn; the lease runs again. Should the snapshot's
// runner die, that work ends with its calls, and the next lease end
// releases the rest.
func (s *Snapshots) leaseEnded(token string, lease time.Duration) {
	s.mu.Lock()
	p := s.pins[token]
	if p == nil {
		s.mu.Unlock()
		return
	}
	if s.working > 0 {
		p.timer.Reset(lease)
		s.mu.Unlock()
		return
	}
	delete(s.pins, token)
	s.mu.Unlock()
	s.Log.Warn("snapshot pin lease ended before its upload; released", "group", p.group, "pos", p.pos)
	p.drop()
}

// workStarted counts an upload or a full build in flight (leaseEnded);
// the returned func ends it.
func (s *Snapshots) workStarted() func() {
	s.mu.Lock()
	s.working++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.working--
		s.mu.Unlock()
	}
}

func (s *Snapshots) takePin(token string) *snapshotPin {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pins[token]
	delete(s.pins, token)
	if p != nil {
		p.timer.Stop()
	}
	return p
}

// SnapshotPartitionsServer implements internalrpc.SnapshotPartitionsServer:
// a node's partitions uploaded for a snapshot the group-0 leader runs.
type SnapshotPartitionsServer struct {
	internalrpc.UnimplementedSnapshotPartitionsServer
	n *Node
}

// NewSnapshotPartitionsServer returns node n's SnapshotPartitions service.
func NewSnapshotPartitionsServer(n *Node) *SnapshotPartitionsServer {
	return &SnapshotPartitionsServer{n: n}
}

// snapshotApplyWait bounds how long PrepareSnapshot waits for the replica
// to apply the cut's CutFinish entry.
const snapshotApplyWait = 10 * time.Second

// PrepareSnapshot pins the partition's log from its newest base below the
// cut's position and reports that base; for a full snapshot it first
// builds a materialization at pos-1 by replaying the log onto that base.
func (s *SnapshotPartitionsServer) PrepareSnapshot(ctx context.Context, req *internalpb.PrepareSnapshotRequest) (*internalpb.PrepareSnapshotResponse, error) {
	n := s.n
	if req.GetClusterId() != n.Layout.ClusterID {
		return nil, toStatus(fmt.Errorf("%w: cluster %x", ErrWrongCluster, req.GetClusterId()), "")
	}
	g, pos, fin := req.GetGroup(), req.GetPos(), req.GetFinishIndex()
	if g == 0 || pos == 0 || fin < pos {
		return nil, toStatus(fmt.Errorf("%w: partition %d, pos %d, finish index %d", ErrInvalidArgument, g, pos, fin), "")
	}
	if err := waitApplied(ctx, n, g, fin); err != nil {
		return nil, toStatus(err, "")
	}
	// Hold everything while choosing, then only what the base needs.
	hold := n.Store.Pin(g, 0)
	defer func() {
		if hold != nil {
			hold()
		}
	}()
	mats, err := n.Store.Materializations(g)
	if err != nil {
		return nil, toStatus(err, "")
	}
	var base checkpoint.Materialization
	for _, m := range mats {
		if m.Index < pos {
			base = m
		}
	}
	from, err := n.Store.LogFrom(g)
	if err != nil {
		return nil, toStatus(err, "")
	}
	if from > base.Index+1 {
		return nil, toStatus(fmt.Errorf("%w: partition %d on %s: the log is held from entry %d only, and the newest materialization below the cut's position %d is at %d: take a new cut",
			ErrFailedPrecondition, g, n.Self.ID, from, pos, base.Index), "")
	}
	pin := &snapshotPin{group: g, pos: pos, finish: fin, release: n.Store.Pin(g, base.Index)}
	hold()
	hold = nil
	baseIndex := base.Index
	if req.GetFull() && base.Index != pos-1 {
		path, err := s.buildFull(ctx, g, base.Index, pos)
		if err != nil {
			pin.release()
			return nil, toStatus(err, "")
		}
		pin.full, baseIndex = path, pos-1
	}
	lease := time.Duration(req.GetLeaseMs()) * time.Millisecond
	if lease <= 0 {
		lease = defaultPinLease
	}
	out := &internalpb.PrepareSnapshotResponse{BaseIndex: baseIndex, LogFrom: from}
	if base.Dir && baseIndex == base.Index {
		_, files, err := checkpoint.ReadManifest(n.Store.CheckpointPath(g, base.Index))
		if err != nil {
			pin.release()
			return nil, toStatus(err, "")
		}
		for _, f := range files {
			out.BaseFiles = append(out.BaseFiles, &internalpb.BaseFile{File: f.Name, Size: f.Size, Sha256: f.Hex()})
		}
	}
	out.Pin = n.Snapshots.addPin(pin, lease)
	return out, nil
}

// waitApplied waits until this node's replica of partition g applied
// index, woken by the partition's applies.
func waitApplied(ctx context.Context, n *Node, g, index uint64) error {
	part := n.Partitions[g]
	if part == nil {
		return fmt.Errorf("%w %d", raftstore.ErrUnknownGroup, g)
	}
	err := awaitApply(ctx, part, snapshotApplyWait, func() (bool, error) { return part.Applied() >= index, nil })
	if errors.Is(err, errPollTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: partition %d applied %d here, the cut ends at %d", ErrFailedPrecondition, g, part.Applied(), index)
	}
	return err
}

// buildFull writes the state of partition g just before pos (the state a
// copy-on-write image taken right before applying entry pos holds): the
// materialization at base, then entries base+1 … pos-1 applied as the
// raft loop applies them. It returns the file's path in TmpDir. The base
// is read, and the file written, through the node's UploadRate.
func (s *SnapshotPartitionsServer) buildFull(ctx context.Context, g, base, pos uint64) (string, error) {
	n := s.n
	defer n.Snapshots.workStarted()()
	rate := n.Snapshots.UploadRate
	if err := os.MkdirAll(n.Snapshots.TmpDir, 0o750); err != nil {
		return "", err
	}
	// On Pebble, the base is a clone of its checkpoint replayed on disk;
	// else it is loaded into memory.
	var p *partition.Partition
	if live := n.Partitions[g]; base > 0 && live != nil && live.Checkpoints() {
		if m, err := n.Store.FindMaterialization(g, base); err == nil && m.Dir {
			scratch, err := os.MkdirTemp(n.Snapshots.TmpDir, fmt.Sprintf("p%04d-base-", g))
			if err != nil {
				return "", err
			}
			defer os.RemoveAll(scratch)
			q, err := live.OpenCheckpointClone(n.Store.CheckpointPath(g, base), filepath.Join(scratch, "state"))
			if err != nil {
				return "", err
			}
			defer q.Close()
			if q.Applied() != base {
				return "", fmt.Errorf("rpc: partition %d: the checkpoint at %d opened at %d", g, base, q.Applied())
			}
			p = q
		}
	}
	if p == nil {
		p = partition.New(g)
	}
	if base > 0 && p.Applied() == 0 {
		r, err := n.Store.OpenMaterialization(g, base)
		if err != nil {
			return "", err
		}
		err = p.LoadImage(rate.Reader(ctx, r))
		r.Close()
		if err != nil {
			return "", err
		}
	}
	ents, err := n.Store.ReadEntries(g, base+1, pos-1)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		cmd, ok, err := command.Decode(e)
		if err != nil {
			return "", fmt.Errorf("rpc: partition %d entry %d: %w", g, e.GetIndex(), err)
		}
		if !ok {
			p.SetApplied(e.GetIndex())
			continue
		}
		if _, err := p.ApplyCommand(e.GetIndex(), cmd); err != nil {
			return "", fmt.Errorf("rpc: partition %d: replay entry %d: %w", g, e.GetIndex(), err)
		}
	}
	// A directory per build: two snapshots may build the same index.
	dir, err := os.MkdirTemp(n.Snapshots.TmpDir, fmt.Sprintf("p%04d-", g))
	if err != nil {
		return "", err
	}
	img := p.Image()
	defer img.Close()
	meta := checkpoint.Meta{Partition: g, Index: pos - 1, Term: ents[len(ents)-1].GetTerm()}
	path, _, _, err := checkpoint.Files{FS: checkpoint.OS}.Write(dir, meta, func(w io.Writer) error {
		return img.Encode(rate.Writer(ctx, w))
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return path, nil
}

// UploadSnapshot uploads a pinned partition's base (if asked) and the
// changelog pieces asked for, then releases the pin.
func (s *SnapshotPartitionsServer) UploadSnapshot(ctx context.Context, req *internalpb.UploadSnapshotRequest) (*internalpb.UploadSnapshotResponse, error) {
	n := s.n
	if req.GetClusterId() != n.Layout.ClusterID {
		return nil, toStatus(fmt.Errorf("%w: cluster %x", ErrWrongCluster, req.GetClusterId()), "")
	}
	pin := n.Snapshots.takePin(req.GetPin())
	if pin == nil {
		return nil, toStatus(fmt.Errorf("%w: no snapshot pin %q on %s (its lease ended, or the node restarted)", ErrFailedPrecondition, req.GetPin(), n.Self.ID), "")
	}
	defer pin.drop()
	defer n.Snapshots.workStarted()()
	g := pin.group
	if req.GetGroup() != g {
		return nil, toStatus(fmt.Errorf("%w: pin is for partition %d, not %d", ErrInvalidArgument, g, req.GetGroup()), "")
	}
	st, err := n.Snapshots.Store(ctx, req.GetStore(), n.Layout.ClusterID)
	if err != nil {
		return nil, toStatus(err, "")
	}
	out := &internalpb.UploadSnapshotResponse{}
	if b := req.GetBaseIndex(); b > 0 {
		if err := s.uploadBase(ctx, st, pin, g, b, out); err != nil {
			return nil, toStatus(err, "")
		}
	}
	for _, r := range req.GetPieces() {
		if r.GetLo() == 0 || r.GetHi() < r.GetLo() || r.GetHi() > pin.finish {
			return nil, toStatus(fmt.Errorf("%w: piece [%d, %d] of partition %d (the cut ends at %d)", ErrInvalidArgument, r.GetLo(), r.GetHi(), g, pin.finish), "")
		}
		ents, err := n.Store.ReadEntries(g, r.GetLo(), r.GetHi())
		if err != nil {
			return nil, toStatus(err, "")
		}
		o, err := putObject(ctx, st, n.Snapshots.UploadRate, snapshot.PieceName(g, r.GetLo(), r.GetHi()), func() (io.ReadCloser, error) {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(snapshot.EncodePiece(pw, g, ents)) }()
			return pr, nil
		})
		if err != nil {
			return nil, toStatus(err, "")
		}
		out.Objects = append(out.Objects, o)
	}
	return out, nil
}

// uploadBase uploads partition g's base at index b: the materialization
// file (a full snapshot's, built in TmpDir, or one kept as a file), or a
// checkpoint directory's manifest and those of its files the store does
// not hold yet, each under the name of its content.
func (s *SnapshotPartitionsServer) uploadBase(ctx context.Context, st *snapshot.Store, pin *snapshotPin, g, b uint64, out *internalpb.UploadSnapshotResponse) error {
	n := s.n
	rate := n.Snapshots.UploadRate
	if pin.full != "" && b == pin.pos-1 {
		o, err := putObject(ctx, st, rate, checkpoint.Materialization{Partition: g, Index: b}.Name(), func() (io.ReadCloser, error) { return os.Open(pin.full) })
		if err != nil {
			return err
		}
		out.Objects = append(out.Objects, o)
		return nil
	}
	m, err := n.Store.FindMaterialization(g, b)
	if err != nil {
		return err
	}
	if !m.Dir {
		o, err := putObject(ctx, st, rate, m.Name(), func() (io.ReadCloser, error) { return n.Store.MaterializationFile(g, b) })
		if err != nil {
			return err
		}
		out.Objects = append(out.Objects, o)
		return nil
	}
	dir := n.Store.CheckpointPath(g, b)
	_, files, err := checkpoint.ReadManifest(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		name := snapshot.FileObjectName(f.Hex())
		// The coordinator's upload lock reserves the name: a file the
		// store holds stays until the snapshot is finished.
		if ok, err := st.HasPiece(ctx, name); err != nil {
			return err
		} else if ok {
			out.BaseFilesStored++
			out.BaseBytesStored += f.Size
			continue
		}
		in, err := os.Open(filepath.Join(dir, f.Name))
		if err != nil {
			return err
		}
		sha, size, err := st.PutPiece(ctx, name, rate.Reader(ctx, in))
		in.Close()
		if errors.Is(err, snapshot.ErrExists) {
			// Stored meanwhile by another snapshot, with the same bytes
			// (its name is their hash).
			out.BaseFilesStored++
			out.BaseBytesStored += f.Size
			continue
		}
		if err != nil {
			return fmt.Errorf("partition %d: uploading %s of %s: %w", g, f.Name, dir, err)
		}
		if sha != f.Hex() || size != f.Size {
			return fmt.Errorf("%w: partition %d: %s of %s read as %d bytes with SHA-256 %s, its manifest says %d bytes, %s",
				checkpoint.ErrCorrupt, g, f.Name, dir, size, sha, f.Size, f.Hex())
		}
		out.Objects = append(out.Objects, &internalpb.UploadedObject{Name: name, Size: size, Sha256: sha})
		if part := n.Partitions[g]; part != nil && part.CompactionOutput(f.Name) {
			out.BaseCompactedBytes += size
		}
	}
	o, err := putObject(ctx, st, rate, m.Name(), func() (io.ReadCloser, error) { return os.Open(filepath.Join(dir, checkpoint.ManifestName)) })
	if err != nil {
		return err
	}
	out.Objects = append(out.Objects, o)
	return nil
}

// putObject stores a piece, or describes the one stored already (pieces
// of a name hold the same committed entries, or the same state, whoever
// wrote them). It reads through rate.
func putObject(ctx context.Context, st *snapshot.Store, rate *snapshot.RateLimit, name string, open func() (io.ReadCloser, error)) (*internalpb.UploadedObject, error) {
	r, err := open()
	if err != nil {
		return nil, err
	}
	sha, size, err := st.PutPiece(ctx, name, rate.Reader(ctx, r))
	r.Close()
	if errors.Is(err, snapshot.ErrExists) {
		o, err := st.StatPiece(ctx, name)
		if err != nil {
			return nil, err
		}
		return &internalpb.UploadedObject{Name: name, Size: o.Size, Sha256: o.SHA256}, nil
	}
	if err != nil {
		return nil, err
	}
	return &internalpb.UploadedObject{Name: name, Size: size, Sha256: sha}, nil
}

// ReleaseSnapshot drops a pin whose upload will not happen.
func (s *SnapshotPartitionsServer) ReleaseSnapshot(ctx context.Context, req *internalpb.ReleaseSnapshotRequest) (*internalpb.ReleaseSnapshotResponse, error) {
	if p := s.n.Snapshots.takePin(req.GetPin()); p != nil {
		p.drop()
	}
	return &internalpb.ReleaseSnapshotResponse{}, nil
}
