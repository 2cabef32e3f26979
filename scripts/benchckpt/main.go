// Command benchckpt is scripts/bench-checkpoints.sh's helper: it runs a
// local 3-node cluster and times each node's start, takes checkpoints
// through the Cluster API, samples WAL and materialization sizes, and
// prints Markdown rows from kvbench results.
//
//	benchckpt cluster -data DIR [-bin DIR] [-targets FILE] [-- KVNODE FLAGS]
//	benchckpt applied [-endpoints EPS]            (JSON on stdout, for -targets)
//	benchckpt checkpoint [-endpoints EPS]
//	benchckpt ckloop [-endpoints EPS] -for D
//	benchckpt watch -data DIR -every D -for D [-endpoints EPS]
//	benchckpt row LABEL RESULT.json [EXTRA]
//	benchckpt summary RESULT.json
//
// Only the bench script uses it; its output formats are that script's
// contract, not an API.
package main

import (
	"fmt"
	"os"
)

const defaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

// Layout of a node's data dir (server.WALDir, server.MaterializeDir);
// repeated here so this tool builds without the server package.
const (
	walDirName = "wal"
	matDirName = "materializations"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "cluster":
		err = runCluster(args)
	case "applied":
		err = runApplied(args)
	case "checkpoint":
		err = runCheckpoint(args)
	case "ckloop":
		err = runCheckpointLoop(args)
	case "watch":
		err = runWatch(args)
	case "row":
		err = runRow(args)
	case "summary":
		err = runSummary(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchckpt %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchckpt cluster|applied|checkpoint|ckloop|watch|row|summary ... (see the package comment)")
	os.Exit(2)
}
