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

// TestWaitQueue: an entry reserves what it wants, waiting or admitted:
// a younger transaction that conflicts dies; an older one proceeds past a
// younger waiter (which will die at its next look) but waits for a
// younger admitted entry to leave; keys nobody reserved are free; ties on
// priority are broken by id, as Older does.
func TestWaitQueue(t *testing.T) {
	var q WaitQueue
	free := func() Verdict { return Proceed }
	// The audit: old, reading many keys, waiting for a holder.
	var audit []Want
	for i := 0; i < 100; i++ {
		audit = append(audit, pt(fmt.Sprintf("acct/%03d", i), Shared))
	}
	a := q.Enter("audit", 100, audit)
	if v := a.Admit(func() Verdict { return Wait }); v != Wait {
		t.Fatalf("audit behind a younger holder: %v, want Wait", v)
	}
	if q.Len() != 1 {
		t.Fatalf("Len = %d", q.Len())
	}
	transfer := wants(pt("acct/007", Exclusive), pt("acct/500", Exclusive))
	look := func(id string, prio int64, w []Want) Verdict {
		tk := q.Enter(id, prio, w)
		defer tk.Leave()
		return tk.Admit(free)
	}
	if v := look("young", 200, transfer); v != Die {
		t.Errorf("a younger writer of a reserved key: %v, want Die", v)
	}
	if v := look("old", 50, transfer); v != Proceed {
		t.Errorf("an older writer behind a younger waiter: %v, want Proceed", v)
	}
	if v := look("reader", 200, wants(pt("acct/007", Shared))); v != Proceed {
		t.Errorf("a younger reader beside a waiting reader: %v, want Proceed", v)
	}
	if v := look("elsewhere", 200, wants(pt("acct/900", Exclusive))); v != Proceed {
		t.Errorf("a writer of keys nobody reserved: %v, want Proceed", v)
	}
	if v := look("b", 100, transfer); v != Die {
		t.Errorf("tie on priority: audit < b by id, so b must die; got %v", v)
	}
	if v := a.Admit(free); v != Proceed {
		t.Fatalf("audit once the holder went: %v", v)
	}
	// Admitted, the audit still reserves: its entry is on its way.
	if v := look("young", 200, transfer); v != Die {
		t.Errorf("a younger writer beside an admitted reader: %v, want Die", v)
	}
	// An older writer waits for the younger admitted audit to leave, and
	// is woken when it does.
	w := q.Enter("oldest", 1, transfer)
	changed := q.Changed()
	if v := w.Admit(free); v != Wait {
		t.Errorf("an older writer behind a younger admitted entry: %v, want Wait", v)
	}
	a.Leave()
	select {
	case <-changed:
	default:
		t.Error("Leave did not close Changed")
	}
	if v := w.Admit(free); v != Proceed {
		t.Errorf("the older writer after the audit left: %v, want Proceed", v)
	}
	w.Leave()
	w.Leave() // twice is harmless
	if q.Len() != 0 {
		t.Errorf("Len = %d after every entry left", q.Len())
	}
	// held's verdict counts when the queue has nothing against.
	tk := q.Enter("x", 5, transfer)
	defer tk.Leave()
	if v := tk.Admit(func() Verdict { return Die }); v != Die {
		t.Errorf("an older holder: %v, want Die", v)
	}
}
