package benchconn

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// ParseExposition returns the samples of the Prometheus text exposition r
// whose family is in names (a sample's family is its name, or its name
// without _count, _sum or _total; histogram buckets are left out unless a
// name ends in _bucket). Comments and malformed lines are skipped.
func ParseExposition(r io.Reader, names []string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// The series is everything up to the value: the name and, if
		// any, the labels (whose values may hold spaces).
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name := line[:end]
		series := name
		rest := line[end:]
		if rest[0] == '{' {
			rb := strings.LastIndexByte(rest, '}')
			if rb < 0 {
				continue
			}
			series, rest = name+rest[:rb+1], rest[rb+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		family := name
		for _, suf := range []string{"_count", "_sum", "_total"} {
			if t, ok := strings.CutSuffix(name, suf); ok && want[t] {
				family = t
			}
		}
		if !want[family] {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[series] = v
	}
	return out, sc.Err()
}
