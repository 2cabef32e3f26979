package main

import (
	"math/rand/v2"
	"sort"
	"strings"
)

// opKind is one kind of operation a worker sends.
type opKind int

const (
	opPut opKind = iota
	opGet
	numOps
)

func (k opKind) String() string {
	if k == opGet {
		return "get"
	}
	return "put"
}

// workload describes what the workers send in the measured phase.
type workload struct {
	// doc is the one-line description in --help.
	doc string
	// preload: every key of the keyspace is written once, unmeasured,
	// before warmup, so that reads find values.
	preload bool
	// next picks the next operation.
	next func(cfg *Config, rng *rand.Rand) opKind
	// unavailable, when set, says why the workload cannot run yet; it is
	// refused with a usage error, never run with made-up results.
	unavailable string
}

// workloads are the WORKLOAD arguments. Keys are chosen uniformly from the
// keyspace in every workload.
//
// txn and bank arrive with cross-partition transactions (issue 3): txn
// writes two keys of different partitions in one transaction; bank moves
// amounts between accounts in transactions and checks that the total is
// kept. Both need a transaction method on Conn, for cutkv and for etcd
// (a Txn of two puts, and compare-and-swap for bank).
var workloads = map[string]workload{
	"put": {
		doc:  "Put of random keys",
		next: func(*Config, *rand.Rand) opKind { return opPut },
	},
	"get": {
		doc:     "Get of random keys, after writing every key once",
		preload: true,
		next:    func(*Config, *rand.Rand) opKind { return opGet },
	},
	"mixed": {
		doc:     "Get with probability --read-ratio, else Put; after writing every key once",
		preload: true,
		next: func(cfg *Config, rng *rand.Rand) opKind {
			if rng.Float64() < cfg.ReadRatio {
				return opGet
			}
			return opPut
		},
	},
	"txn": {
		doc:         "two-key cross-partition transactions (not available yet)",
		unavailable: "needs transactions (issue 3)",
	},
	"bank": {
		doc:         "bank transfers between accounts, total checked (not available yet)",
		unavailable: "needs transactions (issue 3)",
	},
}

func workloadNames() string {
	var names []string
	for n := range workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// workloadHelp lists the workloads for --help, in a fixed order.
func workloadHelp() string {
	var b strings.Builder
	for _, n := range []string{"put", "get", "mixed", "txn", "bank"} {
		b.WriteString("  " + n + strings.Repeat(" ", 7-len(n)) + workloads[n].doc + "\n")
	}
	return b.String()
}

// putKey writes key index i into buf as zero-padded decimal, filling all
// of buf; i must fit (Config.Validate checks the key size).
func putKey(buf []byte, i int64) {
	for j := len(buf) - 1; j >= 0; j-- {
		buf[j] = byte('0' + i%10)
		i /= 10
	}
}
