package hosts

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestRenderProxy(t *testing.T) {
	const header = "add table inet cutkvchaos\n" +
		"add chain inet cutkvchaos proxy { type nat hook prerouting priority dstnat; policy accept; }\n" +
		"flush chain inet cutkvchaos proxy\n"
	rule := func(port, to int, hosts ...int) string {
		a := ""
		for i, h := range hosts {
			if i > 0 {
				a += ", "
			}
			a += testAddr(h)
		}
		return fmt.Sprintf("proxy ip saddr { %s } tcp dport %d redirect to :%d comment \"cutkv chaos: delay proxy\"", a, port, to)
	}
	for _, tt := range []struct {
		name     string
		h, hosts int
		redirect map[int]int
		want     []string
	}{
		{"one port", 2, 3, map[int]int{7301: 40001}, []string{rule(7301, 40001, 1, 3)}},
		{"ports in order", 1, 3, map[int]int{7301: 40002, 7001: 40001}, []string{rule(7001, 40001, 2, 3), rule(7301, 40002, 2, 3)}},
		{"no other host", 1, 1, map[int]int{7301: 40001}, nil},
		{"no port", 1, 3, map[int]int{}, nil},
	} {
		s := renderProxy(tt.h, tt.hosts, testAddr, tt.redirect)
		if len(s) < len(header) || s[:len(header)] != header {
			t.Errorf("%s: script does not start with the header:\n%s", tt.name, s)
		}
		if got := ruleLines(s); !slices.Equal(got, tt.want) {
			t.Errorf("%s: rules\n%q\nwant\n%q", tt.name, got, tt.want)
		}
	}
	// The fault rendering never touches the proxy chain, so Heal keeps it.
	f := newFaultSet(3)
	if err := f.isolate(1); err != nil {
		t.Fatal(err)
	}
	if s := f.render(1, testAddr); slices.ContainsFunc(ruleLines(s), func(l string) bool { return len(l) > 5 && l[:5] == "proxy" }) {
		t.Errorf("render writes the proxy chain:\n%s", s)
	}
}

func TestSetDelay(t *testing.T) {
	f := newFaultSet(3)
	ms := time.Millisecond
	for _, err := range []error{f.setDelay(1, 1, ms, 0), f.setDelay(0, 2, ms, 0), f.setDelay(1, 4, ms, 0)} {
		if !errors.Is(err, ErrBadHost) {
			t.Errorf("got %v, want ErrBadHost", err)
		}
	}
	for _, dj := range [][2]time.Duration{{-ms, 0}, {ms, -ms}, {ms, 2 * ms}} {
		if err := f.setDelay(1, 2, dj[0], dj[1]); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("delay %v jitter %v: got %v, want ErrInvalidConfig", dj[0], dj[1], err)
		}
	}
	if len(f.delay) != 0 || f.describe() != "none" {
		t.Fatalf("refused calls changed the model: %v %q", f.delay, f.describe())
	}
	if err := errors.Join(f.setDelay(1, 2, 50*ms, 10*ms), f.setDelay(2, 1, 20*ms, 0), f.setDelay(1, 2, 80*ms, 5*ms)); err != nil {
		t.Fatal(err)
	}
	if got, want := f.describe(), "delay 2->1 20ms±0s; delay 1->2 80ms±5ms"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
	if got := f.delay[link{1, 2}]; got != (delaySpec{80 * ms, 5 * ms}) {
		t.Errorf("1->2 = %+v", got)
	}
	g := f.clone()
	if err := g.setDelay(2, 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.delay[link{2, 1}]; ok || g.describe() != "delay 1->2 80ms±5ms" {
		t.Errorf("delay 0 did not remove 2->1: %v %q", g.delay, g.describe())
	}
	if _, ok := f.delay[link{2, 1}]; !ok {
		t.Error("clone shares the delay map")
	}
	for _, r := range []string{f.render(1, testAddr), f.render(2, testAddr)} {
		if len(ruleLines(r)) != 0 {
			t.Errorf("a delay renders rules: %s", r)
		}
	}
}

func TestDelayHold(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	if got := (delaySpec{}).hold(r); got != 0 {
		t.Errorf("no delay holds %v", got)
	}
	if got := (delaySpec{delay: 30 * time.Millisecond}).hold(r); got != 30*time.Millisecond {
		t.Errorf("no jitter holds %v", got)
	}
	d := delaySpec{delay: 100 * time.Millisecond, jitter: 40 * time.Millisecond}
	lo, hi := time.Hour, time.Duration(0)
	for range 10000 {
		h := d.hold(r)
		lo, hi = min(lo, h), max(hi, h)
	}
	if lo < 60*time.Millisecond || hi > 140*time.Millisecond || lo > 62*time.Millisecond || hi < 138*time.Millisecond {
		t.Errorf("100ms±40ms held between %v and %v, want about 60ms..140ms", lo, hi)
	}
}
