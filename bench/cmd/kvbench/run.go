package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/client"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the run could not start, or stopped early
	exitUsage  = 2
)

// run is the whole program: it parses args, runs the benchmark, prints to
// stdout and stderr, and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runEnv(ctx, args, stdout, stderr, os.Getenv)
}

// usageError is a bad flag or argument: exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// flags holds what the command line says besides the Config.
type flags struct {
	cfg           Config
	endpoints     string
	metrics       string
	output        string
	out           string
	reportMD      string
	reportSection string
	// cacert, cert and key are --cacert, --cert and --key (cutkv's TLS).
	cacert, cert, key string
}

// runEnv is run with the context and the environment injected.
func runEnv(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	var f flags
	exit := exitOK
	root := &cobra.Command{
		Use:   "kvbench [flags] WORKLOAD",
		Short: "kvbench puts load on a cutkv (or etcd) cluster and measures it",
		Long: `kvbench puts load on a cutkv (or etcd) cluster and reports throughput,
latency percentiles (p50, p90, p99, p99.9, max) and errors by kind.

Workloads:
` + workloadHelp() + `
A run has up to three phases: preload (get and mixed write every key once,
bank every account, with at least 32 workers), warmup (--warmup, not
measured), and the measured phase, which ends after --duration or --total
operations.

txn and bank send transactions. One that was not applied because of
concurrent ones (a failed compare, or cutkv's ErrConflict after the
client's retries) is an abort, not an error: the output shows aborts and
the abort rate (aborts / attempted). bank initialises --accounts accounts
to a known total; during the measured phase an auditor (a connection of
its own) reads every account in one transaction each --audit-interval and
once at the end. A wrong total stops the run at once (exit 1).

Every run ends by itself, and sends load only to --endpoints (and reads
--metrics-url).

Endpoints come from --endpoints, else from $` + envCutkvEndpoints + ` (cutkv) or $` + envEtcdEndpoints + ` (etcd),
else ` + defaultCutkvEndpoints + ` (cutkv) or ` + defaultEtcdEndpoints + ` (etcd).

cutkv over TLS: --cacert (the CA the nodes' certificates chain to), and
--cert and --key for a client certificate when the nodes require one
(kvctl cert create-client NAME --role write); kvbench reads no
environment variable for them.

Exit codes: 0 ok, 1 the run failed or stopped early, 2 usage.`,
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			exit, err = f.run(cmd, args, stdout, stderr, getenv)
			return err
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	fl := root.Flags()
	fl.SortFlags = false
	c := &f.cfg
	fl.StringVar(&c.Target, "target", "cutkv", "database to drive: "+driverNames())
	fl.StringVar(&f.endpoints, "endpoints", "", "comma-separated addresses of cluster nodes (default: per --target, see above)")
	fl.StringVar(&f.cacert, "cacert", "", "cutkv: CA certificate the servers' certificates chain to: connect with TLS")
	fl.StringVar(&f.cert, "cert", "", "cutkv: client certificate, whose role the cluster checks (write for put, txn and bank; admin for --cut-interval)")
	fl.StringVar(&f.key, "key", "", "cutkv: key of --cert")
	fl.IntVar(&c.Clients, "clients", defaultClients, "concurrent workers, each with one operation in flight")
	fl.IntVar(&c.Conns, "conns", defaultConns, "client connections, shared by the workers round-robin (at most --clients)")
	fl.DurationVar(&c.Duration, "duration", 0, "length of the measured phase (default 10s unless --total is given)")
	fl.Int64Var(&c.Total, "total", 0, "operations in the measured phase, instead of --duration")
	fl.DurationVar(&c.Warmup, "warmup", 0, "unmeasured load before the measured phase")
	fl.Float64Var(&c.Rate, "rate", 0, "limit on operations per second, all workers together (0: none)")
	fl.IntVar(&c.KeySize, "key-size", defaultKeySize, "key length in bytes (zero-padded decimal key index)")
	fl.IntVar(&c.ValueSize, "value-size", defaultValueSize, "value length in bytes")
	fl.Int64Var(&c.Keyspace, "keyspace", defaultKeyspace, "number of distinct keys, chosen uniformly")
	fl.Float64Var(&c.ReadRatio, "read-ratio", defaultReadRatio, "fraction of Gets in the mixed workload")
	fl.StringVar(&c.TxnKeys, "txn-keys", defaultTxnKeys, "txn on cutkv: the two keys in different partitions (cross: 2PC) or in the same one (same: 1PC)")
	fl.IntVar(&c.Partitions, "partitions", 0, "txn on cutkv: the cluster's partition count, to place the keys (0: ask the cluster)")
	fl.Int64Var(&c.Accounts, "accounts", defaultAccounts, fmt.Sprintf("bank: number of accounts, %d each initially (at most %d)", initialBalance, maxAccounts))
	fl.DurationVar(&c.CutInterval, "cut-interval", 0, "cutkv: take a consistent cut this often during the measured phase and report cut completion times (0: none)")
	fl.DurationVar(&c.AuditInterval, "audit-interval", defaultAuditInterval, "bank: time between two audits that read every account in one transaction and check the total")
	fl.Uint64Var(&c.Seed, "seed", 0, "seed for keys and values (0: from the clock; the seed used is reported)")
	fl.DurationVar(&c.OpTimeout, "op-timeout", defaultOpTimeout, "time limit of one operation, retries included")
	fl.DurationVar(&c.DialTimeout, "dial-timeout", defaultDialTimeout, "time limit for connecting")
	fl.Int64Var(&c.MaxErrors, "max-errors", defaultMaxErrors, "stop the run (exit 1) after this many failed operations (0: never)")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.StringVar(&f.out, "out", "", "also write the JSON result to this file")
	fl.DurationVar(&c.Progress, "progress", 2*time.Second, "print a progress line on stderr this often: elapsed, ops, ops/s over the interval, errors (0: never)")
	fl.StringVar(&f.metrics, "metrics-url", "", "comma-separated Prometheus URLs of the nodes (cutkv e.g. 127.0.0.1:7201, etcd e.g. 127.0.0.1:2379): report the nodes' CPU time per operation and, for cutkv, WAL records per fsync (and for txn and bank the Txn attempts answered OK and Aborted) over the measured phase")
	fl.StringVar(&f.reportMD, "report-md", "", "Markdown file whose table --report-section gets this run's row (added or replaced)")
	fl.StringVar(&f.reportSection, "report-section", "", "name of the table in --report-md")
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetContext(ctx)
	if err := root.Execute(); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "kvbench: %v\nRun 'kvbench --help' for usage.\n", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "kvbench: %v\n", err)
		if exit == exitOK {
			exit = exitFailed
		}
	}
	return exit
}

// run validates the flags, runs the benchmark and writes the outputs.
func (f *flags) run(cmd *cobra.Command, args []string, stdout, stderr io.Writer, getenv func(string) string) (int, error) {
	c := &f.cfg
	switch len(args) {
	case 0:
		return exitUsage, usagef("missing WORKLOAD: one of %s", workloadNames())
	case 1:
		c.Workload = args[0]
	default:
		return exitUsage, usagef("one WORKLOAD expected, got %q", strings.Join(args, " "))
	}
	fl := cmd.Flags()
	c.ValueSizeSet = fl.Changed("value-size")
	c.ReadRatioSet = fl.Changed("read-ratio")
	c.KeyspaceSet = fl.Changed("keyspace")
	c.TxnKeysSet = fl.Changed("txn-keys")
	c.AccountsSet = fl.Changed("accounts")
	c.AuditIntervalSet = fl.Changed("audit-interval")
	// A zero flag would mean "default" to Validate: refuse it here.
	for _, name := range []string{"clients", "conns", "key-size", "keyspace", "op-timeout", "dial-timeout"} {
		if fl.Changed(name) && fl.Lookup(name).Value.String() == zeroOf(fl.Lookup(name).Value.Type()) {
			return exitUsage, usagef("invalid --%s %s: must be positive", name, fl.Lookup(name).Value.String())
		}
	}
	if fl.Changed("duration") && c.Duration == 0 {
		return exitUsage, usagef("invalid --duration 0: must be positive")
	}
	if fl.Changed("total") && c.Total == 0 {
		return exitUsage, usagef("invalid --total 0: must be positive")
	}
	switch f.output {
	case "text", "json":
	default:
		return exitUsage, usagef("invalid --output %q: want text or json", f.output)
	}
	if (f.reportMD == "") != (f.reportSection == "") {
		return exitUsage, usagef("--report-md and --report-section go together")
	}
	if f.reportSection != "" {
		if err := checkSectionName(f.reportSection); err != nil {
			return exitUsage, &usageError{err}
		}
	}
	if d, ok := drivers[c.Target]; ok {
		if fl.Changed("endpoints") {
			c.Endpoints = splitEndpoints(f.endpoints)
			if len(c.Endpoints) == 0 {
				return exitUsage, usagef("--endpoints is empty")
			}
		} else {
			c.Endpoints = d.DefaultEndpoints(getenv)
		}
	}
	if f.cacert != "" || f.cert != "" || f.key != "" {
		c.TLS = &client.TLSFiles{CACert: f.cacert, Cert: f.cert, Key: f.key}
	}
	for _, u := range splitEndpoints(f.metrics) {
		mu, err := metricsURL(u)
		if err != nil {
			return exitUsage, &usageError{err}
		}
		c.MetricsURLs = append(c.MetricsURLs, mu)
	}
	if err := c.Validate(); err != nil {
		return exitUsage, &usageError{err}
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}

	res, runErr := benchmark(cmd.Context(), c, stderr)
	if res == nil {
		return exitFailed, runErr
	}
	if err := f.write(res, stdout); err != nil {
		return exitFailed, err
	}
	if runErr != nil {
		return exitFailed, runErr
	}
	return exitOK, nil
}

// zeroOf is how pflag prints the zero value of a flag type.
func zeroOf(typ string) string {
	if typ == "duration" {
		return "0s"
	}
	return "0"
}

// write prints res and writes the files asked for.
func (f *flags) write(res *Result, stdout io.Writer) error {
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	js = append(js, '\n')
	if f.output == "json" {
		if _, err := stdout.Write(js); err != nil {
			return err
		}
	} else if err := res.writeText(stdout); err != nil {
		return err
	}
	if f.out != "" {
		if err := os.WriteFile(f.out, js, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if f.reportMD != "" {
		if err := updateReport(f.reportMD, f.reportSection, reportRow(res)); err != nil {
			return fmt.Errorf("--report-md: %w", err)
		}
	}
	return nil
}
