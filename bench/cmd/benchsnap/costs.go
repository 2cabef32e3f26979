package main

// The subcommands scripts/bench-compare.sh uses to measure what cutkv's
// own features cost (COSTS): cuts on an idle cluster, a scrape of the
// nodes' metrics (after a forced GC, for memory), and a fill of a key
// range (distinct keys, so that N keys are exactly N keys).

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/bench/internal/benchconn"
	"github.com/cutkv/cutkv/bench/internal/benchfmt"
	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// cutLatency is a set of cut completion times in ms; the field names are
// those of kvbench's "cuts" result (latency_ms), so that one reader serves
// both.
type cutLatency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// cutsDone is what cuts prints.
type cutsDone struct {
	// Asked is the number of cuts asked for; Completed, Failed (the
	// cluster recorded the cut as failed) and Errors (the call failed)
	// add up to it.
	Asked     int `json:"asked"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Errors    int `json:"errors"`
	// Latency is each completed cut's CreateCut call, from the call to
	// the answer, as kvbench --cut-interval measures it; Server is the
	// cut's own start to finish, as the cluster recorded it (kvctl cut
	// show's duration, whole milliseconds).
	Latency    cutLatency `json:"latency_ms"`
	Server     cutLatency `json:"server_ms"`
	FirstError string     `json:"first_error,omitempty"`
}

// summarizeMs is the nearest-rank p50, p99 and max of xs (ms).
func summarizeMs(xs []float64) cutLatency {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return cutLatency{P50: quantile(s, 0.5), P99: quantile(s, 0.99), Max: quantile(s, 1)}
}

// runCuts takes -n cuts one after the other, one every -every (the next
// right away when one takes longer), and prints their completion times.
func runCuts(args []string) error {
	fs := benchconn.NewCommand("cuts")
	n := fs.Int("n", 20, "number of cuts")
	every := fs.Duration("every", time.Second, "start a cut this often")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n <= 0 {
		return errors.New("-n must be positive")
	}
	conns, closeAll, err := benchconn.DialAll(fs.Endpoints())
	if err != nil {
		return err
	}
	defer closeAll()
	out := cutsDone{Asked: *n}
	var lat, srv []float64
	next := time.Now()
	for i := 0; i < *n; i++ {
		time.Sleep(time.Until(next))
		next = next.Add(*every)
		took, cut, err := createCut(conns)
		switch {
		case err != nil:
			out.Errors++
			if out.FirstError == "" {
				out.FirstError = err.Error()
			}
		case cut.GetState() != kvpb.CutState_CUT_STATE_COMPLETED:
			out.Failed++
			if out.FirstError == "" {
				out.FirstError = fmt.Sprintf("cut %d: %s", cut.GetVersion(), cut.GetError())
			}
		default:
			out.Completed++
			lat = append(lat, float64(took.Microseconds())/1000)
			srv = append(srv, float64(cut.GetFinishedUnixMs()-cut.GetStartedUnixMs()))
		}
	}
	out.Latency, out.Server = summarizeMs(lat), summarizeMs(srv)
	printJSON(out)
	if out.Completed == 0 {
		return fmt.Errorf("no cut completed of %d: %s", *n, out.FirstError)
	}
	return nil
}

// createCut calls CreateCut on the first endpoint that answers and times
// the call that did.
func createCut(conns []*grpc.ClientConn) (time.Duration, *kvpb.CutInfo, error) {
	var err error
	for _, cc := range conns {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		var resp *kvpb.CreateCutResponse
		resp, err = kvrpc.NewClusterClient(cc).CreateCut(ctx, &kvpb.CreateCutRequest{})
		took := time.Since(t0)
		cancel()
		if err == nil {
			return took, resp.GetCut(), nil
		}
	}
	return 0, nil, err
}

// runScrape reads /metrics of every node (after forcing a garbage
// collection with /debug/pprof/heap?gc=1 when -gc is given, so that the
// heap holds only live data) and prints the samples of the -names
// families as JSON.
func runScrape(args []string) error {
	fs := flag.NewFlagSet("scrape", flag.ContinueOnError)
	urls := fs.String("urls", "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203", "the nodes' HTTP addresses")
	gc := fs.Bool("gc", false, "force a GC on each node first (GET /debug/pprof/heap?gc=1)")
	names := fs.String("names", "go_memstats_heap_inuse_bytes,process_resident_memory_bytes", "comma-separated metric families")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out, err := scrapeNodes(benchconn.Split(*urls), benchconn.Split(*names), *gc)
	if err != nil {
		return err
	}
	printJSON(out)
	return nil
}

// scrapeNodes reads the samples of the metric families names from each
// node's /metrics (urls: host:port or a base URL), forcing a garbage
// collection on each first when gc is set.
func scrapeNodes(urls, names []string, gc bool) (benchfmt.Scrape, error) {
	cl := &http.Client{Timeout: 30 * time.Second}
	get := func(u string) ([]byte, error) {
		resp, err := cl.Get(u)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s", u, resp.Status)
		}
		return b, nil
	}
	out := benchfmt.Scrape{Time: time.Now().UTC(), GC: gc}
	for _, u := range urls {
		base := u
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		base = strings.TrimSuffix(base, "/")
		if gc {
			if _, err := get(base + "/debug/pprof/heap?gc=1"); err != nil {
				return out, fmt.Errorf("forcing a GC: %w", err)
			}
		}
		b, err := get(base + "/metrics")
		if err != nil {
			return out, err
		}
		samples, err := benchconn.ParseExposition(bytes.NewReader(b), names)
		if err != nil {
			return out, fmt.Errorf("%s/metrics: %w", base, err)
		}
		out.Nodes = append(out.Nodes, benchfmt.ScrapeNode{URL: u, Samples: samples})
	}
	return out, nil
}

// runFill puts every key of [-from, -to) once, with a random value of
// -value-size bytes, from -clients workers over -conns clients. A put
// that fails is tried again (the same value: a put is idempotent) up to
// -tries times. Progress goes to stderr every -progress.
func runFill(args []string) error {
	fs := benchconn.NewCommand("fill")
	from := fs.Int64("from", 0, "first key index")
	to := fs.Int64("to", 0, "key index after the last (required)")
	keySize := fs.Int("key-size", 16, "key length: zero-padded decimal index")
	valueSize := fs.Int("value-size", 256, "value length in bytes")
	clients := fs.Int("clients", 64, "concurrent workers")
	nconns := fs.Int("conns", 4, "clients (connections), shared by the workers")
	tries := fs.Int("tries", 5, "attempts per key")
	seed := fs.Uint64("seed", 1, "seed for the values")
	progress := fs.Duration("progress", 10*time.Second, "print progress this often (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to <= *from || *from < 0 {
		return fmt.Errorf("need 0 <= -from < -to, got %d and %d", *from, *to)
	}
	if digits := len(strconv.FormatInt(*to-1, 10)); *keySize < digits {
		return fmt.Errorf("-key-size %d is too short for index %d", *keySize, *to-1)
	}
	if *clients < 1 || *nconns < 1 || *tries < 1 {
		return errors.New("-clients, -conns and -tries must be positive")
	}
	ctx := context.Background()
	var cls []*client.Client
	defer func() {
		for _, c := range cls {
			c.Close()
		}
	}()
	for range min(*nconns, *clients) {
		c, err := client.New(ctx, benchconn.Split(fs.Endpoints())...)
		if err != nil {
			return err
		}
		cls = append(cls, c)
	}
	out := benchfmt.Filled{From: *from, To: *to, KeySize: *keySize, ValueSize: *valueSize}
	var next, done, retries, failed atomic.Int64
	next.Store(*from)
	var errMu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cls[w%len(cls)]
			rng := rand.New(rand.NewPCG(*seed, uint64(w)))
			val := make([]byte, *valueSize)
			for {
				i := next.Add(1) - 1
				if i >= *to {
					return
				}
				key := make([]byte, *keySize) // the client may keep it
				benchfmt.PutKey(key, i)
				for j := range val {
					val[j] = byte('a' + rng.IntN(26))
				}
				var err error
				for try := range *tries {
					if try > 0 {
						retries.Add(1)
						time.Sleep(time.Duration(try) * 100 * time.Millisecond)
					}
					if err = c.Put(ctx, key, val); err == nil {
						break
					}
				}
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if out.FirstError == "" {
						out.FirstError = fmt.Sprintf("put %q: %v", key, err)
					}
					errMu.Unlock()
					continue
				}
				done.Add(1)
			}
		}()
	}
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	if *progress > 0 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			t := time.NewTicker(*progress)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					d := done.Load()
					fmt.Fprintf(os.Stderr, "fill: %d of %d keys in %.0f s (%.0f keys/s), %d failed\n",
						d, *to-*from, time.Since(t0).Seconds(), float64(d)/time.Since(t0).Seconds(), failed.Load())
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	pwg.Wait()
	out.Seconds = time.Since(t0).Seconds()
	out.Keys, out.Retries, out.Errors = done.Load(), retries.Load(), failed.Load()
	printJSON(out)
	if out.Errors > 0 {
		return fmt.Errorf("%d of %d keys not written; first: %s", out.Errors, *to-*from, out.FirstError)
	}
	return nil
}
