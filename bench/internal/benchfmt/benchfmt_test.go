package benchfmt

import (
	"testing"
	"time"
)

func TestPutKey(t *testing.T) {
	b := make([]byte, 6)
	PutKey(b, 4711)
	if string(b) != "004711" {
		t.Errorf("PutKey = %q", b)
	}
	b = make([]byte, 16)
	PutKey(b, 42)
	if string(b) != "0000000000000042" {
		t.Errorf("PutKey(16 bytes, 42) = %q", b)
	}
}

func TestScrapeSumAndPerNode(t *testing.T) {
	s := Scrape{Time: time.Now(), Nodes: []ScrapeNode{
		{URL: "a", Samples: map[string]float64{"x": 1, "y": 5}},
		{URL: "b", Samples: map[string]float64{"x": 2}},
	}}
	if got := s.Sum("x"); got != 3 {
		t.Errorf("Sum(x) = %v, want 3", got)
	}
	if got := s.PerNode("y"); len(got) != 2 || got[0] != 5 || got[1] != 0 {
		t.Errorf("PerNode(y) = %v, want [5 0]", got)
	}
}
