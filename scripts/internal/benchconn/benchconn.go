// Package benchconn holds the connection helpers the bench scripts' Go
// helpers (scripts/benchckpt, scripts/benchsnap) share.
package benchconn

import (
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Split returns the comma-separated addresses in s, blanks dropped.
func Split(s string) []string {
	var eps []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	return eps
}

// Dial connects to one node (lazily, as grpc.NewClient does).
func Dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

// DialAll connects to every address of the comma-separated endpoints and
// returns the connections and a func that closes them all.
func DialAll(endpoints string) ([]*grpc.ClientConn, func(), error) {
	var conns []*grpc.ClientConn
	closeAll := func() {
		for _, cc := range conns {
			cc.Close()
		}
	}
	for _, ep := range Split(endpoints) {
		cc, err := Dial(ep)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		conns = append(conns, cc)
	}
	if len(conns) == 0 {
		return nil, nil, errors.New("no endpoints")
	}
	return conns, closeAll, nil
}
