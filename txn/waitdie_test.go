package txn

import (
	"fmt"
	"testing"
)

func pt(k string, m Mode) Want { return Want{Start: []byte(k), Mode: m} }
func rng(a, b string) Want     { return Want{Start: []byte(a), End: []byte(b), Mode: Shared} }
func wants(ws ...Want) []Want  { return ws }

// TestWantsConflictAgreesWithLockTable: for every pair of small want
// sets, WantsConflict says exactly what the lock table does when one of
// them is held and the other asked for.
func TestWantsConflictAgreesWithLockTable(t *testing.T) {
	all := []Want{pt("a", Shared), pt("a", Exclusive), pt("b", Shared), pt("b", Exclusive), rng("a", "b"), rng("a", ""), rng("c", "d")}
	for i, x := range all {
		for j, y := range all {
			a, b := wants(x), wants(y)
			lt := NewLockTable()
			if c := lt.Acquire("A", a); len(c) > 0 {
				t.Fatal(c)
			}
			want := len(lt.Conflicts("B", b)) > 0
			if got := WantsConflict(a, b); got != want {
				t.Errorf("%d/%d: WantsConflict(%v, %v) = %v, the lock table says %v", i, j, x, y, got, want)
			}
			if got := WantsConflict(b, a); got != want {
				t.Errorf("%d/%d: not symmetric for %v, %v", i, j, x, y)
			}
		}
	}
}

// TestWaitQueue: a younger transaction meets an older waiter's
// reservation and must die; an older one, or one that wants nothing the
// waiter wants, does not; a waiter that is done reserves nothing.
func TestWaitQueue(t *testing.T) {
	var q WaitQueue
	// The audit: old, reading many keys.
	var audit []Want
	for i := 0; i < 100; i++ {
		audit = append(audit, pt(fmt.Sprintf("acct/%03d", i), Shared))
	}
	done := q.Wait("audit", 100, audit)
	if q.Len() != 1 {
		t.Fatalf("Len = %d", q.Len())
	}
	transfer := wants(pt("acct/007", Exclusive), pt("acct/500", Exclusive))
	if id, ok := q.OlderWaiter("young", 200, transfer); !ok || id != "audit" {
		t.Errorf("a younger writer of a reserved key: %q, %v; want the audit", id, ok)
	}
	if _, ok := q.OlderWaiter("old", 50, transfer); ok {
		t.Error("an older writer met the younger waiter's reservation")
	}
	if _, ok := q.OlderWaiter("reader", 200, wants(pt("acct/007", Shared))); ok {
		t.Error("a younger reader conflicts with a waiting reader")
	}
	if _, ok := q.OlderWaiter("elsewhere", 200, wants(pt("acct/900", Exclusive))); ok {
		t.Error("a writer of keys nobody waits for must not die")
	}
	if _, ok := q.OlderWaiter("audit", 100, transfer); ok {
		t.Error("a transaction met its own reservation")
	}
	// Same priority: the id breaks the tie, as Older does.
	if _, ok := q.OlderWaiter("b", 100, transfer); !ok {
		t.Error("tie on priority: audit < b by id, so b must die")
	}
	done()
	if _, ok := q.OlderWaiter("young", 200, transfer); ok || q.Len() != 0 {
		t.Error("a waiter that is done still reserves")
	}
}
