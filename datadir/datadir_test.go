package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/topology"
)

func layout(t *testing.T) *topology.Layout {
	t.Helper()
	ms, err := topology.ParseInitialCluster("n1=127.0.0.1:7301,n2=127.0.0.1:7302")
	if err != nil {
		t.Fatal(err)
	}
	l, err := topology.New("tok", ms, 4)
	if err != nil {
		t.Fatal(err)
	}
	l.ClusterID = 0xabc
	return l
}

// TestIdentityRoundTrip: what CreateIdentity writes, ReadIdentity reads
// back; a second create is refused and changes nothing; WriteIdentity
// replaces it.
func TestIdentityRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := ReadIdentity(dir); ok || err != nil {
		t.Fatalf("empty dir: ok %v, %v", ok, err)
	}
	l := layout(t)
	if err := CreateIdentity(dir, Identity{NodeID: "n2", Layout: l}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := ReadIdentity(dir)
	if err != nil || !ok || id.NodeID != "n2" || id.Layout.ClusterID != 0xabc || id.Layout.Partitions != 4 || id.Pending() {
		t.Fatalf("read back %+v, %v, %v", id, ok, err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, IdentityFile))
	if err := CreateIdentity(dir, Identity{NodeID: "n1", Layout: l}); err == nil {
		t.Fatal("a second CreateIdentity replaced the identity")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, IdentityFile)); string(after) != string(before) {
		t.Fatal("a refused CreateIdentity changed the file")
	}
	l.ClusterID = 0xdef
	if err := WriteIdentity(dir, Identity{NodeID: "n2", Layout: l}); err != nil {
		t.Fatal(err)
	}
	if id, _, _ := ReadIdentity(dir); id.Layout.ClusterID != 0xdef {
		t.Fatalf("WriteIdentity did not replace: cluster %x", id.Layout.ClusterID)
	}
}

// TestIdentityRefusals: a node outside the layout is not written; a
// damaged file, or one without a cluster id that is no restore's, is
// ErrDamaged naming the file.
func TestIdentityRefusals(t *testing.T) {
	dir := t.TempDir()
	if err := CreateIdentity(dir, Identity{NodeID: "n9", Layout: layout(t)}); !errors.Is(err, ErrNotMember) {
		t.Fatalf("a non-member: %v, want ErrNotMember", err)
	}
	if _, err := os.Stat(filepath.Join(dir, IdentityFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused identity was written")
	}
	file := filepath.Join(dir, IdentityFile)
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadIdentity(dir); !errors.Is(err, ErrDamaged) {
		t.Fatalf("damaged file: %v, want ErrDamaged", err)
	}
	if err := os.WriteFile(file, make([]byte, maxIdentityBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadIdentity(dir); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an oversized file: %v, want ErrDamaged saying it is too long", err)
	}
	l := layout(t)
	l.ClusterID = 0
	if err := WriteIdentity(dir, Identity{NodeID: "n1", Layout: l}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadIdentity(dir); !errors.Is(err, ErrDamaged) {
		t.Fatalf("no cluster id and no restore: %v, want ErrDamaged", err)
	}
	if err := WriteIdentity(dir, Identity{NodeID: "n1", Layout: l, RestoredFrom: "0000000000000abc/cut-00000000000000000001"}); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := ReadIdentity(dir); err != nil || !ok || !id.Pending() {
		t.Fatalf("a restore's identity before its first start: %+v, %v, %v", id, ok, err)
	}
}

// TestLockDir: a second lock of the same dir fails with ErrLocked until
// the first is released.
func TestLockDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	l.Unlock()
	l.Unlock() // harmless
	l2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
}
