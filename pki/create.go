package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The files of a CA in its directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// clockSkew is how far in the past a new certificate becomes valid, so
// that a machine whose clock is a little behind accepts it at once.
const clockSkew = time.Minute

// Options are what CreateCA, CreateNode and CreateClient share.
type Options struct {
	// ValidFor is how long the certificate is valid, from now; it must be
	// positive. A node or client certificate must not outlive its CA.
	ValidFor time.Duration
	// Force overwrites files that exist. Without it a Create function that
	// finds any of its files refuses with ErrExists naming the file, and
	// writes nothing.
	Force bool
}

func (o Options) validate() error {
	if o.ValidFor <= 0 {
		return fmt.Errorf("%w: validity %v is not positive", ErrInvalidOptions, o.ValidFor)
	}
	return nil
}

// validity is the NotBefore and NotAfter of a certificate made now.
func (o Options) validity() (notBefore, notAfter time.Time) {
	now := time.Now()
	return now.Add(-clockSkew), now.Add(o.ValidFor)
}

// CreateCA makes a new CA: an ECDSA P-256 key and a self-signed
// certificate with Subject CN name that may sign node and client
// certificates but no other CA (path length 0). It writes dir/ca.key
// (mode 0600) and then dir/ca.crt (0644), each crash-atomically, creating
// dir (0700) if needed. name is 1 to 64 bytes of printable UTF-8. It
// returns the files written: Cert and CA are dir/ca.crt, Key is
// dir/ca.key. Keep ca.key off the nodes: only the Create functions need
// it.
func CreateCA(dir, name string, o Options) (Files, error) {
	if err := o.validate(); err != nil {
		return Files{}, err
	}
	nb, na := o.validity()
	return createCA(dir, name, nb, na, o.Force)
}

// createCA is CreateCA with explicit validity; tests make expired CAs.
func createCA(dir, name string, notBefore, notAfter time.Time, force bool) (Files, error) {
	if err := validateCAName(name); err != nil {
		return Files{}, err
	}
	f := Files{Cert: filepath.Join(dir, CACertFile), Key: filepath.Join(dir, CAKeyFile), CA: filepath.Join(dir, CACertFile)}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	if err := issue(f, tmpl, nil, force); err != nil {
		return Files{}, err
	}
	return f, nil
}

// CreateNode makes the certificate of node id, signed by the CA in caDir
// (caDir/ca.crt and caDir/ca.key, as CreateCA writes them): Subject
// CN id, the URI SAN cutkv://node/<id>, a DNS or IP SAN for each of hosts
// (at least one; an IP address is anything net.ParseIP accepts), and the
// extended key usages ServerAuth and ClientAuth, so the one certificate
// serves both listeners and dials peers. It writes dir/<id>.key (0600)
// and then dir/<id>.crt (0644) as CreateCA does, and returns them with CA
// caDir/ca.crt.
func CreateNode(dir, caDir, id string, hosts []string, o Options) (Files, error) {
	if err := o.validate(); err != nil {
		return Files{}, err
	}
	nb, na := o.validity()
	return createNode(dir, caDir, id, hosts, nb, na, o.Force)
}

func createNode(dir, caDir, id string, hosts []string, notBefore, notAfter time.Time, force bool) (Files, error) {
	if err := ValidateName(id); err != nil {
		return Files{}, fmt.Errorf("node id: %w", err)
	}
	dns, ips, err := parseHosts(hosts)
	if err != nil {
		return Files{}, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: id},
		URIs:        []*url.URL{nodeURI(id)},
		DNSNames:    dns,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return createLeaf(dir, caDir, id, tmpl, notBefore, notAfter, force)
}

// CreateClient makes the certificate of client name with role, signed by
// the CA in caDir: Subject CN name and OU role, the URI SAN
// cutkv://role/<role>, and the extended key usage ClientAuth only (it
// cannot serve). role is RoleRead, RoleWrite or RoleAdmin. It writes
// dir/<name>.key and dir/<name>.crt as CreateNode does.
func CreateClient(dir, caDir, name string, role Role, o Options) (Files, error) {
	if err := o.validate(); err != nil {
		return Files{}, err
	}
	nb, na := o.validity()
	return createClient(dir, caDir, name, role, nb, na, o.Force)
}

func createClient(dir, caDir, name string, role Role, notBefore, notAfter time.Time, force bool) (Files, error) {
	if err := ValidateName(name); err != nil {
		return Files{}, fmt.Errorf("client name: %w", err)
	}
	if !role.valid() {
		return Files{}, fmt.Errorf("%w: %v: a client certificate carries read, write or admin", ErrInvalidRole, role)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, OrganizationalUnit: []string{role.String()}},
		URIs:        []*url.URL{roleURI(role)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return createLeaf(dir, caDir, name, tmpl, notBefore, notAfter, force)
}

// createLeaf completes tmpl and writes it, signed by the CA in caDir, as
// dir/<name>.crt and dir/<name>.key.
func createLeaf(dir, caDir, name string, tmpl *x509.Certificate, notBefore, notAfter time.Time, force bool) (Files, error) {
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(caDir, CACertFile)}
	caKeyFile := filepath.Join(caDir, CAKeyFile)
	for _, p := range []string{f.Cert, f.Key} {
		if samePath(p, f.CA) || samePath(p, caKeyFile) {
			return Files{}, fmt.Errorf("%w: %s is a file of the CA; choose another name or directory", ErrInvalidOptions, p)
		}
	}
	ca, err := loadCA(f.CA, caKeyFile)
	if err != nil {
		return Files{}, err
	}
	if notAfter.After(ca.Leaf.NotAfter) {
		return Files{}, fmt.Errorf("%w: the certificate would be valid until %s, after its CA %s expires (%s): ask for a shorter validity, or make a new CA",
			ErrInvalidOptions, notAfter.UTC().Format(time.RFC3339), f.CA, ca.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	if err := issue(f, tmpl, ca, force); err != nil {
		return Files{}, err
	}
	return f, nil
}

// samePath reports whether a and b name the same path (not following
// symlinks).
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// loadCA reads a CA's certificate and key for signing.
func loadCA(certFile, keyFile string) (*tls.Certificate, error) {
	ca, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err // names the file
	}
	if _, ok := ca.PrivateKey.(crypto.Signer); !ok {
		return nil, fmt.Errorf("%w: %s: the key cannot sign", ErrInvalidFile, keyFile)
	}
	if !ca.Leaf.BasicConstraintsValid || !ca.Leaf.IsCA || ca.Leaf.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: %s is not a CA certificate that may sign certificates", ErrInvalidFile, certFile)
	}
	if len(ca.Certificate) > 1 {
		return nil, fmt.Errorf("%w: %s holds %d certificates; a CA file to sign with holds one", ErrInvalidFile, certFile, len(ca.Certificate))
	}
	if now := time.Now(); now.After(ca.Leaf.NotAfter) {
		return nil, fmt.Errorf("%w: the CA in %s expired at %s", ErrInvalidFile, certFile, ca.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return ca, nil
}

// issue makes a key, signs tmpl with it (self-signed when ca is nil) or
// with ca, and writes the key to f.Key and the certificate to f.Cert.
func issue(f Files, tmpl *x509.Certificate, ca *tls.Certificate, force bool) error {
	if !force {
		for _, p := range []string{f.Key, f.Cert} {
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%w: %s (nothing was written)", ErrExists, p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("pki: %w", err)
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: generate key: %w", err)
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return err
	}
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.Leaf, ca.PrivateKey.(crypto.Signer)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return fmt.Errorf("pki: sign %s: %w", f.Cert, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: encode key: %w", err)
	}
	for _, d := range []string{filepath.Dir(f.Key), filepath.Dir(f.Cert)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("pki: %w", err)
		}
	}
	// The key first: a crash between the two leaves a key without its
	// certificate, never a certificate whose key is missing.
	if err := writeFileAtomic(f.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// newSerial returns a random positive serial number of up to 128 bits.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("pki: serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// validateCAName checks the CN of a new CA: free text for humans, but
// bounded and printable.
func validateCAName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: CA name: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: CA name: %d bytes, at most %d", ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: CA name %q: not UTF-8", ErrInvalidName, name)
	}
	for _, c := range name {
		if !unicode.IsPrint(c) {
			return fmt.Errorf("%w: CA name %q: %q is not printable", ErrInvalidName, name, c)
		}
	}
	return nil
}

// parseHosts splits hosts into DNS names and IP addresses, without
// duplicates, in order.
func parseHosts(hosts []string) (dns []string, ips []net.IP, err error) {
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("%w: a node certificate needs at least one host (DNS name or IP address)", ErrInvalidHost)
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !seen[ip.String()] {
				seen[ip.String()] = true
				ips = append(ips, ip)
			}
			continue
		}
		if err := validateDNSName(h); err != nil {
			return nil, nil, err
		}
		if k := strings.ToLower(h); !seen[k] {
			seen[k] = true
			dns = append(dns, h)
		}
	}
	return dns, ips, nil
}

// validateDNSName accepts what crypto/tls matches a dialed host name
// against: dot-separated labels of letters, digits, '-' and '_', the first
// label possibly "*", at most 253 bytes, no trailing dot.
func validateDNSName(h string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: neither an IP address nor a DNS name (%s)", ErrInvalidHost, h, why)
	}
	if h == "" {
		return bad("empty")
	}
	if len(h) > 253 {
		return bad("longer than 253 bytes")
	}
	for i, label := range strings.Split(h, ".") {
		if label == "" {
			return bad("empty label")
		}
		if len(label) > 63 {
			return bad("label longer than 63 bytes")
		}
		if label == "*" && i == 0 {
			continue
		}
		for j := 0; j < len(label); j++ {
			c := label[j]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return bad(fmt.Sprintf("%q not allowed", c))
			}
		}
	}
	return nil
}

// writeFileAtomic writes data to path crash-atomically with mode perm:
// temp file in the same directory, fsync, rename, fsync of the directory.
// A crash leaves either the old file or the new one (and maybe a temp
// file named path.tmp*).
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*") // mode 0600
	if err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: chmod %s: %w", tmp.Name(), err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pki: close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("pki: rename to %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("pki: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("pki: fsync dir %s: %w", dir, err)
	}
	return nil
}
