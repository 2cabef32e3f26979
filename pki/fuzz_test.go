package pki

import (
	"testing"
)

// FuzzParseCABundle feeds arbitrary bytes to the CA file decoder: it never
// panics, and what it accepts is one or more CA certificates.
func FuzzParseCABundle(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cas, err := parseCABundle(data)
		if err != nil {
			if cas != nil {
				t.Fatal("certificates with an error")
			}
			return
		}
		if len(cas) == 0 {
			t.Fatal("no certificates and no error")
		}
		for _, c := range cas {
			if !c.IsCA || !c.BasicConstraintsValid {
				t.Fatalf("accepted a certificate that is no CA: %v", c.Subject)
			}
		}
	})
}
