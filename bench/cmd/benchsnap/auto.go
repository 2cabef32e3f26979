package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cutkv/cutkv/bench/internal/benchconn"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// listed is a snapshot as ListSnapshots showed it.
type listed struct {
	ID         string `json:"id"`
	Cut        uint64 `json:"cut"`
	TimeUnixMs int64  `json:"time_unix_ms"`
	TotalBytes uint64 `json:"total_bytes"`
	Objects    uint32 `json:"objects"`
}

// runWatch polls ListSnapshots every -every until SIGTERM (and once more
// then) and keeps every snapshot it ever saw (automatic snapshots are
// pruned as new ones come), rewriting -out, a JSON array ordered by cut,
// after each poll.
func runWatch(args []string) error {
	fs := benchconn.NewCommand("watch")
	store := fs.String("store", "", "snapshot store URL (empty: the nodes' --snapshot-store)")
	every := fs.Duration("every", 5*time.Second, "poll this often")
	out := fs.String("out", "", "JSON file to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required")
	}
	conns, closeAll, err := benchconn.DialAll(fs.Endpoints())
	if err != nil {
		return err
	}
	defer closeAll()
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	seen := map[string]listed{}
	var lastErr error
	for {
		lastErr = errors.New("no endpoint answered")
		for _, cc := range conns {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := kvrpc.NewClusterClient(cc).ListSnapshots(ctx, &kvpb.ListSnapshotsRequest{Store: *store})
			cancel()
			if err != nil {
				lastErr = err
				continue
			}
			lastErr = nil
			for _, s := range resp.GetSnapshots() {
				seen[s.GetId()] = listed{ID: s.GetId(), Cut: s.GetCutVersion(), TimeUnixMs: s.GetTimeUnixMs(), TotalBytes: s.GetTotalBytes(), Objects: s.GetObjects()}
			}
			break
		}
		if lastErr != nil {
			fmt.Fprintf(os.Stderr, "benchsnap watch: %v\n", lastErr)
		}
		if err := writeListed(*out, seen); err != nil {
			return err
		}
		if sig.Err() != nil {
			return nil // the poll after the signal was the last
		}
		select {
		case <-sig.Done():
		case <-time.After(*every):
		}
	}
}

func writeListed(path string, seen map[string]listed) error {
	all := make([]listed, 0, len(seen))
	for _, s := range seen {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Cut < all[j].Cut })
	b, err := json.MarshalIndent(all, "", " ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// created is what a node logged about a snapshot it made ("snapshot
// created").
type created struct {
	took     time.Duration
	bytes    uint64
	uploaded int
	reused   int
}

// logfmt splits a text slog line into its key=value fields (values may be
// quoted).
func logfmt(line string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(line); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		eq := strings.IndexByte(line[i:], '=')
		if eq < 0 {
			break
		}
		key := line[i : i+eq]
		i += eq + 1
		if i < len(line) && line[i] == '"' {
			j := i + 1
			for j < len(line) && line[j] != '"' {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			if v, err := strconv.Unquote(line[i:min(j+1, len(line))]); err == nil {
				out[key] = v
			} else {
				out[key] = line[i:min(j+1, len(line))]
			}
			i = j + 1
			continue
		}
		j := strings.IndexByte(line[i:], ' ')
		if j < 0 {
			j = len(line) - i
		}
		out[key] = line[i : i+j]
		i += j
	}
	return out
}

// readLogs collects, from DATA/n*/kvnode.log, the snapshots made (by id)
// and the automatic snapshot failures logged between from and to.
func readLogs(data string, from, to time.Time) (map[string]created, []string, error) {
	made := map[string]created{}
	var failures []string
	logs, _ := filepath.Glob(filepath.Join(data, "n*", "kvnode.log"))
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.Contains(line, `msg="snapshot created"`):
				kv := logfmt(line)
				took, _ := time.ParseDuration(kv["took"])
				bytes, _ := strconv.ParseUint(kv["bytes_uploaded"], 10, 64)
				up, _ := strconv.Atoi(kv["pieces_uploaded"])
				re, _ := strconv.Atoi(kv["pieces_reused"])
				made[kv["id"]] = created{took: took, bytes: bytes, uploaded: up, reused: re}
			case strings.Contains(line, `msg="automatic snapshot failed`):
				kv := logfmt(line)
				if t, err := time.Parse(time.RFC3339Nano, kv["time"]); err == nil && !t.Before(from) && !t.After(to) {
					failures = append(failures, fmt.Sprintf("%s %s: %s", filepath.Base(filepath.Dir(path)), kv["time"], kv["err"]))
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return made, failures, nil
}

func parseTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// runAutoStats prints one Markdown row about the automatic snapshots whose
// cut finished between -from and -to: how many, the gaps between their
// cuts' times (the recovery point actually achieved), how long each took
// and what it uploaded (from the nodes' "snapshot created" log lines), and
// the failures logged. With -detail, one row per snapshot goes there.
func runAutoStats(args []string) error {
	fs := flag.NewFlagSet("autostats", flag.ContinueOnError)
	snaps := fs.String("snapshots", "", "JSON written by benchsnap watch (required)")
	fromS := fs.String("from", "", "window start, unix ms or RFC 3339 (required)")
	toS := fs.String("to", "", "window end, unix ms or RFC 3339 (required)")
	data := fs.String("data", "", "the cluster's data dir, for the nodes' logs")
	label := fs.String("label", "", "first cell of the row")
	detail := fs.String("detail", "", "also write a per-snapshot Markdown table to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	from, err := parseTime(*fromS)
	if err != nil {
		return fmt.Errorf("-from: %w", err)
	}
	to, err := parseTime(*toS)
	if err != nil {
		return fmt.Errorf("-to: %w", err)
	}
	b, err := os.ReadFile(*snaps)
	if err != nil {
		return err
	}
	var all []listed
	if err := json.Unmarshal(b, &all); err != nil {
		return fmt.Errorf("%s: %w", *snaps, err)
	}
	made, failures, err := map[string]created{}, []string(nil), error(nil)
	if *data != "" {
		if made, failures, err = readLogs(*data, from, to); err != nil {
			return err
		}
	}
	var in []listed
	for _, s := range all {
		t := time.UnixMilli(s.TimeUnixMs)
		if !t.Before(from) && !t.After(to) {
			in = append(in, s)
		}
	}
	var gaps, took, mbs []float64
	var sum float64
	var rows []string
	for i, s := range in {
		gap := "-"
		if i > 0 {
			g := float64(s.TimeUnixMs-in[i-1].TimeUnixMs) / 1000
			gaps = append(gaps, g)
			gap = fmt.Sprintf("%.2f", g)
		}
		c, ok := made[s.ID]
		tk, mb, objs := "?", "?", "?"
		if ok {
			took = append(took, c.took.Seconds())
			mbs = append(mbs, float64(c.bytes)/mib)
			sum += float64(c.bytes) / mib
			tk, mb, objs = fmt.Sprintf("%.2f", c.took.Seconds()), fmt.Sprintf("%.1f", float64(c.bytes)/mib), fmt.Sprintf("%d / %d", c.uploaded, c.reused)
		}
		rows = append(rows, fmt.Sprintf("| %d | %.1f | %s | %s | %s | %s |", s.Cut, time.UnixMilli(s.TimeUnixMs).Sub(from).Seconds(), gap, tk, mb, objs))
	}
	sort.Float64s(gaps)
	sort.Float64s(took)
	sort.Float64s(mbs)
	fmt.Printf("| %s | %d | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.1f / %.1f / %.0f | %d |\n", *label, len(in),
		quantile(gaps, 0.5), quantile(gaps, 0.99), quantile(gaps, 1),
		quantile(took, 0.5), quantile(took, 0.99), quantile(took, 1),
		quantile(mbs, 0.5), quantile(mbs, 1), sum, len(failures))
	if len(failures) > 0 {
		fmt.Fprintf(os.Stderr, "automatic snapshot failures (%d), first: %s\n", len(failures), failures[0])
	}
	if len(took) < len(in) {
		fmt.Fprintf(os.Stderr, "%d of %d snapshots have no \"snapshot created\" log line\n", len(in)-len(took), len(in))
	}
	if *detail != "" {
		var sb strings.Builder
		sb.WriteString("| cut | at s | gap s | took s | MiB uploaded | objects uploaded / reused |\n|--:|--:|--:|--:|--:|--:|\n")
		for _, r := range rows {
			sb.WriteString(r + "\n")
		}
		return os.WriteFile(*detail, []byte(sb.String()), 0o644)
	}
	return nil
}

// runMetric sums, over the nodes, the automatic snapshots' Prometheus
// series (since each node started) and prints "interval: N gaps, mean S
// s; duration: N ok, mean S s, E failed".
func runMetric(args []string) error {
	fs := flag.NewFlagSet("metric", flag.ContinueOnError)
	urls := fs.String("urls", "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203", "the nodes' HTTP addresses")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := scrapeNodes(benchconn.Split(*urls), []string{"cutkv_snapshot_interval_seconds", "cutkv_snapshot_duration_seconds", "cutkv_snapshot_uploaded_bytes"}, false)
	if err != nil {
		return err
	}
	mean := func(sum, n float64) float64 {
		if n == 0 {
			return 0
		}
		return sum / n
	}
	ic, is := m.Sum("cutkv_snapshot_interval_seconds_count"), m.Sum("cutkv_snapshot_interval_seconds_sum")
	dc, ds := m.Sum(`cutkv_snapshot_duration_seconds_count{result="ok"}`), m.Sum(`cutkv_snapshot_duration_seconds_sum{result="ok"}`)
	fmt.Printf("cutkv_snapshot_interval_seconds: %.0f gaps, mean %.2f s; cutkv_snapshot_duration_seconds: %.0f ok, mean %.2f s, %.0f failed; uploaded %.1f MiB\n",
		ic, mean(is, ic), dc, mean(ds, dc), m.Sum(`cutkv_snapshot_duration_seconds_count{result="error"}`), m.SumFamily("cutkv_snapshot_uploaded_bytes_total")/mib)
	return nil
}
