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

import "github.com/cutkv/cutkv/bench/internal/benchconn"

// Layout of a node's data dir (datadir.WALDir, datadir.MaterializeDir);
// repeated here so this tool builds without the server package.
const (
	walDirName = "wal"
	matDirName = "materializations"
)

func main() {
	benchconn.Main("benchckpt", map[string]func([]string) error{
		"cluster": runCluster, "applied": runApplied, "checkpoint": runCheckpoint, "ckloop": runCheckpointLoop,
		"watch": runWatch, "row": runRow, "summary": runSummary,
	})
}
