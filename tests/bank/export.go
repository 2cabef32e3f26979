package bank

import (
	"fmt"

	"github.com/cutkv/cutkv/proto/kvpb"
)

// Helpers for tests outside this package that check states the bank
// workload wrote (the cut tests rebuild the cluster's state at each cut).

// Total returns the sum of every account's balance, which transfers keep
// constant.
func (b *Bank) Total() int64 { return b.Initial * int64(len(b.Keys)) }

// CheckTotal checks a whole-cluster state (key to value) written by the
// workload: every account is present, holds a balance as the workload
// encodes it, and the balances sum to Total. Other keys (the transfers'
// markers) are ignored.
func (b *Bank) CheckTotal(state map[string][]byte) error {
	var sum int64
	for _, k := range b.Keys {
		v, ok := state[k]
		if !ok {
			return fmt.Errorf("bank: account %s is missing", k)
		}
		o, err := decodeKV(&kvpb.KeyValue{Key: []byte(k), Value: v, Version: 1})
		if err != nil {
			return fmt.Errorf("bank: %w", err)
		}
		sum += o.Balance
	}
	if sum != b.Total() {
		return fmt.Errorf("bank: the %d accounts sum to %d, want %d", len(b.Keys), sum, b.Total())
	}
	return nil
}
