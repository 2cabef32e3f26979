package rpc

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	if err := poll(context.Background(), time.Second, func() (bool, error) { calls++; return calls == 3, nil }); err != nil || calls != 3 {
		t.Fatalf("done on the 3rd check: err %v after %d checks", err, calls)
	}
	if err := poll(context.Background(), time.Second, func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("check error: %v", err)
	}
	if err := poll(context.Background(), 10*time.Millisecond, func() (bool, error) { return false, nil }); !errors.Is(err, errPollTimeout) {
		t.Fatalf("never done: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := poll(ctx, time.Minute, func() (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
