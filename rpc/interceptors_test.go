package rpc

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
)

// TestMetricsCacheChildren: the cached children count what the vectors
// would, from many goroutines at once, and a request costs no allocation
// once its method and code were seen.
func TestMetricsCacheChildren(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				m.observe("/a", codes.OK, time.Millisecond)
				m.observe("/a", codes.Aborted, time.Millisecond)
				m.observe("/b", codes.OK, time.Millisecond)
			}
		})
	}
	wg.Wait()
	m.observe("/b", codes.Code(99), time.Millisecond)
	for _, tc := range []struct {
		method, code string
		want         float64
	}{{"/a", "OK", 800}, {"/a", "Aborted", 800}, {"/b", "OK", 800}, {"/b", "Code(99)", 1}} {
		var d dto.Metric
		if err := m.requests.WithLabelValues(tc.method, tc.code).Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.GetCounter().GetValue(); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.method, tc.code, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { m.observe("/a", codes.OK, time.Millisecond) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}
