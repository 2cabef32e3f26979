package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// --report-md keeps one table per --report-section in a Markdown file,
// between two HTML comments that Markdown does not show:
//
//	<!-- kvbench:begin NAME -->
//	| target | workload | clients | ... |
//	|---|---|---|...|
//	| cutkv | put | 64 | ... |
//	<!-- kvbench:end NAME -->
//
// A run replaces the row with the same target, workload, clients, conns
// and value size, or appends one. Everything outside the markers is left
// as it is; a missing section is appended at the end of the file.
//
// A run over TLS (--cacert) shows its target as "cutkv tls", so that it
// gets a row of its own beside the plaintext run of the same shape.
//
// A table that holds a transactional run (txn, bank) has one more column,
// aborts (count and rate), after errors; the rows of other runs show "-"
// there. Tables without one keep the original columns, so that tables
// written before the column existed read as they did.

var reportHeader = []string{"target", "workload", "clients", "conns", "value B", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "errors", "records/fsync"}

// reportTxnHeader is reportHeader with the aborts column, at
// reportAbortsCell.
var reportTxnHeader = []string{"target", "workload", "clients", "conns", "value B", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "errors", "aborts", "records/fsync"}

const reportAbortsCell = 10

// reportKeyCells is how many leading cells identify a row.
const reportKeyCells = 5

var sectionName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func checkSectionName(s string) error {
	if !sectionName.MatchString(s) {
		return fmt.Errorf("invalid --report-section %q: use letters, digits, '.', '_' and '-'", s)
	}
	return nil
}

// reportRow renders r as the cells of a table row.
func reportRow(r *Result) []string {
	c := r.cfg
	wl := r.Workload
	valueSize := strconv.Itoa(c.ValueSize)
	switch {
	case r.Workload == "mixed":
		wl = fmt.Sprintf("mixed r=%g", c.ReadRatio)
	case r.Txn != nil && r.Txn.Keys != "":
		wl = "txn " + r.Txn.Keys
	case r.Workload == "bank":
		wl = fmt.Sprintf("bank n=%d", c.Accounts)
		valueSize = "-" // balances
	}
	wal := "-"
	switch {
	case r.WAL != nil && r.WAL.Fsyncs == 0:
		wal = "0 fsyncs"
	case r.WAL != nil:
		wal = strconv.FormatFloat(r.WAL.RecordsPerFsync, 'f', 1, 64)
	}
	target := r.Target
	if c.TLS != nil {
		target += " tls"
	}
	row := []string{
		target, wl, strconv.Itoa(c.Clients), strconv.Itoa(c.Conns), valueSize,
		strconv.FormatFloat(r.OpsPerSec, 'f', 0, 64),
		strconv.FormatFloat(r.Latency.P50, 'f', 2, 64),
		strconv.FormatFloat(r.Latency.P99, 'f', 2, 64),
		strconv.FormatFloat(r.Latency.P999, 'f', 2, 64),
		strconv.FormatInt(r.Errors.Total, 10),
		wal,
	}
	if workloads[r.Workload].transactional {
		aborts := fmt.Sprintf("%d (%.1f %%)", r.Aborts, 100*r.AbortRate)
		row = slices.Insert(row, reportAbortsCell, aborts)
	}
	return row
}

// updateReport writes row into section of the Markdown file at path,
// creating the file or the section if needed. The file is replaced
// atomically.
func updateReport(path, section string, row []string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := upsertRow(string(old), section, row)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kvbench-report-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if fi, err := os.Stat(path); err == nil {
		_ = os.Chmod(tmp.Name(), fi.Mode().Perm())
	} else {
		_ = os.Chmod(tmp.Name(), 0o644)
	}
	return os.Rename(tmp.Name(), path)
}

// upsertRow returns doc with row placed in section's table.
func upsertRow(doc, section string, row []string) (string, error) {
	begin := "<!-- kvbench:begin " + section + " -->"
	end := "<!-- kvbench:end " + section + " -->"
	bi := strings.Index(doc, begin)
	ei := strings.Index(doc, end)
	var before, after string
	var rows [][]string
	switch {
	case bi < 0 && ei < 0:
		before = doc
		if before != "" && !strings.HasSuffix(before, "\n") {
			before += "\n"
		}
		if before != "" {
			before += "\n"
		}
		after = "\n"
	case bi < 0 || ei < bi:
		return "", fmt.Errorf("section %s: markers missing or out of order", section)
	default:
		before = doc[:bi]
		after = doc[ei+len(end):]
		for _, line := range strings.Split(doc[bi+len(begin):ei], "\n") {
			cells := splitRow(line)
			if cells == nil || isHeaderOrRule(cells) {
				continue
			}
			rows = append(rows, cells)
		}
	}
	replaced := false
	for i, r := range rows {
		if sameKey(r, row) {
			rows[i], replaced = row, true
		}
	}
	if !replaced {
		rows = append(rows, row)
	}
	header := reportHeader
	for _, r := range rows {
		if len(r) == len(reportTxnHeader) {
			header = reportTxnHeader
		}
	}
	if len(header) == len(reportTxnHeader) {
		for i, r := range rows {
			if len(r) == len(reportHeader) {
				rows[i] = slices.Insert(r, reportAbortsCell, "-")
			}
		}
	}
	var b strings.Builder
	b.WriteString(before)
	b.WriteString(begin + "\n")
	b.WriteString(joinRow(header))
	rule := make([]string, len(header))
	for i := range rule {
		rule[i] = "---"
		if i >= 2 {
			rule[i] = "--:"
		}
	}
	b.WriteString(joinRow(rule))
	for _, r := range rows {
		b.WriteString(joinRow(r))
	}
	b.WriteString(end)
	b.WriteString(after)
	return b.String(), nil
}

// splitRow returns the cells of a Markdown table row, nil for other lines.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func isHeaderOrRule(cells []string) bool {
	if len(cells) > 0 && cells[0] == reportHeader[0] {
		return true
	}
	for _, c := range cells {
		if strings.Trim(c, "-:") != "" {
			return false
		}
	}
	return true
}

func sameKey(a, b []string) bool {
	if len(a) < reportKeyCells || len(b) < reportKeyCells {
		return false
	}
	for i := range reportKeyCells {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func joinRow(cells []string) string {
	return "| " + strings.Join(cells, " | ") + " |\n"
}
