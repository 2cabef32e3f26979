package restore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/cut/verify"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/engine"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/meta"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/snapshot"
	"github.com/cutkv/cutkv/topology"
)

// restoredTerm is the raft term of every materialization a restore
// writes. The new raft groups start from them with an empty log and
// elect their first leader at term 1, whose entries follow the
// materialization: a higher term here would put the log's terms out of
// order.
const restoredTerm = 1

// metaIndex is the index of group 0's materialization.
const metaIndex = 1

// Result says what a restore wrote.
type Result struct {
	// SourceCluster is the cluster the snapshot was taken of.
	SourceCluster uint64
	// SnapshotID, CutVersion and SnapshotTime describe the snapshot.
	SnapshotID   string
	CutVersion   uint64
	SnapshotTime time.Time
	// Layout is the new cluster's layout. Its ClusterID is 0: the members
	// draw a new random one at their first start. Token is what its Digest
	// was derived from (the same on every member).
	Layout *topology.Layout
	Token  string
	// DataDir is the data dir written, for node NodeID.
	DataDir string
	NodeID  string
	// Groups are the raft groups written, ascending: 0 (the metadata
	// group) and the partitions the layout places on this node.
	Groups []uint64
	// Keys is the number of key-values in the partitions written.
	Keys uint64
	// BytesRead is what was read from the store to rebuild the groups;
	// BytesChecked what Check read before (the whole snapshot).
	BytesRead    int64
	BytesChecked int64
	// Duration is how long the restore took.
	Duration time.Duration
}

// RestoredFrom is what the data dir's identity records as its origin:
// "<source cluster, 16 hex digits>/<snapshot id>".
func (r *Result) RestoredFrom() string {
	return fmt.Sprintf("%016x/%s", r.SourceCluster, r.SnapshotID)
}

// Run restores one node's data dir from a snapshot (see the package doc):
// it refuses a data dir that is not absent or empty, picks the snapshot,
// checks that it fits and that every piece of it is intact, computes the
// new cluster's layout, and writes group 0's and this node's partitions'
// materializations and the identity file. On an error it leaves no data
// dir a node would start from. It blocks; ctx cancels it.
func Run(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if err := checkDataDir(opts.DataDir); err != nil {
		return nil, err
	}
	source := opts.SourceCluster
	if source == 0 {
		var err error
		if source, err = onlyCluster(ctx, opts.StoreURL); err != nil {
			return nil, err
		}
	}
	st, err := snapshot.OpenStore(ctx, opts.StoreURL, source)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	m, err := pickSnapshot(ctx, st, &opts)
	if err != nil {
		return nil, err
	}
	res := &Result{
		SourceCluster: source, SnapshotID: m.ID, CutVersion: m.CutVersion, SnapshotTime: m.Time,
		DataDir: opts.DataDir, NodeID: opts.NodeID, Token: opts.Token,
	}
	if res.Token == "" {
		res.Token = DefaultToken(source, m.ID)
	}
	if res.Layout, err = plan(m, &opts, source, res.Token); err != nil {
		return nil, err
	}
	self, _ := res.Layout.Member(opts.NodeID)
	res.Groups = res.Layout.GroupsOf(self.RaftID)
	for _, o := range m.Objects() {
		res.BytesChecked += o.Size
	}
	log.Info("restoring snapshot", "store", st.URL(), "source_cluster", fmt.Sprintf("%016x", source), "snapshot", m.ID,
		"cut_version", m.CutVersion, "time", m.Time, "partitions", m.PartitionCount,
		"new_cluster_digest", topology.FormatClusterID(res.Layout.Digest), "node", opts.NodeID, "groups", len(res.Groups))
	log.Info("checking every piece of the snapshot", "snapshot", m.ID, "bytes", res.BytesChecked)
	if err := st.Check(ctx, m.ID); err != nil {
		var ce *snapshot.CheckError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("%w: %w; nothing was written (restore another snapshot)", ErrDamaged, err)
		}
		return nil, fmt.Errorf("restore: checking snapshot %s: %w", m.ID, err)
	}

	d, err := createDataDir(opts.DataDir, res.RestoredFrom())
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			if err := d.abort(); err != nil {
				log.Error("restore failed and removing what it wrote failed too; delete the data dir by hand", "data_dir", opts.DataDir, "err", err)
			}
		}
	}()
	env, err := engine.NewEnv(engine.EnvConfig{CacheSize: 64 << 20, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer env.Close()
	r := &rebuilder{env: env, st: st, m: m, dir: filepath.Join(opts.DataDir, datadir.MaterializeDir), log: log}
	for _, g := range res.Groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if g == 0 {
			if err := r.writeMeta(); err != nil {
				return nil, err
			}
			continue
		}
		keys, read, err := r.writePartition(ctx, &m.Partitions[g-1])
		if err != nil {
			return nil, err
		}
		res.Keys += keys
		res.BytesRead += read
	}
	if err := datadir.CreateIdentity(opts.DataDir, datadir.Identity{NodeID: opts.NodeID, Layout: res.Layout, RestoredFrom: res.RestoredFrom()}); err != nil {
		return nil, err
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	done = true
	res.Duration = time.Since(start)
	log.Info("restore done", "data_dir", opts.DataDir, "new_cluster_digest", topology.FormatClusterID(res.Layout.Digest),
		"groups", len(res.Groups), "keys", res.Keys, "bytes_read", res.BytesRead, "took", res.Duration)
	return res, nil
}

// onlyCluster returns the one cluster that has snapshots in the store.
func onlyCluster(ctx context.Context, url string) (uint64, error) {
	ids, err := snapshot.Clusters(ctx, url)
	if err != nil {
		return 0, err
	}
	switch len(ids) {
	case 0:
		return 0, fmt.Errorf("%w: the store %s holds no cluster's snapshots", ErrNoSnapshot, url)
	case 1:
		return ids[0], nil
	}
	hex := make([]string, len(ids))
	for i, id := range ids {
		hex[i] = fmt.Sprintf("%016x", id)
	}
	return 0, fmt.Errorf("%w: the store %s holds snapshots of %d clusters (%s): name the source cluster",
		ErrOptions, url, len(ids), strings.Join(hex, ", "))
}

// pickSnapshot returns the manifest of the snapshot opts asks for.
func pickSnapshot(ctx context.Context, st *snapshot.Store, opts *Options) (*snapshot.Manifest, error) {
	if opts.Snapshot != "" {
		m, err := st.Get(ctx, opts.Snapshot)
		if errors.Is(err, snapshot.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", ErrNoSnapshot, err)
		}
		return m, err
	}
	all, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	var best *snapshot.Manifest
	for i := range all {
		m := &all[i]
		if m.Time.After(opts.At) {
			continue
		}
		if best == nil || m.Time.After(best.Time) || m.Time.Equal(best.Time) && m.CutVersion > best.CutVersion {
			best = m
		}
	}
	if best == nil {
		oldest := "none"
		if len(all) > 0 {
			t := all[0].Time
			for _, m := range all {
				if m.Time.Before(t) {
					t = m.Time
				}
			}
			oldest = t.Format(time.RFC3339)
		}
		return nil, fmt.Errorf("%w: cluster %016x has %d snapshots in %s, none taken at or before %s (the oldest: %s)",
			ErrNoSnapshot, st.ClusterID(), len(all), st.URL(), opts.At.Format(time.RFC3339), oldest)
	}
	return best, nil
}

// plan checks that m fits the options and returns the new cluster's
// layout.
func plan(m *snapshot.Manifest, opts *Options, source uint64, token string) (*topology.Layout, error) {
	if m.KeyHash != keyspace.HashName {
		return nil, fmt.Errorf("%w: snapshot %s maps keys with %q; this binary knows only %q",
			ErrIncompatible, m.ID, m.KeyHash, keyspace.HashName)
	}
	if opts.Partitions != 0 && opts.Partitions != m.PartitionCount {
		return nil, fmt.Errorf("%w: snapshot %s has %d partitions, %d were asked for (the partition count of a restored cluster is the snapshot's)",
			ErrIncompatible, m.ID, m.PartitionCount, opts.Partitions)
	}
	ms, err := topology.ParseInitialCluster(opts.InitialCluster)
	if err != nil {
		return nil, fmt.Errorf("%w: initial cluster: %v", ErrOptions, err)
	}
	l, err := topology.New(token, ms, m.PartitionCount)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOptions, err)
	}
	// The new cluster's id is random, agreed by its members at their first
	// start (package server); the restore token only makes their digest.
	l.ClusterID = 0
	return l, nil
}

// rebuilder writes the groups' materializations of one snapshot.
type rebuilder struct {
	env *engine.Env // opens checkpoint bases
	st  *snapshot.Store
	m   *snapshot.Manifest
	dir string // the data dir's materializations
	log *slog.Logger
}

// writeMeta writes group 0's materialization: the snapshot's cut as the
// last cut allocated, so that the new cluster's cuts start above it. The
// layout is not in it: its cluster id is agreed at the first start, and
// group 0's leader then records the layout as in a new cluster.
func (r *rebuilder) writeMeta() error {
	b, err := proto.Marshal(&internalpb.MetaImage{Applied: metaIndex, LastCut: r.m.CutVersion})
	if err != nil {
		return fmt.Errorf("restore: group 0 image: %w", err)
	}
	if err := meta.New().LoadImage(bytes.NewReader(b)); err != nil {
		return fmt.Errorf("restore: group 0 image does not load: %w", err) // a broken invariant: it was just made
	}
	_, _, size, err := checkpoint.Files{}.Write(r.dir, checkpoint.Meta{Partition: 0, Index: metaIndex, Term: restoredTerm},
		func(w io.Writer) error { _, err := w.Write(b); return err })
	if err != nil {
		return fmt.Errorf("restore: group 0: %w", err)
	}
	r.log.Info("group written", "group", 0, "index", metaIndex, "last_cut", r.m.CutVersion, "file_bytes", size)
	return nil
}

// writePartition rebuilds partition p at the snapshot's cut and writes it
// as a materialization at its applied index, pos-1. It returns the keys
// and the bytes read from the store.
func (r *rebuilder) writePartition(ctx context.Context, p *snapshot.Partition) (keys uint64, read int64, err error) {
	start := time.Now()
	g := p.Partition
	ents, read, err := r.readEntries(ctx, p)
	if err != nil {
		return 0, read, err
	}
	rep := &verify.Replica{Node: "snapshot " + r.m.ID, Group: g, BaseIndex: p.BaseIndex(), Entries: ents}
	var opened *partition.Partition
	var scratch string              // the Pebble directory of a partition rebuilt on Pebble
	var placed []checkpoint.DirFile // the base's files placed there
	defer func() {
		// Closed first: its background compactions must end before the
		// directory goes.
		if opened != nil {
			opened.Close()
		}
		if scratch != "" {
			os.RemoveAll(scratch)
		}
	}()
	if b := p.Base; b == nil || len(b.Files) > 0 {
		// A checkpoint base: its files placed in a scratch directory (not
		// ingested: Pebble's ingest refuses SSTs with sequence numbers),
		// opened as the partition the log is replayed onto. No base: the
		// log is replayed onto an empty Pebble there.
		scratch, err = os.MkdirTemp(filepath.Dir(r.dir), fmt.Sprintf("restore-p%04d-", g))
		if err != nil {
			return 0, read, fmt.Errorf("restore: partition %d: %w", g, err)
		}
		rep.Start = func() (*partition.Partition, error) {
			if b != nil {
				files, n, err := r.placeFiles(ctx, b, scratch)
				read += n
				placed = files
				if err != nil {
					return nil, err
				}
			}
			part, err := partition.Open(r.env, scratch, g)
			if err != nil {
				if b == nil {
					return nil, fmt.Errorf("restore: partition %d: an empty Pebble in %s: %w", g, scratch, err)
				}
				return nil, fmt.Errorf("%w: base %s: %w", snapshot.ErrCorrupt, b.Name, err)
			}
			opened = part
			return part, nil
		}
	} else {
		rep.Start = func() (*partition.Partition, error) {
			mr, err := r.st.OpenMaterialization(ctx, b.Name)
			if err != nil {
				return nil, err
			}
			defer mr.Close()
			part, err := partition.Decode(g, mr)
			if err != nil {
				return nil, err
			}
			read += b.Size
			return part, nil
		}
	}
	part, err := verify.RebuildPartition(rep, r.m.CutVersion, &kvpb.CutPartition{Partition: g, Pos: p.Pos, FinishIndex: p.End})
	if err != nil {
		if damaged(err) {
			return 0, read, fmt.Errorf("%w: snapshot %s partition %d: %w", ErrDamaged, r.m.ID, g, err)
		}
		return 0, read, fmt.Errorf("restore: snapshot %s partition %d: %w", r.m.ID, g, err)
	}
	idx := part.Applied()
	if idx != p.Pos-1 {
		// RebuildPartition applies every entry before pos.
		panic(fmt.Sprintf("restore: partition %d rebuilt at %d, not at pos-1 = %d", g, idx, p.Pos-1))
	}
	keys = uint64(part.Len())
	if idx == 0 {
		// Nothing precedes the cut: the partition was empty, as a new
		// one is; its group bootstraps like a new cluster's.
		r.log.Info("group written", "group", g, "index", 0, "keys", 0, "bytes_read", read, "note", "empty before the cut: no materialization needed")
		return keys, read, nil
	}
	meta := checkpoint.Meta{Partition: g, Index: idx, Term: restoredTerm}
	if part.Checkpoints() {
		// Rebuilt on Pebble (a checkpoint base): its state is kept as the
		// node keeps its own materializations, a checkpoint directory of
		// hard links to the placed and replayed SSTs, which the node
		// clones at its first start: no image to encode here and to load
		// there.
		files, size, err := r.writeCheckpoint(part, meta, scratch, placed)
		if err != nil {
			return 0, read, err
		}
		r.log.Info("group written", "group", g, "index", idx, "keys", keys, "bytes_read", read, "checkpoint_files", files, "file_bytes", size, "took", time.Since(start))
		return keys, read, nil
	}
	img := part.Image()
	_, _, size, err := checkpoint.Files{}.Write(r.dir, meta, img.Encode)
	img.Close()
	if err != nil {
		return 0, read, fmt.Errorf("restore: partition %d: %w", g, err)
	}
	r.log.Info("group written", "group", g, "index", idx, "keys", keys, "bytes_read", read, "file_bytes", size, "took", time.Since(start))
	return keys, read, nil
}

// writeCheckpoint checkpoints part, rebuilt at meta.Index on Pebble, into
// a sealed checkpoint directory of the data dir's materializations, and
// returns its file count and bytes.
// The files placed in dir (placed, their hashes checked as they were
// received) that the checkpoint links are not hashed again.
func (r *rebuilder) writeCheckpoint(part *partition.Partition, meta checkpoint.Meta, dir string, placed []checkpoint.DirFile) (int, int64, error) {
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return 0, 0, fmt.Errorf("restore: partition %d: %w", meta.Partition, err)
	}
	tmp := checkpoint.TempDir(r.dir, meta)
	idx, err := part.Checkpoint(tmp)
	if err == nil && idx != meta.Index {
		err = fmt.Errorf("the checkpoint holds index %d, the rebuilt state is at %d", idx, meta.Index)
	}
	var files []checkpoint.DirFile
	if err == nil {
		_, files, err = checkpoint.SealKnown(tmp, meta, dir, placed)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return 0, 0, fmt.Errorf("restore: partition %d: checkpoint: %w", meta.Partition, err)
	}
	var size int64
	for _, f := range files {
		size += f.Size
	}
	return len(files), size, nil
}

// placeFiles downloads the files of checkpoint base b into dir, each
// checked against its size and SHA-256, and returns them and the bytes
// read.
func (r *rebuilder) placeFiles(ctx context.Context, b *snapshot.Base, dir string) ([]checkpoint.DirFile, int64, error) {
	var read int64
	var placed []checkpoint.DirFile
	for _, f := range b.Files { // names and sizes checked by the manifest's Validate
		rc, err := r.st.OpenPiece(ctx, f.Name)
		if err != nil {
			return nil, read, err
		}
		sum, err := hex.DecodeString(f.SHA256)
		if err != nil || len(sum) != 32 {
			rc.Close()
			return nil, read, fmt.Errorf("%w: base %s: file %s: SHA-256 %q", snapshot.ErrInvalid, b.Name, f.File, f.SHA256)
		}
		cr := &countingReader{r: rc}
		df := checkpoint.DirFile{Name: f.File, Size: f.Size, SHA256: [32]byte(sum)}
		err = checkpoint.ReceiveFile(cr, filepath.Join(dir, f.File), df)
		if err == nil {
			// The object must end there too.
			if n, _ := rc.Read(make([]byte, 1)); n > 0 {
				err = fmt.Errorf("%w: base %s: file %s (object %s) is longer than the %d bytes the manifest says", snapshot.ErrCorrupt, b.Name, f.File, f.Name, f.Size)
			}
		}
		rc.Close()
		read += cr.n
		if err != nil {
			return nil, read, fmt.Errorf("restore: base %s: file %s (object %s): %w", b.Name, f.File, f.Name, err)
		}
		placed = append(placed, df)
	}
	return placed, read, nil
}

// damaged says whether err is damage found in a piece.
func damaged(err error) bool {
	return errors.Is(err, snapshot.ErrCorrupt) || errors.Is(err, snapshot.ErrVersion) ||
		errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrVersion) ||
		errors.Is(err, partition.ErrBadImage) || errors.Is(err, partition.ErrImageVersion) ||
		errors.Is(err, verify.ErrLog) || errors.Is(err, verify.ErrCutFinish)
}

// readEntries reads the entries p's pieces hold for the snapshot, base+1
// … End (each piece from its From on), checking each piece as it goes.
func (r *rebuilder) readEntries(ctx context.Context, p *snapshot.Partition) ([]*raftpb.Entry, int64, error) {
	var (
		ents []*raftpb.Entry
		read int64
	)
	for _, pc := range p.Pieces {
		err := r.readPiece(ctx, pc, func(e *raftpb.Entry) {
			if e.GetIndex() >= pc.From {
				ents = append(ents, e)
			}
		})
		if err != nil {
			fail := &snapshot.CheckError{Snapshot: r.m.ID, Partition: p.Partition, Piece: pc.Name, Err: err}
			if errors.Is(err, snapshot.ErrCorrupt) || errors.Is(err, snapshot.ErrVersion) || errors.Is(err, snapshot.ErrNotFound) {
				return nil, read, fmt.Errorf("%w: %w", ErrDamaged, fail)
			}
			return nil, read, fmt.Errorf("restore: %w", fail)
		}
		read += pc.Size // read to its trailer, so whole (and its size was checked)
	}
	return ents, read, nil
}

// readPiece streams one changelog piece through fn.
func (r *rebuilder) readPiece(ctx context.Context, pc snapshot.Piece, fn func(*raftpb.Entry)) error {
	rc, err := r.st.OpenPiece(ctx, pc.Name)
	if err != nil {
		return err
	}
	defer rc.Close()
	pr, err := snapshot.NewPieceReader(rc, pc.Name)
	if err != nil {
		return err
	}
	for {
		e, err := pr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		fn(e)
	}
}

// checkDataDir accepts a data dir that does not exist or is an empty
// directory.
func checkDataDir(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrDataDir, path)
	}
	names, err := readDirNames(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	if len(names) == 0 {
		return nil
	}
	for _, n := range names {
		if n == datadir.RestoreMarkerFile {
			return fmt.Errorf("%w: %s holds an earlier restore that did not finish (%s); delete the directory and restore again",
				ErrDataDir, path, datadir.RestoreMarkerFile)
		}
	}
	shown := names
	if len(shown) > 5 {
		shown = append(shown[:5:5], "…")
	}
	return fmt.Errorf("%w: %s is not empty (%s): restore only into a new or empty directory; a node's data is never overwritten",
		ErrDataDir, path, strings.Join(shown, ", "))
}

func readDirNames(path string) ([]string, error) {
	es, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names, nil
}

// dataDir is a data dir being restored: it holds the restore marker until
// finish.
type dataDir struct {
	path    string
	created bool // the directory did not exist before
}

// createDataDir creates the data dir (or takes the empty one that
// exists), writes the restore marker, durably, and the materializations'
// directory.
func createDataDir(path, what string) (*dataDir, error) {
	d := &dataDir{path: path}
	if err := checkDataDir(path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("restore: create %s: %w", filepath.Dir(path), err)
		}
		if err := os.Mkdir(path, 0o750); err != nil {
			return nil, fmt.Errorf("restore: create data dir %s: %w", path, err)
		}
		d.created = true
		if err := syncDir(filepath.Dir(path)); err != nil {
			return nil, d.fail(err)
		}
	}
	marker := filepath.Join(path, datadir.RestoreMarkerFile)
	text := fmt.Sprintf("kvnode restore of %s started %s; this data dir is incomplete until the restore removes this file\n",
		what, time.Now().UTC().Format(time.RFC3339))
	if err := writeSynced(marker, []byte(text)); err != nil {
		return nil, d.fail(err)
	}
	if err := syncDir(path); err != nil {
		return nil, d.fail(err)
	}
	if err := os.Mkdir(filepath.Join(path, datadir.MaterializeDir), 0o750); err != nil {
		return nil, d.fail(fmt.Errorf("restore: %w", err))
	}
	return d, nil
}

// fail removes what was written and returns err.
func (d *dataDir) fail(err error) error {
	if aerr := d.abort(); aerr != nil {
		return fmt.Errorf("%w (and cleaning up: %v)", err, aerr)
	}
	return err
}

// abort removes what the restore wrote: the data dir if it created it,
// else everything in it.
func (d *dataDir) abort() error {
	if d.created {
		return os.RemoveAll(d.path)
	}
	names, err := readDirNames(d.path)
	if err != nil {
		return err
	}
	// The marker goes last, so that a crash while cleaning up still
	// leaves a data dir no node starts from.
	for _, n := range names {
		if n != datadir.RestoreMarkerFile {
			if err := os.RemoveAll(filepath.Join(d.path, n)); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(filepath.Join(d.path, datadir.RestoreMarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(d.path)
}

// finish removes the marker: the data dir is complete.
func (d *dataDir) finish() error {
	if err := syncDir(filepath.Join(d.path, datadir.MaterializeDir)); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(d.path, datadir.RestoreMarkerFile)); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return syncDir(d.path)
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("restore: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("restore: fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("restore: close %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("restore: open dir %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("restore: fsync dir %s: %w", dir, err)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
