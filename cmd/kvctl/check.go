package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

func newCheckCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Compare every partition's replicas: same hash at the same index",
		Long: `Compare every partition's replicas. Each partition's leader puts a hash
entry in the partition's log; every replica hashes its state when it applies
that entry, so all replicas hash the same index. Prints one row per replica:
partition, index, node, hash, number of keys, and the partition's result:
OK (every replica answered with the same hash), DIVERGED (replicas answered
with different hashes), or UNCHECKED (the partition, or one of its replicas,
could not be asked; those that answered agree).
Exit 7 unless every partition is OK. --timeout defaults to 30s here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withAdmin(cmd, cutCreateTimeout, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.CheckResponse
				err := a.do(ctx, adminCall{name: "check",
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.Check(ctx, &kvpb.CheckRequest{Header: h})
						resp = r
						return err
					}})
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if g.json() {
					err = writeJSON(out, toJSONCheck(resp))
				} else {
					err = writeCheckText(out, resp.GetPartitions())
				}
				if err != nil {
					return err
				}
				var cf checkFailedError
				for _, pc := range resp.GetPartitions() {
					switch checkResult(pc) {
					case resultDiverged:
						cf.diverged = append(cf.diverged, pc.GetPartition())
					case resultUnchecked:
						cf.unchecked = append(cf.unchecked, pc.GetPartition())
					}
				}
				if len(cf.diverged)+len(cf.unchecked) > 0 {
					return &cf
				}
				return nil
			})
		},
	}
}

// The result of one partition's check.
const (
	resultOK        = "OK"
	resultDiverged  = "DIVERGED"
	resultUnchecked = "UNCHECKED"
)

// checkResult is OK when the server found the replicas consistent,
// DIVERGED when two replicas answered with different hashes, else
// UNCHECKED: the partition could not be hashed, or a replica could not be
// asked and the others agree.
func checkResult(pc *kvpb.PartitionCheck) string {
	if pc.GetConsistent() && pc.GetError() == "" {
		return resultOK
	}
	hashes := map[uint64]bool{}
	for _, r := range pc.GetReplicas() {
		if r.GetError() == "" {
			hashes[r.GetHash()] = true
		}
	}
	if len(hashes) > 1 {
		return resultDiverged
	}
	return resultUnchecked
}

// checkFailedError: some partition is not OK (exit 7).
type checkFailedError struct {
	diverged, unchecked []uint64
}

func (e *checkFailedError) Error() string {
	var parts []string
	if len(e.diverged) > 0 {
		parts = append(parts, "replicas diverge in "+partitionList(e.diverged))
	}
	if len(e.unchecked) > 0 {
		parts = append(parts, partitionList(e.unchecked)+" could not be checked")
	}
	return strings.Join(parts, "; ")
}

// hint says what to do about the partitions that are not OK.
func (e *checkFailedError) hint() string {
	var hints []string
	if len(e.diverged) > 0 {
		hints = append(hints, "Replicas that diverge hold different data at the same log index: keep their data dirs for inspection.")
	}
	if len(e.unchecked) > 0 {
		hints = append(hints, "A partition that could not be checked has a replica that is down or lagging, or no leader: see 'kvctl status', then run 'kvctl check' again.")
	}
	return strings.Join(hints, " ")
}

// partitionList renders "partition 3" or "partitions 1, 4".
func partitionList(ps []uint64) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	if len(ps) == 1 {
		return "partition " + s[0]
	}
	return "partitions " + strings.Join(s, ", ")
}

// hashText renders a replica's hash as 16 hex digits, "" when the replica
// could not be asked.
func hashText(r *kvpb.ReplicaHash) string {
	if r.GetError() != "" {
		return ""
	}
	return fmt.Sprintf("%016x", r.GetHash())
}

// writeCheckText prints one row per replica (one row for a partition that
// could not be hashed), with an ERROR column when some row has an error.
func writeCheckText(w io.Writer, pcs []*kvpb.PartitionCheck) error {
	withErr := false
	for _, pc := range pcs {
		withErr = withErr || pc.GetError() != ""
		for _, r := range pc.GetReplicas() {
			withErr = withErr || r.GetError() != ""
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	hdr := "PARTITION\tINDEX\tNODE\tHASH\tKEYS\tRESULT"
	if withErr {
		hdr += "\tERROR"
	}
	fmt.Fprintln(tw, hdr)
	row := func(pc *kvpb.PartitionCheck, node, hash, keys, errText string) {
		index := "-"
		if pc.GetIndex() != 0 {
			index = fmt.Sprint(pc.GetIndex())
		}
		line := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s", pc.GetPartition(), index, dash(node), dash(hash), dash(keys), checkResult(pc))
		if withErr {
			line += "\t" + dash(errText)
		}
		fmt.Fprintln(tw, line)
	}
	for _, pc := range pcs {
		if len(pc.GetReplicas()) == 0 {
			row(pc, "", "", "", pc.GetError())
			continue
		}
		for _, r := range pc.GetReplicas() {
			keys := ""
			if r.GetError() == "" {
				keys = fmt.Sprint(r.GetKeys())
			}
			errText := r.GetError()
			if errText == "" {
				errText = pc.GetError()
			}
			row(pc, r.GetNode(), hashText(r), keys, errText)
		}
	}
	return tw.Flush()
}

// The JSON shape of check (docs/cli.md): kv.proto's CheckResponse, with
// the hash as 16 hex digits (a 64-bit number does not survive a JSON
// number in most tools).

type jsonReplicaHash struct {
	Node  string `json:"node"`
	Hash  string `json:"hash"`
	Keys  uint64 `json:"keys"`
	Error string `json:"error,omitempty"`
}

type jsonPartitionCheck struct {
	Partition  uint64            `json:"partition"`
	Index      uint64            `json:"index"`
	Replicas   []jsonReplicaHash `json:"replicas"`
	Consistent bool              `json:"consistent"`
	Error      string            `json:"error,omitempty"`
}

type jsonCheck struct {
	Header     jsonHeader           `json:"header"`
	Partitions []jsonPartitionCheck `json:"partitions"`
}

func toJSONCheck(resp *kvpb.CheckResponse) jsonCheck {
	j := jsonCheck{Header: headerFromPB(resp.GetHeader()), Partitions: []jsonPartitionCheck{}}
	for _, pc := range resp.GetPartitions() {
		jp := jsonPartitionCheck{Partition: pc.GetPartition(), Index: pc.GetIndex(), Replicas: []jsonReplicaHash{},
			Consistent: pc.GetConsistent(), Error: pc.GetError()}
		for _, r := range pc.GetReplicas() {
			jp.Replicas = append(jp.Replicas, jsonReplicaHash{Node: r.GetNode(), Hash: hashText(r), Keys: r.GetKeys(), Error: r.GetError()})
		}
		j.Partitions = append(j.Partitions, jp)
	}
	return j
}
