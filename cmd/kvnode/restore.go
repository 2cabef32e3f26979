package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cutkv/cutkv/restore"
	"github.com/cutkv/cutkv/snapshot"
	"github.com/cutkv/cutkv/topology"
)

const restoreUsageHead = `kvnode restore builds one node's data dir of a NEW cluster from a snapshot
in the blob store. Run it once per member of the new cluster (same
--store, snapshot and --initial-cluster; each with its own --id and
--data-dir), then start the nodes. The new cluster may have any number of
members; it keeps the snapshot's partition count and gets a new cluster
id. The snapshot is checked whole first: a damaged or incomplete one is
refused, naming the piece, and nothing is written.

See what a store holds:
  kvnode restore --store file:///backups/cutkv --list

Restore the 3-node cluster's snapshot onto node n1 of a 5-node cluster:
  kvnode restore --store file:///backups/cutkv --snapshot cut-00000000000000000042 \
         --id n1 --data-dir /var/lib/cutkv/n1 \
         --initial-cluster n1=10.0.0.1:7001,n2=10.0.0.2:7001,n3=10.0.0.3:7001,n4=10.0.0.4:7001,n5=10.0.0.5:7001

--snapshot takes a snapshot's id or its cut number (42 for
cut-00000000000000000042). --at TIME restores the newest snapshot taken
at or before TIME instead of a named one: an RFC 3339 time, to the
millisecond as --list prints it (2026-03-01T12:00:00.250Z; a time copied
from --list picks that snapshot), or a duration before now (--at -5m).
--data-dir must not exist or be empty.

Exit status: 0 when the data dir is complete, 1 when the restore failed
(nothing usable is left in --data-dir), 2 for bad flags.

Flags:
`

// restoreFlags are kvnode restore's flags.
type restoreFlags struct {
	fs         *flag.FlagSet
	store      string
	snapshotID string
	at         string
	dataDir    string
	id         string
	initial    string
	token      string
	cluster    string
	partitions uint
	list       bool
	logLevel   string
	logFormat  string
}

func newRestoreFlags(stderr io.Writer) *restoreFlags {
	f := &restoreFlags{fs: flag.NewFlagSet("kvnode restore", flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), restoreUsageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.store, "store", "", "snapshot store URL: file:///dir or s3://BUCKET?region=… (required)")
	fs.StringVar(&f.snapshotID, "snapshot", "", "id of the snapshot to restore, or its cut number (see --list)")
	fs.StringVar(&f.at, "at", "", "restore the newest snapshot taken at or before this time (RFC 3339 as --list prints it, or a duration before now: -5m) instead of --snapshot")
	fs.StringVar(&f.dataDir, "data-dir", "", "the new node's data dir; must not exist or be empty (required)")
	fs.StringVar(&f.id, "id", "", "the new node's id; must appear in --initial-cluster (required)")
	fs.StringVar(&f.initial, "initial-cluster", "", "the NEW cluster's members: id=grpc-host:port,… (required; any number of members)")
	fs.StringVar(&f.token, "initial-cluster-token", "", "token of the new cluster's id (default: derived from the source cluster and the snapshot, the same on every node)")
	fs.StringVar(&f.cluster, "cluster", "", "source cluster id in hex (needed when the store holds several clusters' snapshots)")
	fs.UintVar(&f.partitions, "partitions", 0, "expected partition count; must equal the snapshot's (0: take the snapshot's)")
	fs.BoolVar(&f.list, "list", false, "list the snapshots in --store, per cluster, and exit")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level of the progress lines on stderr: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	return f
}

// options checks the flags and turns them into restore options.
func (f *restoreFlags) options() (restore.Options, error) {
	var o restore.Options
	if f.store == "" {
		return o, errors.New("--store is required (the snapshot store's URL, e.g. file:///backups/cutkv)")
	}
	o.StoreURL = f.store
	if f.cluster != "" {
		id, err := strconv.ParseUint(f.cluster, 16, 64)
		if err != nil || id == 0 {
			return o, fmt.Errorf("--cluster %q: want a cluster id in hex, as --list shows it", f.cluster)
		}
		o.SourceCluster = id
	}
	if f.list {
		return o, nil
	}
	switch {
	case f.snapshotID == "" && f.at == "":
		return o, errors.New("give --snapshot ID or --at TIME (list the snapshots with --list)")
	case f.snapshotID != "" && f.at != "":
		return o, errors.New("give --snapshot or --at, not both")
	case f.dataDir == "":
		return o, errors.New("--data-dir is required")
	case f.id == "":
		return o, errors.New("--id is required")
	case f.initial == "":
		return o, errors.New("--initial-cluster is required: the new cluster's members, id=grpc-host:port,…")
	case f.partitions > topology.MaxPartitions:
		return o, fmt.Errorf("--partitions %d exceeds %d", f.partitions, topology.MaxPartitions)
	}
	if f.at != "" {
		t, err := restore.ParseAt(f.at, time.Now())
		if err != nil {
			return o, fmt.Errorf("--at: %w", err)
		}
		o.At = t
	}
	o.Snapshot, o.DataDir, o.NodeID, o.InitialCluster, o.Token = f.snapshotID, f.dataDir, f.id, f.initial, f.token
	o.Partitions = uint32(f.partitions)
	return o, o.Validate()
}

// runRestore is `kvnode restore`.
func runRestore(args []string, stdout, stderr io.Writer) int {
	f := newRestoreFlags(stderr)
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			f.fs.SetOutput(stdout)
			break
		}
	}
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "kvnode restore: %v\n", err)
		return 2
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kvnode restore: unexpected argument %q\n", f.fs.Arg(0))
		return 2
	}
	opts, err := f.options()
	if err != nil {
		fmt.Fprintf(stderr, "kvnode restore: %v\n", err)
		return 2
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "kvnode restore: %v\n", err)
		return 2
	}
	opts.Logger = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if f.list {
		if err := listSnapshots(ctx, stdout, opts.StoreURL, opts.SourceCluster); err != nil {
			fmt.Fprintf(stderr, "kvnode restore: %v%s\n", err, restoreHint(err, opts.StoreURL))
			return 1
		}
		return 0
	}
	res, err := restore.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "kvnode: %v%s\n", err, restoreHint(err, opts.StoreURL))
		return 1
	}
	printSummary(stdout, res, f)
	return 0
}

// restoreHint says what to do about a failed restore, when the error
// does not say it already.
func restoreHint(err error, store string) string {
	switch {
	case errors.Is(err, snapshot.ErrNoStore):
		return "\n  --store must name the store the cluster's nodes wrote their snapshots to (their --snapshot-store; by default file:// + each node's data dir + /snapshots)"
	case errors.Is(err, restore.ErrNoSnapshot), errors.Is(err, restore.ErrDamaged):
		return fmt.Sprintf("\n  see the snapshots with: kvnode restore --store %s --list", store)
	case errors.Is(err, restore.ErrOptions) && strings.Contains(err.Error(), "clusters"):
		return "\n  pick one with --cluster HEX (kvnode restore --store " + store + " --list shows them)"
	case errors.Is(err, context.Canceled):
		return "\n  interrupted: nothing usable was left in --data-dir"
	}
	return ""
}

func printSummary(w io.Writer, res *restore.Result, f *restoreFlags) {
	groups := make([]string, len(res.Groups))
	for i, g := range res.Groups {
		groups[i] = strconv.FormatUint(g, 10)
	}
	self, _ := res.Layout.Member(res.NodeID)
	fmt.Fprintf(w, "restored snapshot %s (cut %d, %s) of cluster %016x\n",
		res.SnapshotID, res.CutVersion, res.SnapshotTime.UTC().Format(restore.TimeFormat), res.SourceCluster)
	fmt.Fprintf(w, "  data dir:    %s (node %s, groups %s)\n", res.DataDir, res.NodeID, strings.Join(groups, " "))
	fmt.Fprintf(w, "  new cluster: %d partitions, %d members (its id is drawn when its first member, %s, starts)\n",
		res.Layout.Partitions, len(res.Layout.Members), res.Layout.Members[0].ID)
	fmt.Fprintf(w, "  keys:        %d in this node's partitions\n", res.Keys)
	fmt.Fprintf(w, "  read:        %d bytes (and %d to check the snapshot), took %v\n",
		res.BytesRead, res.BytesChecked, res.Duration.Round(time.Millisecond))
	fmt.Fprintf(w, "Restore every member of --initial-cluster the same way, then start each node, e.g. this one:\n")
	fmt.Fprintf(w, "  kvnode --id %s --data-dir %s --peer-addr %s --initial-cluster %s --partitions %d\n",
		res.NodeID, res.DataDir, self.PeerAddr, f.initial, res.Layout.Partitions)
	fmt.Fprintf(w, "  (with its usual --gossip-addr, --http-addr and --join flags; no --initial-cluster-token is needed)\n")
}

// listSnapshots prints the snapshots of every cluster in the store (or of
// cluster only, when not 0).
func listSnapshots(ctx context.Context, w io.Writer, url string, cluster uint64) error {
	ids := []uint64{cluster}
	if cluster == 0 {
		var err error
		if ids, err = snapshot.Clusters(ctx, url); err != nil {
			return err
		}
		if len(ids) == 0 {
			fmt.Fprintf(w, "no snapshots in %s\n", url)
			return nil
		}
	}
	for i, id := range ids {
		st, err := snapshot.OpenStore(ctx, url, id)
		if err != nil {
			return err
		}
		ms, err := st.List(ctx)
		st.Close()
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "cluster %016x: %d snapshots\n", id, len(ms))
		if len(ms) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  SNAPSHOT\tCUT\tTIME\tPARTITIONS\tBYTES")
		for _, m := range ms {
			var size int64
			for _, o := range m.Objects() {
				size += o.Size
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%d\n", m.ID, m.CutVersion, m.Time.UTC().Format(restore.TimeFormat), m.PartitionCount, size)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// isRestore says whether args run the restore subcommand.
func isRestore(args []string) bool { return len(args) > 0 && args[0] == "restore" }
