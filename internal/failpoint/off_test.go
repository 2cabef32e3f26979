//go:build !failpoints

package failpoint

import "testing"

func TestDisabledBuildNeverFires(t *testing.T) {
	t.Setenv("CUTKV_FAILPOINTS", "walBeforeSync=error")
	for _, n := range Names {
		if err := Inject(n); err != nil || Enabled {
			t.Fatalf("failpoint %s fired in a build without the tag: %v", n, err)
		}
	}
}
