package partition

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cutkv/cutkv/internal/dirstate"
	"github.com/cutkv/cutkv/proto/internalpb"
)

// TestCheckpointRoundTrip: a checkpoint of a partition on Pebble holds
// its state at the index it reports (intents, records, finished ids, cut
// progress included); applies after it do not reach it; its image encodes
// the same bytes as the image of a partition that stopped there; it
// installs into another partition, replacing that one's whole state,
// which survives a reopen; and the clones it was read through are gone.
func TestCheckpointRoundTrip(t *testing.T) {
	env := diskEnv(t)
	root := t.TempDir()
	p := openDisk(t, env, filepath.Join(root, "p1"))
	defer p.Close()
	if !p.Checkpoints() {
		t.Fatal("a partition on Pebble says it has no checkpoints")
	}
	es := imgScriptedEntries(t)
	half := len(es) / 2
	imgApplyAll(t, p, es[:half])
	at := es[half-1].index
	ckpt := filepath.Join(root, "ckpt")
	idx, err := p.Checkpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if idx != at {
		t.Fatalf("checkpoint at %d, want %d", idx, at)
	}
	imgApplyAll(t, p, es[half:])

	want := memAt(t, es, at)
	encode := func(im *Image) []byte {
		t.Helper()
		var b bytes.Buffer
		if err := im.Encode(&b); err != nil {
			t.Fatal(err)
		}
		im.Close()
		return b.Bytes()
	}
	scratch := filepath.Join(root, "scratch")
	im, err := p.CheckpointImage(ckpt, scratch)
	if err != nil {
		t.Fatal(err)
	}
	if im.Applied() != at {
		t.Fatalf("checkpoint image at %d, want %d", im.Applied(), at)
	}
	if got := encode(im); !bytes.Equal(got, encode(want.Image())) {
		t.Fatal("the checkpoint's image differs from the state at its index")
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("the clone %s is left after the image closed: %v", scratch, err)
	}

	qdir := filepath.Join(root, "q1")
	q := openDisk(t, env, qdir)
	imgApplyAll(t, q, []imgEntry{mkImgEntry(t, 1, put("other", "x"))})
	if err := q.InstallCheckpoint(ckpt); err != nil {
		t.Fatal(err)
	}
	sameImagePartition(t, want, q)
	if err := q.InstallCheckpoint(filepath.Join(root, "missing")); err == nil {
		t.Fatal("a missing checkpoint was installed")
	}
	sameImagePartition(t, want, q)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = openDisk(t, env, qdir)
	sameImagePartition(t, want, q)
	q.Close()
	for _, left := range []string{qdir + ".load", qdir + ".old"} {
		if _, err := os.Stat(left); !os.IsNotExist(err) {
			t.Fatalf("%s left: %v", left, err)
		}
	}

	if _, err := want.Checkpoint(filepath.Join(root, "mem")); !errors.Is(err, ErrInMemory) {
		t.Fatalf("checkpoint of a memory partition: %v", err)
	}
}

// TestResolveAtCutOnPebble: resolving a cut on a partition rebuilt on
// Pebble (restore's checkpoint bases) gives the state the in-memory
// resolution gives, at the same index, and it is durable.
func TestResolveAtCutOnPebble(t *testing.T) {
	env := diskEnv(t)
	dir := filepath.Join(t.TempDir(), "p1")
	p := openDisk(t, env, dir)
	es := imgScriptedEntries(t)
	imgApplyAll(t, p, es)
	m := memAt(t, es, es[len(es)-1].index)
	var before []*internalpb.CutTxn
	for id := range m.intents {
		before = append(before, &internalpb.CutTxn{TxnId: []byte(id), Succeeded: true})
		break
	}
	if len(before) == 0 {
		t.Fatal("the script leaves no intent to resolve")
	}
	for _, q := range []*Partition{m, p} {
		if err := q.ResolveAtCut(before); err != nil {
			t.Fatal(err)
		}
	}
	if p.Applied() != m.Applied() {
		t.Fatalf("resolved at %d, in memory at %d", p.Applied(), m.Applied())
	}
	sameImagePartition(t, m, p)
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	q := openDisk(t, env, dir)
	defer q.Close()
	sameImagePartition(t, m, q)
}

// TestOpenCheckpointScratch: a checkpoint opened as a scratch partition
// holds the state at its index on Pebble, takes the entries replayed onto
// it without changing the checkpoint (its files' bytes and times stay),
// and closing it, twice, removes the clone and nothing else.
func TestOpenCheckpointScratch(t *testing.T) {
	env := diskEnv(t)
	root := t.TempDir()
	p := openDisk(t, env, filepath.Join(root, "p1"))
	defer p.Close()
	es := imgScriptedEntries(t)
	half := len(es) / 2
	imgApplyAll(t, p, es[:half])
	ckpt := filepath.Join(root, "ckpt")
	at, err := p.Checkpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	before := dirstate.Must(t, ckpt)
	parent := filepath.Join(root, "scratch")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	q, err := OpenCheckpointScratch(ckpt, filepath.Join(parent, "p"), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !q.Checkpoints() || q.Applied() != at {
		t.Fatalf("scratch partition: on Pebble %v, applied %d, want true and %d", q.Checkpoints(), q.Applied(), at)
	}
	if left, _ := os.ReadDir(parent); len(left) != 1 {
		t.Fatalf("scratch parent holds %d entries, want the clone", len(left))
	}
	imgApplyAll(t, q, es[half:])
	sameImagePartition(t, memAt(t, es, es[len(es)-1].index), q)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("the clone is left after close: %v", left)
	}
	if after := dirstate.Must(t, ckpt); after != before {
		t.Fatalf("the checkpoint changed:\nbefore %s\nafter  %s", before, after)
	}
	q, err = OpenCheckpointScratch(ckpt, filepath.Join(parent, "p"), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	sameImagePartition(t, memAt(t, es, at), q)
}
