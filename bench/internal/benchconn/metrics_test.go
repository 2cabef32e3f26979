package benchconn

import (
	"strings"
	"testing"
)

func TestParseExposition(t *testing.T) {
	const text = `# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.2345e+08
go_memstats_heap_alloc_bytes 99
process_resident_memory_bytes 456
cutkv_snapshot_duration_seconds_bucket{result="ok",le="0.01"} 0
cutkv_snapshot_duration_seconds_sum{result="ok"} 1.5
cutkv_snapshot_duration_seconds_count{result="ok"} 3
cutkv_snapshot_duration_seconds_count{result="error"} 1
cutkv_snapshot_uploaded_bytes_total 2048
odd_labels{path="a b}c"} 7
broken_line
broken_value x
`
	got, err := ParseExposition(strings.NewReader(text), []string{
		"go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", "cutkv_snapshot_duration_seconds",
		"cutkv_snapshot_uploaded_bytes", "odd_labels", "broken_line", "broken_value"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"go_memstats_heap_inuse_bytes":                          1.2345e8,
		"process_resident_memory_bytes":                         456,
		`cutkv_snapshot_duration_seconds_sum{result="ok"}`:      1.5,
		`cutkv_snapshot_duration_seconds_count{result="ok"}`:    3,
		`cutkv_snapshot_duration_seconds_count{result="error"}`: 1,
		"cutkv_snapshot_uploaded_bytes_total":                   2048,
		`odd_labels{path="a b}c"}`:                              7,
	}
	if len(got) != len(want) {
		t.Errorf("got %d samples %v, want %d", len(got), got, len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
