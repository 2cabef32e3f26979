// Command benchrow prints one Markdown table row from a kvbench JSON
// result (scripts/bench-cuts.sh): run, cut mode, throughput, latency,
// aborts, the cuts measured and the nodes' CPU per operation (with
// --metrics-url).
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

type latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

type result struct {
	OpsPerSec float64 `json:"ops_per_sec"`
	AbortRate float64 `json:"abort_rate"`
	Latency   latency `json:"latency_ms"`
	WAL       *struct {
		CPUUsPerOp float64 `json:"cpu_us_per_op"`
	} `json:"wal"`
	Cuts *struct {
		Completed int64   `json:"completed"`
		Failed    int64   `json:"failed"`
		Latency   latency `json:"latency_ms"`
	} `json:"cuts"`
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: benchrow RUN MODE RESULT.json")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cuts := "- | - | - | -"
	if c := r.Cuts; c != nil {
		cuts = fmt.Sprintf("%d (%d failed) | %.1f | %.1f | %.1f", c.Completed, c.Failed, c.Latency.P50, c.Latency.P99, c.Latency.Max)
	}
	cpu := "-"
	if r.WAL != nil && r.WAL.CPUUsPerOp > 0 {
		cpu = fmt.Sprintf("%.0f", r.WAL.CPUUsPerOp)
	}
	fmt.Printf("| %s | %s | %.0f | %.1f | %.1f | %.2f | %s | %s |\n", os.Args[1], os.Args[2], r.OpsPerSec, r.Latency.P50, r.Latency.P99, 100*r.AbortRate, cuts, cpu)
}
