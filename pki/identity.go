package pki

import (
	"crypto/x509"
	"fmt"
	"net/url"
)

// The URI SANs that carry identities (see doc.go, "Identity").
const (
	uriScheme = "cutkv"
	nodeHost  = "node" // cutkv://node/<id>
	roleHost  = "role" // cutkv://role/<role>
)

// MaxNameLen is the longest node id or client name, in bytes.
const MaxNameLen = 64

// ValidateName checks a node id or a client name: 1 to MaxNameLen bytes of
// ASCII letters, digits, '.', '_' and '-', and neither "." nor "..". Such a
// name needs no escaping in a URI, a file name or a log line. The error
// wraps ErrInvalidName and says what is wrong.
func ValidateName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w %.16q...: %d bytes, at most %d", ErrInvalidName, s, len(s), MaxNameLen)
	case s == "." || s == "..":
		return fmt.Errorf("%w %q", ErrInvalidName, s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !nameByte(c) {
			return fmt.Errorf("%w %q: byte %d (%q) is not a letter, digit, '.', '_' or '-'", ErrInvalidName, s, i, c)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// nodeURI is the URI SAN of node id; id must be valid.
func nodeURI(id string) *url.URL {
	return &url.URL{Scheme: uriScheme, Host: nodeHost, Path: "/" + id}
}

// roleURI is the URI SAN of role r; r must be valid.
func roleURI(r Role) *url.URL {
	return &url.URL{Scheme: uriScheme, Host: roleHost, Path: "/" + r.String()}
}

// claims is what a certificate says about whom it belongs to.
type claims struct {
	nodes    []string // ids of the cutkv://node/ URIs, in order
	uriRoles []Role   // roles of the cutkv://role/ URIs
	ouRoles  []Role   // Subject OUs that name a role; other OUs are ignored
	// malformed: a cutkv: URI that is neither of the two forms exactly.
	// Such a certificate was not made by the rules in doc.go, and pki
	// refuses to read any identity from it.
	malformed bool
}

func claimsOf(cert *x509.Certificate) claims {
	var c claims
	for _, u := range cert.URIs {
		id, role, ours, ok := parseIdentityURI(u)
		switch {
		case !ours:
		case !ok:
			c.malformed = true
		case role != RoleNone:
			c.uriRoles = append(c.uriRoles, role)
		default:
			c.nodes = append(c.nodes, id)
		}
	}
	for _, ou := range cert.Subject.OrganizationalUnit {
		if r, err := ParseRole(ou); err == nil {
			c.ouRoles = append(c.ouRoles, r)
		}
	}
	return c
}

// parseIdentityURI reads u as an identity URI. ours reports whether u has
// the cutkv scheme (any other URI is none of pki's business); ok whether it
// is exactly the canonical form of a node id (id set) or of a role (role
// set). Anything else under the scheme — another host, a port, user info,
// a query, a fragment, escapes, a bad id or role — is ours but not ok.
func parseIdentityURI(u *url.URL) (id string, role Role, ours, ok bool) {
	if u == nil || u.Scheme != uriScheme { // url.Parse lowercases the scheme
		return "", RoleNone, false, false
	}
	if len(u.Path) < 2 || u.Path[0] != '/' {
		return "", RoleNone, true, false
	}
	v := u.Path[1:]
	var canon *url.URL
	switch u.Host {
	case nodeHost:
		if ValidateName(v) != nil {
			return "", RoleNone, true, false
		}
		id, canon = v, nodeURI(v)
	case roleHost:
		r, err := ParseRole(v)
		if err != nil {
			return "", RoleNone, true, false
		}
		role, canon = r, roleURI(r)
	default:
		return "", RoleNone, true, false
	}
	// Comparing the whole URI with its canonical form refuses, in one
	// place, every part the forms do not have.
	if u.String() != canon.String() {
		return "", RoleNone, true, false
	}
	return id, role, true, true
}

// NodeID returns the node id of a node certificate: the id in its
// cutkv://node/<id> URI SAN. It never reads the Subject (the CN of a node
// certificate is for humans only), so a client certificate whose CN is
// "n1" is not node n1. ok is false for a nil certificate and for one that
// has no node URI, node URIs with different ids, any role (a node
// certificate has none), or a malformed cutkv: URI.
//
// NodeID does not verify the certificate: call it on a certificate that
// the TLS handshake verified against the cluster CA.
func NodeID(cert *x509.Certificate) (id string, ok bool) {
	if cert == nil {
		return "", false
	}
	c := claimsOf(cert)
	if c.malformed || len(c.nodes) == 0 || len(c.uriRoles) > 0 {
		return "", false
	}
	for _, n := range c.nodes[1:] {
		if n != c.nodes[0] {
			return "", false
		}
	}
	return c.nodes[0], true
}

// RoleOf returns the role of a client certificate: the role of its
// cutkv://role/<role> URI SANs, else of its Subject OUs that name a role
// (OUs that name no role are ignored). ok is false — the certificate
// allows nothing — for a nil certificate and for one with no role, with
// two different roles anywhere (URIs and OUs together: an ambiguous
// certificate is refused, not read generously), with a node URI (a node
// certificate has no role), or with a malformed cutkv: URI.
//
// RoleOf does not verify the certificate: call it on a certificate that
// the TLS handshake verified against the client CA.
func RoleOf(cert *x509.Certificate) (role Role, ok bool) {
	if cert == nil {
		return RoleNone, false
	}
	c := claimsOf(cert)
	if c.malformed || len(c.nodes) > 0 {
		return RoleNone, false
	}
	all := append(c.uriRoles, c.ouRoles...)
	if len(all) == 0 {
		return RoleNone, false
	}
	for _, r := range all[1:] {
		if r != all[0] {
			return RoleNone, false
		}
	}
	return all[0], true
}
