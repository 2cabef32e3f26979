package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// uploadSums is what `benchsnap uploads` prints: the "snapshot created"
// log lines of a time window, summed.
type uploadSums struct {
	Snapshots int `json:"snapshots"`
	// BytesUploaded is everything written to the store; BaseFileBytes the
	// part of it that is checkpoint (SST and other) files; the rest is
	// changelog pieces and the bases' own manifests.
	BytesUploaded   uint64  `json:"bytes_uploaded"`
	BaseFileBytes   uint64  `json:"base_file_bytes"`
	OtherBytes      uint64  `json:"other_bytes"`
	ObjectsUploaded int     `json:"objects_uploaded"`
	BaseFilesReused int     `json:"base_files_reused"`
	BaseBytesReused uint64  `json:"base_bytes_reused"`
	TookP50S        float64 `json:"took_p50_s"`
	TookMaxS        float64 `json:"took_max_s"`
	// MaxBytes is the most one snapshot uploaded; WithFiles the snapshots
	// that uploaded any checkpoint file.
	MaxBytes  uint64 `json:"max_bytes"`
	WithFiles int    `json:"with_files"`
	Newest    string `json:"newest"`
	// PerBucket is BytesUploaded per -bucket of the window, from -from.
	PerBucket []uint64 `json:"per_bucket,omitempty"`
}

// runUploads sums the "snapshot created" lines of DATA/n*/kvnode.log
// logged between -from and -to and prints one JSON line.
func runUploads(args []string) error {
	fs := flag.NewFlagSet("uploads", flag.ContinueOnError)
	data := fs.String("data", "", "the cluster's data dir, for the nodes' logs (required)")
	fromS := fs.String("from", "", "window start, unix ms or RFC 3339 (required)")
	toS := fs.String("to", "", "window end, unix ms or RFC 3339 (required)")
	bucket := fs.Duration("bucket", 0, "also sum the bytes uploaded per this much of the window (0: no)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" {
		return errors.New("-data is required")
	}
	from, err := parseTime(*fromS)
	if err != nil {
		return fmt.Errorf("-from: %w", err)
	}
	to, err := parseTime(*toS)
	if err != nil {
		return fmt.Errorf("-to: %w", err)
	}
	logs, _ := filepath.Glob(filepath.Join(*data, "n*", "kvnode.log"))
	var s uploadSums
	if *bucket > 0 {
		s.PerBucket = make([]uint64, max(1, int((to.Sub(from)+*bucket-1) / *bucket)))
	}
	var took []float64
	var newest time.Time
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, `msg="snapshot created"`) {
				continue
			}
			kv := logfmt(line)
			t, err := time.Parse(time.RFC3339Nano, kv["time"])
			if err != nil || t.Before(from) || t.After(to) {
				continue
			}
			u := func(k string) uint64 { v, _ := strconv.ParseUint(kv[k], 10, 64); return v }
			n := func(k string) int { v, _ := strconv.Atoi(kv[k]); return v }
			d, _ := time.ParseDuration(kv["took"])
			s.Snapshots++
			s.BytesUploaded += u("bytes_uploaded")
			s.BaseFileBytes += u("base_file_bytes")
			s.ObjectsUploaded += n("pieces_uploaded")
			s.BaseFilesReused += n("base_files_reused")
			s.BaseBytesReused += u("base_bytes_reused")
			s.MaxBytes = max(s.MaxBytes, u("bytes_uploaded"))
			if u("base_file_bytes") > 0 {
				s.WithFiles++
			}
			took = append(took, d.Seconds())
			if *bucket > 0 {
				s.PerBucket[min(int(t.Sub(from) / *bucket), len(s.PerBucket)-1)] += u("bytes_uploaded")
			}
			if t.After(newest) {
				newest, s.Newest = t, kv["id"]
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	s.OtherBytes = s.BytesUploaded - s.BaseFileBytes
	sort.Float64s(took)
	s.TookP50S, s.TookMaxS = quantile(took, 0.5), quantile(took, 1)
	printJSON(s)
	return nil
}

// sstSums is what `benchsnap sstwatch` prints: per node, the SST files
// that appeared in its Pebble state directories while it watched (flush
// and compaction outputs; materializations are hard links elsewhere and
// not counted), with their last size seen.
type sstSums struct {
	Nodes map[string]sstNode `json:"nodes"`
	// Files and Bytes are summed over the nodes.
	Files int    `json:"files"`
	Bytes uint64 `json:"bytes"`
}

type sstNode struct {
	Files int    `json:"files"`
	Bytes uint64 `json:"bytes"`
}

// runSSTWatch lists DATA/n*/state/**/*.sst every -every until SIGTERM and
// prints, as one JSON line, the files that were not there at the first
// listing: what Pebble wrote (flushes and compactions), as bytes.
func runSSTWatch(args []string) error {
	fset := flag.NewFlagSet("sstwatch", flag.ContinueOnError)
	data := fset.String("data", "", "the cluster's data dir (required)")
	every := fset.Duration("every", time.Second, "list this often")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if *data == "" {
		return errors.New("-data is required")
	}
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// path -> size; the first listing's files are the baseline.
	list := func() map[string]int64 {
		out := map[string]int64{}
		dirs, _ := filepath.Glob(filepath.Join(*data, "n*", "state"))
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() || !strings.HasSuffix(p, ".sst") {
					return nil // a file deleted while listing
				}
				if info, err := e.Info(); err == nil {
					out[p] = info.Size()
				}
				return nil
			})
		}
		return out
	}
	base := list()
	seen := map[string]int64{}
	for {
		for p, sz := range list() {
			if _, old := base[p]; !old {
				seen[p] = max(seen[p], sz)
			}
		}
		if sig.Err() != nil {
			break
		}
		select {
		case <-sig.Done():
		case <-time.After(*every):
		}
	}
	out := sstSums{Nodes: map[string]sstNode{}}
	for p, sz := range seen {
		rel, err := filepath.Rel(*data, p)
		if err != nil {
			continue
		}
		node := strings.SplitN(rel, string(filepath.Separator), 2)[0]
		n := out.Nodes[node]
		n.Files++
		n.Bytes += uint64(sz)
		out.Nodes[node] = n
		out.Files++
		out.Bytes += uint64(sz)
	}
	printJSON(out)
	return nil
}
