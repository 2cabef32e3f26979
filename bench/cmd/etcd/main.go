// Command etcd is etcd's own server, built from the Go module proxy at the
// version bench/go.mod requires (make etcd), so that make bench-compare
// measures cutkv beside a current etcd on any machine with Go, rather
// than whichever etcd a distribution packages.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
