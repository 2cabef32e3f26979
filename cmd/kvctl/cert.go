package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cutkv/cutkv/pki"
)

// Defaults of the cert commands.
const (
	certDefaultDir      = "./certs"
	certDefaultCAName   = "cutkv CA"
	certDefaultCAExpiry = 10 * 365 * 24 * time.Hour // 87600h
	certDefaultExpiry   = 365 * 24 * time.Hour      // 8760h
)

func newCertCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Make the cluster's CA and the certificates of nodes and clients",
		Long: `Make the cluster's CA and the certificates of its nodes and clients (package
pki; DESIGN.md, Trust). These commands write files and talk to no cluster:
--endpoints and the other connection flags are not used.

A node certificate names its node (URI SAN cutkv://node/ID) and its hosts,
and serves both the peer and the client port. A client certificate carries
a role, read, write or admin (URI SAN cutkv://role/ROLE and OU ROLE).
Keys are ECDSA P-256, written with mode 0600; nothing is overwritten
without --force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing command: create-ca, create-node or create-client")
		},
	}
	cmd.AddCommand(newCertCreateCACmd(g), newCertCreateNodeCmd(g), newCertCreateClientCmd(g))
	return cmd
}

// certFlags are the flags every cert command has, and --ca-dir, which
// the commands that sign with the CA have.
type certFlags struct {
	dir    string
	expiry time.Duration
	force  bool
	caDir  string
}

func (f *certFlags) add(cmd *cobra.Command, what string, expiry time.Duration) {
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", certDefaultDir, "directory to write the "+what+" files to (made if missing)")
	fl.DurationVar(&f.expiry, "expiry", expiry, "how long the certificate is valid")
	fl.BoolVar(&f.force, "force", false, "overwrite files that exist")
}

// addCADir adds --ca-dir, for the commands that sign with the CA.
func (f *certFlags) addCADir(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.caDir, "ca-dir", certDefaultDir, "directory of the CA's ca.crt and ca.key")
}

// check checks the common flags and the global ones that matter here.
func (f *certFlags) check(g *globals) error {
	if g.output != "text" {
		return usagef("invalid --output %q: the cert commands print text only", g.output)
	}
	if f.expiry <= 0 {
		return usagef("invalid --expiry %v: must be positive", f.expiry)
	}
	if f.dir == "" {
		return usagef("invalid --dir: empty")
	}
	return nil
}

func (f *certFlags) options() pki.Options {
	return pki.Options{ValidFor: f.expiry, Force: f.force}
}

func newCertCreateCACmd(g *globals) *cobra.Command {
	var (
		f    certFlags
		name string
	)
	cmd := &cobra.Command{
		Use:   "create-ca",
		Short: "Make a new CA: DIR/ca.crt and DIR/ca.key",
		Long: `Make a new CA for a cluster: DIR/ca.crt, the certificate every node and
client trusts, and DIR/ca.key, its key, which only these commands need:
keep it off the nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(g); err != nil {
				return err
			}
			files, leaf, err := certCreated(pki.CreateCA(f.dir, name, f.options()))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "wrote %s (CA key: keep it private and off the nodes)\n", files.Key)
			fmt.Fprintf(w, "wrote %s (CA certificate: every node and client trusts it)\n", files.Cert)
			_, err = fmt.Fprintf(w, "CA %q, valid until %s\n", leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339))
			return err
		},
	}
	f.add(cmd, "CA", certDefaultCAExpiry)
	cmd.Flags().StringVar(&name, "name", certDefaultCAName, "the CA's name (its certificate's common name)")
	return cmd
}

func newCertCreateNodeCmd(g *globals) *cobra.Command {
	var (
		f     certFlags
		hosts []string
	)
	cmd := &cobra.Command{
		Use:   "create-node ID --hosts HOST,...",
		Short: "Make the certificate of node ID: DIR/ID.crt and DIR/ID.key",
		Long: `Make the certificate of node ID, signed by the CA in --ca-dir: DIR/ID.crt
and DIR/ID.key. --hosts lists every DNS name and IP address that nodes and
clients dial the node by (for example --hosts 10.0.0.1,n1.example.com); a
dial by any other name is refused. The one certificate serves the peer
port and the client port, and the node dials its peers with it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(g); err != nil {
				return err
			}
			id := args[0]
			if err := pki.ValidateName(id); err != nil {
				return usagef("invalid node ID: %v", err)
			}
			hs := certHosts(hosts)
			if len(hs) == 0 {
				return usagef("missing --hosts: the DNS names and IP addresses the node is dialed by, e.g. --hosts 127.0.0.1,localhost")
			}
			files, leaf, err := certCreated(pki.CreateNode(f.dir, f.caDir, id, hs, f.options()))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			writeCertWrote(w, files)
			fmt.Fprintf(w, "node %s, hosts %s, valid until %s\n", id, strings.Join(hs, ","), leaf.NotAfter.UTC().Format(time.RFC3339))
			fmt.Fprintf(w, "kvnode peer port:   --peer-cert-file %s --peer-key-file %s --peer-trusted-ca-file %s\n",
				shellQuote(files.Cert), shellQuote(files.Key), shellQuote(files.CA))
			_, err = fmt.Fprintf(w, "kvnode client port: --cert-file %s --key-file %s --trusted-ca-file %s\n",
				shellQuote(files.Cert), shellQuote(files.Key), shellQuote(files.CA))
			return err
		},
	}
	f.add(cmd, "node's", certDefaultExpiry)
	f.addCADir(cmd)
	cmd.Flags().StringSliceVar(&hosts, "hosts", nil, "comma-separated DNS names and IP addresses of the node (required)")
	return cmd
}

func newCertCreateClientCmd(g *globals) *cobra.Command {
	var (
		f    certFlags
		role string
	)
	cmd := &cobra.Command{
		Use:   "create-client NAME --role read|write|admin",
		Short: "Make the certificate of client NAME: DIR/NAME.crt and DIR/NAME.key",
		Long: `Make the certificate of client NAME with a role, signed by the CA in
--ca-dir: DIR/NAME.crt and DIR/NAME.key. read allows reads, write also
writes and transactions, admin also cuts, checkpoints, snapshots and
restore. NAME appears in the servers' logs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(g); err != nil {
				return err
			}
			name := args[0]
			if err := pki.ValidateName(name); err != nil {
				return usagef("invalid client NAME: %v", err)
			}
			if role == "" {
				return usagef("missing --role: read, write or admin")
			}
			r, err := pki.ParseRole(role)
			if err != nil {
				return usagef("invalid --role: %v", err)
			}
			files, leaf, err := certCreated(pki.CreateClient(f.dir, f.caDir, name, r, f.options()))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			writeCertWrote(w, files)
			fmt.Fprintf(w, "client %s, role %s, valid until %s\n", name, r, leaf.NotAfter.UTC().Format(time.RFC3339))
			_, err = fmt.Fprintf(w, "kvctl: --cacert %s --cert %s --key %s\n", shellQuote(files.CA), shellQuote(files.Cert), shellQuote(files.Key))
			return err
		},
	}
	f.add(cmd, "client's", certDefaultExpiry)
	f.addCADir(cmd)
	cmd.Flags().StringVar(&role, "role", "", "the client's role: read, write or admin (required)")
	return cmd
}

// certError sorts an error of pki's Create functions: bad input is a
// usage error (exit 2), anything else (a file that exists, a missing or
// broken CA, I/O) a run error (exit 1).
func certError(err error) error {
	for _, bad := range []error{pki.ErrInvalidName, pki.ErrInvalidHost, pki.ErrInvalidRole, pki.ErrInvalidOptions} {
		if errors.Is(err, bad) {
			return &usageError{err}
		}
	}
	if errors.Is(err, pki.ErrExists) {
		return &runError{&certExistsError{err}}
	}
	return &runError{err}
}

// certExistsError: a cert command would overwrite a file (exit 1); the
// message says what to do.
type certExistsError struct{ err error }

func (e *certExistsError) Error() string {
	return e.err.Error() + "\nTo replace the files, remove them or run again with --force."
}

func (e *certExistsError) Unwrap() error { return e.err }

// certCreated takes what a Create function of pki returned: its error
// sorted by certError, or the files it wrote loaded back through pki, as a
// node would load them, with their certificate.
func certCreated(f pki.Files, err error) (pki.Files, *x509.Certificate, error) {
	if err != nil {
		return pki.Files{}, nil, certError(err)
	}
	leaf, err := certLeaf(f)
	return f, leaf, err
}

// certLeaf loads f through pki and returns its certificate.
func certLeaf(f pki.Files) (*x509.Certificate, error) {
	r, err := pki.NewReloader(f, nil)
	if err != nil {
		return nil, &runError{fmt.Errorf("the files written do not load: %w", err)}
	}
	return r.Leaf(), nil
}

// certHosts splits and trims --hosts, dropping empty entries.
func certHosts(flag []string) []string {
	var hs []string
	for _, h := range flag {
		if h = strings.TrimSpace(h); h != "" {
			hs = append(hs, h)
		}
	}
	return hs
}

func writeCertWrote(w io.Writer, f pki.Files) {
	fmt.Fprintf(w, "wrote %s\n", f.Key)
	fmt.Fprintf(w, "wrote %s\n", f.Cert)
}

// shellQuote quotes a path for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-+:=@,", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
