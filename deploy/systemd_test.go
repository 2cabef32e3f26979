package deploy

import (
	"bufio"
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// unit reads a systemd unit file: for each "Key=value" line, every value
// the key was given in order (an empty assignment is kept: it resets a
// list, as CapabilityBoundingSet= does). Continuation lines ("\" at the end)
// are joined.
func unit(t *testing.T, path string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
	var pending string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, pending = pending+line, ""
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not Key=value", path, line)
		}
		out[strings.TrimSpace(k)] = append(out[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return out
}

// descriptorBudget is what kvnode needs of RLIMIT_NOFILE with its default
// --max-connections (server/trust.go, fileLimitConns): two listeners of
// 1024 connections, 256 kept, 4 per group (16 partitions and group 0 at
// most), and up to 1000 Pebble tables open.
const descriptorBudget = 2*1024 + 256 + 4*17 + 1000

// TestSystemdUnit: the unit's ExecStart runs kvnode with real flags only,
// its data dir is writable under the hardening (ProtectSystem=strict
// makes everything else read-only), the descriptor limit fits the node's
// budget, and the hardening options are there. The example config the
// unit reads holds kvnode flag names only (kvnode refuses others at start).
func TestSystemdUnit(t *testing.T) {
	path := filepath.Join("systemd", "kvnode.service")
	u := unit(t, path)
	real := kvnodeFlags(t)
	exec := u["ExecStart"]
	if len(exec) != 1 {
		t.Fatalf("%s: %d ExecStart lines, want 1", path, len(exec))
	}
	argv := strings.Fields(exec[0])
	if filepath.Base(argv[0]) != "kvnode" || !filepath.IsAbs(argv[0]) {
		t.Fatalf("%s: ExecStart runs %q, want an absolute path to kvnode", path, argv[0])
	}
	flags := parseFlags(t, path+" ExecStart", argv[1:], real)
	dataDir := flags["data-dir"]
	if dataDir == "" {
		t.Errorf("%s: ExecStart gives no --data-dir; the unit must say which directory it makes writable", path)
	}
	writable := false
	for _, list := range append(u["ReadWritePaths"], prefixAll("/var/lib/", u["StateDirectory"])...) {
		for _, p := range strings.Fields(list) {
			p = strings.TrimLeft(p, "-+")
			writable = writable || dataDir == p || strings.HasPrefix(dataDir, strings.TrimSuffix(p, "/")+"/")
		}
	}
	if !writable {
		t.Errorf("%s: --data-dir %s is not under ReadWritePaths %v: ProtectSystem=strict would make it read-only", path, dataDir, u["ReadWritePaths"])
	}
	for key, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes", "ProtectHome": "yes",
		"CapabilityBoundingSet": "", "Restart": "on-failure",
	} {
		got := u[key]
		if len(got) == 0 || got[len(got)-1] != want {
			t.Errorf("%s: %s=%v, want %s=%s", path, key, got, key, want)
		}
	}
	if got := u["User"]; len(got) == 0 || got[0] == "root" || got[0] == "0" {
		t.Errorf("%s: User=%v: run as an unprivileged user", path, got)
	}
	nofile := u["LimitNOFILE"]
	if len(nofile) == 0 {
		t.Fatalf("%s: no LimitNOFILE", path)
	}
	soft, _, _ := strings.Cut(nofile[len(nofile)-1], ":")
	n, err := strconv.Atoi(soft)
	if err != nil || n < descriptorBudget {
		t.Errorf("%s: LimitNOFILE=%s: kvnode needs at least %d descriptors with its default --max-connections", path, nofile[len(nofile)-1], descriptorBudget)
	}

	// The config file the unit names: every key a kvnode flag.
	cfgPath := flags["config"]
	if cfgPath == "" {
		t.Fatalf("%s: ExecStart gives no --config: the node's own settings need a file", path)
	}
	example := filepath.Join("systemd", filepath.Base(cfgPath))
	var keys map[string]any
	if err := yaml.Unmarshal(readFile(t, example), &keys); err != nil {
		t.Fatalf("%s (the example of --config %s): %v", example, cfgPath, err)
	}
	for k := range keys {
		if !real[k] || k == "config" {
			t.Errorf("%s: key %q is not a kvnode flag (kvnode refuses the file)", example, k)
		}
		if _, twice := flags[k]; twice {
			t.Errorf("%s: key %q is also on the unit's command line, which wins: drop one", example, k)
		}
	}
}

// TestSystemdUnitStartsKvnode: kvnode accepts the unit's command line with
// the example config (addresses, --initial-cluster, limits), up to loading
// the certificates the example names, which this machine lacks.
func TestSystemdUnitStartsKvnode(t *testing.T) {
	path := filepath.Join("systemd", "kvnode.service")
	argv := strings.Fields(unit(t, path)["ExecStart"][0])
	example, err := filepath.Abs(filepath.Join("systemd", "kvnode.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := yaml.Unmarshal(readFile(t, example), &keys); err != nil {
		t.Fatal(err)
	}
	cert, _ := keys["peer-cert-file"].(string)
	kvnodeRefusesOnlyTLS(t, path, setFlag(argv[1:], "config", example), cert)
}

func prefixAll(prefix string, values []string) []string {
	var out []string
	for _, v := range values {
		for _, f := range strings.Fields(v) {
			out = append(out, prefix+f)
		}
	}
	return out
}
