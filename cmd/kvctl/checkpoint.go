package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// checkpointTimeout is --timeout of checkpoint when not given: the call
// returns only once every node has written every group it holds, which
// takes about as long as writing the largest partition's state to disk.
const checkpointTimeout = time.Minute

func newCheckpointCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoint",
		Short: "Materialize every group on every node now; the WAL is truncated behind",
		Long: `Materialize every group on every node now (DESIGN.md, checkpoints): each
node writes the state of every group it holds, at the group's applied
index, to a materialization file, then truncates its WAL behind the
materializations. Background materializations (kvnode --materialize-interval,
--materialize-bytes) go on as before. Prints one row per node and group:
the index materialized, or why the group was not; a node that could not be
asked gets one row with GROUP "-". Then a summary line.
Exit 8 unless every group was materialized on every node. --timeout
defaults to 1m here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withAdmin(cmd, checkpointTimeout, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.CheckpointResponse
				// starts: a checkpoint whose answer is lost may have been
				// taken; taking another one is harmless.
				err := a.do(ctx, adminCall{name: "checkpoint", starts: true,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.Checkpoint(ctx, &kvpb.CheckpointRequest{Header: h})
						resp = r
						return err
					}})
				if err != nil {
					return err
				}
				rows := checkpointRows(resp.GetGroups())
				out := cmd.OutOrStdout()
				if g.json() {
					err = writeJSON(out, toJSONCheckpoint(resp))
				} else {
					err = writeCheckpointText(out, rows)
				}
				if err != nil {
					return err
				}
				if cf := checkpointFailure(rows); cf != nil {
					return cf
				}
				return nil
			})
		},
	}
}

// checkpointRow is one row of the answer: a group on a node, or a node
// that could not be asked.
type checkpointRow struct {
	*kvpb.GroupCheckpoint
	// notAsked: the node could not be asked (the server's not_asked).
	notAsked bool
}

func checkpointRows(gcs []*kvpb.GroupCheckpoint) []checkpointRow {
	rows := make([]checkpointRow, len(gcs))
	for i, gc := range gcs {
		rows[i] = checkpointRow{GroupCheckpoint: gc, notAsked: gc.GetNotAsked()}
	}
	return rows
}

// checkpointSummary counts the rows.
type checkpointSummary struct {
	groups, materialized int      // rows of groups, and those without error
	nodes                int      // nodes that answered or could not be asked
	failed               []string // "n1/2": group 2 on n1 was not materialized
	notAsked             []string // nodes that could not be asked
}

func summarizeCheckpoint(rows []checkpointRow) checkpointSummary {
	var s checkpointSummary
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.GetNode()] {
			seen[r.GetNode()] = true
			s.nodes++
		}
		switch {
		case r.notAsked:
			s.notAsked = append(s.notAsked, r.GetNode())
		case r.GetError() != "":
			s.groups++
			s.failed = append(s.failed, fmt.Sprintf("%s/%d", r.GetNode(), r.GetGroup()))
		default:
			s.groups++
			s.materialized++
		}
	}
	return s
}

// line is the summary line of the text output.
func (s checkpointSummary) line() string {
	asked := s.nodes - len(s.notAsked)
	nodes := fmt.Sprintf("%d nodes", s.nodes)
	if len(s.notAsked) > 0 {
		nodes = fmt.Sprintf("%d of %d nodes (not asked: %s)", asked, s.nodes, strings.Join(s.notAsked, ", "))
	}
	return fmt.Sprintf("%d of %d groups materialized on %s", s.materialized, s.groups, nodes)
}

// writeCheckpointText prints one row per node and group, then the
// summary line.
func writeCheckpointText(w io.Writer, rows []checkpointRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tGROUP\tMATERIALIZED\tERROR")
	for _, r := range rows {
		group, index := fmt.Sprint(r.GetGroup()), fmt.Sprint(r.GetMaterializedIndex())
		if r.notAsked {
			group = "-"
		}
		if r.GetError() != "" {
			index = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", dash(r.GetNode()), group, index, dash(r.GetError()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, summarizeCheckpoint(rows).line())
	return err
}

// checkpointFailedError: some group was not materialized, or some node
// could not be asked (exit 8).
type checkpointFailedError struct{ s checkpointSummary }

// checkpointFailure returns the error for an answer that is not a full
// checkpoint, nil for one that is.
func checkpointFailure(rows []checkpointRow) *checkpointFailedError {
	s := summarizeCheckpoint(rows)
	if len(rows) == 0 || len(s.failed) > 0 || len(s.notAsked) > 0 {
		return &checkpointFailedError{s: s}
	}
	return nil
}

func (e *checkpointFailedError) Error() string {
	var parts []string
	if len(e.s.failed) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d groups not materialized (%s)", len(e.s.failed), e.s.groups, listSome(e.s.failed, 8)))
	}
	if len(e.s.notAsked) > 0 {
		parts = append(parts, "could not ask "+strings.Join(e.s.notAsked, ", "))
	}
	if len(parts) == 0 {
		parts = append(parts, "the cluster reported no groups")
	}
	return "checkpoint incomplete: " + strings.Join(parts, "; ")
}

// hint says what to do.
func (e *checkpointFailedError) hint() string {
	var hints []string
	if len(e.s.failed) > 0 {
		hints = append(hints, "A group that was not materialized keeps its WAL tail, so nothing is lost: see the ERROR column (a full disk?), fix the cause, then run 'kvctl checkpoint' again.")
	}
	if len(e.s.notAsked) > 0 || len(e.s.failed) == 0 {
		hints = append(hints, "A node that could not be asked is down or unreachable: see 'kvctl status', then run 'kvctl checkpoint' again.")
	}
	return strings.Join(hints, " ")
}

// listSome joins the first n of items, and says how many more there are.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// The JSON shape of checkpoint (docs/cli.md): kv.proto's
// CheckpointResponse.

type jsonGroupCheckpoint struct {
	Node              string `json:"node"`
	Group             uint64 `json:"group"`
	MaterializedIndex uint64 `json:"materialized_index"`
	Error             string `json:"error,omitempty"`
	NotAsked          bool   `json:"not_asked,omitempty"`
}

type jsonCheckpoint struct {
	Header jsonHeader            `json:"header"`
	Groups []jsonGroupCheckpoint `json:"groups"`
}

func toJSONCheckpoint(resp *kvpb.CheckpointResponse) jsonCheckpoint {
	j := jsonCheckpoint{Header: headerFromPB(resp.GetHeader()), Groups: []jsonGroupCheckpoint{}}
	for _, gc := range resp.GetGroups() {
		j.Groups = append(j.Groups, jsonGroupCheckpoint{Node: gc.GetNode(), Group: gc.GetGroup(), MaterializedIndex: gc.GetMaterializedIndex(), Error: gc.GetError(), NotAsked: gc.GetNotAsked()})
	}
	return j
}
