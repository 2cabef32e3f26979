// Package benchconn holds what the bench scripts' Go helpers
// (bench/cmd/benchckpt, bench/cmd/benchsnap, bench/cmd/benchtrust) share:
// connecting to the nodes, reading their /metrics, subcommand flags and
// dispatch.
package benchconn

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
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

// DefaultEndpoints are the gRPC addresses of scripts/run-local.sh's nodes.
const DefaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

// Command is a subcommand's flag set with the -endpoints flag that every
// subcommand talking to the nodes has.
type Command struct {
	*flag.FlagSet
	endpoints *string
}

// NewCommand returns subcommand name's flags, -endpoints already defined.
func NewCommand(name string) *Command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return &Command{FlagSet: fs, endpoints: fs.String("endpoints", DefaultEndpoints, "gRPC addresses of the nodes")}
}

// Endpoints returns the -endpoints value (after Parse or Connect).
func (c *Command) Endpoints() string { return *c.endpoints }

// Connect parses args and dials every endpoint; the func closes them.
func (c *Command) Connect(args []string) ([]*grpc.ClientConn, func(), error) {
	if err := c.Parse(args); err != nil {
		return nil, nil, err
	}
	return DialAll(*c.endpoints)
}

// Main runs the subcommand os.Args[1] of tool among cmds with the rest of
// the arguments: exit 2 with usage for an unknown one, 1 naming the
// subcommand when it fails.
func Main(tool string, cmds map[string]func(args []string) error) {
	if len(os.Args) < 2 || cmds[os.Args[1]] == nil {
		names := make([]string, 0, len(cmds))
		for n := range cmds {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: %s %s ... (see the package comment)\n", tool, strings.Join(names, "|"))
		os.Exit(2)
	}
	if err := cmds[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", tool, os.Args[1], err)
		os.Exit(1)
	}
}
