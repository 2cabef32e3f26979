package synclog

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// EnvVar names the file a failpoints build appends its records to.
const EnvVar = "CUTKV_SYNCED_LOG"

// ErrBadLog is returned for a record log that is not in the format of
// doc.go.
var ErrBadLog = errors.New("synclog: malformed record log")

// fileID is a file's identity: device and inode.
type fileID struct{ dev, ino uint64 }

// Loss is one file cut back to its fsynced length.
type Loss struct {
	Path   string // under the directory given to Truncate
	Size   int64  // before
	Synced int64  // after: the last length recorded
}

// Lost bytes of l.
func (l Loss) Lost() int64 { return l.Size - l.Synced }

// readLog returns the last length recorded for each file in the log at
// path; a log that does not exist records nothing. A torn last line (the
// process killed mid-append) is ignored; any other malformed line is
// ErrBadLog.
func readLog(path string) (map[fileID]int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[fileID]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[fileID]int64{}
	sc := bufio.NewScanner(f)
	var pending error
	line := 0
	for sc.Scan() {
		line++
		if pending != nil {
			return nil, pending // a bad line that was not the last
		}
		fields := strings.Fields(sc.Text())
		var v [3]uint64
		ok := len(fields) == 3
		for i := 0; ok && i < 3; i++ {
			v[i], err = strconv.ParseUint(fields[i], 10, 63)
			ok = err == nil
		}
		if !ok {
			pending = fmt.Errorf("%w: %s line %d: %q", ErrBadLog, path, line, sc.Text())
			continue
		}
		out[fileID{v[0], v[1]}] = int64(v[2])
	}
	return out, sc.Err()
}

// Truncate cuts every regular file under dir that the log at logPath
// names, and that is longer than its last recorded length, back to that
// length, and returns what it cut in path order. Only for a directory no
// process is using: the harness calls it on a killed node's data dir.
func Truncate(dir, logPath string) ([]Loss, error) { return visit(dir, logPath, true) }

// Unsynced returns what Truncate would cut, without cutting it: for a
// harness that stopped a node (SIGSTOP) and kills it only once it holds
// unsynced bytes.
func Unsynced(dir, logPath string) ([]Loss, error) { return visit(dir, logPath, false) }

func visit(dir, logPath string, cut bool) ([]Loss, error) {
	synced, err := readLog(logPath)
	if err != nil {
		return nil, err
	}
	var out []Loss
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while walking a live node's directory
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return fmt.Errorf("synclog: %w", err)
		}
		n, ok := synced[fileID{uint64(st.Dev), st.Ino}]
		if !ok || st.Size <= n {
			return nil
		}
		if cut {
			if err := os.Truncate(path, n); err != nil {
				return fmt.Errorf("synclog: %w", err)
			}
		}
		out = append(out, Loss{Path: path, Size: st.Size, Synced: n})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}
