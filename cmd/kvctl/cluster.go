package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

func errorsIsNotFound(err error) bool { return errors.Is(err, client.ErrNotFound) }

func newMembersCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the cluster's members",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				var h client.Header
				ms, err := c.Members(ctx, client.WithHeader(&h))
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if g.json() {
					j := jsonMembers{Header: toJSONHeader(h), Members: []jsonMember{}}
					for _, m := range ms {
						jm := jsonMember{ID: m.ID, RaftID: m.RaftID, GRPCAddr: m.GRPCAddr, PeerAddr: m.PeerAddr, GossipAddr: m.GossipAddr, HTTPAddr: m.HTTPAddr, State: m.State.String()}
						if !m.Since.IsZero() {
							jm.SinceUnixMs = m.Since.UnixMilli()
						}
						j.Members = append(j.Members, jm)
					}
					return writeJSON(out, j)
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATE\tGRPC\tPEER\tGOSSIP\tHTTP\tSINCE")
				for _, m := range ms {
					since := "-"
					if !m.Since.IsZero() {
						since = m.Since.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.State, dash(m.GRPCAddr), dash(m.PeerAddr), dash(m.GossipAddr), dash(m.HTTPAddr), since)
				}
				return tw.Flush()
			})
		},
	}
}

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show every raft group and every node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Sent as an admin call: the client's Status has no checkpoint
			// fields.
			return g.withAdmin(cmd, 0, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.StatusResponse
				err := a.do(ctx, adminCall{name: "status", attempt: client.DefaultRequestTimeout,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.Status(ctx, &kvpb.StatusRequest{Header: h})
						resp = r
						return err
					}})
				if err != nil {
					return err
				}
				if g.json() {
					return writeJSON(cmd.OutOrStdout(), toJSONStatus(resp))
				}
				return writeStatusText(cmd.OutOrStdout(), resp)
			})
		},
	}
}

// writeStatusText prints the group table, then the node table.
func writeStatusText(out io.Writer, st *kvpb.StatusResponse) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tLEADER\tTERM\tCOMMIT\tAPPLIED\tMATERIALIZED\tMATS\tWAL TAIL\tREPLICAS")
	for _, gr := range st.GetGroups() {
		mat := "-"
		if gr.GetMaterializedIndex() != 0 {
			mat = fmt.Sprint(gr.GetMaterializedIndex())
		}
		tail := fmt.Sprintf("%d (%s)", gr.GetWalTailEntries(), humanBytes(gr.GetWalTailBytes()))
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", gr.GetId(), dash(gr.GetLeader()), gr.GetTerm(), gr.GetCommitIndex(), gr.GetAppliedIndex(),
			mat, gr.GetMaterializations(), tail, dash(strings.Join(gr.GetReplicas(), ",")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	withErr := false
	for _, n := range st.GetNodes() {
		withErr = withErr || n.GetError() != ""
	}
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	hdr := "NODE\tSERVING\tWAL\tFREE DISK"
	if withErr {
		hdr += "\tERROR"
	}
	fmt.Fprintln(tw, hdr)
	for _, n := range st.GetNodes() {
		serving, wal, free := "no", "-", "-"
		if n.GetServing() {
			serving = "yes"
		}
		if n.GetError() == "" {
			wal, free = humanBytes(uint64(max(n.GetWalBytes(), 0))), humanBytes(n.GetDiskFreeBytes())
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s", n.GetId(), serving, wal, free)
		if withErr {
			row += "\t" + dash(n.GetError())
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func toJSONStatus(st *kvpb.StatusResponse) jsonStatus {
	j := jsonStatus{Header: headerFromPB(st.GetHeader()), ClusterID: st.GetClusterId(), Partitions: st.GetPartitions(), Groups: []jsonGroup{}, Nodes: []jsonNode{}}
	for _, gr := range st.GetGroups() {
		reps := gr.GetReplicas()
		if reps == nil {
			reps = []string{}
		}
		j.Groups = append(j.Groups, jsonGroup{ID: gr.GetId(), Leader: gr.GetLeader(), Term: gr.GetTerm(), CommitIndex: gr.GetCommitIndex(),
			AppliedIndex: gr.GetAppliedIndex(), Replicas: reps, ReportedBy: gr.GetReportedBy(), Keys: gr.GetKeys(),
			MaterializedIndex: gr.GetMaterializedIndex(), Materializations: gr.GetMaterializations(),
			WALTailEntries: gr.GetWalTailEntries(), WALTailBytes: gr.GetWalTailBytes()})
	}
	for _, n := range st.GetNodes() {
		j.Nodes = append(j.Nodes, jsonNode{ID: n.GetId(), Serving: n.GetServing(), WALBytes: n.GetWalBytes(), WALFirstIndex: n.GetWalFirstIndex(),
			WALLastIndex: n.GetWalLastIndex(), DiskFreeBytes: n.GetDiskFreeBytes(), DiskTotalBytes: n.GetDiskTotalBytes(), Version: n.GetVersion(), Error: n.GetError()})
	}
	return j
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
