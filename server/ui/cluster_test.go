package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/server/ui"
)

// startCluster starts n nodes, each with an HTTP listener.
func startCluster(t *testing.T, n int) *clustertest.Cluster {
	t.Helper()
	return clustertest.Start(t, n, clustertest.Options{Configure: func(_ int, cfg *server.Config) {
		cfg.HTTPAddr = "127.0.0.1:0"
	}})
}

// createCut takes a cut as `kvctl cut create` does (the CreateCut call)
// and returns its version once completed.
func createCut(t *testing.T, c *clustertest.Cluster) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var resp *kvpb.CreateCutResponse
	for {
		var err error
		resp, err = kvrpc.NewClusterClient(c.Conn(0)).CreateCut(ctx, &kvpb.CreateCutRequest{})
		if err == nil {
			break
		}
		// As kvctl retries a cut whose group 0 lost its leader.
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			t.Fatalf("create cut: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp.GetCut().GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
		t.Fatalf("create cut: %v", resp.GetCut())
	}
	return resp.GetCut().GetVersion()
}

// createSnapshot takes a snapshot as `kvctl snapshot create` does. A
// snapshot whose driver lost group 0's leadership midway (FailedPrecondition,
// possible in a new cluster's first seconds) is asked for again.
func createSnapshot(t *testing.T, c *clustertest.Cluster) *kvpb.CreateSnapshotResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		res, err := snapshotOnce(ctx, c)
		if err == nil {
			return res
		}
		if status.Code(err) != codes.FailedPrecondition || ctx.Err() != nil {
			t.Fatalf("create snapshot: %v", err)
		}
	}
}

func snapshotOnce(ctx context.Context, c *clustertest.Cluster) (*kvpb.CreateSnapshotResult, error) {
	stream, err := kvrpc.NewClusterClient(c.Conn(0)).CreateSnapshot(ctx, &kvpb.CreateSnapshotRequest{})
	if err != nil {
		return nil, err
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil, errors.New("the snapshot stream ended without a result")
		}
		if err != nil {
			return nil, err
		}
		if r := m.GetResult(); r != nil {
			return r, nil
		}
	}
}

func put(t *testing.T, c *clustertest.Cluster, keys int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range keys {
		k := fmt.Sprintf("key-%04d", i)
		for {
			_, err := c.KV(i%c.N()).Put(ctx, &kvpb.PutRequest{Key: []byte(k), Value: []byte("value of " + k)})
			if err == nil {
				break
			}
			// A new cluster's leaders may still move (more so under
			// -race); the same put again is harmless.
			if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
				t.Fatalf("put %s: %v", k, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func fetchStatus(addr string) (ui.Status, error) {
	var st ui.Status
	resp, err := http.Get("http://" + addr + "/ui/api/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /ui/api/status: %s: %s", resp.Status, body)
	}
	return st, json.Unmarshal(body, &st)
}

// checkStatus says what is missing from st for a cluster of nodes that
// took cut and snap.
func checkStatus(st ui.Status, nodes int, partitions uint32, cut uint64, snap string) error {
	var problems []string
	if st.Members.Error != "" || st.Partitions.Error != "" || st.Cuts.Error != "" || st.Snapshots.Error != "" {
		problems = append(problems, fmt.Sprintf("errors: members %q, partitions %q, cuts %q, snapshots %q",
			st.Members.Error, st.Partitions.Error, st.Cuts.Error, st.Snapshots.Error))
	}
	if len(st.Members.Items) != nodes {
		problems = append(problems, fmt.Sprintf("%d members, want %d", len(st.Members.Items), nodes))
	}
	for i, m := range st.Members.Items {
		if m.ID != fmt.Sprintf("n%d", i+1) || m.State != "alive" || m.Serving == nil || !*m.Serving || m.HTTPAddr == "" {
			problems = append(problems, fmt.Sprintf("member %d: %+v", i, m))
		}
	}
	if len(st.Partitions.Items) != int(partitions)+1 {
		problems = append(problems, fmt.Sprintf("%d groups, want %d", len(st.Partitions.Items), partitions+1))
	}
	for _, g := range st.Partitions.Items {
		if g.Leader == "" || len(g.Replicas) != nodes || g.Term == 0 || g.AppliedIndex == 0 {
			problems = append(problems, fmt.Sprintf("group %d: %+v", g.ID, g))
		}
	}
	found := false
	for _, c := range st.Cuts.Items {
		if c.Version == cut {
			found = c.State == "completed" && c.Partitions == int(partitions)
		}
	}
	if !found {
		problems = append(problems, fmt.Sprintf("cut %d not listed as completed in %+v", cut, st.Cuts.Items))
	}
	found = false
	for _, s := range st.Snapshots.Items {
		if s.ID == snap {
			found = s.TotalBytes > 0 && s.NewBytes != nil
		}
	}
	if !found {
		problems = append(problems, fmt.Sprintf("snapshot %s not listed with its sizes in %+v", snap, st.Snapshots.Items))
	}
	if st.Ops.RequestsPerSec == nil || st.Ops.EntriesPerSec == nil {
		problems = append(problems, fmt.Sprintf("no rates yet: %+v", st.Ops))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// The JSON a node serves describes the real cluster: its members, every
// group, the cut and the snapshot just taken, and rates.
func TestStatusOfCluster(t *testing.T) {
	c := startCluster(t, 3)
	put(t, c, 50)
	cut := createCut(t, c)
	snap := createSnapshot(t, c).GetSnapshot().GetId()
	put(t, c, 20)
	// /ui (no slash) leads to the page.
	resp, err := http.Get("http://" + c.Node(0).Addrs().HTTP + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" || !strings.Contains(string(page), "app.js") {
		t.Errorf("GET /ui: %s at %s: %.200s", resp.Status, resp.Request.URL, page)
	}
	for i := range c.N() {
		addr := c.Node(i).Addrs().HTTP
		clustertest.Eventually(t, 15*time.Second, func() error {
			st, err := fetchStatus(addr)
			if err != nil {
				return err
			}
			if st.Node != fmt.Sprintf("n%d", i+1) || len(st.ClusterID) != 16 {
				return fmt.Errorf("answered by %q of cluster %q", st.Node, st.ClusterID)
			}
			return checkStatus(st, 3, 4, cut, snap)
		})
	}
}
