package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestValidateName(t *testing.T) {
	for _, s := range []string{"n1", "a", "node-1.east_2", strings.Repeat("x", MaxNameLen), "...", "-"} {
		if err := ValidateName(s); err != nil {
			t.Errorf("ValidateName(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", ".", "..", strings.Repeat("x", MaxNameLen+1), "a/b", "a b", "n1\x00", "é", "a:b", "n%31"} {
		if err := ValidateName(s); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", s, err)
		}
	}
}

func TestIdentityOfCreatedCerts(t *testing.T) {
	dir := t.TempDir()
	mustCA(t, dir)
	node := readCert(t, mustNode(t, dir, dir, "n1", "127.0.0.1", "localhost").Cert)
	if id, ok := NodeID(node); !ok || id != "n1" {
		t.Errorf("NodeID(node) = %q, %v", id, ok)
	}
	if r, ok := RoleOf(node); ok {
		t.Errorf("a node certificate has role %v", r)
	}
	for _, role := range []Role{RoleRead, RoleWrite, RoleAdmin} {
		name := "c-" + role.String()
		c := readCert(t, mustClient(t, dir, dir, name, role).Cert)
		if r, ok := RoleOf(c); !ok || r != role {
			t.Errorf("RoleOf(%s) = %v, %v", name, r, ok)
		}
		if id, ok := NodeID(c); ok {
			t.Errorf("client %s is node %q", name, id)
		}
		if c.Subject.CommonName != name || len(c.Subject.OrganizationalUnit) != 1 || c.Subject.OrganizationalUnit[0] != role.String() {
			t.Errorf("client %s subject %v", name, c.Subject)
		}
	}
}

func TestClientCNIsNotNode(t *testing.T) {
	dir := t.TempDir()
	mustCA(t, dir)
	c := readCert(t, mustClient(t, dir, dir, "n1", RoleAdmin).Cert)
	if c.Subject.CommonName != "n1" {
		t.Fatalf("CN %q", c.Subject.CommonName)
	}
	if id, ok := NodeID(c); ok {
		t.Errorf("client certificate with CN n1 passes for node %q", id)
	}
	// Nor does a bare certificate with that CN and nothing else.
	if id, ok := NodeID(&x509.Certificate{Subject: pkix.Name{CommonName: "n1"}}); ok {
		t.Errorf("CN alone passes for node %q", id)
	}
}

// TestAmbiguousSignedCert: a CA that signs a certificate with two roles
// gets a certificate that allows nothing.
func TestAmbiguousSignedCert(t *testing.T) {
	dir := t.TempDir()
	mustCA(t, dir)
	now := time.Now()
	f, err := createLeaf(dir, dir, "both", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "both", OrganizationalUnit: []string{"read"}},
		URIs:        uris(t, "cutkv://role/read", "cutkv://role/admin"),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now.Add(-time.Minute), now.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := RoleOf(readCert(t, f.Cert)); ok {
		t.Errorf("a certificate with roles read and admin has role %v", r)
	}
}

func uris(t testing.TB, ss ...string) []*url.URL {
	var us []*url.URL
	for _, s := range ss {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, u)
	}
	return us
}

func TestIdentityRules(t *testing.T) {
	tests := []struct {
		name string
		uris []string
		ous  []string
		node string // "" for none
		role Role   // RoleNone for none
	}{
		{name: "node", uris: []string{"cutkv://node/n1"}, node: "n1"},
		{name: "node twice", uris: []string{"cutkv://node/n1", "cutkv://node/n1"}, node: "n1"},
		{name: "two nodes", uris: []string{"cutkv://node/n1", "cutkv://node/n2"}},
		{name: "node with other schemes", uris: []string{"spiffe://x/y", "cutkv://node/n1"}, node: "n1"},
		{name: "node ignores OU", uris: []string{"cutkv://node/n1"}, ous: []string{"admin"}, node: "n1"},
		{name: "node and role", uris: []string{"cutkv://node/n1", "cutkv://role/admin"}},
		{name: "upper-case scheme", uris: []string{"CUTKV://node/n1"}, node: "n1"},
		{name: "upper-case host", uris: []string{"cutkv://NODE/n1"}},
		{name: "port", uris: []string{"cutkv://node:1/n1"}},
		{name: "query", uris: []string{"cutkv://node/n1?x"}},
		{name: "empty query", uris: []string{"cutkv://node/n1?"}},
		{name: "fragment", uris: []string{"cutkv://node/n1#x"}},
		{name: "user", uris: []string{"cutkv://u@node/n1"}},
		{name: "escape", uris: []string{"cutkv://node/n%31"}},
		{name: "slash in id", uris: []string{"cutkv://node/n1/x"}},
		{name: "trailing slash", uris: []string{"cutkv://node/n1/"}},
		{name: "no id", uris: []string{"cutkv://node/"}},
		{name: "opaque", uris: []string{"cutkv:node/n1"}},
		{name: "unknown kind makes the cert malformed", uris: []string{"cutkv://node/n1", "cutkv://group/x"}},
		{name: "role URI", uris: []string{"cutkv://role/write"}, role: RoleWrite},
		{name: "role URI and same OU", uris: []string{"cutkv://role/write"}, ous: []string{"write"}, role: RoleWrite},
		{name: "role OU only", ous: []string{"read"}, role: RoleRead},
		{name: "role OU among others", ous: []string{"engineering", "admin"}, role: RoleAdmin},
		{name: "two role URIs", uris: []string{"cutkv://role/read", "cutkv://role/admin"}},
		{name: "two role OUs", ous: []string{"read", "admin"}},
		{name: "URI and OU disagree", uris: []string{"cutkv://role/read"}, ous: []string{"admin"}},
		{name: "role none", uris: []string{"cutkv://role/none"}},
		{name: "role upper case", uris: []string{"cutkv://role/Admin"}},
		{name: "OU upper case is no role", ous: []string{"Admin"}},
		{name: "nothing"},
	}
	for _, tt := range tests {
		c := &x509.Certificate{URIs: uris(t, tt.uris...), Subject: pkix.Name{CommonName: "n1", OrganizationalUnit: tt.ous}}
		id, ok := NodeID(c)
		if ok != (tt.node != "") || id != tt.node {
			t.Errorf("%s: NodeID = %q, %v; want %q", tt.name, id, ok, tt.node)
		}
		r, ok := RoleOf(c)
		if ok != (tt.role != RoleNone) || r != tt.role {
			t.Errorf("%s: RoleOf = %v, %v; want %v", tt.name, r, ok, tt.role)
		}
	}
	if _, ok := NodeID(nil); ok {
		t.Error("NodeID(nil) ok")
	}
	if _, ok := RoleOf(nil); ok {
		t.Error("RoleOf(nil) ok")
	}
}

// FuzzIdentity checks the identity rules on certificates with arbitrary
// URI SANs and OUs: nothing panics, nothing is both a node and a client,
// and whatever is read is there in canonical form.
func FuzzIdentity(f *testing.F) {
	f.Add("cutkv://node/n1", "", "", "")
	f.Add("cutkv://role/read", "", "read", "")
	f.Add("cutkv://node/n1", "cutkv://role/admin", "", "")
	f.Add("", "", "write", "admin")
	f.Fuzz(func(t *testing.T, u1, u2, ou1, ou2 string) {
		c := &x509.Certificate{Subject: pkix.Name{OrganizationalUnit: []string{ou1, ou2}}}
		for _, s := range []string{u1, u2} {
			if u, err := url.Parse(s); err == nil && s != "" {
				c.URIs = append(c.URIs, u)
			}
		}
		id, nodeOK := NodeID(c)
		role, roleOK := RoleOf(c)
		if nodeOK && roleOK {
			t.Fatalf("both node %q and role %v", id, role)
		}
		if nodeOK {
			if err := ValidateName(id); err != nil {
				t.Fatalf("node id %q: %v", id, err)
			}
			if !hasURI(c, nodeURI(id).String()) {
				t.Fatalf("node %q read from %v", id, c.URIs)
			}
		}
		if roleOK {
			if !role.valid() {
				t.Fatalf("role %v", role)
			}
			if !hasURI(c, roleURI(role).String()) && ou1 != role.String() && ou2 != role.String() {
				t.Fatalf("role %v read from %v, OUs %q %q", role, c.URIs, ou1, ou2)
			}
		}
		for _, u := range c.URIs {
			if id, role, _, ok := parseIdentityURI(u); ok {
				canon := nodeURI(id)
				if role != RoleNone {
					canon = roleURI(role)
				}
				back, err := url.Parse(canon.String())
				if err != nil {
					t.Fatal(err)
				}
				if id2, role2, _, ok2 := parseIdentityURI(back); !ok2 || id2 != id || role2 != role {
					t.Fatalf("%v does not read back: %q %v %v", canon, id2, role2, ok2)
				}
			}
		}
	})
}

func hasURI(c *x509.Certificate, s string) bool {
	for _, u := range c.URIs {
		if u.String() == s {
			return true
		}
	}
	return false
}
