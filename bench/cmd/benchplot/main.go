// Command benchplot turns the kvbench JSON results of
// scripts/bench-compare.sh into the Markdown section "Side by side with
// etcd (make bench-compare)" of docs/benchmarks.md and one SVG bar chart
// per workload, and, with --costs, the subsections on what cutkv's own
// features cost (cuts and snapshots under load, cut completion, bytes
// uploaded per incremental snapshot, restart time, memory per key) with
// one SVG chart each. It replaces the section if the document has it (so
// repeated runs do not pile up) and appends it otherwise.
//
// Usage:
//
//	benchplot --results DIR --doc docs/benchmarks.md --imgdir docs/img \
//	    [--etcd-version V] [--etcd-build TEXT] [--commands TEXT] [--took 240s] [--run 20s] \
//	    [--costs DIR/costs] [--costs-took 600s]
//
// DIR holds files named WORKLOAD-N-TARGET.json (N the pass, TARGET cutkv
// or etcd), as the script writes them; the costs directory's layout is
// described at type Costs.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	// Results is the directory of kvbench JSON results.
	Results string
	// Doc is the Markdown file whose section is replaced or appended.
	Doc string
	// ImgDir is where the SVG charts are written; the section links them
	// relative to Doc's directory.
	ImgDir string
	// EtcdVersion, EtcdBuild, Commands, Took and RunDur are shown in the
	// section as given.
	EtcdVersion, EtcdBuild, Commands, Took, RunDur string
	// Costs is the directory of the cost parts' results (empty: none);
	// CostsTook is shown as given.
	Costs, CostsTook string
	// Commit is the commit the measured binaries were built from, as
	// shown in the section (a dirty work tree said so by the caller).
	Commit string
}

func run(args []string) error {
	var o options
	fl := flag.NewFlagSet("benchplot", flag.ContinueOnError)
	fl.StringVar(&o.Results, "results", "", "directory of kvbench JSON results WORKLOAD-N-TARGET.json (required)")
	fl.StringVar(&o.Doc, "doc", "docs/benchmarks.md", "Markdown file whose bench-compare section is replaced or appended")
	fl.StringVar(&o.ImgDir, "imgdir", "docs/img", "directory for the SVG charts")
	fl.StringVar(&o.EtcdVersion, "etcd-version", "", "etcd's version, as shown in the section")
	fl.StringVar(&o.EtcdBuild, "etcd-build", "built by `make etcd` from the Go module proxy", "where that etcd came from, as shown in the section")
	fl.StringVar(&o.Commands, "commands", "", "the kvbench command line, as shown in the section")
	fl.StringVar(&o.Took, "took", "", "how long the measured runs took, as shown in the section")
	fl.StringVar(&o.RunDur, "run", "", "the duration of each run, as shown in the section")
	fl.StringVar(&o.Costs, "costs", "", "directory of the cost parts' results (see type Costs); empty: none")
	fl.StringVar(&o.CostsTook, "costs-took", "", "how long the cost parts took, as shown in the section")
	fl.StringVar(&o.Commit, "commit", "", "the commit the binaries measured were built from, as shown in the section (required)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if o.Results == "" {
		return errors.New("--results is required")
	}
	if o.Commit == "" {
		return errors.New("--commit is required: the section names the commit it measured (bench-compare.sh passes git rev-parse HEAD)")
	}
	runs, err := loadRuns(o.Results)
	if err != nil {
		return err
	}
	groups := groupRuns(runs)
	var costs *Costs
	if o.Costs != "" {
		if costs, err = loadCosts(o.Costs); err != nil {
			return fmt.Errorf("reading the costs: %w", err)
		}
	}
	if len(groups) == 0 && costs.empty() {
		return fmt.Errorf("no results in %s", o.Results)
	}
	if err := os.MkdirAll(o.ImgDir, 0o755); err != nil {
		return err
	}
	// write writes a chart and returns its link relative to the document.
	write := func(name, svg string) (string, error) {
		path := filepath.Join(o.ImgDir, name)
		if err := writeFileAtomic(path, []byte(svg)); err != nil {
			return "", err
		}
		rel, err := filepath.Rel(filepath.Dir(o.Doc), path)
		if err != nil {
			rel = path
		}
		return filepath.ToSlash(rel), nil
	}
	links := map[string]string{}
	for _, g := range groups {
		if links[g.Workload], err = write("bench-compare-"+g.Workload+".svg", chartSVG(g)); err != nil {
			return err
		}
	}
	costLinks := map[string]string{}
	if !costs.empty() {
		for name, svg := range costsSVGs(costs) {
			if costLinks[name], err = write(name, svg); err != nil {
				return err
			}
		}
	}
	all := append(append([]Run(nil), runs...), costs.runs()...)
	date := firstStart(all)
	if date.IsZero() {
		date = time.Now()
	}
	sec := section(sectionInput{
		Groups: groups, Links: links, Machine: describeMachine(all),
		EtcdVersion: o.EtcdVersion, EtcdBuild: o.EtcdBuild, Commands: o.Commands, Took: o.Took, RunDur: o.RunDur,
		Date: date.UTC(), Costs: costs, CostLinks: costLinks, CostsTook: o.CostsTook, Commit: o.Commit,
	})
	doc, err := os.ReadFile(o.Doc)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return writeFileAtomic(o.Doc, []byte(replaceSection(string(doc), sectionTitle, sec)))
}

// describeMachine is the machine line: the kernel from uname, the rest
// from the results (CPUs, CPU model, load averages over the runs).
func describeMachine(runs []Run) string {
	var b strings.Builder
	if len(runs) == 0 { // only parts without kvbench runs: this machine
		fmt.Fprintf(&b, "%d CPUs (runtime.NumCPU)", runtime.NumCPU())
		if k, err := exec.Command("uname", "-sr").Output(); err == nil {
			fmt.Fprintf(&b, ", kernel %s", strings.TrimSpace(string(k)))
		}
		fmt.Fprintf(&b, ", %s/%s", runtime.GOOS, runtime.GOARCH)
		return b.String()
	}
	m := runs[0].Machine
	fmt.Fprintf(&b, "%d CPUs (nproc)", m.NumCPU)
	if m.CPU != "" {
		fmt.Fprintf(&b, ", %s", m.CPU)
	}
	if k, err := exec.Command("uname", "-sr").Output(); err == nil {
		fmt.Fprintf(&b, ", kernel %s", strings.TrimSpace(string(k)))
	}
	fmt.Fprintf(&b, ", %s/%s, kvbench built with %s", m.GOOS, m.GOARCH, m.GoVersion)
	lo, hi, ok := loadRange(runs)
	if ok {
		fmt.Fprintf(&b, "; 1-minute load average at the end of each run between %.2f and %.2f", lo, hi)
	}
	return b.String()
}

// writeFileAtomic writes a temporary file and renames it over path, so a
// failed run never leaves a half-written document.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
