package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFileAndFlagPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "node.yaml")
	yaml := `id: n2
grpc-addr: 127.0.0.1:9002
join: [127.0.0.1:9101, 127.0.0.1:9103]
partitions: 8
shutdown-timeout: 3s
max-txn-ops: 64
snapshot-upload-rate: 1048576
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFlags(&bytes.Buffer{})
	if err := f.parse([]string{"--config", file, "--grpc-addr", "127.0.0.1:9999"}); err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if c.ID != "n2" || c.GRPCAddr != "127.0.0.1:9999" || c.Partitions != 8 || c.ShutdownTimeout != 3*time.Second || c.Limits.MaxTxnOps != 64 || c.SnapshotUploadRate != 1<<20 {
		t.Fatalf("config = %+v", c)
	}
	if strings.Join(c.Join, ",") != "127.0.0.1:9101,127.0.0.1:9103" {
		t.Fatalf("join = %v", c.Join)
	}
	for _, bad := range []string{"bogus: 1\n", "config: other.yaml\n", "partitions: many\n", "id: [\n"} {
		if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := newFlags(&bytes.Buffer{}).parse([]string{"--config", file}); err == nil {
			t.Errorf("config %q accepted", bad)
		}
	}
}

func TestHelpAndUsageExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb, nil); code != 0 || !strings.Contains(out.String(), "--initial-cluster") {
		t.Fatalf("--help: exit %d, stdout %q", code, out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"--no-such-flag"}, &out, &errb, nil); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
	if code := run([]string{"stray-arg"}, &out, &errb, nil); code != 2 {
		t.Fatalf("stray argument: exit %d", code)
	}
	if code := run([]string{}, &out, &errb, nil); code != 2 || !strings.Contains(errb.String(), "--id") {
		t.Fatalf("missing --id: exit %d, stderr %q", code, errb.String())
	}
}

// TestAdvertiseFlags: the --advertise-* flags reach the config, from the
// command line and from a config file, and a bad one is refused with exit
// 2 naming the flag.
func TestAdvertiseFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(file, []byte("advertise-http: n1.example:7201\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFlags(&bytes.Buffer{})
	if err := f.parse([]string{"--config", file, "--advertise-grpc", "n1.example:7001", "--advertise-peer=10.0.0.1:7301", "--advertise-gossip", "n1.example:7101"}); err != nil {
		t.Fatal(err)
	}
	if c := f.cfg; c.AdvertiseGRPC != "n1.example:7001" || c.AdvertisePeer != "10.0.0.1:7301" || c.AdvertiseGossip != "n1.example:7101" || c.AdvertiseHTTP != "n1.example:7201" {
		t.Fatalf("advertise flags: %q %q %q %q", c.AdvertiseGRPC, c.AdvertisePeer, c.AdvertiseGossip, c.AdvertiseHTTP)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--id", "n1", "--data-dir", t.TempDir(), "--advertise-peer", "0.0.0.0:7301"}, &out, &errb, nil); code != 2 || !strings.Contains(errb.String(), "--advertise-peer") {
		t.Fatalf("--advertise-peer 0.0.0.0:7301: exit %d, stderr %q", code, errb.String())
	}
}
