//go:build !failpoints

package failpoint

import "errors"

// Enabled reports whether this build has failpoints.
const Enabled = false

// Inject does nothing in a build without the failpoints tag.
func Inject(string) error { return nil }

// Arm is refused in a build without the failpoints tag.
func Arm(string) error {
	return errors.New("failpoint: this build has no failpoints (build with -tags failpoints)")
}

// Calls is always 0 in a build without the failpoints tag.
func Calls(string) int { return 0 }
