package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/rpc"
)

// CutsResult is what the cutter measured (--cut-interval): cuts taken
// during the measured phase, and their completion time as kvctl cut create
// sees it (allocate in group 0, every partition's CutFinish, record).
type CutsResult struct {
	Interval  string `json:"interval"`
	Completed int64  `json:"completed"`
	Failed    int64  `json:"failed"`
	Errors    int64  `json:"errors"`
	// Retried counts calls the server refused as not applied (a dropped
	// proposal, no leader) and that were sent again, as a client would.
	Retried int64   `json:"retried,omitempty"`
	Latency Latency `json:"latency_ms"`
	// FirstError is the first failed cut's reason or call error.
	FirstError string `json:"first_error,omitempty"`
}

// cutter takes a cut every interval until halted.
type cutter struct {
	interval time.Duration
	conn     *grpc.ClientConn
	stop     chan struct{}
	done     chan struct{}

	mu        sync.Mutex
	stats     *opStats
	completed int64
	failed    int64
	errors    int64
	retried   int64
	firstErr  string
}

// startCutter starts taking cuts through endpoint, with TLS when tlsFiles
// is set (the cluster checks the certificate's role: CreateCut needs
// admin). Its connection has the credentials the client's have.
func startCutter(endpoint string, interval time.Duration, tlsFiles *client.TLSFiles) (*cutter, error) {
	creds, err := client.TransportCredentials(tlsFiles, nil)
	if err != nil {
		return nil, fmt.Errorf("cutter: %w", err)
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("cutter: %w", err)
	}
	c := &cutter{interval: interval, conn: conn, stop: make(chan struct{}), done: make(chan struct{}), stats: newOpStats()}
	go c.run()
	return c, nil
}

func (c *cutter) run() {
	defer close(c.done)
	cl := kvrpc.NewClusterClient(c.conn)
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		resp, err := cl.CreateCut(ctx, &kvpb.CreateCutRequest{})
		// A call the server says it did not apply is sent again, a few
		// times (a leader change drops proposals for a moment).
		retried := int64(0)
		for ; err != nil && notApplied(err) && retried < maxCutRetries && ctx.Err() == nil; retried++ {
			time.Sleep(cutRetryPause)
			resp, err = cl.CreateCut(ctx, &kvpb.CreateCutRequest{})
		}
		took := time.Since(start)
		cancel()
		c.mu.Lock()
		c.retried += retried
		switch {
		case err != nil:
			c.errors++
			c.noteErr(err.Error())
		case resp.GetCut().GetState() != kvpb.CutState_CUT_STATE_COMPLETED:
			c.failed++
			c.noteErr(resp.GetCut().GetError())
		default:
			c.completed++
			c.stats.hist.record(took.Nanoseconds())
		}
		c.mu.Unlock()
	}
}

// Retrying a cut call the server did not apply.
const (
	maxCutRetries = 5
	cutRetryPause = 20 * time.Millisecond
)

// notApplied says whether err is the server's "not applied" answer
// (Unavailable with cutkv's ErrorInfo), which is safe to send again.
func notApplied(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == rpc.ErrorDomain {
			return true
		}
	}
	return false
}

func (c *cutter) noteErr(s string) {
	if c.firstErr == "" {
		c.firstErr = s
	}
}

// halt stops the cutter and returns what it measured.
func (c *cutter) halt() *CutsResult {
	close(c.stop)
	<-c.done
	c.conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return &CutsResult{
		Interval: c.interval.String(), Completed: c.completed, Failed: c.failed, Errors: c.errors, Retried: c.retried,
		Latency: summarize(c.stats, 0).Latency, FirstError: c.firstErr,
	}
}
