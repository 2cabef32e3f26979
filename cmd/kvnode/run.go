package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cutkv/cutkv/internal/version"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/wal"
)

const usageHead = `kvnode runs one node of a cutkv cluster.

Bootstrap a new 3-node cluster (run once per node, same --initial-cluster,
which names the peer addresses; the first member listed draws the cluster id,
so the others finish starting once it runs):
  kvnode --id n1 --data-dir data/n1 --grpc-addr 127.0.0.1:7001 --peer-addr 127.0.0.1:7301 \
         --gossip-addr 127.0.0.1:7101 --http-addr 127.0.0.1:7201 --join 127.0.0.1:7102,127.0.0.1:7103 \
         --initial-cluster n1=127.0.0.1:7301,n2=127.0.0.1:7302,n3=127.0.0.1:7303

With TLS (certificates from kvctl cert create-ca/create-node/create-client):
  ... --peer-cert-file certs/n1.crt --peer-key-file certs/n1.key --peer-trusted-ca-file certs/ca.crt \
      --cert-file certs/n1.crt --key-file certs/n1.key --trusted-ca-file certs/ca.crt \
      --gossip-key-file certs/gossip.key
SIGHUP reloads certificates and gossip keys (certificate files are also
picked up when they change).

Restart a node with existing data: the same command; bootstrap flags are
then optional and, when given, must describe the same cluster.

Restore a snapshot from the blob store into a new cluster's data dirs
(once per member, before starting the nodes; see kvnode restore --help):
  kvnode restore --store file:///backups/cutkv --list
  kvnode restore --store file:///backups/cutkv --snapshot ID --id n1 --data-dir data/n1 \
         --initial-cluster n1=127.0.0.1:7301,n2=127.0.0.1:7302,n3=127.0.0.1:7303

Every flag can also come from a YAML file given with --config (keys are
the flag names, e.g. "grpc-addr: 127.0.0.1:7001"); flags on the command
line win over the file.

Exit status: 0 after a clean shutdown, 1 on a fatal error (the message
names the file or address), 2 for bad flags.

Flags:
`

// flags binds every kvnode flag to a server.Config.
type flags struct {
	fs         *flag.FlagSet
	cfg        server.Config
	join       string
	configFile string
	logLevel   string
	logFormat  string
	maxKey     int
	maxValue   int
	maxTxnOps  int
	partitions uint
	storeAllow string
	version    bool
}

func newFlags(stderr io.Writer) *flags {
	f := &flags{fs: flag.NewFlagSet("kvnode", flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	fs.BoolVar(&f.version, "version", false, "print the version, commit and Go version and exit (also: kvnode version)")
	fs.StringVar(&f.configFile, "config", "", "YAML config file; keys are flag names; command-line flags win")
	fs.StringVar(&f.cfg.ID, "id", "", "node id, e.g. n1 (required); must appear in --initial-cluster")
	fs.StringVar(&f.cfg.DataDir, "data-dir", "", "data directory: WAL, cluster identity, lock (default data/<id>)")
	fs.StringVar(&f.cfg.GRPCAddr, "grpc-addr", "127.0.0.1:7001", "client listen address host:port: KV, Cluster, health, reflection (port 0 picks one)")
	fs.StringVar(&f.cfg.PeerAddr, "peer-addr", "127.0.0.1:7301", "peer listen address host:port: raft, 2PC, cuts, snapshots; what --initial-cluster names (port 0 picks one)")
	fs.StringVar(&f.cfg.PeerCertFile, "peer-cert-file", "", "this node's certificate for the peer listener and for dialing peers (mutual TLS; its identity must be --id)")
	fs.StringVar(&f.cfg.PeerKeyFile, "peer-key-file", "", "key of --peer-cert-file")
	fs.StringVar(&f.cfg.PeerTrustedCAFile, "peer-trusted-ca-file", "", "the cluster CA: every member's certificate must chain to it")
	fs.BoolVar(&f.cfg.InsecurePeer, "insecure-peer", false, "allow a non-loopback --peer-addr without peer TLS (anyone who reaches it can act as a member)")
	fs.StringVar(&f.cfg.CertFile, "cert-file", "", "server certificate of the client listener (TLS)")
	fs.StringVar(&f.cfg.KeyFile, "key-file", "", "key of --cert-file")
	fs.StringVar(&f.cfg.TrustedCAFile, "trusted-ca-file", "", "CA of client certificates: requires one, whose role (read, write, admin) is checked on every call")
	fs.StringVar(&f.cfg.GossipKeyFile, "gossip-key-file", "", "gossip encryption keys, one base64 key (16, 24 or 32 bytes) a line; the first encrypts")
	fs.IntVar(&f.cfg.MaxConnections, "max-connections", 0, "most connections each listener holds open; more are closed at once (0: 1024, or less if the file descriptor limit is low)")
	fs.DurationVar(&f.cfg.IdleTimeout, "idle-timeout", 5*time.Minute, "close a connection with no call in flight for this long")
	fs.BoolVar(&f.cfg.Pprof, "pprof", false, "serve /debug/pprof on --http-addr")
	fs.StringVar(&f.cfg.GossipAddr, "gossip-addr", "127.0.0.1:7101", "memberlist gossip listen address host:port, TCP and UDP (port 0 picks one)")
	fs.StringVar(&f.cfg.HTTPAddr, "http-addr", "127.0.0.1:7201", "HTTP address for /metrics, /healthz, /readyz, /livez (and /debug/pprof with --pprof); HTTPS with --cert-file's certificate when client TLS is on; empty disables")
	fs.StringVar(&f.cfg.AdvertiseGRPC, "advertise-grpc", "", "client address host:port announced to members and clients instead of --grpc-addr (for a node listening on 0.0.0.0, behind NAT or in a container)")
	fs.StringVar(&f.cfg.AdvertisePeer, "advertise-peer", "", "peer address host:port this node announces instead of --peer-addr; must be its address in --initial-cluster")
	fs.StringVar(&f.cfg.AdvertiseGossip, "advertise-gossip", "", "gossip address host:port announced instead of --gossip-addr; a host name is resolved to its IP at start")
	fs.StringVar(&f.cfg.AdvertiseHTTP, "advertise-http", "", "HTTP address host:port announced instead of --http-addr")
	fs.StringVar(&f.join, "join", "", "comma-separated gossip addresses of other nodes to join")
	fs.StringVar(&f.cfg.InitialCluster, "initial-cluster", "", "bootstrap a new cluster: id=peer-host:port,... (ignored when it matches existing data; refused when it does not)")
	fs.StringVar(&f.cfg.InitialClusterToken, "initial-cluster-token", "cutkv", "token that tells this cluster's members from another's bootstrapped with the same --initial-cluster")
	fs.UintVar(&f.partitions, "partitions", 16, "number of data partitions, fixed at bootstrap")
	fs.IntVar(&f.maxKey, "max-key-size", 4<<10, "largest key accepted, bytes")
	fs.IntVar(&f.maxValue, "max-value-size", 1<<20, "largest value accepted, bytes")
	fs.IntVar(&f.maxTxnOps, "max-txn-ops", 128, "most compares, success ops or failure ops in one transaction (each list)")
	fs.DurationVar(&f.cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "graceful shutdown bound: drain requests, hand off leadership, leave gossip")
	fs.DurationVar(&f.cfg.TickInterval, "raft-tick", 100*time.Millisecond, "raft tick interval")
	fs.IntVar(&f.cfg.ElectionTicks, "election-ticks", 10, "raft election timeout in ticks")
	fs.IntVar(&f.cfg.WALSegmentSize, "wal-segment-size", wal.DefaultSegmentSize, "WAL segment file size, bytes (about two segments are held in memory)")
	fs.DurationVar(&f.cfg.MaterializeInterval, "materialize-interval", time.Minute, "materialize each partition's state at least this often; the WAL is truncated behind materializations")
	fs.Int64Var(&f.cfg.MaterializeBytes, "materialize-bytes", 64<<20, "materialize a partition whose WAL tail (log after its last materialization) passed this many bytes")
	fs.Uint64Var(&f.cfg.CatchUpEntries, "catch-up-entries", 5000, "raft entries kept in memory behind a materialization for slow followers; one further behind is caught up by shipping a materialization (a raft snapshot)")
	fs.StringVar(&f.cfg.Storage, "storage", "pebble", "where partition state lives: pebble (on disk under <data-dir>/state) or memory (rebuilt from materializations and the WAL at each start)")
	fs.Int64Var(&f.cfg.CacheSize, "cache-size", 0, "memory for the partitions' Pebble block cache and memtables, bytes (0: a quarter of the memory limit, at least 64 MiB)")
	fs.DurationVar(&f.cfg.CutInterval, "cut-interval", 0, "take a consistent cut this often (0: only on kvctl cut create)")
	fs.DurationVar(&f.cfg.CutTimeout, "cut-timeout", 10*time.Second, "fail a cut not finished in every partition within this time")
	fs.StringVar(&f.cfg.SnapshotStore, "snapshot-store", "", "snapshot store URL (file:///dir, s3://bucket?region=...) for snapshots; set the same on every node (default file:// + <data-dir>/snapshots)")
	fs.StringVar(&f.storeAllow, "snapshot-store-allow", "", "comma-separated other store URLs a snapshot request (kvctl --store) may name; any other is refused")
	fs.DurationVar(&f.cfg.SnapshotInterval, "snapshot-interval", 0, "take a snapshot of a new cut this often while this node leads group 0 (0: only on kvctl snapshot create)")
	fs.IntVar(&f.cfg.SnapshotKeep, "snapshot-keep", 0, "prune automatic snapshots beyond the newest this many (0: keep all)")
	fs.Int64Var(&f.cfg.SnapshotUploadRate, "snapshot-upload-rate", 0, "most bytes per second this node uploads to snapshot stores, and reads and writes building full snapshots, all together (0: no limit)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	return f
}

// parse reads the command line, then fills every flag not given there
// from the YAML config file.
func (f *flags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", f.fs.Arg(0))
	}
	if f.configFile != "" {
		if err := f.applyFile(f.configFile); err != nil {
			return err
		}
	}
	if f.join != "" {
		for _, a := range strings.Split(f.join, ",") {
			if a = strings.TrimSpace(a); a != "" {
				f.cfg.Join = append(f.cfg.Join, a)
			}
		}
	}
	for _, a := range strings.Split(f.storeAllow, ",") {
		if a = strings.TrimSpace(a); a != "" {
			f.cfg.SnapshotStoreAllow = append(f.cfg.SnapshotStoreAllow, a)
		}
	}
	f.cfg.Partitions = uint32(f.partitions)
	f.cfg.Limits.MaxKeySize, f.cfg.Limits.MaxValueSize, f.cfg.Limits.MaxTxnOps = f.maxKey, f.maxValue, f.maxTxnOps
	return nil
}

func (f *flags) applyFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for k, v := range raw {
		if k == "config" {
			return fmt.Errorf("config file %s: key %q is not allowed in a config file", path, k)
		}
		if f.fs.Lookup(k) == nil {
			return fmt.Errorf("config file %s: unknown key %q (keys are kvnode flag names)", path, k)
		}
		if set[k] {
			continue // the command line wins
		}
		var s string
		switch x := v.(type) {
		case []any:
			parts := make([]string, len(x))
			for i, p := range x {
				parts[i] = fmt.Sprint(p)
			}
			s = strings.Join(parts, ",")
		case nil:
			s = ""
		default:
			s = fmt.Sprint(x)
		}
		if err := f.fs.Set(k, s); err != nil {
			return fmt.Errorf("config file %s: key %q: %v", path, k, err)
		}
	}
	return nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %v", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// run is kvnode's main. signals, when non-nil, replaces the process's
// SIGINT/SIGTERM (tests).
func run(args []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	if isRestore(args) {
		return runRestore(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "version" {
		if len(args) > 1 {
			fmt.Fprintf(stderr, "kvnode version: unexpected argument %q\n", args[1])
			return 2
		}
		fmt.Fprintln(stdout, version.Get().String("kvnode"))
		return 0
	}
	f := newFlags(stderr)
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			f.fs.SetOutput(stdout) // asked for: help goes to stdout
			break
		}
	}
	if err := f.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "kvnode: %v\n", err)
		return 2
	}
	if f.version {
		fmt.Fprintln(stdout, version.Get().String("kvnode"))
		return 0
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "kvnode: %v\n", err)
		return 2
	}
	if err := f.cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "kvnode: %v\n", err)
		return 2
	}
	if signals == nil {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(ch)
		signals = ch
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	f.cfg.FatalExit = func(err error) {
		fmt.Fprintf(stderr, "kvnode: fatal: %v\n", err)
		os.Exit(1)
	}
	n, err := server.Start(f.cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "kvnode: %v\n", err)
		return 1
	}
	a := n.Addrs()
	ready := n.Ready()
	for {
		select {
		case <-ready:
			fmt.Fprintf(stdout, "ready id=%s grpc=%s gossip=%s http=%s peer=%s\n", f.cfg.ID, a.GRPC, a.Gossip, a.HTTP, a.Peer)
			ready = nil
		case <-hup:
			_ = n.Reload() // logs what failed; the node keeps what it had
		case err := <-n.Fatal():
			fmt.Fprintf(stderr, "kvnode: fatal: %v\n", err)
			n.Kill()
			return 1
		case sig := <-signals:
			log.Info("signal received; shutting down (send it again to exit at once)", "signal", sig.String())
			ctx, cancel := context.WithTimeout(context.Background(), f.cfg.ShutdownTimeout)
			done := make(chan error, 1)
			go func() { done <- n.Shutdown(ctx) }()
			select {
			case err := <-done:
				cancel()
				if err != nil {
					fmt.Fprintf(stderr, "kvnode: %v\n", err)
					return 1
				}
				return 0
			case <-signals:
				cancel()
				fmt.Fprintln(stderr, "kvnode: second signal: exiting now")
				return 1
			}
		}
	}
}
