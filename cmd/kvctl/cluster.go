package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cutkv/cutkv/client"
	"github.com/spf13/cobra"
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
						jm := jsonMember{ID: m.ID, RaftID: m.RaftID, GRPCAddr: m.GRPCAddr, GossipAddr: m.GossipAddr, HTTPAddr: m.HTTPAddr, State: m.State.String()}
						if !m.Since.IsZero() {
							jm.SinceUnixMs = m.Since.UnixMilli()
						}
						j.Members = append(j.Members, jm)
					}
					return writeJSON(out, j)
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATE\tGRPC\tGOSSIP\tHTTP\tSINCE")
				for _, m := range ms {
					since := "-"
					if !m.Since.IsZero() {
						since = m.Since.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.State, dash(m.GRPCAddr), dash(m.GossipAddr), dash(m.HTTPAddr), since)
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
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				var h client.Header
				st, err := c.Status(ctx, client.WithHeader(&h))
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if g.json() {
					j := jsonStatus{Header: toJSONHeader(h), ClusterID: st.ClusterID, Partitions: st.Partitions, Groups: []jsonGroup{}, Nodes: []jsonNode{}}
					for _, gr := range st.Groups {
						reps := gr.Replicas
						if reps == nil {
							reps = []string{}
						}
						j.Groups = append(j.Groups, jsonGroup{ID: gr.ID, Leader: gr.Leader, Term: gr.Term, CommitIndex: gr.CommitIndex,
							AppliedIndex: gr.AppliedIndex, Replicas: reps, ReportedBy: gr.ReportedBy, Keys: gr.Keys})
					}
					for _, n := range st.Nodes {
						j.Nodes = append(j.Nodes, jsonNode{ID: n.ID, Serving: n.Serving, WALBytes: n.WALBytes, WALFirstIndex: n.WALFirstIndex,
							WALLastIndex: n.WALLastIndex, DiskFreeBytes: n.DiskFreeBytes, DiskTotalBytes: n.DiskTotalBytes, Version: n.Version, Error: n.Error})
					}
					return writeJSON(out, j)
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "GROUP\tLEADER\tTERM\tCOMMIT\tAPPLIED\tREPLICAS")
				for _, gr := range st.Groups {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\n", gr.ID, dash(gr.Leader), gr.Term, gr.CommitIndex, gr.AppliedIndex, dash(strings.Join(gr.Replicas, ",")))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintln(out)
				withErr := false
				for _, n := range st.Nodes {
					withErr = withErr || n.Error != ""
				}
				tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				hdr := "NODE\tSERVING\tWAL\tFREE DISK"
				if withErr {
					hdr += "\tERROR"
				}
				fmt.Fprintln(tw, hdr)
				for _, n := range st.Nodes {
					serving, wal, free := "no", "-", "-"
					if n.Serving {
						serving = "yes"
					}
					if n.Error == "" {
						wal, free = humanBytes(uint64(max(n.WALBytes, 0))), humanBytes(n.DiskFreeBytes)
					}
					row := fmt.Sprintf("%s\t%s\t%s\t%s", n.ID, serving, wal, free)
					if withErr {
						row += "\t" + dash(n.Error)
					}
					fmt.Fprintln(tw, row)
				}
				return tw.Flush()
			})
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
