//go:build !failpoints

package clock

import (
	"errors"
	"time"
)

// Enabled reports whether this build lets a harness skew the clock.
const Enabled = false

// Now is time.Now in a build without the failpoints tag.
func Now() time.Time { return time.Now() }

// Offset is always 0 in a build without the failpoints tag.
func Offset() time.Duration { return 0 }

// Set is refused in a build without the failpoints tag.
func Set(time.Duration) error {
	return errors.New("clock: this build cannot skew its clock (build with -tags failpoints)")
}
