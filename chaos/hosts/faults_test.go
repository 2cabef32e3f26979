package hosts

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Tests of the parts without I/O: they run anywhere, root or not.

func testAddr(i int) string { return fmt.Sprintf("10.231.7.%d", 10+i) }

// ruleLines returns the rule lines of a rendered script (the header that
// creates and flushes the chains aside).
func ruleLines(script string) []string {
	var out []string
	for line := range strings.Lines(script) {
		if strings.HasPrefix(line, "add rule ") {
			out = append(out, strings.TrimSpace(strings.TrimPrefix(line, "add rule inet cutkvchaos ")))
		}
	}
	return out
}

func TestRender(t *testing.T) {
	drop := func(chain, dir string, hosts ...int) string {
		var a []string
		for _, h := range hosts {
			a = append(a, testAddr(h))
		}
		return fmt.Sprintf("%s ip %s { %s } drop comment \"cutkv chaos: drop\"", chain, dir, strings.Join(a, ", "))
	}
	loss := func(chain, dir string, p int, hosts ...int) string {
		var a []string
		for _, h := range hosts {
			a = append(a, testAddr(h))
		}
		return fmt.Sprintf("%s ip %s { %s } numgen random mod 100 < %d drop comment \"cutkv chaos: loss %d%%\"", chain, dir, strings.Join(a, ", "), p, p)
	}
	tests := []struct {
		name  string
		hosts int
		edit  func(*faultSet) error
		want  map[int][]string // host -> rules; hosts not listed have none
		notes string
	}{
		{name: "none", hosts: 3, edit: func(*faultSet) error { return nil }, notes: "none"},
		{
			name: "clog two links, unclog one", hosts: 3,
			edit: func(f *faultSet) error {
				return errors.Join(f.clog(1, 2), f.clog(3, 2), f.unclog(2, 1))
			},
			want: map[int][]string{
				2: {drop("input", "saddr", 3), drop("output", "daddr", 3)},
				3: {drop("input", "saddr", 2), drop("output", "daddr", 2)},
			},
			notes: "clog 2-3",
		},
		{
			name: "unclog opens a link another call cut", hosts: 3,
			edit: func(f *faultSet) error { return errors.Join(f.isolate(1), f.unclog(1, 3)) },
			want: map[int][]string{
				1: {drop("input", "saddr", 2), drop("output", "daddr", 2)},
				2: {drop("input", "saddr", 1), drop("output", "daddr", 1)},
			},
			notes: "isolate 1",
		},
		{
			name: "partition 1 | 2 3", hosts: 3,
			edit: func(f *faultSet) error { return f.partition([][]int{{1}, {2, 3}}) },
			want: map[int][]string{
				1: {drop("input", "saddr", 2, 3), drop("output", "daddr", 2, 3)},
				2: {drop("input", "saddr", 1), drop("output", "daddr", 1)},
				3: {drop("input", "saddr", 1), drop("output", "daddr", 1)},
			},
			notes: "partition {1} | {2 3}",
		},
		{
			name: "partition leaves unnamed hosts alone", hosts: 5,
			edit: func(f *faultSet) error { return f.partition([][]int{{1, 2}, {3}}) },
			want: map[int][]string{
				1: {drop("input", "saddr", 3), drop("output", "daddr", 3)},
				2: {drop("input", "saddr", 3), drop("output", "daddr", 3)},
				3: {drop("input", "saddr", 1, 2), drop("output", "daddr", 1, 2)},
			},
			notes: "partition {1 2} | {3}",
		},
		{
			name: "one group cuts nothing", hosts: 3,
			edit:  func(f *faultSet) error { return f.partition([][]int{{1, 2, 3}}) },
			notes: "none",
		},
		{
			name: "isolate", hosts: 3,
			edit: func(f *faultSet) error { return f.isolate(2) },
			want: map[int][]string{
				1: {drop("input", "saddr", 2), drop("output", "daddr", 2)},
				2: {drop("input", "saddr", 1, 3), drop("output", "daddr", 1, 3)},
				3: {drop("input", "saddr", 2), drop("output", "daddr", 2)},
			},
			notes: "isolate 2",
		},
		{
			name: "one way", hosts: 3,
			edit: func(f *faultSet) error { return f.dropOneWay(1, 2) },
			want: map[int][]string{
				1: {drop("output", "daddr", 2)},
				2: {drop("input", "saddr", 1)},
			},
			notes: "drop 1->2",
		},
		{
			name: "loss only at the lossy host", hosts: 3,
			edit: func(f *faultSet) error { return f.setLoss(2, 30) },
			want: map[int][]string{
				2: {loss("input", "saddr", 30, 1, 3), loss("output", "daddr", 30, 1, 3)},
			},
			notes: "loss 2 30%",
		},
		{
			name: "total loss needs no numgen", hosts: 2,
			edit: func(f *faultSet) error { return f.setLoss(1, 100) },
			want: map[int][]string{1: {
				`input ip saddr { 10.231.7.12 } drop comment "cutkv chaos: loss 100%"`,
				`output ip daddr { 10.231.7.12 } drop comment "cutkv chaos: loss 100%"`,
			}},
			notes: "loss 1 100%",
		},
		{
			name: "loss replaced, then removed", hosts: 3,
			edit: func(f *faultSet) error {
				return errors.Join(f.setLoss(2, 30), f.setLoss(2, 60), f.setLoss(3, 10), f.setLoss(3, 0))
			},
			want:  map[int][]string{2: {loss("input", "saddr", 60, 1, 3), loss("output", "daddr", 60, 1, 3)}},
			notes: "loss 2 60%",
		},
		{
			name: "faults compose and repeat idempotently", hosts: 3,
			edit: func(f *faultSet) error {
				return errors.Join(f.dropOneWay(1, 2), f.dropOneWay(1, 2), f.dropOneWay(3, 1), f.setLoss(1, 5))
			},
			want: map[int][]string{
				1: {drop("input", "saddr", 3), drop("output", "daddr", 2), loss("input", "saddr", 5, 2, 3), loss("output", "daddr", 5, 2, 3)},
				2: {drop("input", "saddr", 1)},
				3: {drop("output", "daddr", 1)},
			},
			notes: "drop 1->2; drop 3->1; loss 1 5%",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFaultSet(tt.hosts)
			if err := tt.edit(f); err != nil {
				t.Fatal(err)
			}
			for h := 1; h <= tt.hosts; h++ {
				script := f.render(h, testAddr)
				if !strings.HasPrefix(script, "add table inet cutkvchaos\n") || !strings.Contains(script, "flush chain inet cutkvchaos input\n") {
					t.Errorf("host %d: script lacks the idempotent header:\n%s", h, script)
				}
				got, want := ruleLines(script), tt.want[h]
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("host %d rules:\n got %q\nwant %q", h, got, want)
				}
			}
			if got := f.describe(); got != tt.notes {
				t.Errorf("describe = %q, want %q", got, tt.notes)
			}
		})
	}
}

func TestFaultArgs(t *testing.T) {
	f := newFaultSet(3)
	for _, err := range []error{
		f.partition([][]int{{1}, {1, 2}}),
		f.partition([][]int{{0}, {2}}),
		f.partition([][]int{{1}, {4}}),
		f.isolate(4),
		f.dropOneWay(2, 2),
		f.dropOneWay(1, 0),
		f.clog(2, 2),
		f.clog(0, 1),
		f.unclog(1, 4),
	} {
		if !errors.Is(err, ErrBadHost) {
			t.Errorf("got %v, want ErrBadHost", err)
		}
	}
	for _, p := range []int{-1, 101} {
		if err := f.setLoss(1, p); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("loss %d: got %v, want ErrInvalidConfig", p, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Name: "ck1", Hosts: 3, Subnet: 9}, true},
		{Config{Name: "abcdef", Hosts: 9}, true},
		{Config{Name: "a", Hosts: 1}, true},
		{Config{Name: "", Hosts: 3}, false},
		{Config{Name: "abcdefg", Hosts: 3}, false},
		{Config{Name: "Ck", Hosts: 3}, false},
		{Config{Name: "c-k", Hosts: 3}, false},
		{Config{Name: "ck", Hosts: 0}, false},
		{Config{Name: "ck", Hosts: 10}, false},
		{Config{Name: "ck", Hosts: 3, ProxyPorts: []int{7301, 7001}}, true},
		{Config{Name: "ck", Hosts: 3, ProxyPorts: []int{0}}, false},
		{Config{Name: "ck", Hosts: 3, ProxyPorts: []int{65536}}, false},
		{Config{Name: "ck", Hosts: 3, ProxyPorts: []int{7301, 7301}}, false},
	} {
		err := tt.cfg.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("%+v: Validate = %v, want ok=%v", tt.cfg, err, tt.ok)
		}
	}
}

func TestNames(t *testing.T) {
	const name = "abcdef" // the longest
	for _, s := range []string{switchNS(name), hostNS(name, 9), bridgeName(name), uplinkName(name), uplinkPeer(name), hostPort(name, 9)} {
		if len(s) > 15 {
			t.Errorf("%q longer than IFNAMSIZ-1", s)
		}
	}
	for _, tt := range []struct {
		kind, obj, run string
		ok             bool
	}{
		{"ns", "ck1sw", "ck1", true},
		{"ns", "ck1n3", "ck1", true},
		{"ns", "abn1n1", "abn1", true},
		{"ns", "ck1n0", "", false},
		{"ns", "ck1", "", false},
		{"ns", "sw", "", false},
		{"ns", "ck1234567n1", "", false},
		{"link", "ck1h", "ck1", true},
		{"link", "eth0", "", false},
		{"link", "docker0", "", false},
		{"link", "h", "", false},
		{"link", "ck1br", "", false},
	} {
		run, ok := parseRunObject(tt.kind, tt.obj)
		if ok != tt.ok || (ok && run != tt.run) {
			t.Errorf("parseRunObject(%s, %s) = %q, %v; want %q, %v", tt.kind, tt.obj, run, ok, tt.run, tt.ok)
		}
	}
	// Every object of a run parses back to the run.
	for _, obj := range []string{switchNS(name), hostNS(name, 1), hostNS(name, 9)} {
		if run, ok := parseRunObject("ns", obj); !ok || run != name {
			t.Errorf("namespace %s parses to %q, %v", obj, run, ok)
		}
	}
	if run, ok := parseRunObject("link", uplinkName(name)); !ok || run != name {
		t.Errorf("uplink parses to %q, %v", run, ok)
	}
}

func TestProcState(t *testing.T) {
	for _, tt := range []struct {
		stat string
		want byte
		ok   bool
	}{
		{"123 (sleep) S 1 123 123 0 -1", 'S', true},
		{"123 (a) b) (c) T 1 2", 'T', true},
		{"123 (x y) t 1", 't', true},
		{"123 (sleep", 0, false},
		{"123 (sleep)", 0, false},
	} {
		got, err := procState([]byte(tt.stat))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("procState(%q) = %q, %v; want %q", tt.stat, got, err, tt.want)
		}
	}
}
