package hosts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A host's disk is a tmpfs the harness mounts at a path of its choice
// (MountDisk), so that a fault can fill it without filling the machine's.
// It is mounted in the harness's mount namespace, before the processes
// that use it start: ip netns exec gives each process a private copy of
// the mount tree, which holds the tmpfs if it was there at the exec (and
// shares its superblock, so what one side writes the other sees), whatever
// the machine's mount propagation.
//
// Every disk of host i of run <name> is mounted with the source
// cutkvchaos-<name>n<i>, which is how removeRun (from Close, Setup and
// CleanupStale) finds them in /proc/self/mountinfo, also those of a
// crashed run. Unmounting keeps the contents: they are copied onto the
// filesystem under the mount point first, so the same path holds the same
// files afterwards (a failed round's data dirs stay to be read).

// diskSourcePrefix starts the source name of every disk this package
// mounts.
const diskSourcePrefix = "cutkvchaos-"

// diskSource is the source name of host i's disks in run name.
func diskSource(name string, i int) string { return diskSourcePrefix + hostNS(name, i) }

// MountDisk mounts a tmpfs of size bytes at path (an absolute path,
// created if missing; it must be empty and no mount point yet), nosuid
// and nodev, root directory mode 0750. Processes started on any host
// after the call see it; those started before do not. Close unmounts it,
// keeping its files (see UnmountDisk). It needs root and does not block.
func (h *Host) MountDisk(path string, size int64) error {
	if !filepath.IsAbs(path) || size <= 0 {
		return fmt.Errorf("%w: disk at %q of %d bytes: want an absolute path and a positive size", ErrInvalidConfig, path, size)
	}
	path = filepath.Clean(path)
	n := h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: mount a disk at %s for host %d", ErrClosed, path, h.index)
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return fmt.Errorf("hosts: disk for host %d: %w", h.index, err)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("hosts: disk for host %d: %w", h.index, err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("%w: disk for host %d: %s is not empty (%s, ...)", ErrInvalidConfig, h.index, path, ents[0].Name())
	}
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m.point == path {
			return fmt.Errorf("%w: disk for host %d: %s is a mount point already (%s %s)", ErrInvalidConfig, h.index, path, m.fstype, m.source)
		}
	}
	opts := fmt.Sprintf("size=%d,mode=0750", size)
	if err := unix.Mount(diskSource(n.cfg.Name, h.index), path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("hosts: mount a tmpfs (%s) at %s for host %d: %w", opts, path, h.index, err)
	}
	return nil
}

// UnmountDisk unmounts the disk MountDisk mounted at path, keeping its
// files: it copies them to a sibling directory, unmounts (lazily if the
// mount is busy) and moves the copy into the mount point's directory. A
// copy that fails still unmounts (a tmpfs holds memory) and returns the
// error, with what was copied in place. Unmount only disks whose
// processes have exited: a process still writing may leave its last
// writes out of the copy. It needs root and blocks while it copies.
func (h *Host) UnmountDisk(path string) error {
	return unmountKeeping(filepath.Clean(path))
}

// DiskFree returns the bytes free on the filesystem holding path, as an
// unprivileged writer sees them.
func DiskFree(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("hosts: statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// unmountDisks unmounts every disk of run name (see UnmountDisk), the
// deepest first.
func unmountDisks(name string) error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	var errs []error
	for k := len(mounts) - 1; k >= 0; k-- { // mountinfo lists parents first
		m := mounts[k]
		if m.fstype != "tmpfs" || !isRunDisk(m.source, name) {
			continue
		}
		if err := unmountKeeping(m.point); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isRunDisk says whether a mount source is a disk of a host of run name.
func isRunDisk(source, name string) bool {
	ns, ok := strings.CutPrefix(source, diskSourcePrefix)
	if !ok {
		return false
	}
	run, ok := parseRunObject("ns", ns)
	return ok && run == name && !strings.HasSuffix(ns, "sw")
}

// unmountKeeping copies the tmpfs at point aside, unmounts it, and moves
// the copy back under point.
func unmountKeeping(point string) error {
	keep := point + ".keep"
	if err := os.RemoveAll(keep); err != nil {
		return fmt.Errorf("hosts: unmount disk %s: clear %s: %w", point, keep, err)
	}
	copyErr := copyTree(point, keep)
	if err := unix.Unmount(point, 0); err != nil {
		if !errors.Is(err, unix.EBUSY) {
			return errors.Join(copyErr, fmt.Errorf("hosts: unmount disk %s: %w (its copy is in %s)", point, err, keep))
		}
		// Open files keep it busy (a process of ours not yet gone): it
		// goes with the last of them; the copy is what stays.
		if err := unix.Unmount(point, unix.MNT_DETACH); err != nil {
			return errors.Join(copyErr, fmt.Errorf("hosts: unmount disk %s lazily: %w (its copy is in %s)", point, err, keep))
		}
	}
	ents, err := os.ReadDir(keep)
	if err != nil {
		return errors.Join(copyErr, fmt.Errorf("hosts: unmount disk %s: read its copy: %w", point, err))
	}
	for _, e := range ents {
		if err := os.Rename(filepath.Join(keep, e.Name()), filepath.Join(point, e.Name())); err != nil {
			return errors.Join(copyErr, fmt.Errorf("hosts: unmount disk %s: move its copy back: %w (the rest is in %s)", point, err, keep))
		}
	}
	if err := os.Remove(keep); err != nil {
		return errors.Join(copyErr, fmt.Errorf("hosts: unmount disk %s: %w", point, err))
	}
	if copyErr != nil {
		return fmt.Errorf("hosts: unmount disk %s: not every file was kept: %w", point, copyErr)
	}
	return nil
}

// copyTree copies the directories, regular files and symbolic links under
// src to dst (created), with their permissions. A file that vanishes
// while it runs is left out; other failures are joined, and the rest is
// copied all the same.
func copyTree(src, dst string) error {
	var errs []error
	walkErr := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return nil
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(to, info.Mode().Perm()|0o700); err != nil {
				errs = append(errs, err)
				return fs.SkipDir
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		case d.Type().IsRegular():
			if err := copyRegular(p, to, info.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return nil
	})
	if walkErr != nil {
		errs = append(errs, walkErr)
	}
	return errors.Join(errs...)
}

func copyRegular(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}

// mountEntry is one line of /proc/self/mountinfo, the fields we use.
type mountEntry struct {
	point, fstype, source string
}

func readMounts() ([]mountEntry, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("hosts: read mounts: %w", err)
	}
	ms, err := parseMountinfo(b)
	if err != nil {
		return nil, fmt.Errorf("hosts: /proc/self/mountinfo: %w", err)
	}
	return ms, nil
}

// parseMountinfo parses /proc/<pid>/mountinfo (proc(5)): per line, the
// mount point is the fifth field, and after the optional fields and their
// "-" separator come the filesystem type and the source. Spaces, tabs,
// newlines and backslashes in paths are octal escapes (\040).
func parseMountinfo(b []byte) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		sep := -1
		for k := 6; k < len(f); k++ {
			if f[k] == "-" {
				sep = k
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			return nil, fmt.Errorf("line %d: %q is not a mount", line, sc.Text())
		}
		out = append(out, mountEntry{point: unescapeMount(f[4]), fstype: f[sep+1], source: unescapeMount(f[sep+2])})
	}
	return out, sc.Err()
}

// unescapeMount undoes the kernel's octal escapes (\ooo) in a mountinfo
// field.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for k := 0; k < len(s); k++ {
		if s[k] == '\\' && k+4 <= len(s) {
			if v, err := strconv.ParseUint(s[k+1:k+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				k += 3
				continue
			}
		}
		b.WriteByte(s[k])
	}
	return b.String()
}
