package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/bench/internal/benchconn"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// localApplied returns the applied index of every group the node behind
// cc holds, as it reports them itself.
func localApplied(ctx context.Context, cc *grpc.ClientConn) (map[uint64]uint64, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := kvrpc.NewClusterClient(cc).Status(cctx, &kvpb.StatusRequest{LocalOnly: true})
	if err != nil {
		return nil, err
	}
	got := map[uint64]uint64{}
	for _, g := range resp.GetGroups() {
		got[g.GetId()] = g.GetAppliedIndex()
	}
	return got, nil
}

// runApplied prints, as JSON, every node's applied index per group:
// {"n1": {"0": 12, "1": 3400, ...}, ...}.
func runApplied(args []string) error {
	fs := benchconn.NewCommand("applied")
	if err := fs.Parse(args); err != nil {
		return err
	}
	all := map[string]map[uint64]uint64{}
	for _, ep := range benchconn.Split(fs.Endpoints()) {
		cc, err := benchconn.Dial(ep)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := kvrpc.NewClusterClient(cc).Status(ctx, &kvpb.StatusRequest{LocalOnly: true})
		cancel()
		cc.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", ep, err)
		}
		if len(resp.GetNodes()) == 0 {
			return fmt.Errorf("%s: status names no node", ep)
		}
		m := map[uint64]uint64{}
		for _, g := range resp.GetGroups() {
			m[g.GetId()] = g.GetAppliedIndex()
		}
		all[resp.GetNodes()[0].GetId()] = m
	}
	return json.NewEncoder(os.Stdout).Encode(all)
}

// checkpointOnce calls Cluster.Checkpoint on the first endpoint that
// answers and returns how long it took, the groups materialized and the
// per-group errors.
func checkpointOnce(ctx context.Context, conns []*grpc.ClientConn) (took time.Duration, groups int, errs []string, err error) {
	for _, cc := range conns {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		t0 := time.Now()
		var resp *kvpb.CheckpointResponse
		resp, err = kvrpc.NewClusterClient(cc).Checkpoint(cctx, &kvpb.CheckpointRequest{})
		took = time.Since(t0)
		cancel()
		if err != nil {
			continue
		}
		for _, g := range resp.GetGroups() {
			if g.GetError() != "" {
				errs = append(errs, fmt.Sprintf("%s/g%d: %s", g.GetNode(), g.GetGroup(), g.GetError()))
			} else {
				groups++
			}
		}
		return took, groups, errs, nil
	}
	return took, 0, nil, err
}

// runCheckpoint takes one checkpoint and prints
// "took=SECONDS groups=N errors=M"; it fails when any group failed.
func runCheckpoint(args []string) error {
	fs := benchconn.NewCommand("checkpoint")
	conns, closeAll, err := fs.Connect(args)
	if err != nil {
		return err
	}
	defer closeAll()
	took, groups, errs, err := checkpointOnce(context.Background(), conns)
	if err != nil {
		return err
	}
	fmt.Printf("took=%.3f groups=%d errors=%d\n", took.Seconds(), groups, len(errs))
	if len(errs) > 0 {
		return fmt.Errorf("checkpoint: %s", strings.Join(errs, "; "))
	}
	return nil
}

// runCheckpointLoop takes checkpoints back to back for a while (or until
// SIGTERM, after the checkpoint in flight) and prints "checkpoints=N failed=F p50=S max=S" (seconds).
func runCheckpointLoop(args []string) error {
	fs := benchconn.NewCommand("ckloop")
	dur := fs.Duration("for", time.Minute, "stop starting checkpoints after this long")
	every := fs.Duration("every", 0, "wait this long between two checkpoints (0: back to back)")
	conns, closeAll, err := fs.Connect(args)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	end := time.Now().Add(*dur)
	var took []float64
	failed := 0
	var firstErr string
	for time.Now().Before(end) && ctx.Err() == nil {
		// The signal stops the loop between checkpoints: the one in
		// flight completes, so the next run starts without one.
		d, _, errs, err := checkpointOnce(context.Background(), conns)
		switch {
		case err != nil:
			failed++
			if firstErr == "" {
				firstErr = err.Error()
			}
		case len(errs) > 0:
			failed++
			if firstErr == "" {
				firstErr = errs[0]
			}
		default:
			took = append(took, d.Seconds())
		}
		if *every > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(*every):
			}
		}
	}
	sort.Float64s(took)
	p50, mx := 0.0, 0.0
	if len(took) > 0 {
		p50, mx = took[len(took)/2], took[len(took)-1]
	}
	fmt.Printf("checkpoints=%d failed=%d p50=%.3f max=%.3f\n", len(took), failed, p50, mx)
	if firstErr != "" {
		fmt.Fprintf(os.Stderr, "first checkpoint error: %s\n", firstErr)
	}
	return nil
}

// dirBytes sums the sizes of the regular files under dir whose names end
// in suffix (all files for ""), and counts them.
func dirBytes(dir, suffix string) (bytes int64, files int) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), suffix) {
			return nil // a file removed while walking is simply not counted
		}
		if info, err := d.Info(); err == nil {
			bytes += info.Size()
			files++
		}
		return nil
	})
	return bytes, files
}

// runWatch samples, every interval, the sum over the nodes of the WAL
// bytes they report (Cluster.Status), of the WAL files' bytes and of the
// materialization files' bytes under DATA/n*, and prints a Markdown table
// with a max row.
func runWatch(args []string) error {
	fs := benchconn.NewCommand("watch")
	data := fs.String("data", "", "the cluster's data dir (DATA/n1 ...)")
	every := fs.Duration("every", 10*time.Second, "sampling interval")
	dur := fs.Duration("for", 5*time.Minute, "sample until this long after the start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" {
		return errors.New("-data is required")
	}
	conns, closeAll, err := benchconn.DialAll(fs.Endpoints())
	if err != nil {
		return err
	}
	defer closeAll()
	nodeDirs, _ := filepath.Glob(filepath.Join(*data, "n*"))
	const mb = 1 << 20 // MiB
	fmt.Println("| t s | WAL MiB (nodes report) | WAL files MiB | materializations MiB | .mat files | WAL first index n1/n2/n3 |")
	fmt.Println("|--:|--:|--:|--:|--:|---|")
	var maxRep, maxWAL, maxMat float64
	t0 := time.Now()
	for i := 0; ; i++ {
		at := t0.Add(time.Duration(i) * *every)
		if at.Sub(t0) > *dur {
			break
		}
		time.Sleep(time.Until(at))
		rep, firsts := "?", "?"
		for _, cc := range conns {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			resp, err := kvrpc.NewClusterClient(cc).Status(ctx, &kvpb.StatusRequest{})
			cancel()
			if err != nil {
				continue
			}
			var sum int64
			var fi []string
			complete := true
			for _, n := range resp.GetNodes() {
				if n.GetError() != "" {
					complete = false
				}
				sum += n.GetWalBytes()
				fi = append(fi, fmt.Sprint(n.GetWalFirstIndex()))
			}
			if complete {
				rep = fmt.Sprintf("%.1f", float64(sum)/mb)
				maxRep = max(maxRep, float64(sum)/mb)
			} else {
				rep = fmt.Sprintf("%.1f (a node did not answer)", float64(sum)/mb)
			}
			firsts = strings.Join(fi, "/")
			break
		}
		var walB, matB int64
		var matFiles int
		for _, d := range nodeDirs {
			b, _ := dirBytes(filepath.Join(d, walDirName), "")
			walB += b
			b, n := dirBytes(filepath.Join(d, matDirName), ".mat")
			matB += b
			matFiles += n
		}
		maxWAL = max(maxWAL, float64(walB)/mb)
		maxMat = max(maxMat, float64(matB)/mb)
		fmt.Printf("| %.0f | %s | %.1f | %.1f | %d | %s |\n", time.Since(t0).Seconds(), rep, float64(walB)/mb, float64(matB)/mb, matFiles, firsts)
	}
	fmt.Printf("| max | %.1f | %.1f | %.1f | | |\n", maxRep, maxWAL, maxMat)
	return nil
}

// kvbenchResult is the part of kvbench's JSON result a row shows.
type kvbenchResult struct {
	OpsPerSec  float64 `json:"ops_per_sec"`
	Ops        int64   `json:"ops"`
	ElapsedSec float64 `json:"elapsed_s"`
	Errors     struct {
		Total int64 `json:"total"`
	} `json:"errors"`
	Latency struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
	StoppedEarly string `json:"stopped_early"`
	// WAL is present with kvbench --metrics-url.
	WAL *struct {
		Nodes []struct {
			Fsyncs      float64 `json:"fsyncs"`
			FsyncMeanMs float64 `json:"fsync_mean_ms"`
		} `json:"nodes"`
		// CPUUsPerOp is the nodes' CPU time per operation measured (0:
		// the nodes export no process CPU).
		CPUUsPerOp float64 `json:"cpu_us_per_op"`
	} `json:"wal"`
}

// fsyncMean is the nodes' mean WAL write+fsync time over the run, in ms
// ("-" without --metrics-url).
func (r *kvbenchResult) fsyncMean() string {
	if r.WAL == nil {
		return "-"
	}
	var n, sum float64
	for _, x := range r.WAL.Nodes {
		n += x.Fsyncs
		sum += x.Fsyncs * x.FsyncMeanMs
	}
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", sum/n)
}

// runSummary prints "OPS ops/s, p50 X ms, p99 Y ms, E errors" from a
// kvbench JSON result.
func runSummary(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: benchckpt summary RESULT.json")
	}
	r, err := readResult(args[0])
	if err != nil {
		return err
	}
	fmt.Printf("%d writes in %.0f s: %.0f ops/s, p50 %.1f ms, p99 %.1f ms, %d errors\n",
		r.Ops, r.ElapsedSec, r.OpsPerSec, r.Latency.P50, r.Latency.P99, r.Errors.Total)
	return nil
}

func readResult(path string) (*kvbenchResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &kvbenchResult{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// cpuPerOp is the nodes' CPU time per operation in µs ("-" without
// --metrics-url or process CPU).
func (r *kvbenchResult) cpuPerOp() string {
	if r.WAL == nil || r.WAL.CPUUsPerOp == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", r.WAL.CPUUsPerOp)
}

// runRow prints "| LABEL | ops/s | p50 | p99 | errors | WAL fsync ms |
// node CPU µs/op | EXTRA |" from a kvbench JSON result.
func runRow(args []string) error {
	if len(args) < 2 || len(args) > 3 {
		return errors.New("usage: benchckpt row LABEL RESULT.json [EXTRA]")
	}
	r, err := readResult(args[1])
	if err != nil {
		return err
	}
	extra := ""
	if len(args) == 3 {
		extra = " " + args[2] + " |"
	}
	errs := fmt.Sprint(r.Errors.Total)
	if r.StoppedEarly != "" {
		errs += " (stopped early: " + r.StoppedEarly + ")"
	}
	fmt.Printf("| %s | %.0f | %.1f | %.1f | %s | %s | %s |%s\n", args[0], r.OpsPerSec, r.Latency.P50, r.Latency.P99, errs, r.fsyncMean(), r.cpuPerOp(), extra)
	return nil
}
