package bank

import (
	"strings"
	"testing"
)

// baseHistory is a small correct history of three accounts of 10:
// init; t1 moves 4 from account 0 to 1 (committed); t2 moves 1 from 1 to
// 2 (unknown outcome, applied); t3 (not applied) and t4 (failure branch)
// wrote nothing.
func baseHistory() *History {
	init := &Txn{ID: "init", Outcome: Committed, Writes: []Write{
		{Account: 0, Balance: 10}, {Account: 1, Balance: 10}, {Account: 2, Balance: 10},
	}}
	t1 := &Txn{ID: "t1", Outcome: Committed, Markers: []string{"tx/t1/0", "tx/t1/1"}, Writes: []Write{
		{Account: 0, ReadVersion: 1, ReadBalance: 10, Balance: 6},
		{Account: 1, ReadVersion: 1, ReadBalance: 10, Balance: 14},
	}}
	t2 := &Txn{ID: "t2", Outcome: Unknown, Markers: []string{"tx/t2/0", "tx/t2/1"}, Writes: []Write{
		{Account: 1, ReadVersion: 2, ReadBalance: 14, Balance: 13},
		{Account: 2, ReadVersion: 1, ReadBalance: 10, Balance: 11},
	}}
	t3 := &Txn{ID: "t3", Outcome: NotApplied, Markers: []string{"tx/t3/0", "tx/t3/1"}, Writes: []Write{
		{Account: 0, ReadVersion: 2, ReadBalance: 6, Balance: 0},
		{Account: 2, ReadVersion: 2, ReadBalance: 11, Balance: 17},
	}}
	t4 := &Txn{ID: "t4", Outcome: CommittedElse, Markers: []string{"tx/t4/0", "tx/t4/1"}, Writes: []Write{
		{Account: 0, ReadVersion: 1, ReadBalance: 10, Balance: 9},
		{Account: 2, ReadVersion: 1, ReadBalance: 10, Balance: 11},
	}}
	obs := func(v, b int64, w string) Obs { return Obs{Version: v, Balance: b, Writer: w} }
	return &History{
		Accounts: 3,
		Total:    30,
		Txns:     []*Txn{init, t1, t2, t3, t4},
		Reads: []Snapshot{
			{Source: "r0", Full: true, Obs: map[int]Obs{0: obs(1, 10, "init"), 1: obs(1, 10, "init"), 2: obs(1, 10, "init")}},
			{Source: "r1", Full: true, Obs: map[int]Obs{0: obs(2, 6, "t1"), 1: obs(2, 14, "t1"), 2: obs(1, 10, "init")}},
			{Source: "g", Obs: map[int]Obs{2: obs(2, 11, "t2")}},
			{Source: "t4 else", Obs: map[int]Obs{0: obs(2, 6, "t1"), 2: obs(2, 11, "t2")}},
		},
		Final: Snapshot{Source: "final", Full: true, Obs: map[int]Obs{0: obs(2, 6, "t1"), 1: obs(3, 13, "t2"), 2: obs(2, 11, "t2")}},
		Markers: map[string]string{
			"tx/t1/0": "t1", "tx/t1/1": "t1", "tx/t2/0": "t2", "tx/t2/1": "t2",
		},
	}
}

func TestCheckAcceptsACorrectHistory(t *testing.T) {
	for _, err := range baseHistory().Check() {
		t.Error(err)
	}
}

// TestCheckFindsViolations breaks the correct history in one way per
// case and expects Check to say so.
func TestCheckFindsViolations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(h *History)
		want   string
	}{
		{"committed transfer half applied", func(h *History) {
			delete(h.Markers, "tx/t1/1")
		}, "t1 committed, but only 1 of its 2 markers exist"},
		{"refused transfer applied", func(h *History) {
			h.Markers["tx/t3/0"] = "t3"
		}, "t3 not applied, but 1 of its 2 markers exist"},
		{"failure branch wrote", func(h *History) {
			h.Markers["tx/t4/0"], h.Markers["tx/t4/1"] = "t4", "t4"
		}, "t4 committed (else branch), but 2 of its 2 markers exist"},
		{"unknown transfer half applied", func(h *History) {
			delete(h.Markers, "tx/t2/0")
		}, "t2 (outcome unknown) applied in part"},
		{"stray marker", func(h *History) {
			h.Markers["tx/zz/0"] = "zz"
		}, "belongs to no transaction"},
		{"committed write lost", func(h *History) {
			h.Final.Obs[0] = Obs{Version: 1, Balance: 10, Writer: "init"}
			h.Final.Obs[2] = Obs{Version: 2, Balance: 15, Writer: "t2"}
		}, "t1 (committed) wrote account 0 version 2, but the final state has version 1"},
		{"lost update", func(h *History) {
			h.Txns = append(h.Txns, &Txn{ID: "t5", Outcome: Committed, Writes: []Write{
				{Account: 0, ReadVersion: 1, ReadBalance: 10, Balance: 10},
			}})
		}, "account 0 version 2 written by both t1 and t5"},
		{"read of a refused write", func(h *History) {
			h.Reads = append(h.Reads, Snapshot{Source: "bad", Obs: map[int]Obs{0: {Version: 3, Balance: 0, Writer: "t3"}}})
		}, "a write of no applied transaction (t3 is not applied)"},
		{"torn read", func(h *History) {
			h.Reads = append(h.Reads, Snapshot{Source: "torn", Full: true, Obs: map[int]Obs{
				0: {Version: 2, Balance: 6, Writer: "t1"}, 1: {Version: 1, Balance: 10, Writer: "init"}, 2: {Version: 1, Balance: 10, Writer: "init"},
			}})
		}, "torn: sees t1's write of account 0"},
		{"wrong total", func(h *History) {
			h.Txns[0].Writes[2].Balance = 11
			h.Reads[0].Obs[2] = Obs{Version: 1, Balance: 11, Writer: "init"}
		}, "r0: the accounts sum to 31, want 30"},
		{"stale read under a matching version", func(h *History) {
			h.Txns[2].Writes[0].ReadBalance = 10
		}, "t2 read account 1 = 10 at version 2, but t1 wrote 14 there"},
		{"write from nowhere", func(h *History) {
			h.Final.Obs[1] = Obs{Version: 4, Balance: 13, Writer: "t9"}
		}, "account 1 version 4 (final 4) was written by no applied transaction"},
		{"cycle", func(h *History) {
			// t6 and t7 each wrote one account before the other did.
			h.Txns = append(h.Txns,
				&Txn{ID: "t6", Outcome: Committed, Writes: []Write{
					{Account: 0, ReadVersion: 2, ReadBalance: 6, Balance: 6}, {Account: 2, ReadVersion: 3, ReadBalance: 11, Balance: 11},
				}},
				&Txn{ID: "t7", Outcome: Committed, Writes: []Write{
					{Account: 2, ReadVersion: 2, ReadBalance: 11, Balance: 11}, {Account: 0, ReadVersion: 3, ReadBalance: 6, Balance: 6},
				}})
			h.Final.Obs[0] = Obs{Version: 4, Balance: 6, Writer: "t7"}
			h.Final.Obs[2] = Obs{Version: 4, Balance: 11, Writer: "t6"}
		}, "not serializable: a cycle among t6, t7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := baseHistory()
			tc.mutate(h)
			errs := h.Check()
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Errorf("Check did not report %q; it reported %v", tc.want, errs)
		})
	}
}
