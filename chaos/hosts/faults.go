package hosts

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// tableName is the nftables table (family inet) in every host's namespace
// that holds the fault rules.
const tableName = "cutkvchaos"

// link is a direction between two hosts: packets from host from to host to.
type link struct{ from, to int }

// faultSet is the model of the faults in force on a run of n hosts: the
// directed links whose packets are dropped, and each host's random loss.
// The nft rules of every host are a pure function of it (render), so a
// fault call changes the model and then rewrites the rules of the hosts
// whose rendering changed. It does no I/O.
type faultSet struct {
	hosts int
	drop  map[link]bool
	loss  map[int]int        // host -> percent, 1..100; absent = none
	delay map[link]delaySpec // enforced by the proxy, not by rules (delay.go)
	notes []string           // the calls in force, for Faults
}

func newFaultSet(hosts int) *faultSet {
	return &faultSet{hosts: hosts, drop: map[link]bool{}, loss: map[int]int{}, delay: map[link]delaySpec{}}
}

// clone returns a deep copy, so that a fault call with bad arguments
// leaves the model untouched.
func (f *faultSet) clone() *faultSet {
	g := newFaultSet(f.hosts)
	maps.Copy(g.drop, f.drop)
	maps.Copy(g.loss, f.loss)
	maps.Copy(g.delay, f.delay)
	g.notes = slices.Clone(f.notes)
	return g
}

func (f *faultSet) checkHost(i int) error {
	if i < 1 || i > f.hosts {
		return fmt.Errorf("%w: host %d, want 1..%d", ErrBadHost, i, f.hosts)
	}
	return nil
}

func (f *faultSet) note(s string) {
	if !slices.Contains(f.notes, s) {
		f.notes = append(f.notes, s)
	}
}

// partition drops both directions of every link between hosts of
// different groups. Hosts in no group are not touched.
func (f *faultSet) partition(groups [][]int) error {
	group := map[int]int{}
	for g, hs := range groups {
		for _, h := range hs {
			if err := f.checkHost(h); err != nil {
				return err
			}
			if _, ok := group[h]; ok {
				return fmt.Errorf("%w: host %d named twice in partition %v", ErrBadHost, h, groups)
			}
			group[h] = g
		}
	}
	for a, ga := range group {
		for b, gb := range group {
			if ga != gb {
				f.drop[link{a, b}] = true
			}
		}
	}
	var parts []string
	for _, hs := range groups {
		if len(hs) > 0 {
			parts = append(parts, "{"+joinInts(hs, " ")+"}")
		}
	}
	if len(parts) > 1 {
		f.note("partition " + strings.Join(parts, " | "))
	}
	return nil
}

// isolate drops both directions of every link of host i.
func (f *faultSet) isolate(i int) error {
	if err := f.checkHost(i); err != nil {
		return err
	}
	for j := 1; j <= f.hosts; j++ {
		if j != i {
			f.drop[link{i, j}] = true
			f.drop[link{j, i}] = true
		}
	}
	if f.hosts > 1 {
		f.note("isolate " + strconv.Itoa(i))
	}
	return nil
}

// dropOneWay drops packets from host from to host to.
func (f *faultSet) dropOneWay(from, to int) error {
	if err := f.checkLink(from, to); err != nil {
		return err
	}
	f.drop[link{from, to}] = true
	f.note(fmt.Sprintf("drop %d->%d", from, to))
	return nil
}

// clog drops both directions of the link between hosts a and b (a
// "clogged" link in FoundationDB's simulator).
func (f *faultSet) clog(a, b int) error {
	if err := f.checkLink(a, b); err != nil {
		return err
	}
	f.drop[link{a, b}] = true
	f.drop[link{b, a}] = true
	f.note(clogNote(a, b))
	return nil
}

// unclog lets both directions of the link between a and b through again,
// whichever call dropped them, and forgets the link's clog note.
func (f *faultSet) unclog(a, b int) error {
	if err := f.checkLink(a, b); err != nil {
		return err
	}
	delete(f.drop, link{a, b})
	delete(f.drop, link{b, a})
	f.notes = slices.DeleteFunc(f.notes, func(s string) bool { return s == clogNote(a, b) })
	return nil
}

func (f *faultSet) checkLink(a, b int) error {
	if err := f.checkHost(a); err != nil {
		return err
	}
	if err := f.checkHost(b); err != nil {
		return err
	}
	if a == b {
		return fmt.Errorf("%w: link from host %d to itself", ErrBadHost, a)
	}
	return nil
}

// clogNote names the link a-b the same whichever end comes first.
func clogNote(a, b int) string {
	return fmt.Sprintf("clog %d-%d", min(a, b), max(a, b))
}

// setLoss sets host i's random loss, replacing an earlier one; 0 removes it.
func (f *faultSet) setLoss(i, percent int) error {
	if err := f.checkHost(i); err != nil {
		return err
	}
	if percent < 0 || percent > 100 {
		return fmt.Errorf("%w: loss %d%%, want 0..100", ErrInvalidConfig, percent)
	}
	prefix := "loss " + strconv.Itoa(i) + " "
	f.notes = slices.DeleteFunc(f.notes, func(s string) bool { return strings.HasPrefix(s, prefix) })
	if percent == 0 || f.hosts == 1 {
		delete(f.loss, i)
		return nil
	}
	f.loss[i] = percent
	f.note(prefix + strconv.Itoa(percent) + "%")
	return nil
}

// describe is Faults' text.
func (f *faultSet) describe() string {
	if len(f.notes) == 0 {
		return "none"
	}
	return strings.Join(f.notes, "; ")
}

// render returns the nft script that makes host h's fault table exactly
// what the model says, in one transaction. addr gives every host's
// address. The header creates the table and chains if they are missing
// (add is idempotent in nft) and flushes them, so applying a script twice
// is the same as applying it once, whatever was there before.
//
// Rules, in this order, each only if it has addresses to match:
//
//	input:  ip saddr { senders dropped towards h } drop
//	output: ip daddr { receivers dropped from h } drop
//	input:  ip saddr { every other host } numgen random mod 100 < P drop
//	output: ip daddr { every other host } numgen random mod 100 < P drop
//
// (for P = 100 the numgen test is left out: its value is 0..99 and nft
// refuses the comparison).
//
// A dropped link is enforced at both ends (the sender's output and the
// receiver's input); loss only at the lossy host, so a packet crosses one
// loss rule, not two.
func (f *faultSet) render(h int, addr func(int) string) string {
	var in, out []string
	for j := 1; j <= f.hosts; j++ {
		if f.drop[link{j, h}] {
			in = append(in, addr(j))
		}
		if f.drop[link{h, j}] {
			out = append(out, addr(j))
		}
	}
	t := "inet " + tableName
	var b strings.Builder
	fmt.Fprintf(&b, "add table %s\n", t)
	fmt.Fprintf(&b, "add chain %s input { type filter hook input priority filter; policy accept; }\n", t)
	fmt.Fprintf(&b, "add chain %s output { type filter hook output priority filter; policy accept; }\n", t)
	fmt.Fprintf(&b, "flush chain %s input\n", t)
	fmt.Fprintf(&b, "flush chain %s output\n", t)
	if len(in) > 0 {
		fmt.Fprintf(&b, "add rule %s input ip saddr { %s } drop comment \"cutkv chaos: drop\"\n", t, strings.Join(in, ", "))
	}
	if len(out) > 0 {
		fmt.Fprintf(&b, "add rule %s output ip daddr { %s } drop comment \"cutkv chaos: drop\"\n", t, strings.Join(out, ", "))
	}
	if p, ok := f.loss[h]; ok {
		var peers []string
		for j := 1; j <= f.hosts; j++ {
			if j != h {
				peers = append(peers, addr(j))
			}
		}
		// numgen's value is 0..99, and nft refuses "< 100" as out of range.
		chance := fmt.Sprintf("numgen random mod 100 < %d ", p)
		if p == 100 {
			chance = ""
		}
		for _, c := range []struct{ chain, match string }{{"input", "saddr"}, {"output", "daddr"}} {
			fmt.Fprintf(&b, "add rule %s %s ip %s { %s } %sdrop comment \"cutkv chaos: loss %d%%\"\n",
				t, c.chain, c.match, strings.Join(peers, ", "), chance, p)
		}
	}
	return b.String()
}

func joinInts(xs []int, sep string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}
