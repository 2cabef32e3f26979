package clock

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSkewFromEnvironment starts this test binary with CUTKV_CLOCK_SKEW_FILE
// set, as the chaos harness starts a node, and changes the file while the
// child runs: with the failpoints tag the child's Now follows the file
// from its first call, without the tag Now stays time.Now.
func TestSkewFromEnvironment(t *testing.T) {
	if os.Getenv("CLOCK_TEST_CHILD") == "1" {
		child()
		return
	}
	skew := filepath.Join(t.TempDir(), "skew")
	if err := os.WriteFile(skew, []byte("-12m"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSkewFromEnvironment$")
	cmd.Env = append(os.Environ(), "CLOCK_TEST_CHILD=1", SkewFileEnv+"="+skew)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	lines := bufio.NewScanner(stdout)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the child ended early: %v", lines.Err())
		}
		return lines.Text()
	}
	want := "start 0s"
	if Enabled {
		want = "start -12m0s"
	}
	if got := next(); got != want {
		t.Fatalf("child's first line %q, want %q", got, want)
	}
	if err := os.WriteFile(skew, []byte("3m"), 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "written")
	want = "after 0s"
	if Enabled {
		want = "after 3m0s"
	}
	if got := next(); got != want {
		t.Fatalf("child's line after the file changed to 3m: %q, want %q", got, want)
	}
}

// child reports the offset at start, and again once it reaches 3m (with
// the tag) or, without it, when told the file changed.
func child() {
	report := func(what string) {
		d := time.Until(Now()).Round(time.Minute)
		if d != Offset() {
			fmt.Printf("%s: Now is %v from time.Now but the offset is %v\n", what, d, Offset())
			return
		}
		fmt.Printf("%s %v\n", what, Offset())
	}
	report("start")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || strings.TrimSpace(in.Text()) != "written" {
		fmt.Println("no word from the parent")
		return
	}
	for deadline := time.Now().Add(10 * time.Second); Enabled && Offset() != 3*time.Minute && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	report("after")
}
