package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Defaults filled in by Config.Validate.
const (
	defaultDuration    = 10 * time.Second
	defaultClients     = 16
	defaultConns       = 4
	defaultKeySize     = 16
	defaultValueSize   = 256
	defaultKeyspace    = 10000
	defaultReadRatio   = 0.5
	defaultOpTimeout   = 10 * time.Second
	defaultDialTimeout = 5 * time.Second
	defaultMaxErrors   = 1000

	maxKeySize   = 4 << 10 // cutkv's limit (client.MaxKeySize)
	maxValueSize = 1 << 20 // cutkv's limit (client.MaxValueSize)
)

// Config is one benchmark run. The zero value of a field means its
// default, except where said otherwise; Validate fills them in.
type Config struct {
	// Workload names the workload (see workloads). Required.
	Workload string
	// Target names the driver (see drivers). Default "cutkv".
	Target string
	// Endpoints are the addresses the driver talks to, and the only ones
	// kvbench sends load to. Default: the driver's DefaultEndpoints.
	Endpoints []string

	// Clients is the number of concurrent workers, each with at most one
	// operation in flight. Default 16.
	Clients int
	// Conns is the number of connections (driver clients); worker i uses
	// connection i mod Conns. Validate lowers it to Clients. Default 4.
	Conns int

	// Duration bounds the measured phase in time, Total in operations
	// (successful or not); exactly one is set. Default: Duration 10 s.
	Duration time.Duration
	Total    int64
	// Warmup runs the workload for this long, unmeasured, before the
	// measured phase. Default 0.
	Warmup time.Duration
	// Rate limits the operations per second of all workers together; 0
	// means no limit.
	Rate float64

	// KeySize is the length of every key: the key's index in decimal,
	// zero-padded. It must hold the largest index. Default 16.
	KeySize int
	// ValueSize is the length of every written value (random bytes).
	// Default 256; 0 is allowed with ValueSizeSet.
	ValueSize    int
	ValueSizeSet bool
	// Keyspace is the number of distinct keys; operations pick keys
	// uniformly at random. Default 10000.
	Keyspace int64
	// ReadRatio is the fraction of Gets in the mixed workload (0..1).
	// Default 0.5; set only for mixed.
	ReadRatio    float64
	ReadRatioSet bool

	// Seed seeds the key choice and the values; 0 picks one from the
	// clock. The seed used is reported.
	Seed uint64

	// OpTimeout bounds each operation, retries included. Default 10 s.
	OpTimeout time.Duration
	// DialTimeout bounds connecting. Default 5 s.
	DialTimeout time.Duration
	// MaxErrors stops the run early (exit 1) once this many operations
	// have failed; 0 means never (the flag's default is 1000).
	MaxErrors int64

	// Progress is the interval of the progress line on stderr; 0 turns it
	// off.
	Progress time.Duration
	// MetricsURLs are Prometheus endpoints of cutkv nodes, scraped before
	// and after the measured phase for WAL group-commit statistics.
	MetricsURLs []string
}

// Validate checks c and fills in defaults. Its errors are usage errors.
func (c *Config) Validate() error {
	w, ok := workloads[c.Workload]
	if !ok {
		return fmt.Errorf("unknown workload %q: want one of %s", c.Workload, workloadNames())
	}
	if w.unavailable != "" {
		return fmt.Errorf("workload %s: not available yet: %s", c.Workload, w.unavailable)
	}
	if c.Target == "" {
		c.Target = "cutkv"
	}
	if _, ok := drivers[c.Target]; !ok {
		return fmt.Errorf("unknown --target %q: want one of %s", c.Target, driverNames())
	}
	if len(c.Endpoints) == 0 {
		return errors.New("no endpoints")
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"--clients", &c.Clients, defaultClients},
		{"--conns", &c.Conns, defaultConns},
		{"--key-size", &c.KeySize, defaultKeySize},
	}
	for _, f := range ints {
		switch {
		case *f.v < 0:
			return fmt.Errorf("invalid %s %d: must be positive", f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	// More connections than workers would leave some idle: --clients 1
	// with the default --conns 4 uses one.
	c.Conns = min(c.Conns, c.Clients)
	switch {
	case c.Duration < 0:
		return fmt.Errorf("invalid --duration %v: must be positive", c.Duration)
	case c.Total < 0:
		return fmt.Errorf("invalid --total %d: must be positive", c.Total)
	case c.Duration > 0 && c.Total > 0:
		return errors.New("--duration and --total exclude each other: give one")
	case c.Duration == 0 && c.Total == 0:
		c.Duration = defaultDuration
	}
	if c.Warmup < 0 {
		return fmt.Errorf("invalid --warmup %v: must not be negative", c.Warmup)
	}
	if c.Rate < 0 {
		return fmt.Errorf("invalid --rate %v: must not be negative (0 means no limit)", c.Rate)
	}
	switch {
	case c.Keyspace < 0:
		return fmt.Errorf("invalid --keyspace %d: must be positive", c.Keyspace)
	case c.Keyspace == 0:
		c.Keyspace = defaultKeyspace
	}
	if c.KeySize > maxKeySize {
		return fmt.Errorf("invalid --key-size %d: at most %d", c.KeySize, maxKeySize)
	}
	if d := len(strconv.FormatInt(c.Keyspace-1, 10)); c.KeySize < d {
		return fmt.Errorf("--key-size %d is too small for --keyspace %d: keys need %d digits", c.KeySize, c.Keyspace, d)
	}
	switch {
	case c.ValueSize < 0 || c.ValueSize > maxValueSize:
		return fmt.Errorf("invalid --value-size %d: want 0 to %d", c.ValueSize, maxValueSize)
	case c.ValueSize == 0 && !c.ValueSizeSet:
		c.ValueSize = defaultValueSize
	}
	if c.ReadRatioSet && c.Workload != "mixed" {
		return fmt.Errorf("--read-ratio applies only to the mixed workload, not %s", c.Workload)
	}
	if c.Workload == "mixed" {
		if !c.ReadRatioSet {
			c.ReadRatio = defaultReadRatio
		}
		if !(c.ReadRatio >= 0 && c.ReadRatio <= 1) {
			return fmt.Errorf("invalid --read-ratio %v: want 0 to 1", c.ReadRatio)
		}
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"--op-timeout", &c.OpTimeout, defaultOpTimeout},
		{"--dial-timeout", &c.DialTimeout, defaultDialTimeout},
	}
	for _, f := range durations {
		switch {
		case *f.v < 0:
			return fmt.Errorf("invalid %s %v: must be positive", f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	if c.MaxErrors < 0 {
		return fmt.Errorf("invalid --max-errors %d: must not be negative (0 means never stop)", c.MaxErrors)
	}
	if c.Progress < 0 {
		return fmt.Errorf("invalid --progress %v: must not be negative (0 turns it off)", c.Progress)
	}
	return nil
}
