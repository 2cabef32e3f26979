package bank

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cutkv/cutkv/tests/process"
)

// bin holds the binaries the real-process tests run, built by TestMain.
var bin process.Binaries

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "cutkv-bank-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bank tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	began := time.Now()
	if bin, err = process.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "bank tests:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "bank tests: built kvnode, kvnode (failpoints) and kvctl in %v\n", time.Since(began).Round(time.Millisecond))
	}
	return m.Run()
}
