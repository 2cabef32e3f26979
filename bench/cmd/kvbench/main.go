// Command kvbench puts load on a cutkv (or etcd) cluster and measures
// throughput, latency percentiles and errors; see docs/benchmarks.md.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
