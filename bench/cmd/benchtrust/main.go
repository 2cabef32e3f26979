// Command benchtrust is scripts/bench-trust.sh's helper:
//
//	benchtrust flood -client ADDR -peer ADDR -http ADDR [flags]
//	    times Puts of a client connected before a flood of connections
//	    to a node's client and peer ports, before, during and after it,
//	    and samples the node's /metrics and /healthz; prints JSON.
//	benchtrust section -results DIR -doc FILE
//	    writes the Markdown of the script's results (kvbench JSON of the
//	    TLS on/off runs, the flood's JSON, the script's notes) into FILE,
//	    between the markers of the section "Trust: TLS cost and
//	    connection floods", which it appends if it is missing.
//
// flood sends traffic only to the 127.0.0.1 addresses it is given, and
// every loop it runs is bounded in count and in time: it stops by itself.
package main

import (
	"os"

	"github.com/cutkv/cutkv/bench/internal/benchconn"
)

func main() {
	benchconn.Main("benchtrust", map[string]func(args []string) error{
		"flood":   func(args []string) error { return floodMain(args, os.Stdout, os.Stderr) },
		"section": sectionMain,
	})
}
