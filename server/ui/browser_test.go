package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/server"
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; load.Err() == nil; i++ {
			k := fmt.Sprintf("load-%06d", i)
			_, _ = c.KV(0).Put(load, &kvpb.PutRequest{Key: []byte(k), Value: []byte(k)})
		}
	}()
	defer func() { stopLoad(); wg.Wait() }()

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
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer cancelBrowser()
	// The first Run starts the browser, which lives as long as bctx: the
	// deadline goes on the steps, not on bctx.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
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
