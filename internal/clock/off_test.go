//go:build !failpoints

package clock

import (
	"testing"
	"time"
)

func TestSetRefused(t *testing.T) {
	if err := Set(time.Minute); err == nil || Offset() != 0 || Enabled {
		t.Fatalf("Set in a build without failpoints: %v, offset %v, enabled %v", err, Offset(), Enabled)
	}
}
