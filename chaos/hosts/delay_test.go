package hosts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// minRTT is the shortest of a few round trips, which keeps a busy
// machine's scheduling out of the comparison.
func minRTT(t *testing.T, n *Net, from, to int) time.Duration {
	t.Helper()
	best := time.Hour
	for range 3 {
		d, err := n.RoundTrip(from, to, port, flowWait)
		if err != nil {
			t.Fatal(err)
		}
		best = min(best, d)
	}
	return best
}

// TestDelay proves on real hosts that a delayed link's round trips grow
// by the delay, in the direction set only, for connections opened before
// and after the call, that byte order survives jitter, that drop rules
// still cut proxied connections, and that Heal restores the speed.
func TestDelay(t *testing.T) {
	requireRoot(t)
	var n *Net
	start := 100 + (os.Getpid()+50)%100
	for k := range 50 {
		var err error
		n, err = Setup(Config{Name: testPrefix + "d", Hosts: 3, Subnet: byte(start + k), ProxyPorts: []int{port}})
		if errors.Is(err, ErrSubnetInUse) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	if n == nil {
		t.Fatal("no free subnet")
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	serve(t, nil, n.HostIP())
	for i := 1; i <= 3; i++ {
		serve(t, n.Host(i), n.Host(i).IP())
	}
	if rules, err := n.Rules(2); err != nil || !strings.Contains(rules, fmt.Sprintf("tcp dport %d redirect to :", port)) {
		t.Fatalf("host 2 has no redirect to its proxy: %q %v", rules, err)
	}
	checkReach(t, n, "through the proxies")
	const delay = 150 * time.Millisecond
	base := minRTT(t, n, 1, 2)
	if base >= delay/3 {
		t.Fatalf("round trip 1->2 before any delay took %v, too slow to measure a delay of %v", base, delay)
	}
	t.Logf("round trip through a proxy at delay 0: %v; harness to host, not proxied: %v", base, minRTT(t, n, 0, 2))

	open, err := n.Host(1).Dial("tcp4", net.JoinHostPort(n.Host(2).IP(), strconv.Itoa(port)), flowWait)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	echo := func(msg string) time.Duration {
		t.Helper()
		began := time.Now()
		if _, err := open.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		_ = open.SetReadDeadline(time.Now().Add(flowWait))
		if _, err := io.ReadFull(open, make([]byte, len(msg))); err != nil {
			t.Fatal(err)
		}
		return time.Since(began)
	}
	echo("a")

	if err := n.Delay(1, 2, delay, 0); err != nil {
		t.Fatal(err)
	}
	if got := n.Faults(); got != "delay 1->2 150ms±0s" {
		t.Errorf("Faults = %q", got)
	}
	// 1->2 holds the probe on a connection 1 opens, the answer on one 2
	// opens; 1->3 and the harness's connections are not slowed.
	if d := minRTT(t, n, 1, 2); d < delay {
		t.Errorf("round trip 1->2 with 1->2 delayed by %v: %v", delay, d)
	} else {
		t.Logf("round trip 1->2: %v before, %v with 1->2 delayed by %v", base, d, delay)
	}
	if d := minRTT(t, n, 2, 1); d < delay {
		t.Errorf("round trip 2->1 with 1->2 delayed by %v: %v (the answers cross 1->2)", delay, d)
	}
	if d := minRTT(t, n, 1, 3); d >= delay/2 {
		t.Errorf("round trip 1->3 beside a delay 1->2: %v", d)
	}
	if d := minRTT(t, n, 0, 2); d >= delay/2 {
		t.Errorf("round trip harness->2 beside a delay 1->2: %v", d)
	}
	if d := echo("b"); d < delay {
		t.Errorf("a connection opened before the delay echoed in %v", d)
	}
	if err := n.Delay(2, 1, delay, 0); err != nil {
		t.Fatal(err)
	}
	if d := minRTT(t, n, 1, 2); d < 2*delay {
		t.Errorf("round trip 1->2 with both ways delayed by %v: %v", delay, d)
	} else {
		t.Logf("round trip 1->2 with both ways delayed by %v: %v", delay, d)
	}

	// Jitter: every hold is within delay±jitter, and a stream's bytes stay
	// in order however the holds fall.
	if err := errors.Join(n.Delay(1, 2, 100*time.Millisecond, 60*time.Millisecond), n.Delay(2, 1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if d := minRTT(t, n, 1, 2); d < 40*time.Millisecond {
		t.Errorf("round trip 1->2 at 100ms±60ms: %v", d)
	}
	var sent bytes.Buffer
	for i := range 200 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		sent.Write(b[:])
		if _, err := open.Write(b[:]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // separate chunks, separate holds
	}
	got := make([]byte, sent.Len())
	_ = open.SetReadDeadline(time.Now().Add(flowWait))
	if _, err := io.ReadFull(open, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Error("jitter reordered a stream's bytes")
	}

	// Drop rules match proxied connections as any other.
	if err := n.Isolate(2); err != nil {
		t.Fatal(err)
	}
	checkReach(t, n, "isolate 2 through the proxies", both([2]int{2, 1}, [2]int{2, 3})...)

	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if n.Faults() != "none" {
		t.Errorf("after Heal, Faults = %q", n.Faults())
	}
	checkReach(t, n, "healed")
	if d := minRTT(t, n, 1, 2); d >= delay/2 {
		t.Errorf("round trip 1->2 after Heal: %v", d)
	} else {
		t.Logf("round trip 1->2 after Heal: %v", d)
	}
	_ = open.SetReadDeadline(time.Now().Add(30 * time.Second)) // TCP may retransmit after the isolation
	if d := echo("c"); d >= delay {
		t.Errorf("a connection proxied since before the delay echoed in %v after Heal", d)
	}

	// Nothing listening behind a proxy: the connection is reset, as the
	// kernel would refuse it.
	l, err := n.Host(3).Listen("tcp4", net.JoinHostPort(n.Host(3).IP(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if _, err := n.RoundTrip(1, 3, l.Addr().(*net.TCPAddr).Port, cutWait); err == nil {
		t.Error("a round trip to a closed port answered")
	}
	if _, err := n.RoundTrip(1, 3, port+1, cutWait); err == nil {
		t.Error("a round trip to an unproxied closed port answered")
	}
}

// TestDelayNeedsProxy: without Config.ProxyPorts, Delay refuses.
func TestDelayNeedsProxy(t *testing.T) {
	requireRoot(t)
	n := newNet(t, "e", 2)
	if err := n.Delay(1, 2, time.Millisecond, 0); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Delay without a proxy: %v, want ErrInvalidConfig", err)
	}
}
