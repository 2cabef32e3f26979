//go:build failpoints

package chaos

import (
	"testing"

	"github.com/cutkv/cutkv/internal/failpoint"
)

// TestCrashArmSpecsArm: the failpoint package accepts the spec of every
// crash point at its largest count, as a node's start would read it.
func TestCrashArmSpecsArm(t *testing.T) {
	defer failpoint.Arm("")
	for _, p := range crashPoints {
		a := crashArm{point: p, after: p.maxAfter}
		if err := failpoint.Arm(a.spec()); err != nil {
			t.Errorf("%s: %v", a.spec(), err)
		}
	}
}
