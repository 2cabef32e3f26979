// Package benchfmt holds what the benchmark tools share across binaries:
// kvbench's key format (so a fill by bench/cmd/benchsnap and kvbench runs
// name the same keys) and the JSON lines bench/cmd/benchsnap prints that
// bench/cmd/benchplot reads.
package benchfmt

import (
	"strings"
	"time"
)

// PutKey writes key index i into buf as zero-padded decimal, filling all
// of buf (kvbench --key-size); i must fit.
func PutKey(buf []byte, i int64) {
	for j := len(buf) - 1; j >= 0; j-- {
		buf[j] = byte('0' + i%10)
		i /= 10
	}
}

// Filled is the line `benchsnap fill` prints: keys [From, To) of KeySize
// bytes, each put once with a ValueSize-byte value.
type Filled struct {
	From       int64   `json:"from"`
	To         int64   `json:"to"`
	KeySize    int     `json:"key_size"`
	ValueSize  int     `json:"value_size"`
	Keys       int64   `json:"keys"`
	Retries    int64   `json:"retries"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	FirstError string  `json:"first_error,omitempty"`
}

// Scrape is what `benchsnap scrape` prints: per node, the samples of the
// metric families asked for, keyed as the exposition shows them
// (`name{label="v"}`).
type Scrape struct {
	Time  time.Time    `json:"time"`
	GC    bool         `json:"gc"`
	Nodes []ScrapeNode `json:"nodes"`
}

// ScrapeNode is one node's samples.
type ScrapeNode struct {
	URL     string             `json:"url"`
	Samples map[string]float64 `json:"samples"`
}

// Sum is series summed over the nodes (0 where a node lacks it).
func (s Scrape) Sum(series string) float64 {
	var t float64
	for _, n := range s.Nodes {
		t += n.Samples[series]
	}
	return t
}

// SumFamily is every series of metric name (unlabelled, or with any
// labels) summed over the nodes: a family that gained a label since a
// run was recorded reads the same.
func (s Scrape) SumFamily(name string) float64 {
	var t float64
	for _, n := range s.Nodes {
		for series, v := range n.Samples {
			if series == name || strings.HasPrefix(series, name+"{") {
				t += v
			}
		}
	}
	return t
}

// PerNode is series of each node, in scrape order.
func (s Scrape) PerNode(series string) []float64 {
	out := make([]float64, len(s.Nodes))
	for i, n := range s.Nodes {
		out[i] = n.Samples[series]
	}
	return out
}
