package discovery

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// alive reports whether n sees id alive.
func (n *node) alive(id string) (bool, string) {
	m, ok := n.Member(id)
	return ok && m.State == StateAlive, fmt.Sprintf("%+v %v", m, ok)
}

// TestGossipKeys: members with the same key gossip; a member with another
// key, or none, never joins them, and its broadcasts never arrive.
func TestGossipKeys(t *testing.T) {
	a := startNode(t, Config{Meta: Meta{ID: "a"}, Keys: [][]byte{key(1)}})
	b := startNode(t, Config{Meta: Meta{ID: "b"}, Keys: [][]byte{key(1)}, Join: []string{a.Addr()}})
	waitFor(t, 5*time.Second, "b sees a", func() (bool, string) { return b.alive("a") })
	waitFor(t, 5*time.Second, "a sees b", func() (bool, string) { return a.alive("b") })

	other := startNode(t, Config{Meta: Meta{ID: "x"}, Keys: [][]byte{key(2)}, Join: []string{a.Addr()}})
	plain := startNode(t, Config{Meta: Meta{ID: "p"}, Join: []string{a.Addr()}})
	other.Broadcast([]byte("from-x"))
	plain.Broadcast([]byte("from-p"))
	b.Broadcast([]byte("from-b"))
	waitFor(t, 5*time.Second, "a gets b's broadcast", func() (bool, string) {
		return slices.Contains(a.messages(), "from-b"), fmt.Sprint(a.messages())
	})
	time.Sleep(500 * time.Millisecond) // let any wrongly accepted gossip arrive
	for _, id := range []string{"x", "p"} {
		if ok, saw := a.alive(id); ok {
			t.Errorf("a took %s, which has another key or none, as a member: %s", id, saw)
		}
	}
	if msgs := a.messages(); slices.Contains(msgs, "from-x") || slices.Contains(msgs, "from-p") {
		t.Errorf("a received broadcasts of members without its key: %v", msgs)
	}
}

// TestGossipKeyRotation rotates the key of a running pair without a
// restart: add the new key second, make it first, drop the old one; the
// members stay joined and a member knowing only the new key joins.
func TestGossipKeyRotation(t *testing.T) {
	a := startNode(t, Config{Meta: Meta{ID: "a"}, Keys: [][]byte{key(1)}})
	b := startNode(t, Config{Meta: Meta{ID: "b"}, Keys: [][]byte{key(1)}, Join: []string{a.Addr()}})
	waitFor(t, 5*time.Second, "b sees a", func() (bool, string) { return b.alive("a") })
	for _, step := range [][][]byte{{key(1), key(3)}, {key(3), key(1)}, {key(3)}} {
		for _, n := range []*node{a, b} {
			if err := n.SetKeys(step); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := startNode(t, Config{Meta: Meta{ID: "c"}, Keys: [][]byte{key(3)}, Join: []string{a.Addr()}})
	waitFor(t, 5*time.Second, "c joins with the new key", func() (bool, string) { return c.alive("b") })
	if ok, saw := a.alive("b"); !ok {
		t.Fatalf("a lost b during the rotation: %s", saw)
	}
	if err := a.SetKeys(nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("SetKeys(nil): %v, want ErrInvalidConfig", err)
	}
	if err := a.SetKeys([][]byte{[]byte("short")}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("SetKeys with a 5-byte key: %v, want ErrInvalidConfig", err)
	}
	plain := startNode(t, Config{Meta: Meta{ID: "p"}})
	if err := plain.SetKeys([][]byte{key(1)}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("SetKeys on plaintext gossip: %v, want ErrInvalidConfig", err)
	}
	if _, err := Start(Config{Meta: Meta{ID: "q"}, BindAddr: "127.0.0.1:0", Keys: [][]byte{key(1), key(1)}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Start with a key twice: %v, want ErrInvalidConfig", err)
	}
}
