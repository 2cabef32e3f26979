package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The section benchtrust writes: its heading (with the run number, found
// when the section is first appended) and the markers between which a
// rerun replaces the text. What follows the end marker in the section is
// written by hand and kept.
const (
	sectionTitle = "Trust: TLS cost and connection floods"
	beginMarker  = "<!-- bench-trust:begin -->"
	endMarker    = "<!-- bench-trust:end -->"
)

// kvbenchResult is the part of a kvbench JSON result the tables show.
type kvbenchResult struct {
	OpsPerSec float64 `json:"ops_per_sec"`
	Latency   struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
	Errors struct {
		Total int64 `json:"total"`
	} `json:"errors"`
	WAL *struct {
		CPUUsPerOp float64 `json:"cpu_us_per_op"`
		CPUCores   float64 `json:"cpu_cores"`
	} `json:"wal"`
	Config struct {
		TLS *struct {
			CACert string `json:"cacert"`
		} `json:"tls"`
	} `json:"config"`
	Machine struct {
		LoadAvg string `json:"load_avg"`
	} `json:"machine"`
	StoppedEarly string `json:"stopped_early"`
}

func sectionMain(args []string) error {
	fs := flag.NewFlagSet("section", flag.ContinueOnError)
	results := fs.String("results", "", "the script's results directory (meta.txt, plain-N.json, tls-N.json, flood.json)")
	doc := fs.String("doc", "", "Markdown file to write the section into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *results == "" || *doc == "" || fs.NArg() != 0 {
		return errors.New("want -results DIR -doc FILE")
	}
	meta, err := readMeta(filepath.Join(*results, "meta.txt"))
	if err != nil {
		return err
	}
	body, err := render(*results, meta)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(*doc)
	if err != nil {
		return err
	}
	out, run, err := placeSection(string(old), body)
	if err != nil {
		return fmt.Errorf("%s: %w", *doc, err)
	}
	tmp := *doc + ".bench-trust.tmp"
	if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, *doc); err != nil {
		os.Remove(tmp)
		return err
	}
	fmt.Printf("benchtrust: section %q (run %d) written in %s\n", sectionTitle, run, *doc)
	return nil
}

// readMeta reads the script's KEY=VALUE lines.
func readMeta(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m, sc.Err()
}

var runNumber = regexp.MustCompile(`(?m)^##+ .*\(run (\d+)`)

// placeSection replaces the text between the markers with body, or, when
// the markers are missing, appends the section with the next run number
// (one more than the highest "(run N" in a heading). It returns the run
// number of the section (0 if its heading has none).
func placeSection(doc, body string) (string, int, error) {
	b, e := strings.Index(doc, beginMarker), strings.Index(doc, endMarker)
	if b >= 0 || e >= 0 {
		if b < 0 || e < b || strings.Count(doc, beginMarker) != 1 || strings.Count(doc, endMarker) != 1 {
			return "", 0, errors.New("bench-trust markers missing, repeated or out of order")
		}
		run := 0
		if h := strings.LastIndex(doc[:b], "\n## "+sectionTitle); h >= 0 {
			if m := runNumber.FindStringSubmatch(doc[h+1 : b]); m != nil {
				run, _ = strconv.Atoi(m[1])
			}
		}
		return doc[:b] + beginMarker + "\n" + body + doc[e:], run, nil
	}
	run := 1
	for _, m := range runNumber.FindAllStringSubmatch(doc, -1) {
		if n, _ := strconv.Atoi(m[1]); n >= run {
			run = n + 1
		}
	}
	if !strings.HasSuffix(doc, "\n") {
		doc += "\n"
	}
	doc += fmt.Sprintf("\n## %s (run %d)\n\n%s\n%s%s\n", sectionTitle, run, beginMarker, body, endMarker)
	return doc, run, nil
}

// render writes the generated part of the section.
func render(dir string, meta map[string]string) (string, error) {
	var w strings.Builder
	get := func(k string) string {
		if v := meta[k]; v != "" {
			return v
		}
		return "?"
	}
	fmt.Fprintf(&w, "Written by `scripts/bench-trust.sh` (with its helper `bench/cmd/benchtrust`), %s to %s UTC; rerunning it replaces the text between this section's markers, the reading after them is written by hand.\n\n", get("started"), get("ended"))
	fmt.Fprintf(&w, "* Command: `%s`\n", get("command"))
	commit := "commit " + get("commit")
	if d := meta["dirty"]; d != "" {
		commit += ", built by `make build` from the working tree, which also held uncommitted changes (built in) to " + d
	} else {
		commit += " (clean working tree), built by `make build`"
	}
	fmt.Fprintf(&w, "* Code: %s.\n", commit)
	fmt.Fprintf(&w, "* Machine: %s CPUs (nproc), **2 cores shared with other jobs** (the client and the nodes run on them too), %s, Linux %s; load average %s at the start, %s at the end. `ulimit -n`: %s (hard %s).\n\n",
		get("nproc"), get("cpu"), get("kernel"), get("load_start"), get("load_end"), get("ulimit_soft"), get("ulimit_hard"))

	if meta["part_tls"] == "1" {
		if err := renderTLS(&w, dir, meta, get); err != nil {
			return "", err
		}
	}
	if meta["part_flood"] == "1" {
		if err := renderFlood(&w, dir, meta, get); err != nil {
			return "", err
		}
	}
	return w.String(), nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func renderTLS(w *strings.Builder, dir string, meta map[string]string, get func(string) string) error {
	pairs, err := strconv.Atoi(meta["pairs"])
	if err != nil || pairs < 1 {
		return fmt.Errorf("meta.txt: bad pairs %q", meta["pairs"])
	}
	fmt.Fprintf(w, "### TLS on vs off: Put, %s clients\n\n", get("clients"))
	fmt.Fprintf(w, "Two 3-node clusters on 127.0.0.1 with ports of their own (A: client %s, B: client %s, and peer, gossip and HTTP ports beside them). "+
		"A: plaintext. B: TLS everywhere — peer mutual TLS (`--peer-cert-file --peer-key-file --peer-trusted-ca-file`), client TLS with client certificates required "+
		"(`--cert-file --key-file --trusted-ca-file`; kvbench presents a `write` certificate made by `kvctl cert create-client`), encrypted gossip (`--gossip-key-file`, one 32-byte key); %s. "+
		"Runs A B A B, each on a fresh cluster (its own data directories under a temporary directory, stopped after its run, so only the cluster measured runs); "+
		"nodes `--cut-interval 0`, 16 partitions, WAL fsynced. Each run: `%s` (B adds `--cacert --cert --key`): the clients and connections of the put comparison with etcd above.\n\n",
		get("plain_client"), get("tls_client"), get("tls_confirmed"), get("kvbench"))
	fmt.Fprintf(w, "| pass | cluster | ops/s | p50 ms | p99 ms | node CPU µs/op | node CPU cores | errors | load avg at the end |\n")
	fmt.Fprintf(w, "|--:|---|--:|--:|--:|--:|--:|--:|---|\n")
	type side struct {
		ops, p50, p99, cpu []float64
	}
	var plain, secure side
	for i := 1; i <= pairs; i++ {
		for _, s := range []struct {
			kind, label string
			acc         *side
		}{{"plain", "plaintext", &plain}, {"tls", "TLS", &secure}} {
			var r kvbenchResult
			if err := readJSON(filepath.Join(dir, fmt.Sprintf("%s-%d.json", s.kind, i)), &r); err != nil {
				return err
			}
			if (r.Config.TLS != nil) != (s.kind == "tls") {
				return fmt.Errorf("%s-%d.json: kvbench TLS %v, want %v", s.kind, i, r.Config.TLS != nil, s.kind == "tls")
			}
			cpu, cores := "-", "-"
			if r.WAL != nil && r.WAL.CPUUsPerOp > 0 {
				cpu, cores = fmt.Sprintf("%.0f", r.WAL.CPUUsPerOp), fmt.Sprintf("%.2f", r.WAL.CPUCores)
				s.acc.cpu = append(s.acc.cpu, r.WAL.CPUUsPerOp)
			}
			errs := strconv.FormatInt(r.Errors.Total, 10)
			if r.StoppedEarly != "" {
				errs += " (stopped early: " + r.StoppedEarly + ")"
			}
			fmt.Fprintf(w, "| %d | %s | %s | %.2f | %.2f | %s | %s | %s | %s |\n", i, s.label, thousands(r.OpsPerSec), r.Latency.P50, r.Latency.P99, cpu, cores, errs, r.Machine.LoadAvg)
			s.acc.ops = append(s.acc.ops, r.OpsPerSec)
			s.acc.p50 = append(s.acc.p50, r.Latency.P50)
			s.acc.p99 = append(s.acc.p99, r.Latency.P99)
		}
	}
	fmt.Fprintf(w, "\n| mean of %d run(s) each | plaintext | TLS | TLS / plaintext | per pass |\n|---|--:|--:|--:|---|\n", pairs)
	row := func(name string, a, b []float64, format func(float64) string) {
		if len(a) == 0 || len(b) == 0 {
			fmt.Fprintf(w, "| %s | - | - | - | - |\n", name)
			return
		}
		ma, mb := mean(a), mean(b)
		var per []string
		for i := range min(len(a), len(b)) {
			per = append(per, fmt.Sprintf("%.2f", b[i]/a[i]))
		}
		fmt.Fprintf(w, "| %s | %s | %s | **%.2f** | %s |\n", name, format(ma), format(mb), mb/ma, strings.Join(per, ", "))
	}
	twoDecimals := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	row("ops/s", plain.ops, secure.ops, thousands)
	row("p50 ms", plain.p50, secure.p50, twoDecimals)
	row("p99 ms", plain.p99, secure.p99, twoDecimals)
	row("node CPU µs per Put (3 nodes)", plain.cpu, secure.cpu, thousands)
	fmt.Fprintf(w, "\n")
	return nil
}

func renderFlood(w *strings.Builder, dir string, meta map[string]string, get func(string) string) error {
	var f floodResult
	if err := readJSON(filepath.Join(dir, "flood.json"), &f); err != nil {
		return err
	}
	c := f.Config
	fmt.Fprintf(w, "### Connection flood: one node, `--max-connections %s`\n\n", get("max_conns"))
	fmt.Fprintf(w, "One node (a 1-node cluster, plaintext, on 127.0.0.1, a fresh data dir, `--max-connections %s --cut-interval 0`, 16 partitions). "+
		"`%s`: a client connected first, and %d workers Put through it in a closed loop (%d B values, %d keys), for %s before, %s during and %s after a flood of %d connection slots "+
		"to the client port (%s) and %d to the peer port (%s): each slot dials, holds its connection (reading what the node sends) until the node closes it, and dials again %s later "+
		"(at most %d dials per port). Every %s a new client connects and Puts once (\"new clients\"). /metrics and /healthz read every %s; the flood ran with a file limit of %d. "+
		"Closed at once: within 5 s of the dial (refused at the limit); closed later: the node took the connection and closed it when its handshake did not come (after 10 s); "+
		"most open at once counts from the kernel's completion of the TCP handshake, before the node accepts and closes, so it exceeds the limit.\n\n",
		get("max_conns"), get("flood_cmd"), c.Workers, c.ValueSize, c.Keyspace, c.PhaseS, c.PhaseS, c.PhaseS, c.Conns, c.Client, c.Conns, c.Peer, c.RedialS,
		c.MaxAttempts, c.ProbeEveryS, c.SampleEveryS, f.FileLimit)
	fmt.Fprintf(w, "| phase | Puts/s | p50 ms | p99 ms | max ms | errors | new clients ok | client conns open, max | peer conns open, max | rejected: client | rejected: peer | node fds, max | WAL fsyncs | node CPU cores | benchtrust CPU cores | /healthz samples |\n")
	fmt.Fprintf(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, p := range f.Phases {
		errs := strconv.FormatInt(p.Errors, 10)
		if p.FirstError != "" {
			errs += " (" + short(p.FirstError) + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %.1f | %s | %d of %d | %.0f | %.0f | %s | %s | %.0f | %s | %.2f | %.2f | %s |\n",
			p.Name, thousands(p.PutsPerSec), p.P50Ms, p.P99Ms, p.MaxMs, errs, p.ProbesOK, p.Probes, p.ClientOpenMax, p.PeerOpenMax,
			thousands(p.ClientRejected), thousands(p.PeerRejected), p.OpenFDsMax, thousands(p.WALFsyncs),
			p.NodeCPUSeconds/p.Seconds, p.SelfCPUSeconds/p.Seconds, healthSummary(p.Healthz, p.ScrapeErrors))
	}
	fmt.Fprintf(w, "\n| flooded port | slots | dials | connected | closed at once (p50 ms) | closed later (p50 s) | held at the end | most open at once (this side) | dial errors |\n")
	fmt.Fprintf(w, "|---|--:|--:|--:|---|---|--:|--:|--:|\n")
	for _, p := range f.Flood {
		de := thousands(float64(p.DialErrors))
		if p.FirstDialError != "" {
			de += " (" + short(p.FirstDialError) + ")"
		}
		capNote := ""
		if p.MaxAttemptsHits {
			capNote = " (the -max-attempts bound)"
		}
		withP50 := func(n int64, p50 string) string {
			if n == 0 {
				return "0"
			}
			return thousands(float64(n)) + " (" + p50 + ")"
		}
		fmt.Fprintf(w, "| %s %s | %d | %s%s | %s | %s | %s | %d | %d | %s |\n",
			p.Listener, p.Addr, p.Slots, thousands(float64(p.Attempts)), capNote, thousands(float64(p.Connected)),
			withP50(p.ClosedAtOnce, fmt.Sprintf("%.2f", p.AtOnceP50Ms)), withP50(p.ClosedLater, fmt.Sprintf("%.1f", p.LaterP50Ms/1000)),
			p.HeldAtEnd, p.MaxHeld, de)
	}
	for _, p := range f.Phases {
		if p.ProbeFirstError != "" {
			fmt.Fprintf(w, "\nFirst failed new client %s the flood: `%s`.\n", p.Name, short(p.ProbeFirstError))
		}
	}
	fmt.Fprintf(w, "\nThe node after the flood: %s; /healthz at the end: %s; stopped with SIGTERM: %s; its log: %s.\n\n", get("flood_alive"), f.FinalHealthz, get("flood_exit"), get("flood_log"))
	return nil
}

// healthSummary says how the /healthz samples answered.
func healthSummary(h map[string]int, scrapeErrs int) string {
	n := 0
	for _, v := range h {
		n += v
	}
	s := fmt.Sprintf("SERVING %d of %d", h["SERVING"], n)
	for k, v := range h {
		if k != "SERVING" {
			s += fmt.Sprintf(", %s %d", k, v)
		}
	}
	if scrapeErrs > 0 {
		s += fmt.Sprintf("; %d /metrics reads failed", scrapeErrs)
	}
	return s
}

// short cuts a message to one table-friendly line.
func short(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", "/")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// thousands formats v rounded, with commas: 12,345.
func thousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
