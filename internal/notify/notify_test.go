package notify

import "testing"

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestSignal: a channel taken before a Notify is closed by it, one taken
// after waits for the next, and a Notify with nobody waiting is not kept
// for a later waiter.
func TestSignal(t *testing.T) {
	var s Signal
	s.Notify() // nobody waits
	a, b := s.Wait(), s.Wait()
	if closed(a) {
		t.Fatal("a Notify before Wait closed its channel")
	}
	s.Notify()
	if !closed(a) || !closed(b) {
		t.Fatal("Notify left a waiter's channel open")
	}
	c := s.Wait()
	if closed(c) {
		t.Fatal("a channel taken after the Notify is closed already")
	}
	s.Notify()
	if !closed(c) {
		t.Fatal("the second Notify left the new waiter's channel open")
	}
}
