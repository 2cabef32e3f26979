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
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "flood":
		err = floodMain(os.Args[2:], os.Stdout, os.Stderr)
	case "section":
		err = sectionMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchtrust %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchtrust flood -client ADDR -peer ADDR -http ADDR [flags] | benchtrust section -results DIR -doc FILE")
	os.Exit(2)
}
