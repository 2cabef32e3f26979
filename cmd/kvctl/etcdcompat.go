package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// etcdctl's names for what kvctl does under other names. Where the
// meaning is the same the etcdctl form runs the kvctl command (member
// list, endpoint status, get --prefix, -w); where it is not, the command
// fails with a usage error naming the kvctl (or kvnode) command to use,
// rather than cobra's bare "unknown command".

// newMemberCmd is etcdctl's "member": "member list" is "members".
func newMemberCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "etcdctl's member commands: 'member list' is 'kvctl members'",
		Long: `etcdctl's member commands. 'kvctl member list' is 'kvctl members'.
cutkv has no online membership changes (member add, remove, update,
promote): a cluster's members are fixed by --initial-cluster when it is
bootstrapped, and moving the data onto other members is done by restoring
a snapshot onto them (kvnode restore --help).`,
		Args: cobra.ArbitraryArgs,
		// etcdctl's member add/remove flags (--peer-urls) are not kvctl's:
		// left unparsed, so that the answer is the pointer below.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing command: list (the same as 'kvctl members')")
			}
			if args[0] == "-h" || args[0] == "--help" {
				return cmd.Help()
			}
			switch args[0] {
			case "add", "remove", "update", "promote":
				return usagef("cutkv has no 'member %s': members are fixed by --initial-cluster at bootstrap; "+
					"to run the data on other members, restore a snapshot onto them ('kvctl snapshot create', then 'kvnode restore')", args[0])
			}
			return usagef("unknown command %q for 'kvctl member': the only one is list (the same as 'kvctl members')", args[0])
		},
	}
	list := newMembersCmd(g)
	list.Use, list.Short = "list", "List the cluster's members (the same as 'kvctl members')"
	cmd.AddCommand(list)
	return cmd
}

// newEndpointCmd is etcdctl's "endpoint": "endpoint status" is "status",
// "endpoint health" asks each endpoint's gRPC health service.
func newEndpointCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "endpoint",
		Short: "etcdctl's endpoint commands: health of each endpoint, and 'endpoint status' ('kvctl status')",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing command: health or status (the same as 'kvctl status')")
			}
			return usagef("unknown command %q for 'kvctl endpoint': health (each endpoint's gRPC health) or status (the same as 'kvctl status')", args[0])
		},
	}
	status := newStatusCmd(g)
	status.Use, status.Short = "status", "Show every raft group and every node (the same as 'kvctl status')"
	cmd.AddCommand(newEndpointHealthCmd(g), status)
	return cmd
}

// unhealthyError: endpoint health found endpoints that do not serve.
type unhealthyError struct{ bad, all int }

func (e *unhealthyError) Error() string {
	return fmt.Sprintf("%d of %d endpoints unhealthy", e.bad, e.all)
}

type jsonEndpointHealth struct {
	Endpoint string  `json:"endpoint"`
	Health   bool    `json:"health"`
	TookMs   float64 `json:"took_ms"`
	Error    string  `json:"error,omitempty"`
}

type jsonEndpointHealthList struct {
	Endpoints []jsonEndpointHealth `json:"endpoints"`
}

func newEndpointHealthCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Ask every endpoint's gRPC health service whether it serves",
		Long: `Ask the standard gRPC health service (grpc.health.v1, the one
grpc-health-probe uses) of every endpoint whether the node serves: a node
is SERVING once it has joined the cluster and replayed its log, and stops
serving when it shuts down or its WAL failed. Prints one line per
endpoint, "ADDR is healthy: took = D" or "ADDR is unhealthy: WHY", as
etcdctl does; -o json prints {"endpoints":[{"endpoint","health","took_ms","error"}]}.
Exit 3 when some endpoint is not healthy.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withAdmin(cmd, 0, func(ctx context.Context, a *adminConns) error {
				res := jsonEndpointHealthList{Endpoints: []jsonEndpointHealth{}}
				bad := 0
				for _, ep := range a.endpoints {
					h := a.health(ctx, ep)
					if !h.Health {
						bad++
					}
					res.Endpoints = append(res.Endpoints, h)
				}
				out := cmd.OutOrStdout()
				if g.json() {
					if err := writeJSON(out, res); err != nil {
						return err
					}
				} else {
					tw := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
					for _, h := range res.Endpoints {
						if h.Health {
							fmt.Fprintf(tw, "%s is healthy: took = %v\n", h.Endpoint, time.Duration(h.TookMs*float64(time.Millisecond)).Round(10*time.Microsecond))
						} else {
							fmt.Fprintf(tw, "%s is unhealthy: %s\n", h.Endpoint, h.Error)
						}
					}
					if err := tw.Flush(); err != nil {
						return err
					}
				}
				if bad > 0 {
					return &unhealthyError{bad: bad, all: len(a.endpoints)}
				}
				return nil
			})
		},
	}
}

// health asks one endpoint's health service, within the dial timeout for
// connecting and the request timeout for the answer.
func (a *adminConns) health(ctx context.Context, ep string) jsonEndpointHealth {
	start := time.Now()
	h := jsonEndpointHealth{Endpoint: ep}
	cc, err := a.conn(ctx, ep)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, a.dialTimeout)
		var resp *healthpb.HealthCheckResponse
		resp, err = healthpb.NewHealthClient(cc).Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("the node reports %s", resp.GetStatus())
		}
	}
	h.TookMs = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		h.Error = err.Error()
		return h
	}
	h.Health = true
	return h
}

// etcdctlSnapshotPointers are etcdctl's snapshot commands that have no
// kvctl equivalent of the same meaning: each fails naming what to use.
func etcdctlSnapshotPointers() []*cobra.Command {
	pointer := func(name, msg string) *cobra.Command {
		return &cobra.Command{
			Use:    name,
			Short:  "etcdctl's 'snapshot " + name + "': " + msg,
			Hidden: true,
			Args:   cobra.ArbitraryArgs,
			// Flags are etcdctl's, not checked: the command only points.
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return usagef("kvctl has no 'snapshot %s' (etcdctl's): %s", name, msg)
			},
		}
	}
	return []*cobra.Command{
		pointer("save", "take a snapshot with 'kvctl snapshot create'; it is written to the blob store (--store), not to a local file, and is consistent across every partition"),
		pointer("restore", "restore with 'kvnode restore' on each member of the new cluster (kvnode restore --help); it reads the blob store directly"),
		pointer("status", "see a snapshot's cut, time, size and pieces with 'kvctl snapshot show ID' (and all of them with 'kvctl snapshot list')"),
	}
}

// applyWriteOut maps etcdctl's -w/--write-out onto -o: table and simple are
// kvctl's text, json is json.
func (g *globals) applyWriteOut(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("write-out") {
		return nil
	}
	var o string
	switch g.writeOut {
	case "table", "simple":
		o = "text"
	case "json":
		o = "json"
	default:
		return usagef("invalid --write-out %q: kvctl prints text (etcdctl's table and simple) or json; -o text|json is kvctl's own flag", g.writeOut)
	}
	if cmd.Flags().Changed("output") && g.output != o {
		return usagef("--write-out %s and --output %s disagree: give one", g.writeOut, g.output)
	}
	g.output = o
	return nil
}

// prefixEnd is the end of the range of keys that start with prefix: the
// prefix with its last byte below 0xff incremented and what follows
// dropped; nil (to the last key) when there is none, as for "" or
// "\xff\xff".
func prefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] < 0xff {
			end := append([]byte(nil), prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}
