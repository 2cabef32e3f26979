package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/restore/restoretest"
)

func runKvnode(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb, nil)
	return code, out.String(), errb.String()
}

func TestRestoreFlagErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	common := []string{"restore", "--store", "file:///nowhere", "--data-dir", dir, "--id", "n1", "--initial-cluster", "n1=127.0.0.1:7001"}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"restore"}, "--store is required"},
		{[]string{"restore", "--list"}, "--store is required"},
		{common, "give --snapshot ID or --at TIME"},
		{append(common, "--snapshot", "s", "--at", "2026-01-01T00:00:00Z"), "not both"},
		{append(common, "--at", "yesterday"), "RFC 3339"},
		{append(common, "--at", "5m"), "duration before now"},
		{append(common, "--snapshot", "s", "--cluster", "xyz"), "--cluster \"xyz\""},
		{[]string{"restore", "--store", "file:///x", "--snapshot", "s", "--id", "n1", "--initial-cluster", "n1=a:1"}, "--data-dir is required"},
		{[]string{"restore", "--store", "file:///x", "--snapshot", "s", "--data-dir", dir, "--initial-cluster", "n1=a:1"}, "--id is required"},
		{[]string{"restore", "--store", "file:///x", "--snapshot", "s", "--data-dir", dir, "--id", "n1"}, "--initial-cluster is required"},
		{[]string{"restore", "--store", "file:///x", "--snapshot", "s", "--data-dir", dir, "--id", "n9", "--initial-cluster", "n1=a:1"}, `"n9" is not in`},
		{append(common, "--snapshot", "s", "stray"), "unexpected argument"},
		{[]string{"restore", "--bogus"}, "bogus"},
	} {
		code, _, stderr := runKvnode(c.args...)
		if code != 2 || !strings.Contains(stderr, c.says) {
			t.Errorf("kvnode %s: exit %d, stderr %q; want 2 saying %q", strings.Join(c.args, " "), code, stderr, c.says)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused command created the data dir: %v", err)
	}
	code, stdout, _ := runKvnode("restore", "--help")
	if code != 0 || !strings.Contains(stdout, "--initial-cluster") || !strings.Contains(stdout, "--list") {
		t.Fatalf("restore --help: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runKvnode("--help")
	if code != 0 || !strings.Contains(stdout, "kvnode restore") {
		t.Fatalf("--help does not mention restore: exit %d, stdout %q", code, stdout)
	}
}

func TestRestoreCommand(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{})
	m := f.Snapshots[1]
	dir := filepath.Join(t.TempDir(), "n2")
	initial := "n1=127.0.0.1:7001,n2=127.0.0.1:7002"
	at := m.Time.Add(time.Minute).Format(time.RFC3339)
	code, stdout, stderr := runKvnode("restore", "--store", f.URL, "--at", at, "--data-dir", dir, "--id", "n2",
		"--initial-cluster", initial, "--partitions", "4")
	if code != 0 {
		t.Fatalf("restore: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{
		"restored snapshot " + m.ID + " (cut 3",
		fmt.Sprintf("of cluster %016x", f.Cluster),
		"node n2, groups 0 1 2 3 4",
		"4 partitions, 2 members",
		"kvnode --id n2 --data-dir " + dir + " --peer-addr 127.0.0.1:7002 --initial-cluster " + initial + " --partitions 4",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "group written") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "cluster.json")); err != nil {
		t.Fatal(err)
	}
	// Again into the same dir: refused, nothing touched.
	code, _, stderr = runKvnode("restore", "--store", f.URL, "--snapshot", m.ID, "--data-dir", dir, "--id", "n2", "--initial-cluster", initial)
	if code != 1 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("restore into a full data dir: exit %d, stderr %q", code, stderr)
	}
	// An unknown snapshot: the hint shows how to list them.
	code, _, stderr = runKvnode("restore", "--store", f.URL, "--snapshot", "cut-nope", "--data-dir", filepath.Join(t.TempDir(), "x"), "--id", "n2", "--initial-cluster", initial)
	if code != 1 || !strings.Contains(stderr, "--list") {
		t.Fatalf("restore of an unknown snapshot: exit %d, stderr %q", code, stderr)
	}
	// A damaged piece: refused, naming it.
	piece := m.Partitions[3].Pieces[0].Name
	if err := os.Remove(f.PiecePath(piece)); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "n1")
	code, _, stderr = runKvnode("restore", "--store", f.URL, "--snapshot", m.ID, "--data-dir", other, "--id", "n1", "--initial-cluster", initial)
	t.Log(stderr)
	if code != 1 || !strings.Contains(stderr, piece) || !strings.Contains(stderr, "missing") {
		t.Fatalf("restore of a snapshot missing a piece: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("the failed restore left %s: %v", other, err)
	}
}

func TestRestoreList(t *testing.T) {
	dir := t.TempDir()
	a := restoretest.Build(t, restoretest.Options{Dir: dir, Cluster: 0xa})
	restoretest.Build(t, restoretest.Options{Dir: dir, Cluster: 0xb, Partitions: 5, Time: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)})
	code, stdout, stderr := runKvnode("restore", "--store", a.URL, "--list")
	if code != 0 {
		t.Fatalf("--list: exit %d, stderr %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{
		"cluster 000000000000000a: 2 snapshots", "cluster 000000000000000b: 2 snapshots",
		"SNAPSHOT", "cut-00000000000000000002  2    2026-01-02T03:04:05.000Z",
		"cut-00000000000000000003  3    2026-01-02T04:04:05.000Z",
		"2026-05-06T08:08:09.000Z  5",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--list lacks %q:\n%s", want, stdout)
		}
	}
	var size int64
	for _, o := range a.Snapshots[1].Objects() {
		size += o.Size
	}
	if !strings.Contains(stdout, fmt.Sprint(size)) {
		t.Errorf("--list does not show snapshot 2's %d bytes:\n%s", size, stdout)
	}
	code, stdout, _ = runKvnode("restore", "--store", a.URL, "--list", "--cluster", "b")
	if code != 0 || strings.Contains(stdout, "000000000000000a") || !strings.Contains(stdout, "cluster 000000000000000b") {
		t.Fatalf("--list --cluster b: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runKvnode("restore", "--store", "file://"+t.TempDir(), "--list")
	if code != 0 || !strings.Contains(stdout, "no snapshots") {
		t.Fatalf("--list of an empty store: exit %d\n%s", code, stdout)
	}
	// Restoring from a store of two clusters needs --cluster.
	code, _, stderr = runKvnode("restore", "--store", a.URL, "--snapshot", a.Snapshots[0].ID, "--data-dir", filepath.Join(t.TempDir(), "n1"),
		"--id", "n1", "--initial-cluster", "n1=127.0.0.1:7001")
	if code != 1 || !strings.Contains(stderr, "--cluster") {
		t.Fatalf("restore from two clusters: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runKvnode("restore", "--store", a.URL, "--cluster", "a", "--snapshot", a.Snapshots[0].ID, "--data-dir", filepath.Join(t.TempDir(), "n1"),
		"--id", "n1", "--initial-cluster", "n1=127.0.0.1:7001")
	if code != 0 {
		t.Fatalf("restore with --cluster: exit %d, stderr %q", code, stderr)
	}
}

// TestRestoreAtListedTime: the time --list prints, given to --at, picks
// that snapshot although the snapshot's time has more digits than printed
// (before, --list printed whole seconds and --at with them found none);
// --at -5m and a snapshot named by its cut number work too.
func TestRestoreAtListedTime(t *testing.T) {
	f := restoretest.Build(t, restoretest.Options{Time: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)})
	code, stdout, stderr := runKvnode("restore", "--store", f.URL, "--list")
	if code != 0 {
		t.Fatalf("--list: exit %d, stderr %s", code, stderr)
	}
	var listed string
	for _, line := range strings.Split(stdout, "\n") {
		if fs := strings.Fields(line); len(fs) >= 3 && fs[0] == f.Snapshots[0].ID {
			listed = fs[2]
		}
	}
	if listed != "2026-01-02T03:04:05.123Z" {
		t.Fatalf("--list shows %s at %q, want 2026-01-02T03:04:05.123Z:\n%s", f.Snapshots[0].ID, listed, stdout)
	}
	initial := "n1=127.0.0.1:7001"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--at", listed}, f.Snapshots[0].ID},
		{[]string{"--at", "-5m"}, f.Snapshots[1].ID},
		{[]string{"--snapshot", "2"}, f.Snapshots[0].ID},
		{[]string{"--snapshot", "0003"}, f.Snapshots[1].ID},
	} {
		args := append([]string{"restore", "--store", f.URL, "--data-dir", filepath.Join(t.TempDir(), "n1"), "--id", "n1", "--initial-cluster", initial}, c.args...)
		code, stdout, stderr := runKvnode(args...)
		if code != 0 || !strings.Contains(stdout, "restored snapshot "+c.want) {
			t.Errorf("restore %v: exit %d, want %s\nstdout %s\nstderr %s", c.args, code, c.want, stdout, stderr)
		}
	}
}
