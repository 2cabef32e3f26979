// Command benchsnap is scripts/bench-snapshots.sh's helper: it takes
// snapshots through the Cluster API (one, or in a loop at a cadence),
// follows the automatic ones, checks a stored snapshot, and digests a
// cluster's whole keyspace so that a restored cluster (kvnode restore) can
// be compared with its source.
//
//	benchsnap create [-endpoints EPS] [-store URL] [-full]        one JSON line
//	benchsnap loop [-endpoints EPS] [-store URL] [-full] -every D -for D
//	                                                               one JSON line per snapshot
//	benchsnap loopcell FILE                                        a table cell from loop's lines
//	benchsnap watch [-endpoints EPS] [-store URL] -every D -out FILE
//	                                                               polls ListSnapshots until SIGTERM
//	benchsnap autostats -snapshots FILE -from T -to T [-data DIR]  Markdown rows: gaps, durations, bytes
//	benchsnap metric -urls HOST:PORT,...                           cutkv_snapshot_interval_seconds
//	benchsnap check [-endpoints EPS] [-store URL] [-id ID]          CheckSnapshot (default: the newest), one JSON line
//	benchsnap digest [-endpoints EPS]                              key count and SHA-256 of every key-value
//	benchsnap cuts [-endpoints EPS] -n N -every D                  N cuts one after the other, their completion times
//	benchsnap scrape [-urls HOST:PORT,...] [-gc] [-names A,B]      the nodes' metric samples (after a forced GC), JSON
//	benchsnap fill [-endpoints EPS] -from I -to J [-value-size B]  put every key of [I, J) once, one JSON line
//	benchsnap uploads -data DIR -from T -to T                     the "snapshot created" lines of a window, summed, JSON
//	benchsnap sstwatch -data DIR [-every D]                       SST bytes Pebble wrote until SIGTERM, JSON
//
// scripts/bench-compare.sh uses cuts, scrape and fill (COSTS), and create.
// Only the bench scripts use it; its output formats are those scripts'
// contract, not an API.
package main

import "github.com/cutkv/cutkv/bench/internal/benchconn"

func main() {
	benchconn.Main("benchsnap", map[string]func([]string) error{
		"create": runCreate, "loop": runLoop, "loopcell": runLoopCell, "watch": runWatch,
		"autostats": runAutoStats, "metric": runMetric, "check": runCheck, "digest": runDigest,
		"cuts": runCuts, "scrape": runScrape, "fill": runFill,
		"uploads": runUploads, "sstwatch": runSSTWatch,
	})
}
