package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeResolver answers lookups from a script, one answer a call (the last
// one repeats), on a clock that moves only when the resolver sleeps.
type fakeResolver struct {
	answers [][]net.IP // nil entry: the name does not resolve
	local   []net.IP
	calls   int
	clock   time.Time
}

func (f *fakeResolver) resolver() resolver {
	return resolver{
		lookup: func(context.Context, string) ([]net.IP, error) {
			a := f.answers[min(f.calls, len(f.answers)-1)]
			f.calls++
			if a == nil {
				return nil, errors.New("no such host")
			}
			return a, nil
		},
		localIPs: func() ([]net.IP, error) { return f.local, nil },
		now:      func() time.Time { return f.clock },
		sleep:    func(d time.Duration) { f.clock = f.clock.Add(d) },
	}
}

func ips(s ...string) []net.IP {
	var out []net.IP
	for _, x := range s {
		out = append(out, net.ParseIP(x))
	}
	return out
}

// TestResolveAdvertise: an IP address is taken as it is; a host name is
// waited for while it does not resolve, and while it names no address of
// this machine (a stale record after a restart), up to the stale wait,
// after which its address is taken anyway (NAT); a name that never
// resolves fails by the deadline, naming the flag and the host. Of
// several addresses a local one wins, IPv4 first.
func TestResolveAdvertise(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	local := ips("127.0.0.1", "10.1.0.7", "fd00::7")
	for _, tc := range []struct {
		name    string
		addr    string
		answers [][]net.IP
		want    string
		calls   int    // lookups made; 0: any
		fails   string // the error says; "": no error
	}{
		{name: "an IP address", addr: "10.9.9.9:7101", answers: [][]net.IP{nil}, want: "10.9.9.9:7101"},
		{name: "local at once", addr: "kvnode-0.peer:7101", answers: [][]net.IP{ips("10.1.0.7")}, want: "10.1.0.7:7101", calls: 1},
		{name: "appears later", addr: "kvnode-0.peer:7101", answers: [][]net.IP{nil, nil, nil, ips("10.1.0.7")}, want: "10.1.0.7:7101", calls: 4},
		{name: "stale record, then the new one", addr: "kvnode-0.peer:7101", answers: [][]net.IP{ips("10.1.0.3"), ips("10.1.0.3"), ips("10.1.0.7")}, want: "10.1.0.7:7101", calls: 3},
		{name: "never local (NAT): taken after the stale wait", addr: "public.example:7101", answers: [][]net.IP{ips("203.0.113.5")}, want: "203.0.113.5:7101"},
		{name: "local IPv4 first", addr: "h:7101", answers: [][]net.IP{ips("fd00::7", "203.0.113.5", "10.1.0.7")}, want: "10.1.0.7:7101"},
		{name: "local IPv6 before a foreign IPv4", addr: "h:7101", answers: [][]net.IP{ips("203.0.113.5", "fd00::7")}, want: "[fd00::7]:7101"},
		{name: "never resolves", addr: "no-such-host.invalid:7101", answers: [][]net.IP{nil}, fails: "no-such-host.invalid did not resolve within 30s"},
	} {
		f := &fakeResolver{answers: tc.answers, local: local, clock: time.Unix(1e9, 0)}
		start := f.clock
		got, err := f.resolver().resolveAdvertise(tc.addr, 30*time.Second, 15*time.Second, log)
		switch {
		case tc.fails != "":
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--advertise-gossip") || !strings.Contains(err.Error(), tc.fails) {
				t.Errorf("%s: %q, %v; want ErrConfig saying %q", tc.name, got, err, tc.fails)
			}
			if waited := f.clock.Sub(start); waited > 30*time.Second {
				t.Errorf("%s: gave up after %v, beyond the 30s wait", tc.name, waited)
			}
		case err != nil || got != tc.want || tc.calls != 0 && f.calls != tc.calls:
			t.Errorf("%s: %q, %v after %d lookups; want %q after %d", tc.name, got, err, f.calls, tc.want, tc.calls)
		}
		if tc.name == "never local (NAT): taken after the stale wait" {
			if waited := f.clock.Sub(start); waited < 13*time.Second || waited > 15*time.Second {
				t.Errorf("%s: announced after %v, want about the 15s stale wait", tc.name, waited)
			}
		}
	}

	// The system resolver: localhost is this machine's.
	if got, err := systemResolver().resolveAdvertise("localhost:7101", time.Second, time.Second, log); got != "127.0.0.1:7101" || err != nil {
		t.Errorf("localhost: %q, %v", got, err)
	}
}
