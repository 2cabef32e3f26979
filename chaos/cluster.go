package chaos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cutkv/cutkv/chaos/hosts"
	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/internal/synclog"
	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/tests/linearizability"
)

// Ports every node uses on its own host's address.
const (
	clientPort = 7001
	gossipPort = 7101
	httpPort   = 7201
	peerPort   = 7301
)

// partitions of a chaos cluster: enough for cross-partition
// transactions, few enough to verify every cut quickly.
const partitions = 8

// cluster is kvnode processes, one per host.
type cluster struct {
	net   *hosts.Net
	bin   string // kvnode
	store string // file:// snapshot store
	nodes []*node
	conns []*grpc.ClientConn // one per node, to its client port
}

type node struct {
	id   string
	host *hosts.Host
	data string
	log  string
	// synced is the file the node records its fsynced lengths in
	// (synclog.EnvVar; the failpoints build).
	synced string
	args   []string
	mu     sync.Mutex
	proc   *hosts.Proc // nil while down
	state  string      // "up", "killed", "paused"
	skew   *skew       // the clock-skew fault on it (clockskew.go), nil when none
	// filler is the file a disk-full fault filled the disk with, removed
	// before a restart (freeDisk); "" if none.
	filler string
}

// active are the hosts of the rounds running, for closeActive.
var active struct {
	sync.Mutex
	nets map[*hosts.Net]bool
}

// closeActive stops every process and removes every host the running
// rounds started (on SIGINT or SIGTERM of the harness).
func closeActive() {
	active.Lock()
	defer active.Unlock()
	for n := range active.nets {
		_ = n.Close()
	}
	active.nets = nil
}

// startCluster sets up n hosts and starts a node on each, with peer
// mutual TLS from a CA made for the round and encrypted gossip. The
// connections between hosts to the ports of proxied pass through the
// hosts' delay proxies (delay.go).
func startCluster(dir, bin string, n int, subnet byte, name string, proxied []int) (*cluster, error) {
	dir, err := filepath.Abs(dir) // a disk's mount point must be absolute
	if err != nil {
		return nil, err
	}
	net, err := hosts.Setup(hosts.Config{Name: name, Hosts: n, Subnet: subnet, ProxyPorts: proxied})
	if err != nil {
		return nil, fmt.Errorf("chaos: set up %d hosts: %w", n, err)
	}
	active.Lock()
	if active.nets == nil {
		active.nets = map[*hosts.Net]bool{}
	}
	active.nets[net] = true
	active.Unlock()
	c := &cluster{net: net, bin: bin}
	ok := false
	defer func() {
		if !ok {
			c.close()
		}
	}()
	certs := filepath.Join(dir, "certs")
	if _, err := pki.CreateCA(certs, "chaos CA", pki.Options{ValidFor: 48 * time.Hour}); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	gossipKey := filepath.Join(certs, "gossip.key")
	if err := os.WriteFile(gossipKey, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	storeDir := filepath.Join(dir, "snapshots")
	if err := os.MkdirAll(storeDir, 0o750); err != nil {
		return nil, err
	}
	c.store = "file://" + storeDir
	var initial, gossip []string
	for i := 1; i <= n; i++ {
		h := net.Host(i)
		initial = append(initial, fmt.Sprintf("n%d=%s:%d", i, h.IP(), peerPort))
		gossip = append(gossip, fmt.Sprintf("%s:%d", h.IP(), gossipPort))
	}
	for i := 1; i <= n; i++ {
		h := net.Host(i)
		id := fmt.Sprintf("n%d", i)
		files, err := pki.CreateNode(certs, certs, id, []string{h.IP()}, pki.Options{ValidFor: 24 * time.Hour})
		if err != nil {
			return nil, err
		}
		nd := &node{id: id, host: h, data: filepath.Join(dir, id), log: filepath.Join(dir, id+".log"), synced: filepath.Join(dir, id+".synced")}
		// A disk of its own, for disk-full faults (kept at close).
		if err := h.MountDisk(nd.data, nodeDisk); err != nil {
			return nil, err
		}
		var join []string
		for j, g := range gossip {
			if j != i-1 {
				join = append(join, g)
			}
		}
		nd.args = []string{
			"--id", id, "--data-dir", nd.data,
			"--grpc-addr", fmt.Sprintf("%s:%d", h.IP(), clientPort),
			"--peer-addr", fmt.Sprintf("%s:%d", h.IP(), peerPort),
			"--gossip-addr", fmt.Sprintf("%s:%d", h.IP(), gossipPort),
			"--http-addr", fmt.Sprintf("%s:%d", h.IP(), httpPort),
			"--join", strings.Join(join, ","),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", name,
			"--partitions", fmt.Sprint(partitions),
			"--peer-cert-file", files.Cert, "--peer-key-file", files.Key, "--peer-trusted-ca-file", files.CA,
			"--gossip-key-file", gossipKey,
			"--snapshot-store", c.store,
			"--raft-tick", "50ms",
			"--materialize-interval", "45s", "--wal-segment-size", fmt.Sprint(1 << 20),
			"--catch-up-entries", fmt.Sprint(catchUpEntries),
			"--cut-timeout", "10s", "--shutdown-timeout", "3s",
		}
		c.nodes = append(c.nodes, nd)
	}
	for i := range c.nodes {
		if err := c.start(i); err != nil {
			return nil, err
		}
	}
	for i := range c.nodes {
		if err := c.waitServing(i, 60*time.Second); err != nil {
			return nil, err
		}
	}
	for _, nd := range c.nodes {
		cc, err := grpc.NewClient(nd.clientAddr(), append(linearizability.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))...)
		if err != nil {
			return nil, err
		}
		c.conns = append(c.conns, cc)
	}
	ok = true
	return c, nil
}

func (nd *node) clientAddr() string { return fmt.Sprintf("%s:%d", nd.host.IP(), clientPort) }

// endpoints lists every node's client address.
func (c *cluster) endpoints() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.clientAddr())
	}
	return out
}

// start (re)starts node i from its data dir.
func (c *cluster) start(i int) error { return c.startWith(i, nil) }

// startWith (re)starts node i with the harness's environment and extra
// ("NAME=value", each replacing a variable of that name): a start that
// only this one call changes; the next start is plain again.
func (c *cluster) startWith(i int, extra []string) error {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	env := append(os.Environ(), synclog.EnvVar+"="+nd.synced, clock.SkewFileEnv+"="+nd.skewFile())
	p, err := nd.host.Start(c.bin, nd.args, withEnv(env, extra), nd.log)
	if err != nil {
		return fmt.Errorf("chaos: start %s: %w", nd.id, err)
	}
	nd.proc, nd.state = p, "up"
	return nil
}

// serving reports whether node i's /healthz says SERVING.
func (c *cluster) serving(i int) bool {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://%s:%d/healthz", c.nodes[i].host.IP(), httpPort))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "SERVING"
}

// waitServing waits until node i serves, or says why not.
func (c *cluster) waitServing(i int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for !c.serving(i) {
		nd := c.nodes[i]
		nd.mu.Lock()
		p := nd.proc
		nd.mu.Unlock()
		if p != nil && !p.Running() {
			return fmt.Errorf("chaos: %s exited; its log %s ends:\n%s", nd.id, nd.log, tail(nd.log, 15))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s not serving within %v; its log %s ends:\n%s", nd.id, within, nd.log, tail(nd.log, 15))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// down says whether node i is killed or paused (clients avoid it).
func (c *cluster) down(i int) bool {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.state != "up"
}

// kill kills node i with SIGKILL and waits until it is reaped.
func (c *cluster) kill(i int) error {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.proc == nil {
		return fmt.Errorf("chaos: %s is not running", nd.id)
	}
	// A process not reaped may still hold its data dir: it is not marked
	// killed (heal would start a second one), and the fault is not run.
	if err := nd.proc.Kill(); err != nil {
		return err
	}
	nd.proc, nd.state = nil, "killed"
	return nil
}

// pause stops node i with SIGSTOP and returns whether /proc shows it
// stopped.
func (c *cluster) pause(i int) (bool, error) {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.proc == nil {
		return false, fmt.Errorf("chaos: %s is not running", nd.id)
	}
	if err := nd.proc.Pause(); err != nil {
		return false, err
	}
	nd.state = "paused"
	deadline := time.Now().Add(2 * time.Second)
	for {
		paused, err := nd.proc.Paused()
		if err != nil || paused || time.Now().After(deadline) {
			return paused, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// resume continues node i after pause.
func (c *cluster) resume(i int) error {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.proc == nil || nd.state != "paused" {
		return fmt.Errorf("chaos: %s is not paused", nd.id)
	}
	if err := nd.proc.Resume(); err != nil {
		return err
	}
	nd.state = "up"
	return nil
}

// heal resumes paused nodes and restarts killed ones (on a freed disk),
// and removes every network fault.
func (c *cluster) heal() error {
	var errs []string
	if err := c.net.Heal(); err != nil {
		errs = append(errs, err.Error())
	}
	errs = append(errs, c.unskew()...)
	for i, nd := range c.nodes {
		nd.mu.Lock()
		st, p := nd.state, nd.proc
		nd.mu.Unlock()
		switch st {
		case "paused":
			if err := p.Resume(); err != nil {
				errs = append(errs, err.Error())
			}
			nd.mu.Lock()
			nd.state = "up"
			nd.mu.Unlock()
		case "killed":
			if err := c.freeDisk(i); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			if err := c.start(i); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("chaos: heal: %s", strings.Join(errs, "; "))
	}
	return nil
}

// stop shuts every running node down (SIGTERM, then SIGKILL), so that
// their WALs are complete and at rest.
func (c *cluster) stop() {
	for _, nd := range c.nodes {
		nd.mu.Lock()
		p := nd.proc
		if p != nil && nd.state == "paused" {
			_ = p.Resume()
		}
		nd.mu.Unlock()
		if p != nil {
			_ = p.Term()
		}
	}
	for _, nd := range c.nodes {
		nd.mu.Lock()
		p := nd.proc
		nd.proc, nd.state = nil, "stopped"
		nd.mu.Unlock()
		if p != nil {
			if exited, _ := p.Wait(10 * time.Second); !exited {
				p.Kill()
			}
		}
	}
}

// close stops everything the cluster started and removes its hosts.
func (c *cluster) close() {
	for _, cc := range c.conns {
		cc.Close()
	}
	c.stop()
	_ = c.net.Close()
	active.Lock()
	delete(active.nets, c.net)
	active.Unlock()
}

// status asks node i for its own view of the groups it holds (their
// leaders as it knows them), without asking the other nodes.
func (c *cluster) status(ctx context.Context, i int) (*kvpb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return kvrpc.NewClusterClient(c.conns[i]).Status(ctx, &kvpb.StatusRequest{LocalOnly: true})
}

// leaderOf returns the index of the node group g's leader is, as the
// first node that answers says, and the term; -1 when unknown.
func (c *cluster) leaderOf(ctx context.Context, g uint64, askOnly []int) (int, uint64) {
	ask := askOnly
	if ask == nil {
		for i := range c.nodes {
			ask = append(ask, i)
		}
	}
	for _, i := range ask {
		st, err := c.status(ctx, i)
		if err != nil {
			continue
		}
		for _, row := range st.GetGroups() {
			if row.GetId() != g || row.GetLeader() == "" {
				continue
			}
			for j, nd := range c.nodes {
				if nd.id == row.GetLeader() {
					return j, row.GetTerm()
				}
			}
		}
	}
	return -1, 0
}
