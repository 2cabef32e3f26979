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
	// opTxn is one transaction writing two keys (workload txn).
	opTxn
	// opTransfer is one bank transfer: two Gets, then a transaction that
	// compares both versions and writes both balances (workload bank).
	opTransfer
	// opInit writes one bank account's initial balance (unmeasured).
	opInit
	numOps
)

// opKinds lists the kinds in the order the text output shows them.
var opKinds = []opKind{opPut, opGet, opTxn, opTransfer, opInit}

func (k opKind) String() string {
	switch k {
	case opGet:
		return "get"
	case opTxn:
		return "txn"
	case opTransfer:
		return "transfer"
	case opInit:
		return "init"
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
	// transactional: the workload sends transactions, which may abort
	// (the output then shows aborts).
	transactional bool
}

// workloads are the WORKLOAD arguments. Keys are chosen uniformly from the
// keyspace (bank: from the accounts) in every workload.
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
		doc:           "one transaction putting two random keys, in different partitions or one (--txn-keys)",
		next:          func(*Config, *rand.Rand) opKind { return opTxn },
		transactional: true,
	},
	"bank": {
		doc:           "transfers between --accounts accounts (read both, compare-and-swap both); an auditor checks the total",
		next:          func(*Config, *rand.Rand) opKind { return opTransfer },
		transactional: true,
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
