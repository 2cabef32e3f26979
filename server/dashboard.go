package server

import (
	"net/http"

	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/rpc"
	"github.com/cutkv/cutkv/server/ui"
)

// dashboard is the web dashboard served at /ui/ on the HTTP port. It reads
// the cluster through rn's Cluster service in process, as kvctl would
// through gRPC: the calls go through no interceptor, so a forwarded one
// carries the node's own role; the dashboard calls only read methods.
func (n *Node) dashboard(rn *rpc.Node) http.Handler {
	h, err := ui.New(ui.Config{Self: n.cfg.ID, Cluster: rpc.NewClusterServer(rn), Metrics: n.reg, Log: n.log.With("component", "ui"), Wall: clock.Now})
	if err != nil {
		// Every field New needs is set above.
		panic(err)
	}
	return h
}
