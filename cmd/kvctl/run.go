package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/internal/version"
)

// Exit codes (docs/cli.md).
const (
	exitOK              = 0
	exitNotFound        = 1 // also any error without a code of its own
	exitUsage           = 2
	exitUnavailable     = 3
	exitUnknown         = 4
	exitConflict        = 5  // txn: kept conflicting until the deadline
	exitCutFailed       = 6  // cut create: the cluster recorded the cut as failed
	exitCheckFailed     = 7  // check: replicas diverge or could not be checked
	exitCheckpoint      = 8  // checkpoint: some group was not materialized, or some node not asked
	exitSnapshotDamaged = 9  // snapshot check: a piece is missing or corrupt, or a chain does not reach the cut
	exitDenied          = 10 // the cluster refused this client's certificate (none, or a role too low)
)

const (
	defaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	envEndpoints     = "CUTKV_ENDPOINTS"
	envCACert        = "CUTKV_CACERT"
	envCert          = "CUTKV_CERT"
	envKey           = "CUTKV_KEY"
)

// run is the whole program: it parses args, runs the command, prints to
// stdout and stderr, and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(args, stdin, stdout, stderr, os.Getenv)
}

// runEnv is run with the environment injected.
func runEnv(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	g := &globals{getenv: getenv, stdin: stdin}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	code, msg := describe(err, cmd, g)
	fmt.Fprintf(stderr, "Error: %s\n", msg)
	return code
}

// globals holds the global flags and the environment of one run.
type globals struct {
	endpoints   string
	output      string
	writeOut    string // etcdctl's -w, mapped onto output
	timeout     time.Duration
	dialTimeout time.Duration
	maxTxnOps   int // txn --max-ops; 0: the client's default
	cacert      string
	cert        string
	key         string

	getenv func(string) string
	stdin  io.Reader
}

// usageError is a bad flag or argument: exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// runError is a failure after the arguments were accepted; its exit code
// comes from the error.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "kvctl",
		Short: "kvctl talks to a cutkv cluster",
		Long: `kvctl reads and writes keys of a cutkv cluster and shows its state.

Endpoints come from --endpoints, else from $` + envEndpoints + `, else ` + defaultEndpoints + `.
TLS: --cacert (the cluster CA; $` + envCACert + `) makes kvctl speak TLS; --cert and --key
($` + envCert + `, $` + envKey + `) present a client certificate, whose role (read, write, admin)
the cluster checks.
Exit codes: 0 ok, 1 not found (or other error), 2 usage, 3 cluster unavailable, 4 write outcome unknown,
5 transaction kept conflicting (not applied), 6 cut failed, 7 replicas diverge or could not be checked,
8 checkpoint incomplete, 9 snapshot damaged, 10 permission denied.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing command")
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error { return g.applyWriteOut(cmd) },
	}
	// --version prints what `kvctl version` prints in text.
	root.Version = version.Get().String("kvctl")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	f := root.PersistentFlags()
	f.StringVar(&g.endpoints, "endpoints", defaultEndpoints, "comma-separated gRPC addresses of cluster nodes; $"+envEndpoints+" overrides the default")
	f.StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	f.StringVarP(&g.writeOut, "write-out", "w", "", "etcdctl's name for --output: table or simple (text), json")
	f.DurationVar(&g.timeout, "timeout", 5*time.Second, "time limit for the whole command, retries included")
	f.DurationVar(&g.dialTimeout, "dial-timeout", 2*time.Second, "time limit for reaching a first node, and for connecting to any node")
	f.StringVar(&g.cacert, "cacert", "", "CA certificate the servers' certificates chain to: connect with TLS ($"+envCACert+")")
	f.StringVar(&g.cert, "cert", "", "client certificate, whose role the cluster checks ($"+envCert+")")
	f.StringVar(&g.key, "key", "", "key of --cert ($"+envKey+")")
	root.AddCommand(newPutCmd(g), newGetCmd(g), newDelCmd(g), newScanCmd(g), newTxnCmd(g), newMembersCmd(g), newStatusCmd(g),
		newCutCmd(g), newCheckCmd(g), newCheckpointCmd(g), newSnapshotCmd(g), newCertCmd(g), newVersionCmd(g),
		newMemberCmd(g), newEndpointCmd(g))
	return root
}

// endpointList resolves the endpoints: the flag wins over the environment,
// which wins over the default.
func (g *globals) endpointList(cmd *cobra.Command) []string {
	s := g.endpoints
	if !cmd.Flags().Changed("endpoints") {
		if env := strings.TrimSpace(g.getenv(envEndpoints)); env != "" {
			s = env
		}
	}
	var eps []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	return eps
}

func (g *globals) json() bool { return g.output == "json" }

// tlsFiles resolves --cacert, --cert and --key (each flag wins over its
// environment variable); nil when none is set: plaintext.
func (g *globals) tlsFiles(cmd *cobra.Command) (*client.TLSFiles, error) {
	pick := func(flag, v, env string) string {
		if !cmd.Flags().Changed(flag) {
			if e := strings.TrimSpace(g.getenv(env)); e != "" {
				return e
			}
		}
		return v
	}
	t := &client.TLSFiles{CACert: pick("cacert", g.cacert, envCACert), Cert: pick("cert", g.cert, envCert), Key: pick("key", g.key, envKey)}
	switch {
	case t.CACert == "" && t.Cert == "" && t.Key == "":
		return nil, nil
	case t.CACert == "":
		return nil, usagef("--cert and --key need --cacert (the CA the cluster's certificates come from; $%s)", envCACert)
	case (t.Cert == "") != (t.Key == ""):
		return nil, usagef("--cert and --key go together ($%s, $%s)", envCert, envKey)
	}
	return t, nil
}

// withClient checks the global flags, connects and runs fn under the
// command's time limit. Errors from fn are run errors.
func (g *globals) withClient(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	if err := g.checkFlags(); err != nil {
		return err
	}
	eps := g.endpointList(cmd)
	if len(eps) == 0 {
		return usagef("no endpoints: set --endpoints or $%s", envEndpoints)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	tls, err := g.tlsFiles(cmd)
	if err != nil {
		return err
	}
	c, err := client.NewWithConfig(ctx, client.Config{Endpoints: eps, DialTimeout: g.dialTimeout, MaxTxnOps: g.maxTxnOps, TLS: tls})
	if err != nil {
		return &runError{err}
	}
	defer c.Close()
	if err := fn(ctx, c); err != nil {
		return &runError{err}
	}
	return nil
}

// checkFlags checks the global flags other than the endpoints.
func (g *globals) checkFlags() error {
	switch g.output {
	case "text", "json":
	default:
		return usagef("invalid --output %q: want text or json", g.output)
	}
	if g.timeout <= 0 {
		return usagef("invalid --timeout %v: must be positive", g.timeout)
	}
	if g.dialTimeout <= 0 {
		return usagef("invalid --dial-timeout %v: must be positive", g.dialTimeout)
	}
	return nil
}

// describe returns the exit code for err and the message to print, with a
// hint at what to do.
func describe(err error, cmd *cobra.Command, g *globals) (int, string) {
	path := "kvctl"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	var re *runError
	if !errors.As(err, &re) {
		return exitUsage, fmt.Sprintf("%v\nRun '%s --help' for usage.", err, path)
	}
	if hasReason(err, reasonStoreAccess) {
		return exitDenied, fmt.Sprintf("%v\nThe nodes need the store's credentials in their own environment (for s3://: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE), then a restart; kvctl's own certificate is not the problem.", err)
	}
	if errors.Is(err, client.ErrPermissionDenied) {
		return exitDenied, fmt.Sprintf("%v\nUse a client certificate whose role allows this command (--cert/--key or $%s/$%s; kvctl cert create-client NAME --role admin|write|read makes one).", err, envCert, envKey)
	}
	if code, msg, ok := describeSnapshot(err, cmd); ok {
		return code, msg
	}
	var (
		unhealthy   *unhealthyError
		cutFailed   *cutFailedError
		cutNotFound *cutNotFoundError
		checkFailed *checkFailedError
		ckptFailed  *checkpointFailedError
	)
	switch {
	case errors.As(err, &unhealthy):
		return exitUnavailable, fmt.Sprintf("%v\nCheck that those nodes run ('make run' logs: data/nN/kvnode.log) and that --endpoints names their client (gRPC) addresses.", err)
	case errors.As(err, &cutFailed):
		return exitCutFailed, fmt.Sprintf("%v\nNo consistent cut was taken: check that every partition has a leader ('kvctl status'), then run 'kvctl cut create' again.", err)
	case errors.As(err, &cutNotFound):
		return exitNotFound, fmt.Sprintf("%v\nList the cuts the cluster remembers with 'kvctl cut list --limit 0'.", err)
	case errors.As(err, &checkFailed):
		return exitCheckFailed, fmt.Sprintf("%v\n%s", err, checkFailed.hint())
	case errors.As(err, &ckptFailed):
		return exitCheckpoint, fmt.Sprintf("%v\n%s", err, ckptFailed.hint())
	case errors.Is(err, client.ErrOutcomeUnknown) && isCheckpoint(cmd):
		return exitUnknown, fmt.Sprintf("%v\nThe checkpoint may have been taken on some nodes: see the MATERIALIZED column of 'kvctl status', or run 'kvctl checkpoint' again (that is harmless).", err)
	case errors.Is(err, client.ErrOutcomeUnknown) && isCutCreate(cmd):
		return exitUnknown, fmt.Sprintf("%v\nThe cut may or may not have been taken: see 'kvctl cut list'.", err)
	case errors.Is(err, client.ErrOutcomeUnknown):
		if isTxn(cmd) {
			return exitUnknown, fmt.Sprintf("%v\nThe transaction may or may not have been applied: read its keys back before retrying it.", err)
		}
		return exitUnknown, fmt.Sprintf("%v\nThe write may or may not have been applied: read the key back before retrying it.", err)
	case errors.Is(err, client.ErrConflict):
		return exitConflict, fmt.Sprintf("%v\nThe transaction kept conflicting with other transactions until --timeout and was not applied: run it again, or raise --timeout.", err)
	case errors.Is(err, client.ErrNotFound):
		var oe *client.OpError
		if errors.As(err, &oe) && oe.Key != nil {
			return exitNotFound, fmt.Sprintf("key %s not found", client.QuoteKey(oe.Key))
		}
		return exitNotFound, "not found"
	case errors.Is(err, client.ErrInvalidArgument) && isTxn(cmd):
		return exitUsage, fmt.Sprintf("%v\nA transaction has at most --max-ops compares and ops per branch; a branch writes a key at most once and reads no key it writes; keys are 1 to %d bytes, values at most %d bytes.", err, client.MaxKeySize, client.MaxValueSize)
	case errors.Is(err, client.ErrInvalidArgument):
		return exitUsage, fmt.Sprintf("%v\nKeys must be 1 to %d bytes and values at most %d bytes.", err, client.MaxKeySize, client.MaxValueSize)
	case errors.Is(err, client.ErrUnavailable):
		return exitUnavailable, fmt.Sprintf("%v\nNo node answered in time: check that the nodes at %s are running and reachable (set --endpoints or $%s), or raise --dial-timeout and --timeout.",
			err, strings.Join(g.endpointList(cmd), ","), envEndpoints)
	default:
		return exitNotFound, err.Error()
	}
}

func isTxn(cmd *cobra.Command) bool { return cmd != nil && cmd.Name() == "txn" }

func isCheckpoint(cmd *cobra.Command) bool { return cmd != nil && cmd.Name() == "checkpoint" }

func isCutCreate(cmd *cobra.Command) bool {
	return cmd != nil && cmd.Name() == "create" && cmd.HasParent() && cmd.Parent().Name() == "cut"
}
