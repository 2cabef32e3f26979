package partition

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
)

func put(k, v string) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: []byte(k), Value: []byte(v)}}}
}

func del(k string) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_Delete{Delete: &internalpb.DeleteOp{Key: []byte(k)}}}
}

func TestApplyVersions(t *testing.T) {
	p := New(1)
	mustApply(t, p, 1, put("a", "1"))
	res := mustApply(t, p, 2, put("a", "2"))
	if res.Prev == nil || string(res.Prev.Value) != "1" {
		t.Fatalf("prev = %+v", res.Prev)
	}
	kv, ok, _ := p.Get([]byte("a"))
	if !ok || string(kv.Value) != "2" || kv.Version != 2 || kv.CreateIndex != 1 || kv.ModIndex != 2 {
		t.Fatalf("a = %+v", kv)
	}
	res = mustApply(t, p, 3, del("a"))
	if res.Deleted != 1 {
		t.Fatalf("delete res = %+v", res)
	}
	if res := mustApply(t, p, 4, del("a")); res.Deleted != 0 {
		t.Fatalf("second delete res = %+v", res)
	}
	mustApply(t, p, 5, put("a", "3"))
	kv, _, _ = p.Get([]byte("a"))
	if kv.Version != 1 || kv.CreateIndex != 5 {
		t.Fatalf("recreated a = %+v, want version 1 created at 5", kv)
	}
	// Replayed entries at or below applied change nothing.
	mustApply(t, p, 2, put("a", "stale"))
	if kv, _, _ := p.Get([]byte("a")); string(kv.Value) != "3" || p.Applied() != 5 {
		t.Fatalf("replay changed state: %+v applied %d", kv, p.Applied())
	}
}

func TestApplyCopiesInput(t *testing.T) {
	p := New(1)
	k, v := []byte("key"), []byte("val")
	cmd := &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: k, Value: v}}}
	mustApply(t, p, 1, cmd)
	k[0], v[0] = 'X', 'X'
	if kv, ok, _ := p.Get([]byte("key")); !ok || string(kv.Value) != "val" {
		t.Fatalf("partition aliases the command's buffers: %+v", kv)
	}
}

// TestScanAgainstModel applies random puts and deletes and compares Scan
// with a sorted map.
func TestScanAgainstModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	p := New(1)
	model := map[string]string{}
	for i := uint64(1); i <= 3000; i++ {
		k := fmt.Sprintf("k%03d", r.IntN(300))
		if r.IntN(3) == 0 {
			delete(model, k)
			mustApply(t, p, i, del(k))
		} else {
			v := fmt.Sprint(i)
			model[k] = v
			mustApply(t, p, i, put(k, v))
		}
	}
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for trial := 0; trial < 200; trial++ {
		start := fmt.Sprintf("k%03d", r.IntN(300))
		var end []byte
		if r.IntN(2) == 0 {
			end = []byte(fmt.Sprintf("k%03d", r.IntN(300)))
		}
		limit := r.IntN(50)
		var want []string
		for _, k := range keys {
			if k >= start && (end == nil || k < string(end)) {
				want = append(want, k)
			}
		}
		wantMore := limit > 0 && len(want) > limit
		if wantMore {
			want = want[:limit]
		}
		got, more, _ := p.Scan([]byte(start), end, limit)
		if more != wantMore || len(got) != len(want) {
			t.Fatalf("Scan(%s,%s,%d): %d kvs more=%v, want %d more=%v", start, end, limit, len(got), more, len(want), wantMore)
		}
		for i := range got {
			if string(got[i].Key) != want[i] || !bytes.Equal(got[i].Value, []byte(model[want[i]])) {
				t.Fatalf("Scan(%s,%s,%d)[%d] = %s=%s, want %s=%s", start, end, limit, i, got[i].Key, got[i].Value, want[i], model[want[i]])
			}
		}
	}
	if p.Len() != len(model) {
		t.Fatalf("Len = %d, want %d", p.Len(), len(model))
	}
}

func mustApply(t *testing.T, p *Partition, index uint64, cmd *internalpb.Command) Result {
	t.Helper()
	res, err := p.Apply(index, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestChanged: the channel closes on the next apply (a command, an index
// recorded without one, an image loaded), not before; a new one is
// handed out after.
func TestChanged(t *testing.T) {
	p := New(1)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := p.Changed()
	if closed(ch) || p.Changed() != ch {
		t.Fatal("closed before any apply, or a second waiter got another channel")
	}
	if _, err := p.ApplyCommand(1, &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: []byte("k"), Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) {
		t.Fatal("not closed by an applied command")
	}
	ch = p.Changed()
	if closed(ch) {
		t.Fatal("the next channel is closed already")
	}
	p.SetApplied(1) // at or below applied: nothing happens
	if closed(ch) {
		t.Fatal("closed by an index already applied")
	}
	p.SetApplied(2)
	if !closed(ch) {
		t.Fatal("not closed by SetApplied")
	}
}
