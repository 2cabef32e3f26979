package bank

import (
	"fmt"
	"sort"
	"strings"
)

// Outcome is what a client learned about one logical transaction (all
// its attempts together).
type Outcome int

// The outcomes. Pending appears only while the transaction runs.
const (
	Pending Outcome = iota
	// Committed: an attempt committed and the success branch ran.
	Committed
	// CommittedElse: an attempt committed and the failure branch ran
	// (a compare did not hold); the bank's failure branches write nothing.
	CommittedElse
	// NotApplied: every attempt was definitely not applied (Aborted,
	// Unavailable with a cutkv reason, or never sent).
	NotApplied
	// Unknown: an attempt was sent and no definite answer came back; the
	// client did not resend it.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case CommittedElse:
		return "committed (else branch)"
	case NotApplied:
		return "not applied"
	case Unknown:
		return "unknown"
	}
	return "pending"
}

// Write is a transaction's conditional write of one account: it compared
// the account's version with ReadVersion (which it had read with balance
// ReadBalance) and, if the success branch ran, wrote Balance, making the
// version ReadVersion+1. Accounts are never deleted.
type Write struct {
	Account     int
	ReadVersion int64
	ReadBalance int64
	Balance     int64
}

// Txn is one logical transaction of the history: a transfer, or the
// initial or final write of every account.
type Txn struct {
	ID     string
	Writes []Write
	// Markers are keys the success branch puts with value ID, in the
	// partitions of the accounts it writes, so that the final state tells
	// whether the transaction was applied.
	Markers []string
	Outcome Outcome
}

// Obs is one account as a read saw it. Version 0 means absent.
type Obs struct {
	Version int64
	Balance int64
	Writer  string // the ID of the transaction whose write it is
}

// Snapshot is what one read returned: some accounts (a transfer's read of
// two) or all of them (Full), each read at the same serialization point
// when the read was one transaction, or at different points when it was
// a single plain Get (one account).
type Snapshot struct {
	Source string
	Full   bool
	Obs    map[int]Obs
}

// History is everything the clients saw, checked by Check once all
// clients have stopped.
type History struct {
	Accounts int
	Total    int64
	Txns     []*Txn
	Reads    []Snapshot
	// Final is every account read after all traffic stopped.
	Final Snapshot
	// Markers holds every marker key found at the end and its value.
	Markers map[string]string
}

// maxErrors caps the violations Check reports.
const maxErrors = 40

// Check verifies the history against the bank's model and returns every
// violation found (at most maxErrors), nil when there is none:
//
//   - all or nothing: a committed transfer's markers all exist; a
//     definitely not applied one's, or one whose failure branch ran, do
//     not; an unknown one's all exist or none does;
//   - every account version was written by exactly one applied
//     transaction (committed, or unknown with its markers present), which
//     compared the previous version and read the balance that version
//     holds; every applied write is in the final state or overwritten;
//   - the order the versions impose on the applied transactions has no
//     cycle (serializable);
//   - every read shows, for each account, exactly what the writer of the
//     version read wrote, and is closed under that order: a read that sees
//     a transaction's write (or a later one) of one account sees its writes
//     of the others too (atomic, consistent reads);
//   - every read of all accounts, and the final state, sums to Total.
func (h *History) Check() []error {
	c := &checker{h: h, byID: map[string]*Txn{}}
	c.run()
	return c.errs
}

type checker struct {
	h       *History
	byID    map[string]*Txn
	applied map[string]bool
	// chain[a][v] is the applied transaction that wrote version v of
	// account a.
	chain   []map[int64]*Txn
	errs    []error
	dropped int
}

func (c *checker) fail(format string, args ...any) {
	if len(c.errs) >= maxErrors {
		c.dropped++
		return
	}
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) run() {
	for _, t := range c.h.Txns {
		if c.byID[t.ID] != nil {
			c.fail("two transactions have the id %q", t.ID)
		}
		c.byID[t.ID] = t
		if t.Outcome == Pending {
			c.fail("%s: still pending when the history was checked", t.ID)
		}
	}
	c.checkMarkers()
	c.buildChains()
	c.checkChains()
	c.checkOrder()
	for i := range c.h.Reads {
		c.checkRead(&c.h.Reads[i])
	}
	if !c.h.Final.Full {
		c.fail("the final state is not a read of every account")
	}
	c.checkRead(&c.h.Final)
	c.checkFinal()
	if c.dropped > 0 {
		c.errs = append(c.errs, fmt.Errorf("... and %d more violations", c.dropped))
	}
}

// checkMarkers checks all-or-nothing on the marker keys and decides
// which transactions were applied.
func (c *checker) checkMarkers() {
	c.applied = map[string]bool{}
	owned := map[string]bool{}
	for _, t := range c.h.Txns {
		present := 0
		for _, k := range t.Markers {
			owned[k] = true
			if v, ok := c.h.Markers[k]; ok {
				present++
				if v != t.ID {
					c.fail("%s: marker %q holds %q", t.ID, k, v)
				}
			}
		}
		all, none := present == len(t.Markers), present == 0
		switch t.Outcome {
		case Committed:
			if !all {
				c.fail("%s committed, but only %d of its %d markers exist", t.ID, present, len(t.Markers))
			}
			c.applied[t.ID] = true
		case CommittedElse, NotApplied:
			if !none {
				c.fail("%s %s, but %d of its %d markers exist", t.ID, t.Outcome, present, len(t.Markers))
			}
		case Unknown:
			if !all && !none {
				c.fail("%s (outcome unknown) applied in part: %d of its %d markers exist", t.ID, present, len(t.Markers))
			}
			if len(t.Markers) > 0 {
				c.applied[t.ID] = all
			} else {
				// No markers (the initial or final write): applied when
				// some read saw one of its writes.
				c.applied[t.ID] = c.observed(t.ID)
			}
		}
	}
	var strays []string
	for k := range c.h.Markers {
		if !owned[k] {
			strays = append(strays, k)
		}
	}
	sort.Strings(strays)
	for _, k := range strays {
		c.fail("marker %q = %q belongs to no transaction of the history", k, c.h.Markers[k])
	}
}

func (c *checker) observed(id string) bool {
	seen := func(s *Snapshot) bool {
		for _, o := range s.Obs {
			if o.Writer == id {
				return true
			}
		}
		return false
	}
	for i := range c.h.Reads {
		if seen(&c.h.Reads[i]) {
			return true
		}
	}
	return seen(&c.h.Final)
}

// buildChains places every applied write at its version.
func (c *checker) buildChains() {
	c.chain = make([]map[int64]*Txn, c.h.Accounts)
	for a := range c.chain {
		c.chain[a] = map[int64]*Txn{}
	}
	for _, t := range c.h.Txns {
		if !c.applied[t.ID] {
			continue
		}
		for _, w := range t.Writes {
			if w.Account < 0 || w.Account >= c.h.Accounts {
				c.fail("%s writes account %d of %d", t.ID, w.Account, c.h.Accounts)
				continue
			}
			v := w.ReadVersion + 1
			if o := c.chain[w.Account][v]; o != nil {
				c.fail("account %d version %d written by both %s and %s (lost update)", w.Account, v, o.ID, t.ID)
				continue
			}
			c.chain[w.Account][v] = t
		}
	}
}

// checkChains checks that each applied write read what the version it
// compared holds.
func (c *checker) checkChains() {
	for _, t := range c.h.Txns {
		if !c.applied[t.ID] {
			continue
		}
		for _, w := range t.Writes {
			if w.Account < 0 || w.Account >= c.h.Accounts || w.ReadVersion == 0 {
				continue
			}
			prev := c.chain[w.Account][w.ReadVersion]
			if prev == nil {
				c.fail("%s compared account %d at version %d, which no applied transaction wrote", t.ID, w.Account, w.ReadVersion)
				continue
			}
			if b, _ := balanceOf(prev, w.Account); b != w.ReadBalance {
				c.fail("%s read account %d = %d at version %d, but %s wrote %d there", t.ID, w.Account, w.ReadBalance, w.ReadVersion, prev.ID, b)
			}
		}
	}
}

func balanceOf(t *Txn, account int) (int64, bool) {
	for _, w := range t.Writes {
		if w.Account == account {
			return w.Balance, true
		}
	}
	return 0, false
}

// checkOrder looks for a cycle in "wrote the version before" among the
// applied transactions (Kahn's algorithm).
func (c *checker) checkOrder() {
	next := map[*Txn][]*Txn{}
	indeg := map[*Txn]int{}
	for _, ch := range c.chain {
		for v, t := range ch {
			indeg[t] += 0
			if n := ch[v+1]; n != nil && n != t {
				next[t] = append(next[t], n)
				indeg[n]++
			}
		}
	}
	var ready []*Txn
	for t, d := range indeg {
		if d == 0 {
			ready = append(ready, t)
		}
	}
	done := 0
	for len(ready) > 0 {
		t := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		done++
		for _, n := range next[t] {
			if indeg[n]--; indeg[n] == 0 {
				ready = append(ready, n)
			}
		}
	}
	if done < len(indeg) {
		var ids []string
		for t, d := range indeg {
			if d > 0 {
				ids = append(ids, t.ID)
			}
		}
		sort.Strings(ids)
		if len(ids) > 10 {
			ids = append(ids[:10], "...")
		}
		c.fail("the applied transactions are not serializable: a cycle among %s", strings.Join(ids, ", "))
	}
}

// checkRead checks one read against the chains.
func (c *checker) checkRead(s *Snapshot) {
	if s.Full && len(s.Obs) != c.h.Accounts {
		c.fail("%s: a read of all accounts returned %d of %d", s.Source, len(s.Obs), c.h.Accounts)
	}
	var sum int64
	accts := make([]int, 0, len(s.Obs))
	for a := range s.Obs {
		accts = append(accts, a)
	}
	sort.Ints(accts)
	for _, a := range accts {
		o := s.Obs[a]
		sum += o.Balance
		if a < 0 || a >= c.h.Accounts {
			c.fail("%s: read account %d of %d", s.Source, a, c.h.Accounts)
			continue
		}
		if o.Version == 0 {
			c.fail("%s: account %d is missing", s.Source, a)
			continue
		}
		w := c.chain[a][o.Version]
		switch {
		case w == nil:
			c.fail("%s: account %d version %d = %d by %s, a write of no applied transaction (%s is %s)",
				s.Source, a, o.Version, o.Balance, o.Writer, o.Writer, c.outcomeOf(o.Writer))
			continue
		case w.ID != o.Writer:
			c.fail("%s: account %d version %d was written by %s, read as written by %s", s.Source, a, o.Version, w.ID, o.Writer)
		}
		if b, _ := balanceOf(w, a); b != o.Balance {
			c.fail("%s: account %d version %d = %d, but %s wrote %d", s.Source, a, o.Version, o.Balance, w.ID, b)
		}
		// Closed under the order: every writer of a version up to the one
		// read must show all its writes in this read (where it read them).
		for v := int64(1); v <= o.Version; v++ {
			t := c.chain[a][v]
			if t == nil {
				continue // reported by checkFinal
			}
			for _, tw := range t.Writes {
				other, ok := s.Obs[tw.Account]
				if ok && other.Version <= tw.ReadVersion {
					c.fail("%s: sees %s's write of account %d (version %d, read %d) but not its write of account %d (version %d, read %d): not atomic",
						s.Source, t.ID, a, v, o.Version, tw.Account, tw.ReadVersion+1, other.Version)
				}
			}
		}
	}
	if s.Full && len(s.Obs) == c.h.Accounts && sum != c.h.Total {
		c.fail("%s: the accounts sum to %d, want %d", s.Source, sum, c.h.Total)
	}
}

func (c *checker) outcomeOf(id string) string {
	if t := c.byID[id]; t != nil {
		return t.Outcome.String()
	}
	return "not in the history"
}

// checkFinal checks that the versions of each account are exactly the
// applied writes: none missing below the final version (a write from
// nowhere), none above it (an applied write lost).
func (c *checker) checkFinal() {
	for a := 0; a < c.h.Accounts; a++ {
		o, ok := c.h.Final.Obs[a]
		if !ok {
			continue
		}
		for v := int64(1); v <= o.Version; v++ {
			if c.chain[a][v] == nil {
				c.fail("account %d version %d (final %d) was written by no applied transaction", a, v, o.Version)
			}
		}
		for v, t := range c.chain[a] {
			if v > o.Version {
				c.fail("%s (%s) wrote account %d version %d, but the final state has version %d: its write is lost",
					t.ID, t.Outcome, a, v, o.Version)
			}
		}
	}
}
