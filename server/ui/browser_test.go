package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/server/ui"
)

// chromium returns the path of a Chromium or Chrome binary, or skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on this machine (looked for chromium, chromium-browser, google-chrome in PATH): " +
		"install it with `apt-get install chromium` to run the dashboard's browser test")
	return ""
}

// artifactDir is where the test leaves its screenshot: $CUTKV_ARTIFACTS
// when set, else the test's temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CUTKV_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatalf("artifact dir %s: %v", dir, err)
	}
	return dir
}

// startBrowser starts headless Chromium for the test; it stops at the
// test's end. Its profile is under the test's temporary directory.
func startBrowser(t *testing.T, exe string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	profile := filepath.Join(t.TempDir(), "chromium")
	t.Cleanup(func() {
		// Chromium's helpers may still write there for a moment after it
		// stops.
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelBrowser)
	// The first Run starts the browser, which lives as long as bctx: a
	// deadline goes on the steps, not on bctx.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	return bctx
}

// The dashboard, opened in headless Chromium on a 3-node cluster that
// took a cut (as `kvctl cut create` does) and two snapshots, lists the
// real members and shows the cut on its timeline.
func TestDashboardInChromium(t *testing.T) {
	exe := chromium(t)
	c := clustertest.Start(t, 3, clustertest.Options{Configure: func(_ int, cfg *server.Config) {
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.CutInterval = time.Second // a timeline with more than the one cut
	}})
	put(t, c, 200)
	createSnapshot(t, c)
	put(t, c, 50)
	createSnapshot(t, c)
	cut := createCut(t, c)

	// Writes while the page is open, so that its ops/s are not all zero.
	load, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	kv := c.KV(0)
	wg.Go(func() {
		for i := 0; load.Err() == nil; i++ {
			k := fmt.Sprintf("load-%06d", i)
			if _, err := kv.Put(load, &kvpb.PutRequest{Key: []byte(k), Value: []byte(k)}); err != nil {
				time.Sleep(20 * time.Millisecond) // the load is for the picture: a failed put is not retried
			}
		}
	})
	defer func() { stopLoad(); wg.Wait() }()

	bctx := startBrowser(t, exe)
	ctx, cancel := context.WithTimeout(bctx, 20*time.Second)
	defer cancel()

	url := "http://" + c.Node(0).Addrs().HTTP + "/ui"
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	members := `[...document.querySelectorAll("#members tbody tr")].map(r => r.dataset.member).join(",")`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](members+` === "n1,n2,n3"`, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		got, _ := chromedp.Run(bctx, chromedp.Evaluate[string](members))
		t.Fatalf("the page does not list members n1,n2,n3 (it lists %q): %v", got, err)
	}
	onTimeline := fmt.Sprintf(`document.querySelector('#cuts-timeline [data-cut-version="%d"]') !== null`, cut)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](onTimeline, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		got, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("#cuts").innerText`))
		t.Fatalf("cut %d is not on the timeline: %v; the cuts section reads:\n%s", cut, err, got)
	}
	// Let the page draw rates and the chain before the picture: two
	// samples of ops, and both snapshots.
	ready := `document.querySelectorAll("#snapshot-chain .snap").length >= 2 && document.querySelector("#ops-chart polyline") !== null`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](ready, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("the page shows no snapshot chain or ops chart: %v", err)
	}
	stopLoad()
	errs, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll(".error:not([hidden]), #conn-error:not([hidden])")].map(e => e.textContent).join("; ")`))
	if err != nil || errs != "" {
		t.Errorf("the page shows errors: %q (%v)", errs, err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), "ui.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatalf("write the screenshot: %v", err)
	}
	t.Logf("dashboard screenshot: %s (%d bytes)", path, len(shot))
}

// tlsCluster is a Cluster service whose snapshot store fails.
type tlsCluster struct {
	kvrpc.UnimplementedClusterServer
}

func (tlsCluster) Members(context.Context, *kvpb.MembersRequest) (*kvpb.MembersResponse, error) {
	return &kvpb.MembersResponse{Members: []*kvpb.Member{
		{Id: "a1", RaftId: 1, State: kvpb.MemberState_MEMBER_STATE_ALIVE},
		{Id: "a2", RaftId: 2, State: kvpb.MemberState_MEMBER_STATE_FAILED},
	}}, nil
}

func (tlsCluster) Status(context.Context, *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	return &kvpb.StatusResponse{ClusterId: "00000000000000aa", Nodes: []*kvpb.NodeStatus{{Id: "a1", Serving: true}, {Id: "a2", Error: "connection refused"}},
		Groups: []*kvpb.PartitionStatus{{Id: 0, Leader: "a1", Replicas: []string{"a1", "a2"}, Term: 2}}}, nil
}

func (tlsCluster) ListCuts(context.Context, *kvpb.ListCutsRequest) (*kvpb.ListCutsResponse, error) {
	return &kvpb.ListCutsResponse{Cuts: []*kvpb.CutInfo{{Version: 77, State: kvpb.CutState_CUT_STATE_FAILED,
		StartedUnixMs: time.Now().Add(-time.Second).UnixMilli(), FinishedUnixMs: time.Now().UnixMilli(), Error: "partition 1 did not answer"}}}, nil
}

func (tlsCluster) ListSnapshots(context.Context, *kvpb.ListSnapshotsRequest) (*kvpb.ListSnapshotsResponse, error) {
	return nil, status.Error(codes.FailedPrecondition, "the snapshot store s3://b/p cannot be read: no credentials")
}

// Over HTTPS (same origin) the page works as over HTTP, and a section
// whose source fails shows the error while the others are drawn.
func TestDashboardOverTLSShowsErrors(t *testing.T) {
	exe := chromium(t)
	h, err := ui.New(ui.Config{Self: "a1", Cluster: tlsCluster{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", h)
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	// The test server's certificate is its own; the page's requests go
	// to the same origin over the same TLS.
	bctx := startBrowser(t, exe, chromedp.IgnoreCertErrors)
	ctx, cancel := context.WithTimeout(bctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/ui")); err != nil {
		t.Fatalf("open %s/ui: %v", srv.URL, err)
	}
	drawn := `document.querySelectorAll("#members tbody tr").length === 2 && ` +
		`document.querySelector('#cuts-timeline [data-cut-version="77"] rect.failed') !== null && ` +
		`!document.querySelector("#snapshots .error").hidden`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](drawn, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		got, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("the page over HTTPS is not drawn: %v; it reads:\n%s", err, got)
	}
	for sel, want := range map[string]string{
		"#snapshots .error":             "list snapshots: FailedPrecondition: the snapshot store s3://b/p cannot be read: no credentials",
		`#members tr[data-member="a2"]`: "unreachable",
		"#cuts tbody":                   "partition 1 did not answer",
		"#conn-error":                   "",
	} {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).innerText`, sel)))
		if err != nil || !strings.Contains(got, want) || (want == "" && got != "") {
			t.Errorf("%s reads %q (%v), want %q", sel, got, err, want)
		}
	}
}
