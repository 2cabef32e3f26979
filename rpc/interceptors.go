package rpc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metrics are the gRPC server's request counters.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// children caches the label children by method (methodMetrics), so
	// that a request costs a lock-free map load, not the vectors' label
	// hashing under their lock. Methods are bounded by the services.
	children sync.Map // string → *methodMetrics
}

// methodMetrics are one method's children: its latency, and its request
// count per status code, resolved on first use.
type methodMetrics struct {
	latency prometheus.Observer
	// codes holds a prometheus.Counter per code once used. Two first
	// requests racing store the same child (the vector returns one per
	// label values), so a load and a store need no lock.
	codes [codes.Unauthenticated + 1]atomic.Value
}

// NewMetrics registers the gRPC metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cutkv_grpc_requests_total", Help: "gRPC requests served, by method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cutkv_grpc_request_duration_seconds", Help: "gRPC request latency by method.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"method"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// method returns the children of method, made on its first request.
func (m *Metrics) method(method string) *methodMetrics {
	if mm, ok := m.children.Load(method); ok {
		return mm.(*methodMetrics)
	}
	mm, _ := m.children.LoadOrStore(method, &methodMetrics{latency: m.latency.WithLabelValues(method)})
	return mm.(*methodMetrics)
}

// observe counts one request of method ending with code, taking took.
func (m *Metrics) observe(method string, code codes.Code, took time.Duration) {
	mm := m.method(method)
	mm.latency.Observe(took.Seconds())
	if int(code) >= len(mm.codes) {
		m.requests.WithLabelValues(method, code.String()).Inc() // not a gRPC code: never cached
		return
	}
	c, _ := mm.codes[code].Load().(prometheus.Counter)
	if c == nil {
		c = m.requests.WithLabelValues(method, code.String())
		mm.codes[code].Store(c)
	}
	c.Inc()
}

// UnaryInterceptor counts and times every unary request.
func (m *Metrics) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		m.observe(info.FullMethod, status.Code(err), time.Since(start))
		return resp, err
	}
}
