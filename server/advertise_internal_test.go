package server

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestResolveAdvertise: an IP address is taken as it is; a host name is
// resolved (localhost: to its IPv4 address); a name that never resolves
// fails by the deadline, naming the flag and the host.
func TestResolveAdvertise(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for in, want := range map[string]string{"10.0.0.1:7101": "10.0.0.1:7101", "[fd00::1]:7101": "[fd00::1]:7101", "localhost:7101": "127.0.0.1:7101"} {
		if got, err := resolveAdvertise(in, time.Second, log); got != want || err != nil {
			t.Errorf("resolveAdvertise(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := resolveAdvertise("no-such-host.invalid:7101", 300*time.Millisecond, log)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--advertise-gossip") || !strings.Contains(err.Error(), "no-such-host.invalid") {
		t.Errorf("unresolvable host: %v", err)
	}
}
