package dirstate

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDescribeSeesChanges: a rewrite with the same bytes but a new time,
// a new file and a changed byte each change the description; reading
// does not.
func TestDescribeSeesChanges(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "sub", "a")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	describe := func() string {
		t.Helper()
		s, err := Describe(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := describe()
	if _, err := os.ReadFile(f); err != nil {
		t.Fatal(err)
	}
	if again := describe(); again != first {
		t.Fatalf("reading changed the description:\n%s\n%s", first, again)
	}
	changes := []func() error{
		func() error { return os.Chtimes(f, time.Now(), time.Unix(1, 0)) },
		func() error { return os.WriteFile(f, []byte("two"), 0o644) },
		func() error { return os.WriteFile(filepath.Join(dir, "b"), nil, 0o644) },
	}
	for i, change := range changes {
		before := describe()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if describe() == before {
			t.Errorf("change %d not seen", i)
		}
	}
	if _, err := Describe(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory described")
	}
}
