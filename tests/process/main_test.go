package process

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// bin holds the paths of the binaries under test, built by TestMain.
var bin Binaries

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "cutkv-process-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "process tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	began := time.Now()
	if bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "process tests:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "process tests: built kvnode, kvnode (failpoints) and kvctl in %v\n", time.Since(began).Round(time.Millisecond))
	}
	return m.Run()
}
