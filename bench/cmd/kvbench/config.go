package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cutkv/cutkv/client"
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

	defaultTxnKeys       = txnKeysCross
	defaultAccounts      = 1000
	defaultAuditInterval = time.Second
	// initialBalance is every bank account's balance after the
	// (unmeasured) initialisation: the total is accounts × initialBalance.
	initialBalance = 1000
	// maxAccounts: the audit reads every account with one Scan in one
	// transaction, and cutkv returns at most 10000 keys per Scan.
	maxAccounts = 10000
	// accountPrefix starts every account key, so that the audit's range
	// holds no key of the other workloads.
	accountPrefix = "bank/"

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
	// TLS, when set (cutkv only: --cacert, --cert, --key), makes every
	// connection TLS; it is passed as it is to client.Config.TLS. nil:
	// plaintext.
	TLS *client.TLSFiles

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
	// zero-padded (bank: accountPrefix, then the account's index). It
	// must hold the largest index. Default 16.
	KeySize int
	// ValueSize is the length of every written value (random bytes).
	// Default 256; 0 is allowed with ValueSizeSet.
	ValueSize    int
	ValueSizeSet bool
	// Keyspace is the number of distinct keys; operations pick keys
	// uniformly at random. Default 10000.
	Keyspace    int64
	KeyspaceSet bool
	// ReadRatio is the fraction of Gets in the mixed workload (0..1).
	// Default 0.5; set only for mixed.
	ReadRatio    float64
	ReadRatioSet bool

	// TxnKeys is where the txn workload's two keys live: txnKeysCross
	// (different partitions: 2PC) or txnKeysSame (one partition: 1PC).
	// Default cross; set only for txn on cutkv.
	TxnKeys    string
	TxnKeysSet bool
	// Partitions is the cutkv cluster's partition count, used to place
	// the txn workload's keys; 0 asks the cluster (Status). Only for txn
	// on cutkv.
	Partitions int
	// Accounts is the number of bank accounts (bank only). Default 1000.
	Accounts    int64
	AccountsSet bool
	// AuditInterval is the time between two audits of the bank total
	// (bank only). Default 1 s.
	AuditInterval    time.Duration
	AuditIntervalSet bool

	// CutInterval, when set (cutkv only), takes a consistent cut this
	// often during the measured phase and reports their completion times.
	CutInterval time.Duration

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
	// MetricsURLs are Prometheus endpoints of the nodes, scraped before
	// and after the measured phase for their CPU time and (cutkv) WAL
	// group-commit statistics.
	MetricsURLs []string
}

// Validate checks c and fills in defaults. Its errors are usage errors.
func (c *Config) Validate() error {
	if _, ok := workloads[c.Workload]; !ok {
		return fmt.Errorf("unknown workload %q: want one of %s", c.Workload, workloadNames())
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
	if d := len(strconv.FormatInt(c.Keyspace-1, 10)); c.KeySize < d && c.Workload != "bank" {
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
	if err := c.validateTxn(); err != nil {
		return err
	}
	if err := c.validateTLS(); err != nil {
		return err
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

// validateTLS checks --cacert, --cert and --key: cutkv only, a CA to
// verify the servers with, a certificate with its key.
func (c *Config) validateTLS() error {
	t := c.TLS
	switch {
	case t == nil:
		return nil
	case c.Target != "cutkv":
		return fmt.Errorf("--cacert, --cert and --key apply only to --target cutkv, not %s", c.Target)
	case t.CACert == "":
		return errors.New("--cert and --key need --cacert (the CA the cluster's certificates chain to)")
	case (t.Cert == "") != (t.Key == ""):
		return errors.New("--cert and --key go together")
	}
	return nil
}

// connectOptions are what the drivers get of c.
func (c *Config) connectOptions() ConnectOptions {
	return ConnectOptions{DialTimeout: c.DialTimeout, TLS: c.TLS}
}

// The values of --txn-keys.
const (
	txnKeysCross = "cross"
	txnKeysSame  = "same"
)

// validateTxn checks the flags of the txn and bank workloads, which the
// other workloads refuse. It runs after the keyspace and key size are
// known.
func (c *Config) validateTxn() error {
	if c.TxnKeysSet && c.Workload != "txn" {
		return fmt.Errorf("--txn-keys applies only to the txn workload, not %s", c.Workload)
	}
	if c.Partitions != 0 && c.Workload != "txn" {
		return fmt.Errorf("--partitions applies only to the txn workload, not %s", c.Workload)
	}
	if c.AccountsSet && c.Workload != "bank" {
		return fmt.Errorf("--accounts applies only to the bank workload, not %s", c.Workload)
	}
	if c.CutInterval < 0 {
		return errors.New("--cut-interval must not be negative")
	}
	if c.CutInterval > 0 && c.Target != "cutkv" {
		return fmt.Errorf("--cut-interval applies only to --target cutkv, not %s", c.Target)
	}
	if c.AuditIntervalSet && c.Workload != "bank" {
		return fmt.Errorf("--audit-interval applies only to the bank workload, not %s", c.Workload)
	}
	switch c.Workload {
	case "txn":
		if c.Target != "cutkv" {
			if c.TxnKeysSet || c.Partitions != 0 {
				return fmt.Errorf("--txn-keys and --partitions apply only to --target cutkv (%s has no partitions)", c.Target)
			}
			c.TxnKeys = ""
		} else {
			if !c.TxnKeysSet {
				c.TxnKeys = defaultTxnKeys
			}
			if c.TxnKeys != txnKeysCross && c.TxnKeys != txnKeysSame {
				return fmt.Errorf("invalid --txn-keys %q: want %s or %s", c.TxnKeys, txnKeysCross, txnKeysSame)
			}
			if c.Partitions < 0 {
				return fmt.Errorf("invalid --partitions %d: must be positive (0 asks the cluster)", c.Partitions)
			}
			if c.Partitions == 1 && c.TxnKeys == txnKeysCross {
				return errors.New("--txn-keys cross needs at least 2 partitions, --partitions is 1")
			}
		}
		if c.Keyspace < 2 {
			return fmt.Errorf("invalid --keyspace %d: the txn workload writes two different keys", c.Keyspace)
		}
	case "bank":
		if c.KeyspaceSet {
			return errors.New("--keyspace does not apply to the bank workload: use --accounts")
		}
		if c.ValueSizeSet {
			return errors.New("--value-size does not apply to the bank workload: values are balances in decimal")
		}
		switch {
		case !c.AccountsSet:
			c.Accounts = defaultAccounts
		case c.Accounts < 2 || c.Accounts > maxAccounts:
			return fmt.Errorf("invalid --accounts %d: want 2 to %d", c.Accounts, maxAccounts)
		}
		if d := len(accountPrefix) + len(strconv.FormatInt(c.Accounts-1, 10)); c.KeySize < d {
			return fmt.Errorf("--key-size %d is too small for --accounts %d: account keys need %d bytes (%q and the index)", c.KeySize, c.Accounts, d, accountPrefix)
		}
		switch {
		case !c.AuditIntervalSet:
			c.AuditInterval = defaultAuditInterval
		case c.AuditInterval <= 0:
			return fmt.Errorf("invalid --audit-interval %v: must be positive", c.AuditInterval)
		}
	}
	return nil
}
