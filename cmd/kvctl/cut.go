package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// cutCreateTimeout is --timeout of cut create and check when not given: it
// must outlast the servers' --cut-timeout (10s by default), or kvctl would
// give up on cuts that are about to complete.
const cutCreateTimeout = 30 * time.Second

// cutListLimit is the default of cut list --limit.
const cutListLimit = 20

func newCutCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cut",
		Short: "Take, list and show consistent cuts",
		Long: `Take, list and show consistent cuts. A cut is a consistent snapshot
point across all partitions (DESIGN.md, consistent cuts); group 0 records
each cut's state and, per partition, where it fell in the log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing command: create, list or show")
		},
	}
	cmd.AddCommand(newCutCreateCmd(g), newCutListCmd(g), newCutShowCmd(g))
	return cmd
}

func newCutCreateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "create",
		Short: "Take a consistent cut and wait until it completes or fails",
		Long: `Take a consistent cut and wait until it completes or fails, then print
it as cut show does. If a cut is already in flight, wait for that one and
print it instead. Exit 6 when the cluster recorded the cut as failed.
--timeout defaults to 30s here, longer than the servers' --cut-timeout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withAdmin(cmd, cutCreateTimeout, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.CreateCutResponse
				err := a.do(ctx, adminCall{name: "cut create", starts: true,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.CreateCut(ctx, &kvpb.CreateCutRequest{Header: h})
						resp = r
						return err
					}})
				if err != nil {
					return err
				}
				if err := g.writeCut(cmd.OutOrStdout(), resp.GetHeader(), resp.GetCut()); err != nil {
					return err
				}
				if resp.GetCut().GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
					return &cutFailedError{cut: resp.GetCut()}
				}
				return nil
			})
		},
	}
}

func newCutListCmd(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the cuts the cluster remembers, newest first",
		Long: `List the cuts group 0 remembers, newest first: version, state, start
time, duration, number of partitions, and why a failed cut failed.
--limit bounds the number of cuts (0: all the cluster keeps).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 || int64(limit) > int64(^uint32(0)) {
				return usagef("invalid --limit %d: must be 0 (all) or more", limit)
			}
			return g.withAdmin(cmd, 0, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.ListCutsResponse
				err := a.do(ctx, adminCall{name: "cut list", attempt: client.DefaultRequestTimeout,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.ListCuts(ctx, &kvpb.ListCutsRequest{Header: h, Limit: uint32(limit)})
						resp = r
						return err
					}})
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if g.json() {
					j := jsonCutList{Header: headerFromPB(resp.GetHeader()), Cuts: []jsonCut{}}
					for _, c := range resp.GetCuts() {
						j.Cuts = append(j.Cuts, toJSONCut(c))
					}
					return writeJSON(out, j)
				}
				return writeCutListText(out, resp.GetCuts())
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", cutListLimit, "list at most this many cuts, newest first (0: all)")
	return cmd
}

func newCutShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show VERSION",
		Short: "Show one cut: its state and where it fell in each partition",
		Long: `Show one cut: its version, state, start and finish times, duration, the
error of a failed cut, and per partition the cut's position in the log
(POS), the index of its CutFinish entry, and how the transactions active
at the cut ended (BEFORE, AFTER the cut, ABORTED). Exit 1 when the cluster
does not remember the cut.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || v == 0 {
				return usagef("invalid cut version %q: want a number from 1 up", args[0])
			}
			return g.withAdmin(cmd, 0, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.GetCutResponse
				err := a.do(ctx, adminCall{name: "cut show", attempt: client.DefaultRequestTimeout,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.GetCut(ctx, &kvpb.GetCutRequest{Header: h, Version: v})
						resp = r
						return err
					}})
				if status.Code(err) == codes.FailedPrecondition {
					return &cutNotFoundError{version: v, err: err}
				}
				if err != nil {
					return err
				}
				return g.writeCut(cmd.OutOrStdout(), resp.GetHeader(), resp.GetCut())
			})
		},
	}
}

// cutFailedError: cut create ended with a cut the cluster recorded as
// failed (exit 6).
type cutFailedError struct{ cut *kvpb.CutInfo }

func (e *cutFailedError) Error() string {
	why := e.cut.GetError()
	if why == "" {
		why = "the cluster reported it " + cutState(e.cut.GetState())
	}
	return fmt.Sprintf("cut %d failed: %s", e.cut.GetVersion(), why)
}

// cutNotFoundError: cut show named a cut group 0 does not remember
// (exit 1).
type cutNotFoundError struct {
	version uint64
	err     error // the GetCut call's error, FailedPrecondition
}

func (e *cutNotFoundError) Error() string {
	msg := e.err.Error()
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(e.err, &st) {
		msg = st.GRPCStatus().Message() // the server's words, without the call's
	}
	return fmt.Sprintf("cut %d not found: %s", e.version, msg)
}

func (e *cutNotFoundError) Unwrap() error { return e.err }

// cutState names a state as kvctl prints it.
func cutState(s kvpb.CutState) string {
	switch s {
	case kvpb.CutState_CUT_STATE_RUNNING:
		return "running"
	case kvpb.CutState_CUT_STATE_COMPLETED:
		return "completed"
	case kvpb.CutState_CUT_STATE_FAILED:
		return "failed"
	}
	return "unknown"
}

// cutDuration is how long a cut took, "-" while it runs.
func cutDuration(c *kvpb.CutInfo) string {
	start, end := c.GetStartedUnixMs(), c.GetFinishedUnixMs()
	if c.GetState() == kvpb.CutState_CUT_STATE_RUNNING || start == 0 || end < start {
		return "-"
	}
	return (time.Duration(end-start) * time.Millisecond).String()
}

// unixMs renders a Unix-millisecond time as RFC 3339 in UTC with
// milliseconds, "-" for 0.
func unixMs(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// writeCut prints one cut, as cut create and cut show do.
func (g *globals) writeCut(w io.Writer, h *kvpb.ResponseHeader, c *kvpb.CutInfo) error {
	if g.json() {
		return writeJSON(w, jsonCutResponse{Header: headerFromPB(h), Cut: toJSONCut(c)})
	}
	return writeCutText(w, c)
}

// writeCutText prints a cut's fields, then a table of its partitions.
func writeCutText(w io.Writer, c *kvpb.CutInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%d\n", c.GetVersion())
	fmt.Fprintf(tw, "state\t%s\n", cutState(c.GetState()))
	fmt.Fprintf(tw, "started\t%s\n", unixMs(c.GetStartedUnixMs()))
	fmt.Fprintf(tw, "finished\t%s\n", unixMs(c.GetFinishedUnixMs()))
	fmt.Fprintf(tw, "duration\t%s\n", cutDuration(c))
	if c.GetError() != "" {
		fmt.Fprintf(tw, "error\t%s\n", c.GetError())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tPOS\tFINISH\tBEFORE\tAFTER\tABORTED")
	for _, p := range c.GetPartitions() {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\n", p.GetPartition(), p.GetPos(), p.GetFinishIndex(), p.GetBefore(), p.GetAfter(), p.GetAborted())
	}
	return tw.Flush()
}

// writeCutListText prints one row per cut.
func writeCutListText(w io.Writer, cuts []*kvpb.CutInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tSTARTED\tDURATION\tPARTITIONS\tERROR")
	for _, c := range cuts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", c.GetVersion(), cutState(c.GetState()), unixMs(c.GetStartedUnixMs()),
			cutDuration(c), len(c.GetPartitions()), dash(c.GetError()))
	}
	return tw.Flush()
}

// The JSON shapes of the cut commands (docs/cli.md): the fields of
// kv.proto's messages, with numbers as JSON numbers and the state as
// "running", "completed" or "failed".

type jsonCutPartition struct {
	Partition   uint64 `json:"partition"`
	Pos         uint64 `json:"pos"`
	FinishIndex uint64 `json:"finish_index"`
	Before      uint32 `json:"before"`
	After       uint32 `json:"after"`
	Aborted     uint32 `json:"aborted"`
}

type jsonCut struct {
	Version        uint64             `json:"version"`
	State          string             `json:"state"`
	StartedUnixMs  int64              `json:"started_unix_ms"`
	FinishedUnixMs int64              `json:"finished_unix_ms"`
	Partitions     []jsonCutPartition `json:"partitions"`
	Error          string             `json:"error,omitempty"`
}

type jsonCutResponse struct {
	Header jsonHeader `json:"header"`
	Cut    jsonCut    `json:"cut"`
}

type jsonCutList struct {
	Header jsonHeader `json:"header"`
	Cuts   []jsonCut  `json:"cuts"`
}

func toJSONCut(c *kvpb.CutInfo) jsonCut {
	j := jsonCut{
		Version:        c.GetVersion(),
		State:          cutState(c.GetState()),
		StartedUnixMs:  c.GetStartedUnixMs(),
		FinishedUnixMs: c.GetFinishedUnixMs(),
		Partitions:     []jsonCutPartition{},
		Error:          c.GetError(),
	}
	for _, p := range c.GetPartitions() {
		j.Partitions = append(j.Partitions, jsonCutPartition{Partition: p.GetPartition(), Pos: p.GetPos(), FinishIndex: p.GetFinishIndex(),
			Before: p.GetBefore(), After: p.GetAfter(), Aborted: p.GetAborted()})
	}
	return j
}
