package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// Default --timeout of the snapshot commands. create uploads every
// partition's handle (with --full, a whole materialization of each) and
// check reads back every object of a snapshot: both take about as long as
// moving the snapshot's bytes. delete and prune list and read every
// manifest of the cluster, then delete pieces one by one. list reads every
// manifest, show one.
const (
	snapshotCreateTimeout = 30 * time.Minute // create and check
	snapshotGCTimeout     = 10 * time.Minute // delete and prune
	snapshotReadTimeout   = time.Minute      // list and show
)

// snapshotReadAttempt bounds one attempt of list and show, so that a node
// that hangs leaves time to ask another within snapshotReadTimeout.
const snapshotReadAttempt = 20 * time.Second

// shaPrefix is how many hex digits of a SHA-256 show --pieces prints.
const shaPrefix = 12

const storeFlagHelp = "blob store URL (file:///dir or s3://bucket/prefix); empty: the serving node's default, file:// + its data dir + /snapshots"

func newSnapshotCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Take, list, show, check and delete snapshots in a blob store",
		Long: `Take, list, show, check and delete snapshots (DESIGN.md, "Snapshots"). A
snapshot is a completed consistent cut plus, per partition, a base
materialization and the changelog pieces up to the cut, stored in a blob
store under the cluster's id. Pieces are shared between snapshots.

ID is a snapshot's id or the number of its cut: 42 is
cut-00000000000000000042.

Every command takes --store URL (file:///dir or s3://bucket/prefix). Empty
means the serving node's default: file:// + its data dir + /snapshots. The
calls run on group 0's leader, so the default store is that node's
directory, and another node's once the leadership moves: on a cluster of
more than one node give every command the same shared --store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing command: create, list, show, check, delete or prune")
		},
	}
	cmd.AddCommand(newSnapshotCreateCmd(g), newSnapshotListCmd(g), newSnapshotShowCmd(g), newSnapshotCheckCmd(g),
		newSnapshotDeleteCmd(g), newSnapshotPruneCmd(g))
	cmd.AddCommand(etcdctlSnapshotPointers()...)
	return cmd
}

func addStoreFlag(cmd *cobra.Command, store *string) {
	cmd.Flags().StringVar(store, "store", "", storeFlagHelp)
}

// snapshotID checks the ID argument and turns a cut number ("7") into
// its snapshot's id; the server checks the rest of the rules for ids.
func snapshotID(args []string) (string, error) {
	if strings.TrimSpace(args[0]) == "" {
		return "", usagef("empty snapshot ID: see 'kvctl snapshot list'")
	}
	return resolveSnapshotID(args[0]), nil
}

func newSnapshotCreateCmd(g *globals) *cobra.Command {
	var (
		store      string
		full       bool
		cutVersion uint64
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Take a snapshot and upload it to the store",
		Long: `Take a snapshot: take a consistent cut (or, with --cut V, use completed cut V)
and upload every partition's handle to the store, storing only the pieces
the store does not have yet (--full: a fresh materialization of every
partition instead). Progress goes to stderr, one line per update (one line
rewritten in place when stderr is a terminal); then the result goes to
stdout: the snapshot's id, cut version and partitions, what was uploaded
and reused, how long it took and the store.
A stream that ends without a result exits 4: the snapshot may not have been
written, see 'kvctl snapshot list'. --timeout defaults to 30m here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withAdmin(cmd, snapshotCreateTimeout, func(ctx context.Context, a *adminConns) error {
				prog := newProgressPrinter(cmd.ErrOrStderr())
				defer prog.finish()
				var (
					stream grpc.ServerStreamingClient[kvpb.CreateSnapshotResponse]
					first  *kvpb.CreateSnapshotResponse
				)
				// An attempt lasts until the first message, which shows that
				// the node took the call; the rest of the stream is read
				// below and not retried, as a second call would take a
				// second snapshot. No attempt bound: the stream lives on ctx,
				// which do does not cancel when send returns.
				err := a.do(ctx, adminCall{name: "snapshot create", starts: true,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						s, err := c.CreateSnapshot(ctx, &kvpb.CreateSnapshotRequest{Header: h, Store: store, CutVersion: cutVersion, Full: full})
						if err != nil {
							return err
						}
						m, err := s.Recv()
						if err == io.EOF {
							// The node ended the call, with OK, without a
							// word: a definite answer, with no result.
							stream, first = nil, nil
							return nil
						}
						if err != nil {
							return err
						}
						stream, first = s, m
						return nil
					}})
				if err != nil {
					return err
				}
				resp, err := recvSnapshotResult(stream, first, prog)
				if err != nil {
					return err
				}
				prog.finish()
				out := cmd.OutOrStdout()
				if g.json() {
					return writeJSON(out, jsonSnapshotCreateResponse{Header: headerFromPB(resp.GetHeader()), Result: toJSONSnapshotResult(resp.GetResult())})
				}
				return writeSnapshotResultText(out, resp.GetResult())
			})
		},
	}
	addStoreFlag(cmd, &store)
	cmd.Flags().BoolVar(&full, "full", false, "upload a fresh materialization of every partition instead of reusing stored pieces")
	cmd.Flags().Uint64Var(&cutVersion, "cut", 0, "use this completed cut (see 'kvctl cut list'); 0: take a new cut")
	return cmd
}

// errNoResult: create's stream ended, without an error, before its result.
var errNoResult = errors.New("the stream ended without a result: the snapshot may not have been written")

// recvSnapshotResult reads create's stream from its first message m (nil:
// the stream ended before any) until the result, showing the progress. A
// stream that ends or fails before the result gives a *client.OpError:
// ErrOutcomeUnknown when the snapshot may still have been written, no
// sentinel when the node said it failed.
func recvSnapshotResult(s grpc.ServerStreamingClient[kvpb.CreateSnapshotResponse], m *kvpb.CreateSnapshotResponse, prog *progressPrinter) (*kvpb.CreateSnapshotResponse, error) {
	var h *kvpb.ResponseHeader // the newest header seen
	for m != nil {
		if m.GetHeader() != nil {
			h = m.GetHeader()
		}
		if m.GetResult() != nil {
			if m.GetHeader() == nil {
				m.Header = h
			}
			return m, nil
		}
		if p := m.GetProgress(); p != nil {
			prog.show(p)
		}
		var err error
		m, err = s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			kind := client.ErrOutcomeUnknown
			if _, ok := status.FromError(err); ok {
				if _, ambiguous, k := classifyAdmin(err); !ambiguous {
					kind = k // the node ended the call with a definite failure
				}
			}
			return nil, &client.OpError{Op: "snapshot create", Kind: kind, Err: err}
		}
	}
	return nil, &client.OpError{Op: "snapshot create", Kind: client.ErrOutcomeUnknown, Err: errNoResult}
}

func newSnapshotListCmd(g *globals) *cobra.Command {
	var store string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the snapshots in the store, oldest cut first",
		Long: `List the snapshots in the store, oldest cut first: id, cut version, time
of the cut (RFC 3339, UTC), number of partitions, and the number and total
size of the objects each references (shared pieces count in each).
--timeout defaults to 1m here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withAdmin(cmd, snapshotReadTimeout, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.ListSnapshotsResponse
				err := a.do(ctx, adminCall{name: "snapshot list", attempt: snapshotReadAttempt,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.ListSnapshots(ctx, &kvpb.ListSnapshotsRequest{Header: h, Store: store})
						resp = r
						return err
					}})
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if g.json() {
					j := jsonSnapshotList{Header: headerFromPB(resp.GetHeader()), Snapshots: []jsonSnapshot{}, Store: resp.GetStore()}
					for _, s := range resp.GetSnapshots() {
						j.Snapshots = append(j.Snapshots, toJSONSnapshot(s))
					}
					return writeJSON(out, j)
				}
				return writeSnapshotListText(out, resp.GetStore(), resp.GetSnapshots())
			})
		},
	}
	addStoreFlag(cmd, &store)
	return cmd
}

func newSnapshotShowCmd(g *globals) *cobra.Command {
	var (
		store  string
		pieces bool
	)
	cmd := &cobra.Command{
		Use:   "show ID|CUT",
		Short: "Show one snapshot: its cut and each partition's handle",
		Long: `Show one snapshot: its id, cut version, time, cluster, partitions, key hash,
objects and size; then per partition the cut's position (POS), the end of
its chain (END: the CutFinish entry), its base materialization (index and
name, "-" for none), the number of changelog pieces and the bytes of its
objects. -v (--pieces) also lists every piece: name, range of entries, the
first entry used, size and the start of its SHA-256. Exit 1 when the store
has no snapshot ID. --timeout defaults to 1m here.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := snapshotID(args)
			if err != nil {
				return err
			}
			return g.withAdmin(cmd, snapshotReadTimeout, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.GetSnapshotResponse
				err := a.do(ctx, adminCall{name: "snapshot show", attempt: snapshotReadAttempt,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.GetSnapshot(ctx, &kvpb.GetSnapshotRequest{Header: h, Store: store, Id: id})
						resp = r
						return err
					}})
				if err != nil {
					return snapshotNotFound(id, err)
				}
				out := cmd.OutOrStdout()
				if g.json() {
					return writeJSON(out, jsonSnapshotShow{Header: headerFromPB(resp.GetHeader()), Snapshot: toJSONSnapshot(resp.GetSnapshot())})
				}
				return writeSnapshotText(out, resp.GetSnapshot(), pieces)
			})
		},
	}
	addStoreFlag(cmd, &store)
	cmd.Flags().BoolVarP(&pieces, "pieces", "v", false, "also list every piece of every partition")
	return cmd
}

func newSnapshotCheckCmd(g *globals) *cobra.Command {
	var store string
	cmd := &cobra.Command{
		Use:   "check ID|CUT",
		Short: "Read every object of a snapshot and verify it",
		Long: `Read every object of a snapshot back from the store and verify it: presence,
size and SHA-256 against the manifest, each piece's own format, and that
every partition's chain reaches the cut. The node stops at the first fault.
Prints "snapshot ID ok: N objects, B bytes verified", or exits 9 naming the
partition and piece at fault and why (also when the snapshot's manifest
cannot be read). Exit 1 when the store has no snapshot ID. --timeout
defaults to 30m here.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := snapshotID(args)
			if err != nil {
				return err
			}
			return g.withAdmin(cmd, snapshotCreateTimeout, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.CheckSnapshotResponse
				err := a.do(ctx, adminCall{name: "snapshot check",
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.CheckSnapshot(ctx, &kvpb.CheckSnapshotRequest{Header: h, Store: store, Id: id})
						resp = r
						return err
					}})
				if status.Code(err) == codes.DataLoss {
					// The node could not read the snapshot's manifest (a
					// fault in a piece comes in the answer): damaged too.
					resp, err = &kvpb.CheckSnapshotResponse{Error: serverMessage(err)}, nil
				}
				if err != nil {
					return snapshotNotFound(id, err)
				}
				out := cmd.OutOrStdout()
				if g.json() {
					err = writeJSON(out, toJSONSnapshotCheck(resp))
				} else if resp.GetOk() {
					_, err = fmt.Fprintf(out, "snapshot %s ok: %d objects, %d bytes verified\n", id, resp.GetObjects(), resp.GetBytes())
				}
				if err != nil {
					return err
				}
				if !resp.GetOk() {
					return &snapshotDamagedError{id: id, resp: resp}
				}
				return nil
			})
		},
	}
	addStoreFlag(cmd, &store)
	return cmd
}

func newSnapshotDeleteCmd(g *globals) *cobra.Command {
	var (
		store   string
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "delete ID|CUT",
		Short: "Delete a snapshot and the pieces no other snapshot uses",
		Long: `Delete a snapshot's manifest, then every piece of the cluster that no
remaining snapshot names (pieces an upload in flight reserved are kept).
Prints the snapshots deleted and the number of pieces deleted (-v: their
names), the pieces kept for uploads in flight and the stale locks removed.
Exit 1 when the store has no snapshot ID. --timeout defaults to 10m here.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := snapshotID(args)
			if err != nil {
				return err
			}
			return g.withAdmin(cmd, snapshotGCTimeout, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.SnapshotGCResponse
				// starts: a delete whose answer is lost may have deleted
				// the snapshot; a second one then finds no snapshot ID.
				err := a.do(ctx, adminCall{name: "snapshot delete", starts: true,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.DeleteSnapshot(ctx, &kvpb.DeleteSnapshotRequest{Header: h, Store: store, Id: id})
						resp = r
						return err
					}})
				if err != nil {
					return snapshotNotFound(id, err)
				}
				return g.writeSnapshotGC(cmd.OutOrStdout(), resp, verbose)
			})
		},
	}
	addStoreFlag(cmd, &store)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list the pieces deleted and kept, and the stale locks removed")
	return cmd
}

func newSnapshotPruneCmd(g *globals) *cobra.Command {
	var (
		store      string
		keepLast   uint32
		keepWithin time.Duration
		verbose    bool
	)
	cmd := &cobra.Command{
		Use:   "prune [--keep-last N] [--keep-within D]",
		Short: "Delete old snapshots: keep the newest N and those younger than D",
		Long: `Delete every snapshot but the newest --keep-last N and those whose cut is
younger than --keep-within D (at least one of them must be set: with both
0 prune would delete everything), then every piece that no remaining
snapshot names, as delete does. Prints what delete prints.
--timeout defaults to 10m here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if keepWithin < 0 {
				return usagef("invalid --keep-within %v: must be 0 or more", keepWithin)
			}
			if keepWithin > 0 && keepWithin < time.Millisecond {
				return usagef("invalid --keep-within %v: must be 0 or at least 1ms", keepWithin)
			}
			if keepLast == 0 && keepWithin == 0 {
				return usagef("refusing to prune every snapshot: set --keep-last N or --keep-within D (or both)")
			}
			return g.withAdmin(cmd, snapshotGCTimeout, func(ctx context.Context, a *adminConns) error {
				var resp *kvpb.SnapshotGCResponse
				// starts: a prune whose answer is lost may have deleted
				// snapshots; pruning again is harmless.
				err := a.do(ctx, adminCall{name: "snapshot prune", starts: true,
					send: func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error {
						r, err := c.PruneSnapshots(ctx, &kvpb.PruneSnapshotsRequest{Header: h, Store: store,
							KeepLast: keepLast, KeepWithinMs: keepWithin.Milliseconds()})
						resp = r
						return err
					}})
				if err != nil {
					return err
				}
				return g.writeSnapshotGC(cmd.OutOrStdout(), resp, verbose)
			})
		},
	}
	addStoreFlag(cmd, &store)
	cmd.Flags().Uint32Var(&keepLast, "keep-last", 0, "keep the newest N snapshots")
	cmd.Flags().DurationVar(&keepWithin, "keep-within", 0, "keep every snapshot whose cut is younger than this (e.g. 168h)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list the pieces deleted and kept, and the stale locks removed")
	return cmd
}

// snapshotNotFoundError: the store has no snapshot of that id (exit 1).
type snapshotNotFoundError struct {
	id  string
	err error // the call's error, NotFound
}

// snapshotNotFound turns a NotFound answer to a call about snapshot id
// into a *snapshotNotFoundError; other errors are returned as they are.
func snapshotNotFound(id string, err error) error {
	if status.Code(err) == codes.NotFound && !hasReason(err, reasonNoStore) {
		return &snapshotNotFoundError{id: id, err: err}
	}
	return err
}

func (e *snapshotNotFoundError) Error() string {
	return fmt.Sprintf("snapshot %s not found: %s", e.id, serverMessage(e.err))
}

func (e *snapshotNotFoundError) Unwrap() error { return e.err }

// serverMessage is the server's words in a call's error, without the
// call's.
func serverMessage(err error) string {
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(err, &st) {
		return st.GRPCStatus().Message()
	}
	return err.Error()
}

// snapshotDamagedError: snapshot check found a fault (exit 9).
type snapshotDamagedError struct {
	id   string
	resp *kvpb.CheckSnapshotResponse
}

func (e *snapshotDamagedError) Error() string {
	var where []string
	if p := e.resp.GetPartition(); p != 0 {
		where = append(where, fmt.Sprintf("partition %d", p))
	}
	if piece := e.resp.GetPiece(); piece != "" {
		where = append(where, "piece "+piece)
	}
	// The node's error may repeat where the fault is, as
	// snapshot.CheckError does: say it once.
	why := strings.TrimPrefix(e.resp.GetError(), fmt.Sprintf("snapshot %s: partition %d: piece %s: ", e.id, e.resp.GetPartition(), e.resp.GetPiece()))
	if why == "" {
		why = "the node reported it damaged without saying why"
	}
	if len(where) == 0 {
		return fmt.Sprintf("snapshot %s is damaged: %s", e.id, why)
	}
	return fmt.Sprintf("snapshot %s is damaged: %s: %s", e.id, strings.Join(where, ", "), why)
}

func (e *snapshotDamagedError) hint() string {
	return fmt.Sprintf("Do not restore from it: restore from an older snapshot ('kvctl snapshot list'), after checking it too, as snapshots share pieces. "+
		"Delete the damaged one with 'kvctl snapshot delete %s', and take a new one with 'kvctl snapshot create --full', which stores fresh pieces.", e.id)
}

// reasonNoStore is the ErrorInfo reason of a store that does not exist
// (rpc.ReasonNoStore).
const reasonNoStore = "SNAPSHOT_STORE_NOT_FOUND"

// reasonStoreAccess is the ErrorInfo reason of a store that refused the
// node's credentials (rpc.ReasonStoreAccess).
const reasonStoreAccess = "SNAPSHOT_STORE_ACCESS"

// hasReason says whether err carries a cutkv ErrorInfo with reason.
func hasReason(err error, reason string) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == notAppliedDomain && info.GetReason() == reason {
			return true
		}
	}
	return false
}

// isSnapshot says whether cmd is one of the snapshot commands.
func isSnapshot(cmd *cobra.Command) bool {
	return cmd != nil && cmd.HasParent() && cmd.Parent().Name() == "snapshot"
}

// describeSnapshot gives the exit code and message of the snapshot
// commands' own errors; ok is false for the others.
func describeSnapshot(err error, cmd *cobra.Command) (code int, msg string, ok bool) {
	var (
		damaged  *snapshotDamagedError
		notFound *snapshotNotFoundError
	)
	switch {
	case errors.As(err, &damaged):
		return exitSnapshotDamaged, fmt.Sprintf("%v\n%s", err, damaged.hint()), true
	case errors.As(err, &notFound):
		return exitNotFound, fmt.Sprintf("%v\nList the snapshots in the store with 'kvctl snapshot list' (with the same --store).", err), true
	case !isSnapshot(cmd):
		return 0, "", false
	case hasReason(err, reasonNoStore):
		return exitNotFound, fmt.Sprintf("%v\nThe store does not exist where the node looked: create it (for file://, the directory, the same on every node; for s3://, the bucket), "+
			"or give --store the URL of an existing store (without --store the nodes use their --snapshot-store, by default file:// + the data dir + /snapshots).", err), true
	case status.Code(err) == codes.NotFound:
		return exitNotFound, fmt.Sprintf("%v\nList the snapshots with 'kvctl snapshot list' (with the same --store), and the completed cuts with 'kvctl cut list'.", err), true
	case errors.Is(err, client.ErrOutcomeUnknown) && cmd.Name() == "create":
		return exitUnknown, fmt.Sprintf("%v\nSee whether the snapshot is in 'kvctl snapshot list' (with the same --store); if not, run 'kvctl snapshot create' again.", err), true
	case errors.Is(err, client.ErrOutcomeUnknown):
		return exitUnknown, fmt.Sprintf("%v\nSome snapshots and pieces may have been deleted: see 'kvctl snapshot list'; running 'kvctl snapshot %s' again is harmless.", err, cmd.Name()), true
	case errors.Is(err, client.ErrInvalidArgument):
		return exitUsage, fmt.Sprintf("%v\nThe node refused the request: check --store (a file:// or s3:// URL) and the snapshot ID ('kvctl snapshot list').", err), true
	case cmd.Name() == "create" && status.Code(err) == codes.AlreadyExists:
		return exitNotFound, fmt.Sprintf("%v\nThe store has a snapshot of that cut already: see 'kvctl snapshot list' (with the same --store).", err), true
	case cmd.Name() == "create" && !errors.Is(err, client.ErrUnavailable):
		return exitNotFound, fmt.Sprintf("%v\nThe node reported that the snapshot failed (with --cut V, V must be a completed cut: see 'kvctl cut list'): "+
			"see the node's log and 'kvctl snapshot list', then run 'kvctl snapshot create' again.", err), true
	}
	return 0, "", false
}

// progressPrinter shows create's progress: one line per message, or, when
// w is a terminal, one line rewritten in place.
type progressPrinter struct {
	w       io.Writer
	tty     bool
	pending bool // tty: a line is shown without its newline
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	return &progressPrinter{w: w, tty: isTerminal(w)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *progressPrinter) show(sp *kvpb.SnapshotProgress) {
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", progressLine(sp)) // ESC [ K: clear the rest of the line
		p.pending = true
		return
	}
	fmt.Fprintln(p.w, progressLine(sp))
}

// finish ends the line in place, if any, so that what follows starts on
// a line of its own.
func (p *progressPrinter) finish() {
	if p.pending {
		fmt.Fprintln(p.w)
		p.pending = false
	}
}

// progressLine renders a progress message: the phase, then what is
// known so far: "cut", "upload: cut 42, 3/8 partitions, 12.5 MiB uploaded".
func progressLine(p *kvpb.SnapshotProgress) string {
	phase := p.GetPhase()
	if phase == "" {
		phase = "progress"
	}
	var parts []string
	if v := p.GetCutVersion(); v != 0 {
		parts = append(parts, fmt.Sprintf("cut %d", v))
	}
	if p.GetPartitionsTotal() != 0 {
		parts = append(parts, fmt.Sprintf("%d/%d partitions", p.GetPartitionsDone(), p.GetPartitionsTotal()))
	}
	if p.GetPartitionsTotal() != 0 || p.GetBytesUploaded() != 0 {
		parts = append(parts, humanBytes(p.GetBytesUploaded())+" uploaded")
	}
	if len(parts) == 0 {
		return phase
	}
	return phase + ": " + strings.Join(parts, ", ")
}

// rfc3339Ms renders a Unix-millisecond time as RFC 3339 in UTC with its
// milliseconds, as kvnode restore --list prints it and --at reads it
// back; "-" for 0.
func rfc3339Ms(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(snapshotTimeFormat)
}

// snapshotTimeFormat is restore.TimeFormat, which kvnode restore --at
// reads back (kvctl does not link the restore and snapshot packages,
// which hold the storage engine; a test checks the two agree).
const snapshotTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// resolveSnapshotID is snapshot.ResolveID: a cut number in decimal names
// the snapshot of that cut, anything else is an id (a test checks the two
// agree).
func resolveSnapshotID(arg string) string {
	if arg == "" || strings.TrimLeft(arg, "0123456789") != "" {
		return arg
	}
	v, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		return arg
	}
	return fmt.Sprintf("cut-%020d", v)
}

func durationMs(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// writeSnapshotResultText prints create's result.
func writeSnapshotResultText(w io.Writer, r *kvpb.CreateSnapshotResult) error {
	s := r.GetSnapshot()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", s.GetId())
	fmt.Fprintf(tw, "cut\t%d\n", s.GetCutVersion())
	fmt.Fprintf(tw, "partitions\t%d\n", s.GetPartitionCount())
	fmt.Fprintf(tw, "bytes uploaded\t%s\n", humanBytes(r.GetBytesUploaded()))
	fmt.Fprintf(tw, "pieces uploaded\t%d\n", r.GetPiecesUploaded())
	fmt.Fprintf(tw, "pieces reused\t%d\n", r.GetPiecesReused())
	if r.GetBaseFileBytes() > 0 || r.GetBaseFilesReused() > 0 {
		fmt.Fprintf(tw, "base files uploaded\t%s (%s rewritten by compactions)\n", humanBytes(r.GetBaseFileBytes()), humanBytes(r.GetBaseCompactedBytes()))
		fmt.Fprintf(tw, "base files reused\t%d (%s)\n", r.GetBaseFilesReused(), humanBytes(r.GetBaseBytesReused()))
	}
	fmt.Fprintf(tw, "duration\t%s\n", durationMs(r.GetDurationMs()))
	fmt.Fprintf(tw, "store\t%s\n", dash(r.GetStore()))
	return tw.Flush()
}

// writeSnapshotListText prints the store, then one row per snapshot.
func writeSnapshotListText(w io.Writer, store string, snaps []*kvpb.SnapshotInfo) error {
	if store != "" {
		fmt.Fprintf(w, "store  %s\n\n", store)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCUT\tTIME\tPARTITIONS\tOBJECTS\tSIZE")
	for _, s := range snaps {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\n", s.GetId(), s.GetCutVersion(), rfc3339Ms(s.GetTimeUnixMs()),
			s.GetPartitionCount(), s.GetObjects(), humanBytes(s.GetTotalBytes()))
	}
	return tw.Flush()
}

// writeSnapshotText prints a snapshot's fields, a table of its partitions
// and, with pieces, a table of their pieces.
func writeSnapshotText(w io.Writer, s *kvpb.SnapshotInfo, pieces bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", s.GetId())
	fmt.Fprintf(tw, "cut\t%d\n", s.GetCutVersion())
	fmt.Fprintf(tw, "time\t%s\n", rfc3339Ms(s.GetTimeUnixMs()))
	fmt.Fprintf(tw, "cluster\t%s\n", dash(s.GetCluster()))
	fmt.Fprintf(tw, "partitions\t%d\n", s.GetPartitionCount())
	fmt.Fprintf(tw, "key hash\t%s\n", dash(s.GetKeyHash()))
	fmt.Fprintf(tw, "objects\t%d\n", s.GetObjects())
	fmt.Fprintf(tw, "size\t%s\n", humanBytes(s.GetTotalBytes()))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tPOS\tEND\tBASE\tPIECES\tBYTES")
	for _, p := range s.GetPartitions() {
		base, size := "-", uint64(max(p.GetBaseSize(), 0))
		if p.GetBaseName() != "" {
			base = fmt.Sprintf("%d %s", p.GetBaseIndex(), p.GetBaseName())
		}
		for _, pc := range p.GetPieces() {
			size += uint64(max(pc.GetSize(), 0))
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%s\n", p.GetPartition(), p.GetPos(), p.GetEnd(), base, len(p.GetPieces()), humanBytes(size))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !pieces {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tPIECE\tRANGE\tFROM\tSIZE\tSHA256")
	for _, p := range s.GetPartitions() {
		for _, pc := range p.GetPieces() {
			sha := pc.GetSha256()
			if len(sha) > shaPrefix {
				sha = sha[:shaPrefix]
			}
			fmt.Fprintf(tw, "%d\t%s\t%d-%d\t%d\t%s\t%s\n", p.GetPartition(), pc.GetName(), pc.GetLo(), pc.GetHi(), pc.GetFrom(),
				humanBytes(uint64(max(pc.GetSize(), 0))), dash(sha))
		}
	}
	return tw.Flush()
}

// writeSnapshotGC prints what delete or prune did.
func (g *globals) writeSnapshotGC(w io.Writer, r *kvpb.SnapshotGCResponse, verbose bool) error {
	if g.json() {
		return writeJSON(w, toJSONSnapshotGC(r))
	}
	var b strings.Builder
	section := func(what string, names []string, listed bool) {
		b.WriteString(what + "\n")
		if !listed {
			return
		}
		for _, n := range names {
			b.WriteString("  " + n + "\n")
		}
	}
	section("deleted "+count(len(r.GetDeletedSnapshots()), "snapshot"), r.GetDeletedSnapshots(), true)
	section("deleted "+count(len(r.GetDeletedPieces()), "piece"), r.GetDeletedPieces(), verbose)
	section("kept "+count(len(r.GetReserved()), "unreferenced piece")+" reserved by uploads in flight", r.GetReserved(), verbose)
	section("removed "+count(len(r.GetStaleLocks()), "stale lock"), r.GetStaleLocks(), verbose)
	_, err := io.WriteString(w, b.String())
	return err
}

// count renders "1 piece", "2 pieces".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// The JSON shapes of the snapshot commands (docs/cli.md): kv.proto's
// messages, field for field, with numbers as JSON numbers and every
// repeated field an array (empty rather than absent).

type jsonSnapshotPiece struct {
	Name   string `json:"name"`
	Lo     uint64 `json:"lo"`
	Hi     uint64 `json:"hi"`
	From   uint64 `json:"from"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

type jsonSnapshotPartition struct {
	Partition  uint64              `json:"partition"`
	Pos        uint64              `json:"pos"`
	End        uint64              `json:"end"`
	BaseIndex  uint64              `json:"base_index"`
	BaseName   string              `json:"base_name"`
	BaseSize   int64               `json:"base_size"`
	BaseSHA256 string              `json:"base_sha256"`
	Pieces     []jsonSnapshotPiece `json:"pieces"`
}

type jsonSnapshot struct {
	ID             string `json:"id"`
	CutVersion     uint64 `json:"cut_version"`
	TimeUnixMs     int64  `json:"time_unix_ms"`
	PartitionCount uint32 `json:"partition_count"`
	KeyHash        string `json:"key_hash"`
	Cluster        string `json:"cluster"`
	TotalBytes     uint64 `json:"total_bytes"`
	Objects        uint32 `json:"objects"`
	// Partitions are only in show's answer (GetSnapshot), as in kv.proto.
	Partitions []jsonSnapshotPartition `json:"partitions,omitempty"`
}

type jsonSnapshotResult struct {
	Snapshot       jsonSnapshot `json:"snapshot"`
	BytesUploaded  uint64       `json:"bytes_uploaded"`
	PiecesUploaded uint32       `json:"pieces_uploaded"`
	PiecesReused   uint32       `json:"pieces_reused"`
	DurationMs     int64        `json:"duration_ms"`
	Store          string       `json:"store"`
	// Checkpoint bases: file bytes uploaded, files referenced instead.
	BaseFileBytes   uint64 `json:"base_file_bytes"`
	BaseFilesReused uint32 `json:"base_files_reused"`
	BaseBytesReused uint64 `json:"base_bytes_reused"`
	// Of base_file_bytes, SSTs that compactions rewrote.
	BaseCompactedBytes uint64 `json:"base_compacted_bytes"`
}

type jsonSnapshotCreateResponse struct {
	Header jsonHeader         `json:"header"`
	Result jsonSnapshotResult `json:"result"`
}

type jsonSnapshotList struct {
	Header    jsonHeader     `json:"header"`
	Snapshots []jsonSnapshot `json:"snapshots"`
	Store     string         `json:"store"`
}

type jsonSnapshotShow struct {
	Header   jsonHeader   `json:"header"`
	Snapshot jsonSnapshot `json:"snapshot"`
}

type jsonSnapshotCheck struct {
	Header    jsonHeader `json:"header"`
	OK        bool       `json:"ok"`
	Partition uint64     `json:"partition,omitempty"`
	Piece     string     `json:"piece,omitempty"`
	Error     string     `json:"error,omitempty"`
	Objects   uint32     `json:"objects"`
	Bytes     uint64     `json:"bytes"`
}

type jsonSnapshotGC struct {
	Header           jsonHeader `json:"header"`
	DeletedSnapshots []string   `json:"deleted_snapshots"`
	DeletedPieces    []string   `json:"deleted_pieces"`
	Reserved         []string   `json:"reserved"`
	StaleLocks       []string   `json:"stale_locks"`
}

func toJSONSnapshot(s *kvpb.SnapshotInfo) jsonSnapshot {
	j := jsonSnapshot{ID: s.GetId(), CutVersion: s.GetCutVersion(), TimeUnixMs: s.GetTimeUnixMs(), PartitionCount: s.GetPartitionCount(),
		KeyHash: s.GetKeyHash(), Cluster: s.GetCluster(), TotalBytes: s.GetTotalBytes(), Objects: s.GetObjects()}
	for _, p := range s.GetPartitions() {
		jp := jsonSnapshotPartition{Partition: p.GetPartition(), Pos: p.GetPos(), End: p.GetEnd(), BaseIndex: p.GetBaseIndex(),
			BaseName: p.GetBaseName(), BaseSize: p.GetBaseSize(), BaseSHA256: p.GetBaseSha256(), Pieces: []jsonSnapshotPiece{}}
		for _, pc := range p.GetPieces() {
			jp.Pieces = append(jp.Pieces, jsonSnapshotPiece{Name: pc.GetName(), Lo: pc.GetLo(), Hi: pc.GetHi(), From: pc.GetFrom(),
				Size: pc.GetSize(), SHA256: pc.GetSha256()})
		}
		j.Partitions = append(j.Partitions, jp)
	}
	return j
}

func toJSONSnapshotResult(r *kvpb.CreateSnapshotResult) jsonSnapshotResult {
	return jsonSnapshotResult{Snapshot: toJSONSnapshot(r.GetSnapshot()), BytesUploaded: r.GetBytesUploaded(), PiecesUploaded: r.GetPiecesUploaded(),
		PiecesReused: r.GetPiecesReused(), DurationMs: r.GetDurationMs(), Store: r.GetStore(),
		BaseFileBytes: r.GetBaseFileBytes(), BaseFilesReused: r.GetBaseFilesReused(), BaseBytesReused: r.GetBaseBytesReused(),
		BaseCompactedBytes: r.GetBaseCompactedBytes()}
}

func toJSONSnapshotCheck(r *kvpb.CheckSnapshotResponse) jsonSnapshotCheck {
	return jsonSnapshotCheck{Header: headerFromPB(r.GetHeader()), OK: r.GetOk(), Partition: r.GetPartition(), Piece: r.GetPiece(),
		Error: r.GetError(), Objects: r.GetObjects(), Bytes: r.GetBytes()}
}

func toJSONSnapshotGC(r *kvpb.SnapshotGCResponse) jsonSnapshotGC {
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return jsonSnapshotGC{Header: headerFromPB(r.GetHeader()), DeletedSnapshots: nonNil(r.GetDeletedSnapshots()),
		DeletedPieces: nonNil(r.GetDeletedPieces()), Reserved: nonNil(r.GetReserved()), StaleLocks: nonNil(r.GetStaleLocks())}
}
