package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/bench/internal/benchconn"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

const mib = 1 << 20

// snapResult is one CreateSnapshot call, as create and loop print it (one
// JSON line each).
type snapResult struct {
	// Start is when the call was made.
	Start time.Time `json:"start"`
	Full  bool      `json:"full"`
	ID    string    `json:"id,omitempty"`
	Cut   uint64    `json:"cut,omitempty"`
	// DurationMs is the node's own measure (cut, upload, manifest);
	// WallS the client's, from the call to the result.
	DurationMs int64   `json:"duration_ms,omitempty"`
	WallS      float64 `json:"wall_s"`
	// CutS is when the first message after the cut phase arrived: the
	// time to take the cut.
	CutS           float64 `json:"cut_s,omitempty"`
	BytesUploaded  uint64  `json:"bytes_uploaded"`
	PiecesUploaded uint32  `json:"pieces_uploaded"`
	PiecesReused   uint32  `json:"pieces_reused"`
	// TotalBytes and Objects describe the whole snapshot (every object it
	// references, uploaded now or before).
	TotalBytes uint64 `json:"total_bytes,omitempty"`
	Objects    uint32 `json:"objects,omitempty"`
	Store      string `json:"store,omitempty"`
	Error      string `json:"error,omitempty"`
}

// createOnce takes one snapshot through the first endpoint that accepts
// the call (any node forwards it to group 0's leader).
func createOnce(ctx context.Context, conns []*grpc.ClientConn, store string, full bool) snapResult {
	r := snapResult{Start: time.Now().UTC(), Full: full}
	var err error
	for _, cc := range conns {
		if err = createOn(ctx, cc, store, full, &r); err == nil {
			return r
		}
		if r.CutS > 0 || ctx.Err() != nil {
			break // it got as far as the cut: do not take a second one
		}
	}
	r.WallS = time.Since(r.Start).Seconds()
	r.Error = err.Error()
	return r
}

func createOn(ctx context.Context, cc *grpc.ClientConn, store string, full bool, r *snapResult) error {
	t0 := time.Now()
	stream, err := kvrpc.NewClusterClient(cc).CreateSnapshot(ctx, &kvpb.CreateSnapshotRequest{Store: store, Full: full})
	if err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return errors.New("stream ended without a result")
		}
		if err != nil {
			return err
		}
		if p := m.GetProgress(); p != nil && p.GetPhase() != "cut" && r.CutS == 0 {
			r.CutS = time.Since(t0).Seconds()
		}
		if res := m.GetResult(); res != nil {
			r.WallS = time.Since(t0).Seconds()
			r.ID = res.GetSnapshot().GetId()
			r.Cut = res.GetSnapshot().GetCutVersion()
			r.DurationMs = res.GetDurationMs()
			r.BytesUploaded = res.GetBytesUploaded()
			r.PiecesUploaded = res.GetPiecesUploaded()
			r.PiecesReused = res.GetPiecesReused()
			r.TotalBytes = res.GetSnapshot().GetTotalBytes()
			r.Objects = res.GetSnapshot().GetObjects()
			r.Store = res.GetStore()
			return nil
		}
	}
}

func printJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs only
	}
	fmt.Println(string(b))
}

// runCreate takes one snapshot and prints its snapResult; it fails when
// the snapshot failed (after printing it).
func runCreate(args []string) error {
	fs := benchconn.NewCommand("create")
	store := fs.String("store", "", "snapshot store URL (empty: the nodes' --snapshot-store)")
	full := fs.Bool("full", false, "upload a fresh materialization of every partition (no reuse)")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	conns, closeAll, err := fs.Connect(args)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r := createOnce(ctx, conns, *store, *full)
	printJSON(r)
	if r.Error != "" {
		return errors.New(r.Error)
	}
	return nil
}

// runLoop starts a snapshot every -every (the next one right away when
// one takes longer) until -for has passed or SIGTERM arrives; the one in
// flight then completes, so that the next measurement starts without
// one. It prints one snapResult per snapshot.
func runLoop(args []string) error {
	fs := benchconn.NewCommand("loop")
	store := fs.String("store", "", "snapshot store URL (empty: the nodes' --snapshot-store)")
	full := fs.Bool("full", false, "full snapshots")
	every := fs.Duration("every", time.Second, "start a snapshot this often (0: back to back)")
	dur := fs.Duration("for", time.Minute, "stop starting snapshots after this long")
	conns, closeAll, err := fs.Connect(args)
	if err != nil {
		return err
	}
	defer closeAll()
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	end := time.Now().Add(*dur)
	for next := time.Now(); time.Now().Before(end) && sig.Err() == nil; {
		next = next.Add(*every)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		printJSON(createOnce(ctx, conns, *store, *full))
		cancel()
		if wait := time.Until(next); wait > 0 {
			select {
			case <-sig.Done():
			case <-time.After(wait):
			}
		} else {
			next = time.Now()
		}
	}
	return nil
}

func readLoopFile(path string) ([]snapResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []snapResult
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r snapResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// quantile returns the nearest-rank q-quantile of sorted xs (0 if empty).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// runLoopCell prints "N (F failed), p50 / max S s, M MiB" from loop's
// output: the snapshots that succeeded, their wall times and the bytes
// they uploaded in all. The first error goes to stderr.
func runLoopCell(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: benchsnap loopcell FILE")
	}
	rs, err := readLoopFile(args[0])
	if err != nil {
		return err
	}
	var took []float64
	var bytes uint64
	failed := 0
	for _, r := range rs {
		if r.Error != "" {
			if failed == 0 {
				fmt.Fprintf(os.Stderr, "first snapshot error: %s\n", r.Error)
			}
			failed++
			continue
		}
		took = append(took, r.WallS)
		bytes += r.BytesUploaded
	}
	sort.Float64s(took)
	fmt.Printf("%d (%d failed), %.2f / %.2f s, %.1f MiB\n", len(took), failed, quantile(took, 0.5), quantile(took, 1), float64(bytes)/mib)
	return nil
}

// checked is what check prints.
type checked struct {
	ID      string  `json:"id"`
	OK      bool    `json:"ok"`
	Objects uint32  `json:"objects"`
	Bytes   uint64  `json:"bytes"`
	TookS   float64 `json:"took_s"`
	Error   string  `json:"error,omitempty"`
}

// runCheck has the cluster read and verify every object of a snapshot
// (Cluster.CheckSnapshot; the newest one without -id) and prints the
// outcome; it fails when the snapshot is damaged.
func runCheck(args []string) error {
	fs := benchconn.NewCommand("check")
	store := fs.String("store", "", "snapshot store URL (empty: the nodes' --snapshot-store)")
	id := fs.String("id", "", "snapshot id (empty: the newest)")
	conns, closeAll, err := fs.Connect(args)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c := kvrpc.NewClusterClient(conns[0])
	if *id == "" {
		resp, err := c.ListSnapshots(ctx, &kvpb.ListSnapshotsRequest{Store: *store})
		if err != nil {
			return err
		}
		snaps := resp.GetSnapshots() // oldest cut first
		if len(snaps) == 0 {
			return errors.New("the store holds no snapshot of this cluster")
		}
		*id = snaps[len(snaps)-1].GetId()
	}
	t0 := time.Now()
	resp, err := c.CheckSnapshot(ctx, &kvpb.CheckSnapshotRequest{Store: *store, Id: *id})
	if err != nil {
		return err
	}
	out := checked{ID: *id, OK: resp.GetOk(), Objects: resp.GetObjects(), Bytes: resp.GetBytes(), TookS: time.Since(t0).Seconds()}
	if !out.OK {
		out.Error = fmt.Sprintf("partition %d, piece %s: %s", resp.GetPartition(), resp.GetPiece(), resp.GetError())
	}
	printJSON(out)
	if !out.OK {
		return fmt.Errorf("snapshot %s damaged: %s", *id, out.Error)
	}
	return nil
}
