package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/restore/restoretest"
	"github.com/cutkv/cutkv/snapshot"
)

func members(n int) string {
	var parts []string
	for i := 1; i <= n; i++ {
		parts = append(parts, fmt.Sprintf("n%d=127.0.0.1:%d", i, 7000+i))
	}
	return strings.Join(parts, ",")
}

func options(f *restoretest.Fixture, id string, n int, dataDir string) Options {
	return Options{
		StoreURL: f.URL, Snapshot: f.Snapshots[0].ID, DataDir: dataDir,
		NodeID: id, InitialCluster: members(n),
	}
}

// restored is what a restored data dir holds.
type restored struct {
	files    map[uint64]checkpoint.Materialization // by group
	parts    map[uint64]*partition.Partition
	meta     *internalpb.MetaImage
	identity *internalpb.NodeIdentity
	raw      map[uint64][]byte // the files' bytes
}

// load reads a restored data dir back the way a node would.
func load(t *testing.T, dataDir string) *restored {
	t.Helper()
	names, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n.Name() != "cluster.json" && n.Name() != datadir.MaterializeDir {
			t.Errorf("unexpected %s in the data dir", n.Name())
		}
	}
	dir := filepath.Join(dataDir, datadir.MaterializeDir)
	mats, err := checkpoint.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := &restored{files: map[uint64]checkpoint.Materialization{}, parts: map[uint64]*partition.Partition{}, raw: map[uint64][]byte{}}
	for g, ms := range mats {
		if len(ms) != 1 {
			t.Fatalf("group %d has %d materializations", g, len(ms))
		}
		m := ms[0]
		out.files[g] = m
		path := filepath.Join(dir, m.Name())
		if m.Dir {
			out.parts[g] = loadCheckpointDir(t, path, g, m.Index)
			continue
		}
		if out.raw[g], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		r, err := checkpoint.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if r.Meta().Term != 1 {
			t.Errorf("group %d: materialization at term %d, want 1", g, r.Meta().Term)
		}
		if g == 0 {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			out.meta = &internalpb.MetaImage{}
			if err := proto.Unmarshal(b, out.meta); err != nil {
				t.Fatal(err)
			}
		} else {
			p, err := partition.Decode(g, r)
			if err != nil {
				t.Fatalf("group %d: %v", g, err)
			}
			if p.Applied() != m.Index {
				t.Fatalf("group %d: image at %d in a file named %d", g, p.Applied(), m.Index)
			}
			out.parts[g] = p
		}
		r.Close()
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	out.identity = &internalpb.NodeIdentity{}
	if err := protojson.Unmarshal(b, out.identity); err != nil {
		t.Fatal(err)
	}
	return out
}

// loadCheckpointDir checks the checkpoint directory path of group g as a
// node's first start does (every file's hash) and opens it through a
// scratch clone, which must hold the state at index.
func loadCheckpointDir(t *testing.T, path string, g, index uint64) *partition.Partition {
	t.Helper()
	if g == 0 {
		t.Fatalf("group 0 restored as a checkpoint directory %s", path)
	}
	meta, _, err := checkpoint.VerifyDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Term != 1 || meta.Partition != g || meta.Index != index {
		t.Errorf("group %d: checkpoint manifest %+v, want partition %d index %d term 1", g, meta, g, index)
	}
	p, err := partition.OpenCheckpointScratch(path, filepath.Join(t.TempDir(), "scratch"), g, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if p.Applied() != index {
		t.Fatalf("group %d: checkpoint at %d in a directory named %d", g, p.Applied(), index)
	}
	return p
}

func kvs(p *partition.Partition) map[string]string {
	out := map[string]string{}
	p.Each(func(kv *partition.KV) bool {
		out[string(kv.Key)] = string(kv.Value)
		return true
	})
	return out
}

// checkPartitions compares every restored partition with the state rule 5
// defines (verify.Rebuild over the source's whole log).
func checkPartitions(t *testing.T, f *restoretest.Fixture, m *snapshot.Manifest, got *restored) {
	t.Helper()
	for g, p := range got.parts {
		hp := m.Partitions[g-1]
		if got.files[g].Index != hp.Pos-1 {
			t.Errorf("partition %d materialized at %d, want pos-1 = %d", g, got.files[g].Index, hp.Pos-1)
		}
		want := f.Want(t, m, g)
		have := kvs(p)
		if len(have) != len(want) {
			t.Errorf("partition %d at cut %d: %d keys %q, want %d %q", g, m.CutVersion, len(have), have, len(want), want)
		}
		for k, v := range want {
			if hv, ok := have[k]; !ok || hv != string(v) {
				t.Errorf("partition %d at cut %d: key %q = %q (present %v), want %q", g, m.CutVersion, k, hv, ok, v)
			}
		}
		for _, id := range []string{"TF", "TB", "TA"} {
			if _, ok := p.IntentOf(id); ok {
				t.Errorf("partition %d: intent of %s restored", g, id)
			}
			if _, ok := p.Record(id); ok {
				t.Errorf("partition %d: record of %s restored", g, id)
			}
		}
		if v, _ := p.CutActive(); v != 0 || p.CutVersion() != 0 {
			t.Errorf("partition %d: cut progress restored (version %d, running %d)", g, p.CutVersion(), v)
		}
	}
}

// TestRestoreOneNode restores cut 2 onto a single node and checks every
// group against rule 5, and the facts the scenario is built for, from
// logs written before parallel commits and with their entries.
func TestRestoreOneNode(t *testing.T) {
	t.Run("old entries", func(t *testing.T) { testRestoreOneNode(t, false) })
	t.Run("parallel commits", func(t *testing.T) { testRestoreOneNode(t, true) })
}

func testRestoreOneNode(t *testing.T, parallel bool) {
	f := restoretest.Build(t, restoretest.Options{ParallelCommits: parallel})
	dataDir := filepath.Join(t.TempDir(), "n1")
	var logs bytes.Buffer
	opts := options(f, "n1", 1, dataDir)
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	m := f.Snapshots[0]
	if res.SnapshotID != m.ID || res.CutVersion != 2 || res.SourceCluster != f.Cluster || !res.SnapshotTime.Equal(m.Time) {
		t.Fatalf("result %+v", res)
	}
	// The new cluster's id is drawn at its first start; the restore
	// leaves it 0 and gives the layout a digest of the restore token.
	if res.Layout.ClusterID != 0 || res.Layout.Digest == 0 || res.Token != DefaultToken(f.Cluster, m.ID) {
		t.Fatalf("new cluster %x (digest %x) with token %q; source %x", res.Layout.ClusterID, res.Layout.Digest, res.Token, f.Cluster)
	}
	if !slices.Equal(res.Groups, []uint64{0, 1, 2, 3, 4}) {
		t.Fatalf("groups %v", res.Groups)
	}
	got := load(t, dataDir)
	if len(got.files) != 5 {
		t.Fatalf("materializations of groups %v", got.files)
	}
	checkPartitions(t, f, m, got)
	n := f.Partitions
	k := func(g uint64, i int) string { return restoretest.Key(g, n, i) }
	for g := uint64(1); g <= 4; g++ {
		have := kvs(got.parts[g])
		want := map[string]string{k(g, 0): "a0", k(g, 1): "b1", k(g, 2): "a2", k(g, 3): "a3", k(g, 4): "c4"}
		if g <= 2 {
			want[k(g, 2)] = fmt.Sprintf("tb%d", g) // TB: in the before set in 1, finished before pos in 2
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Errorf("partition %d: %q, want %q", g, have, want)
		}
	}
	var keys uint64
	for _, p := range got.parts {
		keys += uint64(p.Len())
	}
	if res.Keys != keys || res.BytesRead <= 0 || res.BytesChecked < res.BytesRead || res.Duration <= 0 {
		t.Fatalf("result counts: keys %d (files hold %d), read %d, checked %d, took %v", res.Keys, keys, res.BytesRead, res.BytesChecked, res.Duration)
	}
	// Group 0: cut versions above the snapshot's, and no layout yet (the
	// new cluster's id is drawn at its first start, group 0's leader then
	// records the layout).
	if got.meta.GetApplied() != 1 || got.meta.GetLastCut() != 2 || len(got.meta.GetCuts()) != 0 || got.files[0].Index != 1 {
		t.Fatalf("group 0 image %v at %d", got.meta, got.files[0].Index)
	}
	if got.meta.GetLayout() != nil || got.identity.GetLayout().GetClusterId() != 0 || !proto.Equal(got.identity.GetLayout(), res.Layout.Proto()) {
		t.Fatalf("layouts differ: group 0 %v, identity %v, result %v", got.meta.GetLayout(), got.identity.GetLayout(), res.Layout.Proto())
	}
	if got.identity.GetNodeId() != "n1" || got.identity.GetRestoredFrom() != fmt.Sprintf("%016x/%s", f.Cluster, m.ID) {
		t.Fatalf("identity %v", got.identity)
	}
	if res.Layout.Partitions != n {
		t.Fatalf("layout has %d partitions, the snapshot %d", res.Layout.Partitions, n)
	}
	for _, want := range []string{"checking every piece", "group written", "bytes_read=", "keys=", "restore done"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("progress log lacks %q:\n%s", want, logs.String())
		}
	}
	// The data dir is complete: a second restore into it is refused.
	if _, err := Run(context.Background(), opts); !errors.Is(err, ErrDataDir) {
		t.Fatalf("restore into a restored data dir: %v, want ErrDataDir", err)
	}
}

// TestRestoreManyNodes restores cut 3 for a 3-node and a 5-node cluster:
// every node writes the groups the layout places on it, replicas write
// identical files, and all nodes agree on the new cluster.
func TestRestoreManyNodes(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{Partitions: 6})
	m := f.Snapshots[1]
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			base := t.TempDir()
			files := map[uint64][]byte{}
			var cluster uint64
			for i := 1; i <= n; i++ {
				id := fmt.Sprintf("n%d", i)
				opts := options(f, id, n, filepath.Join(base, id))
				opts.Snapshot = m.ID
				opts.Partitions = f.Partitions
				res, err := Run(context.Background(), opts)
				if err != nil {
					t.Fatal(err)
				}
				if cluster == 0 {
					cluster = res.Layout.Digest
				} else if res.Layout.Digest != cluster {
					t.Fatalf("node %s computes digest %x, n1 %x", id, res.Layout.Digest, cluster)
				}
				self, _ := res.Layout.Member(id)
				want := res.Layout.GroupsOf(self.RaftID)
				if !slices.Equal(res.Groups, want) {
					t.Fatalf("node %s wrote groups %v, the layout places %v", id, res.Groups, want)
				}
				got := load(t, opts.DataDir)
				var have []uint64
				for g := range got.files {
					have = append(have, g)
				}
				slices.Sort(have)
				if !slices.Equal(have, want) {
					t.Fatalf("node %s holds groups %v, want %v", id, have, want)
				}
				checkPartitions(t, f, m, got)
				for g := range got.files {
					// Files (group 0, image bases) are byte for byte the
					// same on every replica; checkpoint directories hold
					// the same state (checkPartitions), not the same bytes.
					b := got.raw[g]
					if prev, ok := files[g]; ok && !bytes.Equal(prev, b) {
						t.Fatalf("group %d: node %s wrote another file than an earlier replica", g, id)
					}
					files[g] = b
				}
			}
			if len(files) != int(f.Partitions)+1 {
				t.Fatalf("groups restored somewhere: %d, want %d", len(files), f.Partitions+1)
			}
		})
	}
}

// TestRestoreAt picks the newest snapshot at or before a time.
func TestRestoreAt(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{})
	t0 := f.Snapshots[0].Time
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{t0, f.Snapshots[0].ID},
		{t0.Add(59 * time.Minute), f.Snapshots[0].ID},
		{t0.Add(time.Hour), f.Snapshots[1].ID},
		{t0.Add(48 * time.Hour), f.Snapshots[1].ID},
	} {
		opts := options(f, "n1", 1, filepath.Join(t.TempDir(), "d"))
		opts.Snapshot, opts.At = "", c.at
		res, err := Run(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.SnapshotID != c.want {
			t.Errorf("at %v: restored %s, want %s", c.at, res.SnapshotID, c.want)
		}
		checkPartitions(t, f, f.Snapshots[slices.IndexFunc(f.Snapshots, func(m *snapshot.Manifest) bool { return m.ID == c.want })], load(t, opts.DataDir))
	}
	opts := options(f, "n1", 1, filepath.Join(t.TempDir(), "d"))
	opts.Snapshot, opts.At = "", t0.Add(-time.Second)
	_, err := Run(context.Background(), opts)
	if !errors.Is(err, ErrNoSnapshot) || !strings.Contains(err.Error(), t0.Format(TimeFormat)) {
		t.Fatalf("restore before the oldest snapshot: %v, want ErrNoSnapshot naming the oldest", err)
	}
	assertAbsent(t, opts.DataDir)
	opts.At, opts.Snapshot = time.Time{}, "cut-nope"
	if _, err := Run(context.Background(), opts); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("restore of an unknown snapshot: %v, want ErrNoSnapshot", err)
	}
}

func assertAbsent(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data dir %s exists after a failed restore (%v)", dir, err)
	}
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil || len(names) != 0 {
		t.Fatalf("data dir %s after a failed restore: %v, %v; want it empty", dir, names, err)
	}
}

// TestRestoreRefusesDamage: a flipped byte in a piece, or a missing piece,
// makes the restore fail naming the piece, before anything is written.
func TestRestoreRefusesDamage(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{})
	m := f.Snapshots[0]
	piece := m.Partitions[0].Pieces[1].Name // partition 1's second piece: TB's finish and the CutFinish
	base := m.Partitions[0].Base.Name
	path := f.PiecePath(piece)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		file  string
		spoil func(path string, data []byte) error
		cause error
	}{
		{"flipped byte", piece, func(p string, b []byte) error {
			b = bytes.Clone(b)
			b[len(b)/2] ^= 0x40
			return os.WriteFile(p, b, 0o600)
		}, snapshot.ErrCorrupt},
		{"missing piece", piece, func(p string, _ []byte) error { return os.Remove(p) }, snapshot.ErrMissing},
		{"flipped byte in the base", base, func(p string, b []byte) error {
			b = bytes.Clone(b)
			b[len(b)-70] ^= 0x01
			return os.WriteFile(p, b, 0o600)
		}, snapshot.ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := f.PiecePath(c.file)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.spoil(p, data); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(p, data, 0o600)
			absent := filepath.Join(t.TempDir(), "new")
			empty := t.TempDir()
			for _, dir := range []string{absent, empty} {
				_, err := Run(context.Background(), options(f, "n1", 1, dir))
				var ce *snapshot.CheckError
				if !errors.Is(err, ErrDamaged) || !errors.Is(err, c.cause) || !errors.As(err, &ce) || ce.Piece != c.file {
					t.Fatalf("restore: %v; want ErrDamaged and %v naming %s", err, c.cause, c.file)
				}
				if !strings.Contains(err.Error(), c.file) {
					t.Fatalf("the error does not name the piece: %v", err)
				}
			}
			assertAbsent(t, absent)
			assertEmpty(t, empty)
		})
	}
	// Put back, the snapshot restores again.
	if b, _ := os.ReadFile(path); !bytes.Equal(b, orig) {
		t.Fatal("the piece was not put back")
	}
	if _, err := Run(context.Background(), options(f, "n1", 1, filepath.Join(t.TempDir(), "ok"))); err != nil {
		t.Fatal(err)
	}
}

// cancelOn is a slog handler that cancels a context at the first record
// whose message is msg: a restore that fails between two groups.
type cancelOn struct {
	msg    string
	cancel context.CancelFunc
}

func (h cancelOn) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.cancel()
	}
	return nil
}
func (h cancelOn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h cancelOn) WithGroup(string) slog.Handler      { return h }

// TestRestoreFailureLeavesNothing: a restore that fails half-way, after
// some groups are written, removes them (and the data dir it created).
func TestRestoreFailureLeavesNothing(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{})
	for _, existing := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "d")
		if existing {
			if err := os.Mkdir(dir, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		opts := options(f, "n1", 1, dir)
		opts.Logger = slog.New(cancelOn{msg: "group written", cancel: cancel})
		_, err := Run(ctx, opts)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("restore: %v, want it canceled", err)
		}
		if existing {
			assertEmpty(t, dir)
		} else {
			assertAbsent(t, dir)
		}
	}
}

// TestRestoreRefusesDataDir: only an absent or empty data dir is restored
// into, and nothing in it is touched.
func TestRestoreRefusesDataDir(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{})
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "wal"), []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	half := t.TempDir()
	if err := os.WriteFile(filepath.Join(half, datadir.RestoreMarkerFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{full: "not empty (wal)", half: "did not finish", file: "not a directory"} {
		_, err := Run(context.Background(), options(f, "n1", 1, dir))
		if !errors.Is(err, ErrDataDir) || !strings.Contains(err.Error(), want) {
			t.Errorf("restore into %s: %v, want ErrDataDir saying %q", dir, err, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(full, "wal")); err != nil || string(b) != "precious" {
		t.Fatalf("the existing data dir was touched: %q, %v", b, err)
	}
}

// TestRestoreOptions: bad or contradicting options and snapshots that do
// not fit are refused before anything is written.
func TestRestoreOptions(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{})
	dir := filepath.Join(t.TempDir(), "d")
	for name, c := range map[string]struct {
		edit func(o *Options)
		want error
		says string
	}{
		"no store":         {func(o *Options) { o.StoreURL = "" }, ErrOptions, "store"},
		"no snapshot":      {func(o *Options) { o.Snapshot = "" }, ErrOptions, "no snapshot"},
		"snapshot and at":  {func(o *Options) { o.At = time.Now() }, ErrOptions, "give one"},
		"no data dir":      {func(o *Options) { o.DataDir = "" }, ErrOptions, "data dir"},
		"node not member":  {func(o *Options) { o.NodeID = "n9" }, ErrOptions, `"n9" is not in`},
		"bad members":      {func(o *Options) { o.InitialCluster = "n1" }, ErrOptions, "initial cluster"},
		"partition count":  {func(o *Options) { o.Partitions = 8 }, ErrIncompatible, "has 4 partitions, 8 were asked for"},
		"unknown store":    {func(o *Options) { o.StoreURL = "file://" + filepath.Join(t.TempDir(), "nope") }, snapshot.ErrNotFound, "does not exist"},
		"unknown cluster":  {func(o *Options) { o.SourceCluster = 0xdead }, ErrNoSnapshot, "cut-"},
		"bad store scheme": {func(o *Options) { o.StoreURL = "ftp://x" }, snapshot.ErrInvalid, "scheme"},
	} {
		opts := options(f, "n1", 1, dir)
		c.edit(&opts)
		_, err := Run(context.Background(), opts)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", name, err, c.want, c.says)
		}
		assertAbsent(t, dir)
	}

	// Another token gives another digest: members restored with different
	// tokens never agree on a cluster id.
	res, err := Run(context.Background(), options(f, "n1", 1, dir))
	if err != nil {
		t.Fatal(err)
	}
	opts := options(f, "n1", 1, t.TempDir())
	opts.Token = "other"
	res2, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Token != "other" || res2.Layout.Digest == res.Layout.Digest {
		t.Fatalf("token %q gave digest %x, the default token %x", res2.Token, res2.Layout.Digest, res.Layout.Digest)
	}
}

// TestRestoreSourceCluster: a store with snapshots of two clusters needs
// the source named; snapshot.Clusters lists both.
func TestRestoreSourceCluster(t *testing.T) {
	dir := t.TempDir()
	a := restoretest.Build(t, restoretest.Options{Dir: dir, Cluster: 0xa})
	b := restoretest.Build(t, restoretest.Options{Dir: dir, Cluster: 0xb, Partitions: 5})
	// Objects that are not a cluster's are ignored.
	if err := os.MkdirAll(filepath.Join(dir, "not-a-cluster", "manifests"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("%016x", 0xc), "pieces"), 0o750); err != nil {
		t.Fatal(err)
	}
	ids, err := snapshot.Clusters(context.Background(), a.URL)
	if err != nil || !slices.Equal(ids, []uint64{0xa, 0xb}) {
		t.Fatalf("Clusters = %x, %v; want [a b]", ids, err)
	}
	opts := options(a, "n1", 1, filepath.Join(t.TempDir(), "d"))
	_, err = Run(context.Background(), opts)
	if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "000000000000000a, 000000000000000b") {
		t.Fatalf("restore from a store of two clusters: %v, want ErrOptions listing them", err)
	}
	assertAbsent(t, opts.DataDir)
	opts.SourceCluster = 0xb
	res, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.SourceCluster != 0xb || res.Layout.Partitions != 5 {
		t.Fatalf("restored %x with %d partitions, want b's 5", res.SourceCluster, res.Layout.Partitions)
	}
	checkPartitions(t, b, b.Snapshots[0], load(t, opts.DataDir))
	if ids, err := snapshot.Clusters(context.Background(), "file://"+t.TempDir()); err != nil || len(ids) != 0 {
		t.Fatalf("Clusters of an empty store = %v, %v", ids, err)
	}
	empty := options(a, "n1", 1, filepath.Join(t.TempDir(), "e"))
	empty.StoreURL = "file://" + t.TempDir()
	if _, err := Run(context.Background(), empty); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("restore from an empty store: %v, want ErrNoSnapshot", err)
	}
}

// TestRestoreAtMillisecond: a snapshot whose time has more digits than
// TimeFormat prints is picked by the printed time, and not by a time a
// millisecond before it.
func TestRestoreAtMillisecond(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	f := restoretest.Build(t, restoretest.Options{Time: t0})
	printed, err := time.Parse(time.RFC3339Nano, t0.Format(TimeFormat))
	if err != nil {
		t.Fatal(err)
	}
	opts := options(f, "n1", 1, filepath.Join(t.TempDir(), "d"))
	opts.Snapshot, opts.At = "", printed
	res, err := Run(context.Background(), opts)
	if err != nil || res.SnapshotID != f.Snapshots[0].ID {
		t.Fatalf("at the printed time %s: %v, %+v; want %s", t0.Format(TimeFormat), err, res, f.Snapshots[0].ID)
	}
	opts = options(f, "n1", 1, filepath.Join(t.TempDir(), "d"))
	opts.Snapshot, opts.At = "", printed.Add(-time.Millisecond)
	if _, err := Run(context.Background(), opts); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("a millisecond before the oldest snapshot: %v, want ErrNoSnapshot", err)
	}
}

func TestParseAt(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-03-01T11:00:00Z":           now.Add(-time.Hour),
		"2026-03-01T11:00:00.250Z":       now.Add(-time.Hour + 250*time.Millisecond),
		"2026-03-01T12:00:00.25+01:00":   now.Add(-time.Hour + 250*time.Millisecond),
		"-5m":                            now.Add(-5 * time.Minute),
		"-1h30m":                         now.Add(-90 * time.Minute),
		"2026-03-01T11:59:59.999999999Z": now.Add(-time.Nanosecond),
	} {
		got, err := ParseAt(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseAt(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"5m", "0s", "yesterday", "2026-03-01", ""} {
		if _, err := ParseAt(in, now); !errors.Is(err, ErrOptions) {
			t.Errorf("ParseAt(%q): %v, want ErrOptions", in, err)
		}
	}
}

// TestRestoreByCutNumber: Snapshot may be the cut number alone.
func TestRestoreByCutNumber(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{})
	opts := options(f, "n1", 1, filepath.Join(t.TempDir(), "d"))
	opts.Snapshot = fmt.Sprint(f.Snapshots[1].CutVersion)
	res, err := Run(context.Background(), opts)
	if err != nil || res.SnapshotID != f.Snapshots[1].ID {
		t.Fatalf("restore of snapshot %q: %v; want %s", opts.Snapshot, err, f.Snapshots[1].ID)
	}
}
