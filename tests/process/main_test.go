package process

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// bin holds the paths of the binaries under test, built by TestMain.
var bin struct {
	kvnode   string // normal build
	kvnodeFP string // built with -tags failpoints
	kvctl    string
}

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
	bin.kvnode = filepath.Join(dir, "kvnode")
	bin.kvnodeFP = filepath.Join(dir, "kvnode-failpoints")
	bin.kvctl = filepath.Join(dir, "kvctl")
	builds := [][]string{
		{"-o", bin.kvnode, "github.com/cutkv/cutkv/cmd/kvnode"},
		{"-tags", "failpoints", "-o", bin.kvnodeFP, "github.com/cutkv/cutkv/cmd/kvnode"},
		{"-o", bin.kvctl, "github.com/cutkv/cutkv/cmd/kvctl"},
	}
	began := time.Now()
	for _, args := range builds {
		// The go command on PATH, with the caller's environment: GOFLAGS,
		// GOCACHE and friends apply as they would on the command line.
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "process tests: go build %v: %v\n", args, err)
			return 1
		}
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "process tests: built kvnode, kvnode (failpoints) and kvctl in %v\n", time.Since(began).Round(time.Millisecond))
	}
	return m.Run()
}
