package server

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateTLSFlags: half a set of certificate flags, or a peer port
// off loopback without them, is refused naming the flags that are
// missing; complete sets and loopback plaintext are accepted.
func TestValidateTLSFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		says []string // what the error says; nil: valid
	}{
		{"no TLS on loopback", func(*Config) {}, nil},
		{"peer TLS", func(c *Config) { c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile = "n1.crt", "n1.key", "ca.crt" }, nil},
		{"client TLS", func(c *Config) { c.CertFile, c.KeyFile = "n1.crt", "n1.key" }, nil},
		{"client TLS with CA", func(c *Config) { c.CertFile, c.KeyFile, c.TrustedCAFile = "n1.crt", "n1.key", "ca.crt" }, nil},
		{"insecure peer", func(c *Config) { c.PeerAddr, c.InsecurePeer = "0.0.0.0:7301", true }, nil},
		{"peer cert only", func(c *Config) { c.PeerCertFile = "n1.crt" },
			[]string{"missing --peer-key-file and --peer-trusted-ca-file"}},
		{"peer CA missing", func(c *Config) { c.PeerCertFile, c.PeerKeyFile = "n1.crt", "n1.key" },
			[]string{"missing --peer-trusted-ca-file"}},
		{"client cert without key", func(c *Config) { c.CertFile = "n1.crt" }, []string{"missing --key-file"}},
		{"client key without cert", func(c *Config) { c.KeyFile = "n1.key" }, []string{"missing --cert-file"}},
		{"client CA only", func(c *Config) { c.TrustedCAFile = "ca.crt" }, []string{"missing --cert-file and --key-file"}},
		{"open peer port", func(c *Config) { c.PeerAddr = "0.0.0.0:7301" }, []string{"0.0.0.0:7301", "--insecure-peer", "--peer-cert-file"}},
	} {
		checkValidate(t, tc.name, tc.set, tc.says)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7301": true, "127.8.9.10:0": true, "[::1]:7301": true, "localhost:7301": true,
		"0.0.0.0:7301": false, ":7301": false, "10.0.0.1:7301": false, "[::]:7301": false, "n1.example.com:7301": false, "nonsense": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestValidateAdvertise: every --advertise-* value must be a host:port
// others can dial, with a port in 1-65535; --advertise-peer must be the
// node's --initial-cluster address; each refusal names the flag and says
// what is wrong.
func TestValidateAdvertise(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		says []string // nil: valid
	}{
		{"none", func(*Config) {}, nil},
		{"every flag", func(c *Config) {
			c.HTTPAddr = "0.0.0.0:7201"
			c.AdvertiseGRPC, c.AdvertiseGossip, c.AdvertiseHTTP = "kvnode-0.kvnode-peer.db.svc:7001", "10.1.2.3:7101", "kvnode-0.kvnode-peer.db.svc.:7201"
			c.AdvertisePeer, c.InitialCluster = "[fd00::1]:7301", "n1=[fd00::1]:7301,n2=10.0.0.2:7301"
		}, nil},
		{"peer not in the initial cluster yet", func(c *Config) { c.AdvertisePeer = "10.0.0.1:7301" }, nil},
		{"no port", func(c *Config) { c.AdvertiseGRPC = "kvnode-0" }, []string{"--advertise-grpc", `"kvnode-0"`, "host:port"}},
		{"port 0", func(c *Config) { c.AdvertisePeer = "10.0.0.1:0" }, []string{"--advertise-peer", "1-65535"}},
		{"port too large", func(c *Config) { c.AdvertiseGossip = "10.0.0.1:65536" }, []string{"--advertise-gossip", "1-65535"}},
		{"port not a number", func(c *Config) { c.AdvertiseGRPC = "h:grpc" }, []string{"--advertise-grpc", `"grpc"`}},
		{"empty host", func(c *Config) { c.AdvertiseGRPC = ":7001" }, []string{"--advertise-grpc", "host is empty"}},
		{"unspecified v4", func(c *Config) { c.AdvertiseGossip = "0.0.0.0:7101" }, []string{"--advertise-gossip", "listen-everywhere"}},
		{"unspecified v6", func(c *Config) { c.AdvertiseGRPC = "[::]:7001" }, []string{"--advertise-grpc", "listen-everywhere"}},
		{"bad host", func(c *Config) { c.AdvertiseGRPC = "kv node:7001" }, []string{"--advertise-grpc", "neither an IP address nor a DNS name"}},
		{"label starting with a dash", func(c *Config) { c.AdvertiseGRPC = "-kv.example:7001" }, []string{"--advertise-grpc", "DNS name"}},
		{"http disabled", func(c *Config) { c.AdvertiseHTTP = "h:7201" }, []string{"--advertise-http", "--http-addr is empty"}},
		{"peer differs from the initial cluster", func(c *Config) {
			c.AdvertisePeer, c.InitialCluster = "10.0.0.9:7301", "n1=10.0.0.1:7301,n2=10.0.0.2:7301"
		}, []string{"--advertise-peer 10.0.0.9:7301", "10.0.0.1:7301", "--initial-cluster"}},
	} {
		checkValidate(t, tc.name, tc.set, tc.says)
	}
}

// checkValidate validates the config n1 with a temporary data dir and set
// applied: no error when says is nil, else an ErrConfig that says each of
// says.
func checkValidate(t *testing.T, name string, set func(*Config), says []string) {
	t.Helper()
	cfg := Config{ID: "n1", DataDir: t.TempDir()}
	set(&cfg)
	err := cfg.Validate()
	if says == nil {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		return
	}
	if !errors.Is(err, ErrConfig) {
		t.Errorf("%s: %v, want ErrConfig", name, err)
		return
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", name, err, s)
		}
	}
}
