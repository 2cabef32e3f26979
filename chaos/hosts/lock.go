package hosts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir holds one lock file per live run, <name>.lock, flock'ed by the
// process that owns the run for as long as its Net is open, and setup.lock,
// held while a Setup checks and claims its subnet. The kernel drops a
// flock when its holder dies, so a run whose lock can be taken is stale:
// that is how CleanupStale tells a crashed run from a live one, in this
// process or another. /run is a tmpfs, like /run/netns, so both vanish at
// reboot together.
const lockDir = "/run/cutkvchaos"

func runLockPath(name string) string { return filepath.Join(lockDir, name+".lock") }

// flockFile opens (creating) path and flocks it exclusively. With wait
// false it fails at once with ErrNameInUse if another open file holds the
// lock. It retries if the file it locked was unlinked meanwhile (by a
// releaseRun racing with it), so a returned lock is on the file at path.
func flockFile(path string, wait bool) (*os.File, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, fmt.Errorf("hosts: lock directory: %w", err)
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("hosts: lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), how); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s is locked by a live run", ErrNameInUse, path)
			}
			return nil, fmt.Errorf("hosts: lock %s: %w", path, err)
		}
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			return f, nil
		}
		f.Close()
	}
}

// releaseRun unlinks a run's lock file and then drops the lock, so that
// nobody can lock a file that is about to vanish without noticing.
func releaseRun(f *os.File, name string) {
	_ = os.Remove(runLockPath(name))
	_ = f.Close()
}
