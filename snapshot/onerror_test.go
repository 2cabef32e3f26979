package snapshot_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cutkv/cutkv/snapshot"
)

// TestOnErrorNamesTheOperation: a bucket operation that fails is reported
// once, by kind; an object found missing is an answer, not an error.
func TestOnErrorNamesTheOperation(t *testing.T) {
	dir := t.TempDir()
	var got []snapshot.Op
	st, err := snapshot.OpenStoreOptions(context.Background(), "file://"+dir, 0xabc, snapshot.Options{OnError: func(op snapshot.Op) { got = append(got, op) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := snapshot.IDForCut(7)
	if _, err := st.Get(context.Background(), id); err == nil {
		t.Fatal("Get of a missing snapshot succeeded")
	}
	if len(got) != 0 {
		t.Fatalf("a missing manifest reported errors %v", got)
	}
	// A file where the pieces' directory should be: looking a piece up
	// fails (not a directory), which is not "missing".
	cluster := filepath.Join(dir, fmt.Sprintf("%016x", 0xabc))
	if err := os.MkdirAll(cluster, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cluster, "pieces"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.HasPiece(context.Background(), snapshot.PieceName(1, 1, 2)); err == nil {
		t.Fatal("HasPiece under a file succeeded")
	}
	if len(got) != 1 || got[0] != snapshot.OpStat {
		t.Fatalf("reported %v, want [stat]", got)
	}
}
