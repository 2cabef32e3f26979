// Package ui serves the node's web dashboard at /ui on the HTTP port: one
// page of plain HTML, CSS and JavaScript embedded in the binary (no build
// step, nothing fetched from elsewhere), and the JSON it polls,
// /ui/api/status.
//
// The JSON is this node's view of the cluster, gathered in process from
// the same Cluster service kvctl calls (members, status, cuts, snapshots;
// what only group 0's leader knows is forwarded there as for kvctl) and
// from this node's own request counters. However many pages poll, the
// node gathers it at most once per Config.Refresh, and reads the snapshot
// store at most once per Config.SnapshotRefresh. Every list is capped, so
// an answer stays small whatever the cluster holds. A source that fails
// leaves its section with an error and the others as they are.
package ui

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cutkv/cutkv/proto/kvrpc"
)

// Caps on what one answer carries.
const (
	MaxCuts       = 50   // newest cuts listed
	MaxSnapshots  = 50   // newest snapshots listed
	MaxPartitions = 1024 // partition rows (group 0 included)
	MaxMembers    = 256  // member rows
	maxSamples    = 120  // ops/s history
)

// ErrConfig reports a Config that cannot serve.
var ErrConfig = errors.New("ui: invalid config")

//go:embed assets
var assets embed.FS

// Config says where the dashboard's data comes from.
type Config struct {
	// Self is this node's id, shown as the node that answers.
	Self string
	// Cluster is the node's Cluster service, called in process: Members,
	// Status, ListCuts, ListSnapshots and GetSnapshot. Required.
	Cluster kvrpc.ClusterServer
	// Metrics is the node's registry; its cutkv_grpc_requests_total
	// counts the client requests behind the requests/s figure. Nil: no
	// requests/s.
	Metrics prometheus.Gatherer
	// Log receives what goes wrong with a source, once per change of its
	// error. Default slog.Default().
	Log *slog.Logger
	// Refresh is the least time between two gatherings, and what the page
	// is told to poll at. Default 1s.
	Refresh time.Duration
	// SnapshotRefresh is the least time between two reads of the snapshot
	// store. Default 10s.
	SnapshotRefresh time.Duration
	// Timeout bounds one gathering of members, status and cuts (a status
	// asks every other node, 2s each). Default 3s.
	Timeout time.Duration
	// SnapshotTimeout bounds one read of the snapshot store. Default 10s.
	SnapshotTimeout time.Duration
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
	// Wall is the node's wall clock, for the time a status reports
	// (the chaos harness's clock-skew fault reads it). Default Now.
	Wall func() time.Time
}

// Validate checks c and fills its defaults.
func (c *Config) Validate() error {
	if c.Cluster == nil {
		return fmt.Errorf("%w: no Cluster service", ErrConfig)
	}
	if c.Refresh < 0 || c.SnapshotRefresh < 0 || c.Timeout < 0 || c.SnapshotTimeout < 0 {
		return fmt.Errorf("%w: refresh %v, snapshot refresh %v, timeout %v and snapshot timeout %v must not be negative",
			ErrConfig, c.Refresh, c.SnapshotRefresh, c.Timeout, c.SnapshotTimeout)
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Refresh == 0 {
		c.Refresh = time.Second
	}
	if c.SnapshotRefresh == 0 {
		c.SnapshotRefresh = 10 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 3 * time.Second
	}
	if c.SnapshotTimeout == 0 {
		c.SnapshotTimeout = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Wall == nil {
		c.Wall = c.Now
	}
	return nil
}

// Handler serves /ui/ (the page) and /ui/api/status (its data). Mount it
// at "/ui/".
type Handler struct {
	cfg    Config
	static http.Handler
	g      *gatherer
}

// New returns the dashboard's handler.
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("ui: embedded assets: %w", err)
	}
	return &Handler{
		cfg:    cfg,
		static: http.StripPrefix("/ui/", http.FileServerFS(sub)),
		g:      newGatherer(&cfg),
	}, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "ui: only GET and HEAD are served", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Everything the page uses comes from this origin; no inline script.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	if r.URL.Path == "/ui/api/status" {
		h.serveStatus(w, r)
		return
	}
	h.static.ServeHTTP(w, r)
}

// statusQuery is what /ui/api/status accepts: cuts and snapshots, how
// many of the newest to list (1..MaxCuts, 1..MaxSnapshots).
type statusQuery struct {
	cuts, snapshots int
}

func parseStatusQuery(r *http.Request) (statusQuery, error) {
	q := statusQuery{cuts: MaxCuts, snapshots: MaxSnapshots}
	for name, vals := range r.URL.Query() {
		var dst *int
		var limit int
		switch name {
		case "cuts":
			dst, limit = &q.cuts, MaxCuts
		case "snapshots":
			dst, limit = &q.snapshots, MaxSnapshots
		default:
			return q, fmt.Errorf("ui: unknown query parameter %q (known: cuts, snapshots)", name)
		}
		if len(vals) != 1 {
			return q, fmt.Errorf("ui: query parameter %s given %d times", name, len(vals))
		}
		v, err := strconv.Atoi(vals[0])
		if err != nil || v < 1 || v > limit {
			return q, fmt.Errorf("ui: query parameter %s=%q: want a number from 1 to %d", name, vals[0], limit)
		}
		*dst = v
	}
	return q, nil
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	q, err := parseStatusQuery(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	st := h.g.status(r.Context())
	if len(st.Cuts.Items) > q.cuts {
		st.Cuts.Items = st.Cuts.Items[:q.cuts] // newest first
	}
	if n := len(st.Snapshots.Items); n > q.snapshots {
		st.Snapshots.Items = st.Snapshots.Items[n-q.snapshots:] // oldest first
	}
	body, err := json.Marshal(st)
	if err != nil {
		// Only plain values are marshalled: a failure is a bug.
		http.Error(w, "ui: encode status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// gatherer builds Status values, at most once per cfg.Refresh.
type gatherer struct {
	cfg *Config

	mu      sync.Mutex // serializes gatherings; guards what follows
	last    Status
	lastAt  time.Time
	ops     opsSampler
	snaps   snapshotCache
	errSeen map[string]string // source -> last error logged
}

func newGatherer(cfg *Config) *gatherer {
	return &gatherer{cfg: cfg, errSeen: map[string]string{}, snaps: snapshotCache{details: map[string]*snapshotDetail{}}}
}

// noteErrLocked logs a source's error when it differs from the last one seen.
// REQUIRES: g.mu held.
func (g *gatherer) noteErrLocked(source, msg string) {
	if g.errSeen[source] == msg {
		return
	}
	g.errSeen[source] = msg
	if msg == "" {
		g.cfg.Log.Info("dashboard source recovered", "source", source)
		return
	}
	g.cfg.Log.Warn("dashboard source failed", "source", source, "err", msg)
}
