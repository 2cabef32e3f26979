package main

import (
	"testing"
)

func TestSummarizeMs(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	got := summarizeMs(xs)
	if got != (cutLatency{P50: 3, P99: 5, Max: 5}) {
		t.Errorf("summarizeMs = %+v", got)
	}
	if xs[0] != 5 {
		t.Error("summarizeMs sorted its argument")
	}
	if (summarizeMs(nil) != cutLatency{}) {
		t.Error("summarizeMs(nil) is not zero")
	}
}
