package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

type result struct {
	code           int
	stdout, stderr string
}

// kvbench runs the program with env as its whole environment.
func kvbench(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := runEnv(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return result{code, out.String(), errb.String()}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "missing WORKLOAD"},
		{[]string{"put", "get"}, "one WORKLOAD expected"},
		{[]string{"scan"}, `unknown workload "scan"`},
		{[]string{"txn", "--txn-keys", "diagonal"}, `invalid --txn-keys "diagonal"`},
		{[]string{"put", "--txn-keys", "same"}, "--txn-keys applies only to the txn workload"},
		{[]string{"txn", "--target", "etcd", "--txn-keys", "same"}, "apply only to --target cutkv"},
		{[]string{"txn", "--target", "etcd", "--partitions", "4"}, "apply only to --target cutkv"},
		{[]string{"txn", "--partitions", "-1"}, "invalid --partitions -1"},
		{[]string{"txn", "--partitions", "1"}, "--txn-keys cross needs at least 2 partitions"},
		{[]string{"bank", "--partitions", "4"}, "--partitions applies only to the txn workload"},
		{[]string{"txn", "--keyspace", "1"}, "invalid --keyspace 1"},
		{[]string{"txn", "--accounts", "10"}, "--accounts applies only to the bank workload"},
		{[]string{"put", "--audit-interval", "1s"}, "--audit-interval applies only to the bank workload"},
		{[]string{"bank", "--accounts", "0"}, "invalid --accounts 0"},
		{[]string{"bank", "--accounts", "1"}, "invalid --accounts 1"},
		{[]string{"bank", "--accounts", "10001"}, "invalid --accounts 10001"},
		{[]string{"bank", "--audit-interval", "0"}, "invalid --audit-interval 0s"},
		{[]string{"bank", "--audit-interval", "-1s"}, "invalid --audit-interval"},
		{[]string{"bank", "--keyspace", "100"}, "--keyspace does not apply to the bank workload"},
		{[]string{"bank", "--value-size", "10"}, "--value-size does not apply to the bank workload"},
		{[]string{"bank", "--key-size", "7", "--accounts", "1000"}, "--key-size 7 is too small for --accounts 1000"},
		{[]string{"put", "--target", "redis"}, `unknown --target "redis"`},
		{[]string{"put", "--duration", "1s", "--total", "10"}, "--duration and --total exclude each other"},
		{[]string{"put", "--duration", "0"}, "invalid --duration 0"},
		{[]string{"put", "--duration", "-1s"}, "invalid --duration"},
		{[]string{"put", "--total", "0"}, "invalid --total 0"},
		{[]string{"put", "--total", "-3"}, "invalid --total"},
		{[]string{"put", "--clients", "0"}, "invalid --clients 0"},
		{[]string{"put", "--clients", "-2"}, "invalid --clients"},
		{[]string{"put", "--conns", "0"}, "invalid --conns 0"},
		{[]string{"put", "--key-size", "0"}, "invalid --key-size 0"},
		{[]string{"put", "--key-size", "5000"}, "invalid --key-size 5000"},
		{[]string{"put", "--key-size", "3", "--keyspace", "10000"}, "too small for --keyspace 10000"},
		{[]string{"put", "--value-size", "-1"}, "invalid --value-size"},
		{[]string{"put", "--value-size", "2000000"}, "invalid --value-size"},
		{[]string{"put", "--keyspace", "0"}, "invalid --keyspace 0"},
		{[]string{"put", "--read-ratio", "0.3"}, "--read-ratio applies only to the mixed workload"},
		{[]string{"mixed", "--read-ratio", "1.5"}, "invalid --read-ratio"},
		{[]string{"put", "--rate", "-1"}, "invalid --rate"},
		{[]string{"put", "--warmup", "-1s"}, "invalid --warmup"},
		{[]string{"put", "--op-timeout", "0"}, "invalid --op-timeout"},
		{[]string{"put", "--max-errors", "-1"}, "invalid --max-errors"},
		{[]string{"put", "--progress", "-1s"}, "invalid --progress"},
		{[]string{"put", "-o", "yaml"}, `invalid --output "yaml"`},
		{[]string{"put", "--endpoints", " , "}, "--endpoints is empty"},
		{[]string{"put", "--report-md", "x.md"}, "--report-md and --report-section go together"},
		{[]string{"put", "--report-section", "a"}, "--report-md and --report-section go together"},
		{[]string{"put", "--report-md", "x.md", "--report-section", "a b"}, "invalid --report-section"},
		{[]string{"put", "--metrics-url", "ftp://x/metrics"}, "invalid --metrics-url"},
		{[]string{"put", "--bogus"}, "unknown flag: --bogus"},
	} {
		r := kvbench(t, nil, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.msg) || r.stdout != "" {
			t.Errorf("kvbench %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.msg)
		}
	}
}

func TestHelp(t *testing.T) {
	r := kvbench(t, nil, "--help")
	if r.code != exitOK || !strings.Contains(r.stdout, "kvbench [flags] WORKLOAD") || !strings.Contains(r.stdout, "txn") {
		t.Errorf("exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestUnreachable: the endpoints come from the environment, and a cluster
// that does not answer fails the run (exit 1) within the dial timeout.
func TestUnreachable(t *testing.T) {
	for _, tc := range []struct {
		target, env string
	}{
		{"cutkv", envCutkvEndpoints},
		{"etcd", envEtcdEndpoints},
	} {
		r := kvbench(t, map[string]string{tc.env: "127.0.0.1:1"}, "put", "--target", tc.target, "--dial-timeout", "300ms", "--duration", "1s")
		if r.code != exitFailed || !strings.Contains(r.stderr, "127.0.0.1:1") || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 naming 127.0.0.1:1", tc.target, r.code, r.stdout, r.stderr)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{Workload: "mixed", Endpoints: []string{"a:1"}, Clients: 1}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Target != "cutkv" || c.Conns != 1 || c.Duration != defaultDuration || c.ReadRatio != defaultReadRatio ||
		c.ValueSize != defaultValueSize || c.Keyspace != defaultKeyspace || c.KeySize != defaultKeySize {
		t.Errorf("defaults: %+v", c)
	}
	// An explicit zero value size is kept.
	c = Config{Workload: "put", Endpoints: []string{"a:1"}, ValueSizeSet: true}
	if err := c.Validate(); err != nil || c.ValueSize != 0 {
		t.Errorf("value size %d, err %v", c.ValueSize, err)
	}
}

func TestTxnConfigDefaults(t *testing.T) {
	c := Config{Workload: "txn", Endpoints: []string{"a:1"}}
	if err := c.Validate(); err != nil || c.TxnKeys != txnKeysCross || c.Partitions != 0 {
		t.Errorf("txn: keys %q, partitions %d, err %v", c.TxnKeys, c.Partitions, err)
	}
	c = Config{Workload: "txn", Target: "etcd", Endpoints: []string{"a:1"}}
	if err := c.Validate(); err != nil || c.TxnKeys != "" {
		t.Errorf("txn on etcd: keys %q, err %v", c.TxnKeys, err)
	}
	c = Config{Workload: "bank", Endpoints: []string{"a:1"}}
	if err := c.Validate(); err != nil || c.Accounts != defaultAccounts || c.AuditInterval != defaultAuditInterval {
		t.Errorf("bank: accounts %d, audit interval %v, err %v", c.Accounts, c.AuditInterval, err)
	}
	// Account keys are the prefix and the index: 5 + 4 digits.
	c = Config{Workload: "bank", Endpoints: []string{"a:1"}, KeySize: 9, Accounts: 10000, AccountsSet: true}
	if err := c.Validate(); err != nil {
		t.Errorf("bank --key-size 9 --accounts 10000: %v", err)
	}
}
