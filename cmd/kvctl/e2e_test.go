package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/internal/clustertest"
)

// TestTxnAgainstRealCluster runs kvctl txn against in-process nodes: the
// bank transfer from docs/cli.md, its failure branch, and a parse error.
func TestTxnAgainstRealCluster(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 4})
	eps := "--endpoints=" + strings.Join(c.Endpoints(), ",")
	kvctl := func(stdin string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{eps}, args...), strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}
	setup := "ver(acct/alice) = 0\nver(acct/bob) = 0\n\nput acct/alice 100\nput acct/bob 50\n\n"
	if code, out, errs := kvctl(setup, "txn"); code != 0 || !strings.HasPrefix(out, "SUCCESS") {
		t.Fatalf("setup txn: exit %d\n%s%s", code, out, errs)
	}
	transfer := `# move 10 from alice to bob if both are as we read them
ver(acct/alice) = 1
ver(acct/bob) = 1

put acct/alice 90
put acct/bob 60

get acct/alice
get acct/bob
`
	code, out, errs := kvctl(transfer, "txn")
	if code != 0 || out != "SUCCESS\nOK\nOK\n" {
		t.Fatalf("transfer: exit %d, output %q %s", code, out, errs)
	}
	// Same compares again: the versions moved, so the failure branch reads.
	code, out, errs = kvctl(transfer, "txn")
	if code != 0 || out != "FAILURE\nacct/alice\n90\nacct/bob\n60\n" {
		t.Fatalf("stale transfer: exit %d, output %q %s", code, out, errs)
	}
	if code, out, _ := kvctl("", "get", "acct/bob"); code != 0 || out != "60\n" {
		t.Fatalf("get after txn: exit %d %q", code, out)
	}
	if code, _, errs := kvctl("bogus(line)\n", "txn"); code != 2 || !strings.Contains(errs, "line 1") {
		t.Fatalf("parse error: exit %d %s", code, errs)
	}
}
