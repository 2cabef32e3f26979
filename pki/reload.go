package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// checkInterval is how often, at most, a handshake stats the files to
	// see whether they changed.
	checkInterval = time.Second
	// expiryWarning: a loaded certificate that expires within this long is
	// logged as a warning.
	expiryWarning = 7 * 24 * time.Hour
	// minVersion is the oldest TLS version any config accepts. Go
	// negotiates TLS 1.3 whenever both sides have it.
	minVersion = tls.VersionTLS12
)

// Files names the PEM files a Reloader loads. Paths are used as given
// (relative ones against the working directory) at every load.
type Files struct {
	// Cert is this side's certificate chain: the leaf first, then any
	// intermediates. "" for none (a client that only verifies servers).
	// Cert and Key are both given or both "".
	Cert string
	// Key is the private key of Cert's leaf (PKCS #8, PKCS #1 or SEC 1).
	Key string
	// CA is the bundle of one or more CA certificates that the other
	// side's certificate must chain to: the server's for ClientConfig, a
	// client's for ServerConfig. "" for none, and then nothing can be
	// verified: ClientConfig refuses every server, and ServerConfig
	// refuses every client certificate it is shown (a client that shows
	// none passes NoClientCert and VerifyClientCertIfGiven). System roots
	// are never used: cluster traffic trusts the cluster's CA only.
	CA string
}

// validate checks the shape of f, not the files.
func (f Files) validate() error {
	switch {
	case (f.Cert == "") != (f.Key == ""):
		return fmt.Errorf("%w: a certificate file needs its key file and a key file its certificate file (cert %q, key %q)", ErrInvalidOptions, f.Cert, f.Key)
	case f.Cert == "" && f.CA == "":
		return fmt.Errorf("%w: no files: need a certificate and key, a CA, or both", ErrInvalidOptions)
	}
	return nil
}

// paths are the files to watch, in stamps order; "" is not watched.
func (f Files) paths() [3]string { return [3]string{f.Cert, f.Key, f.CA} }

// stamp is what a stat of one file saw; fi is nil when the file is not
// configured or could not be stat'ed.
type stamp struct{ fi os.FileInfo }

func statFile(path string) stamp {
	if path == "" {
		return stamp{}
	}
	fi, err := os.Stat(path) // follows symlinks, as a swapped-in secret volume needs
	if err != nil {
		return stamp{}
	}
	return stamp{fi}
}

// same reports whether a and b saw the same file content, as far as size,
// modification time and identity (device and inode, which an atomic
// rename changes) tell.
func (a stamp) same(b stamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil
	}
	return a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime()) && os.SameFile(a.fi, b.fi)
}

type stamps [3]stamp

func (f Files) stat() stamps {
	var s stamps
	for i, p := range f.paths() {
		s[i] = statFile(p)
	}
	return s
}

func (s stamps) same(t stamps) bool {
	for i := range s {
		if !s[i].same(t[i]) {
			return false
		}
	}
	return true
}

// material is one load of the files. It is immutable once published.
type material struct {
	cert *tls.Certificate  // nil when Files.Cert is ""
	leaf *x509.Certificate // cert's leaf
	// pool holds cas; it is empty, never nil, when Files.CA is "": an
	// empty pool trusts nothing, where nil would mean the system roots to
	// a client and no verification to a server. Made once per load, not
	// per handshake.
	pool *x509.CertPool
	cas  []*x509.Certificate
}

// Reloader holds a certificate, its key and a CA bundle loaded from Files,
// and hands out TLS configs that always use the newest successful load.
// Files are loaded again by Reload (the server calls it on SIGHUP) and,
// when they changed, by the next handshake: a handshake stats the files
// at most once per checkInterval (a second) and reloads if the size,
// modification time or identity of any of them changed. A load that fails
// keeps what was loaded before; the handshake goes on with it and the
// failure is logged once per change of the files.
//
// All methods are safe for concurrent use. A handshake that runs the
// change check does the stats (and a reload, if one is due) on its own
// goroutine; other handshakes meanwhile go on with the loaded material.
type Reloader struct {
	files Files
	log   *slog.Logger
	now   func() time.Time // the clock of the change check and of expiry logs; tests set it
	check func(*x509.Certificate) error

	cur       atomic.Pointer[material]
	nextCheck atomic.Int64 // UnixNano before which a handshake does not stat the files

	mu   sync.Mutex // serializes loads
	seen stamps     // REQUIRES: mu held. The files as the last load, good or bad, saw them.
}

// NewReloader loads f and returns a Reloader serving it. The error names
// the file that is missing, is not PEM, holds a key that does not match
// its certificate, or holds a CA bundle with something other than CA
// certificates. A certificate that has expired, or is not valid yet, or
// expires within a week, is loaded all the same (a node must be able to
// start and be given new files) and logged on log, as an error when it is
// unusable now and a warning when it soon will be; so is a certificate
// that does not chain to the CA file. log nil logs nothing.
func NewReloader(f Files, log *slog.Logger) (*Reloader, error) {
	return NewCheckedReloader(f, nil, log)
}

// NewCheckedReloader is NewReloader with check run on the leaf of every
// load of f.Cert, the first and each reload: an error fails the load,
// and the Reloader keeps what it had. The server uses it to refuse a
// node certificate that names another node.
func NewCheckedReloader(f Files, check func(leaf *x509.Certificate) error, log *slog.Logger) (*Reloader, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{files: f, log: log, now: time.Now, check: check}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload loads the files now, whether or not they changed. On success new
// handshakes use what it loaded (connections already open keep theirs);
// on failure the Reloader keeps what it had and the error says which file
// is wrong and why. Reload does file I/O and blocks while another load
// runs.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loadLocked(r.files.stat())
}

// loadLocked loads the files and publishes them; st is what a stat saw
// before reading them, so a change that races the read is seen by the
// next check. REQUIRES: r.mu held.
func (r *Reloader) loadLocked(st stamps) error {
	r.seen = st
	m, err := loadMaterial(r.files, r.check)
	if err != nil {
		return err
	}
	r.cur.Store(m)
	r.logLoaded(m)
	return nil
}

// maybeReload is the change check that handshakes run: at most once per
// checkInterval, it stats the files and reloads them if they changed
// since the last load. It never fails: a failed load is logged.
func (r *Reloader) maybeReload() {
	now := r.now().UnixNano()
	next := r.nextCheck.Load()
	if now < next || !r.nextCheck.CompareAndSwap(next, now+int64(checkInterval)) {
		return // not due, or another handshake is checking
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.files.stat()
	if st.same(r.seen) {
		return
	}
	if err := r.loadLocked(st); err != nil {
		r.log.Error("pki: changed certificate files not loaded; new connections keep using the files loaded before", "err", err)
	}
}

// Leaf returns the certificate this side presents (parsed), nil when
// Files.Cert is "". It is the newest successful load; Leaf does no I/O.
// The server checks its node id against it at start (NodeID).
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().leaf }

// loadMaterial reads and checks the files of f.
func loadMaterial(f Files, check func(*x509.Certificate) error) (*material, error) {
	m := &material{pool: x509.NewCertPool()}
	if f.Cert != "" {
		cert, err := loadKeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		m.cert, m.leaf = cert, cert.Leaf
		if check != nil {
			if err := check(cert.Leaf); err != nil {
				return nil, fmt.Errorf("pki: certificate file %s: %w", f.Cert, err)
			}
		}
	}
	if f.CA != "" {
		data, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("pki: CA file: %w", err)
		}
		cas, err := parseCABundle(data)
		if err != nil {
			return nil, fmt.Errorf("%w: CA file %s: %v", ErrInvalidFile, f.CA, err)
		}
		m.cas = cas
		for _, c := range cas {
			m.pool.AddCert(c)
		}
	}
	return m, nil
}

// loadKeyPair reads a certificate chain and its key.
func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("pki: certificate file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: key file: %w", err)
	}
	// tls.X509KeyPair says what is wrong but not in which file; these
	// two checks name the file for the common mistakes.
	if b, _ := pem.Decode(certPEM); b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: certificate file %s: does not start with a PEM CERTIFICATE block", ErrInvalidFile, certFile)
	}
	if b, _ := pem.Decode(keyPEM); b == nil {
		return nil, fmt.Errorf("%w: key file %s: no PEM block", ErrInvalidFile, keyFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate file %s with key file %s: %v", ErrInvalidFile, certFile, keyFile, err)
	}
	if cert.Leaf == nil { // only with GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: certificate file %s: %v", ErrInvalidFile, certFile, err)
		}
	}
	return &cert, nil
}

// parseCABundle parses one or more PEM CA certificates. Anything else in
// the PEM blocks (a key, a leaf certificate) is an error: a key in a
// trust bundle means files were mixed up, and a leaf would be trusted as
// a root. Text outside the blocks is ignored, as openssl writes it.
func parseCABundle(data []byte) ([]*x509.Certificate, error) {
	var cas []*x509.Certificate
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is %q, want CERTIFICATE", n, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %v", n, err)
		}
		if !c.BasicConstraintsValid || !c.IsCA {
			return nil, fmt.Errorf("certificate %d (%q) is not a CA certificate", n, c.Subject.CommonName)
		}
		cas = append(cas, c)
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("no PEM CERTIFICATE block")
	}
	return cas, nil
}

// logLoaded logs what m holds, and loudly what will not work.
func (r *Reloader) logLoaded(m *material) {
	now := r.now()
	attrs := []any{"cert_file", r.files.Cert, "ca_file", r.files.CA, "cas", len(m.cas)}
	if m.leaf != nil {
		attrs = append(attrs, "subject", m.leaf.Subject.CommonName, "serial", fmt.Sprintf("%x", m.leaf.SerialNumber), "not_after", m.leaf.NotAfter)
	}
	r.log.Info("pki: loaded certificates", attrs...)
	if m.leaf != nil {
		r.logValidity("certificate", r.files.Cert, m.leaf, now)
		if len(m.cas) > 0 {
			inter := x509.NewCertPool()
			for _, der := range m.cert.Certificate[1:] {
				if c, err := x509.ParseCertificate(der); err == nil {
					inter.AddCert(c)
				}
			}
			opts := x509.VerifyOptions{Roots: m.pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
			if _, err := m.leaf.Verify(opts); err != nil {
				r.log.Warn("pki: certificate does not verify against the CA file; a side that trusts only that CA refuses it",
					"cert_file", r.files.Cert, "ca_file", r.files.CA, "err", err)
			}
		}
	}
	for _, c := range m.cas {
		r.logValidity("CA certificate", r.files.CA, c, now)
	}
}

func (r *Reloader) logValidity(what, file string, c *x509.Certificate, now time.Time) {
	attrs := []any{"file", file, "subject", c.Subject.CommonName, "not_before", c.NotBefore, "not_after", c.NotAfter}
	switch {
	case now.After(c.NotAfter):
		r.log.Error("pki: "+what+" has EXPIRED; handshakes that need it fail until it is replaced", attrs...)
	case now.Before(c.NotBefore):
		r.log.Error("pki: "+what+" is NOT VALID YET (is the clock right?); handshakes that need it fail", attrs...)
	case c.NotAfter.Sub(now) < expiryWarning:
		r.log.Warn("pki: "+what+" expires soon", append(attrs, "left", c.NotAfter.Sub(now).Round(time.Minute))...)
	}
}

// ServerConfig returns the config of a TLS listener that presents the
// loaded certificate and, as clientAuth asks, verifies client
// certificates against the loaded CA (chain, validity and the ClientAuth
// extended key usage). Each handshake takes the newest material through
// GetConfigForClient, so a reloaded certificate and a reloaded CA take
// effect for new connections; open connections keep theirs. Session
// tickets are off, so a connection cannot resume past a CA that was
// removed.
//
// clientAuth is one of tls.NoClientCert, tls.VerifyClientCertIfGiven and
// tls.RequireAndVerifyClientCert. pki never accepts a client certificate
// it has not verified: tls.RequestClientCert is taken as
// VerifyClientCertIfGiven and tls.RequireAnyClientCert as
// RequireAndVerifyClientCert. With Files.CA "" every client certificate
// shown is refused. A handshake fails with ErrNoCertificate when
// Files.Cert is "".
//
// Authorization is the caller's: read the identity of the verified leaf
// (ConnectionState.PeerCertificates[0], or VerifiedChains[0][0]) with
// RoleOf or NodeID.
func (r *Reloader) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	switch clientAuth {
	case tls.RequestClientCert:
		clientAuth = tls.VerifyClientCertIfGiven
	case tls.RequireAnyClientCert:
		clientAuth = tls.RequireAndVerifyClientCert
	}
	return r.serverConfig(clientAuth, nil)
}

// PeerServerConfig is ServerConfig(tls.RequireAndVerifyClientCert) for the
// peer listener that also refuses, in the handshake, a client certificate
// that has no node identity (NodeID): a client certificate from the same
// CA does not get onto the peer port. Which node it is remains for the
// caller to check against the messages it sends.
func (r *Reloader) PeerServerConfig() *tls.Config {
	return r.serverConfig(tls.RequireAndVerifyClientCert, requireNode)
}

func (r *Reloader) serverConfig(clientAuth tls.ClientAuthType, verify func(tls.ConnectionState) error) *tls.Config {
	return &tls.Config{
		MinVersion: minVersion,
		ClientAuth: clientAuth,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			r.maybeReload()
			m := r.cur.Load()
			if m.cert == nil {
				return nil, fmt.Errorf("%w: the listener has no certificate file", ErrNoCertificate)
			}
			return &tls.Config{
				MinVersion:             minVersion,
				Certificates:           []tls.Certificate{*m.cert},
				ClientAuth:             clientAuth,
				ClientCAs:              m.pool,
				SessionTicketsDisabled: true,
				VerifyConnection:       verify,
			}, nil
		},
	}
}

// ClientConfig returns the config of a TLS client. It presents the loaded
// certificate when the server asks for one (reload-aware: each handshake
// takes the newest through GetClientCertificate; none is sent when
// Files.Cert is ""). The server is verified by crypto/tls itself against
// the CA pool loaded when ClientConfig was called: chain, validity, the
// ServerAuth extended key usage, and the host name in ServerName, which
// tls.Dial and gRPC set to the host that is dialed (an IP address is
// checked against the certificate's IP SANs). With Files.CA "" the pool is
// empty and every server is refused: system roots are never used.
//
// The CA pool is fixed in the returned config: a server's host name is
// only known to crypto/tls's own verification, so the pool cannot be
// swapped behind it. To pick up a reloaded CA, take a new config for each
// new connection; pki/grpctls does that for gRPC. ClientConfig runs the
// change check first, so a new config sees changed files.
func (r *Reloader) ClientConfig() *tls.Config { return r.clientConfig(nil) }

// PeerClientConfig is ClientConfig for dialing a peer; it also refuses a
// server whose certificate has no node identity (NodeID).
func (r *Reloader) PeerClientConfig() *tls.Config { return r.clientConfig(requireNode) }

func (r *Reloader) clientConfig(verify func(tls.ConnectionState) error) *tls.Config {
	r.maybeReload()
	return &tls.Config{
		MinVersion:           minVersion,
		RootCAs:              r.cur.Load().pool,
		GetClientCertificate: r.clientCertificate,
		VerifyConnection:     verify,
	}
}

func (r *Reloader) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	r.maybeReload()
	if m := r.cur.Load(); m.cert != nil {
		return m.cert, nil
	}
	return &tls.Certificate{}, nil // none: the server decides
}

// requireNode refuses a verified peer certificate without a node identity.
func requireNode(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: the peer showed no certificate", ErrNotNode)
	}
	leaf := cs.PeerCertificates[0]
	if _, ok := NodeID(leaf); !ok {
		return fmt.Errorf("%w: %q (serial %x) has no cutkv://node/ identity", ErrNotNode, leaf.Subject.CommonName, leaf.SerialNumber)
	}
	return nil
}
