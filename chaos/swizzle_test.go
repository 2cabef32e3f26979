package chaos

import (
	"slices"
	"testing"
)

func TestSwizzleLinks(t *testing.T) {
	got := swizzleLinks([]int{3, 0, 2})
	want := [][2]int{{0, 3}, {2, 3}, {0, 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("swizzleLinks = %v, want %v", got, want)
	}
	if n := len(swizzleLinks([]int{0, 1, 2, 3, 4})); n != 10 {
		t.Fatalf("5 nodes: %d links, want 10", n)
	}
	if n := len(swizzleLinks([]int{4})); n != 0 {
		t.Fatalf("1 node: %d links, want 0", n)
	}
}
