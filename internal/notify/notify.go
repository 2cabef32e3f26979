// Package notify is how cutkv's state machines wake their waiters: a
// channel closed at the next change, taken before looking at the state,
// so that a waiter neither polls nor misses a change made between its
// look and its wait.
package notify

// Signal hands out the channel of the next change. The zero value is
// ready. It is not safe for concurrent use by itself: its owner's mutex,
// the one that guards the state it announces, guards it too.
type Signal struct {
	c chan struct{} // nil while nobody waits
}

// Wait returns a channel that is closed at the next Notify.
func (s *Signal) Wait() <-chan struct{} {
	if s.c == nil {
		s.c = make(chan struct{})
	}
	return s.c
}

// Notify wakes everyone who took Wait's channel since the last Notify.
func (s *Signal) Notify() {
	if s.c != nil {
		close(s.c)
		s.c = nil
	}
}
