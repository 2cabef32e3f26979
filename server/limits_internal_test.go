package server

import (
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"
)

// TestFileLimitConns: --max-connections must fit the descriptor limit
// with room for the WAL and storage; the default is lowered to fit.
func TestFileLimitConns(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	low := rl
	low.Cur = 600
	if low.Cur > rl.Max {
		t.Skipf("hard limit %d below 600", rl.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	quiet := slog.New(slog.DiscardHandler)
	const groups = 5
	fits := (600 - fdReserve - 4*groups) / 2
	if got, _, err := fileLimitConns(0, groups, false, quiet); err != nil || got != fits {
		t.Errorf("default under a limit of 600: %d, %v; want %d", got, err, fits)
	}
	if got, _, err := fileLimitConns(fits, groups, false, quiet); err != nil || got != fits {
		t.Errorf("--max-connections %d: %d, %v", fits, got, err)
	}
	// On Pebble the SSTs the file cache keeps open count too.
	if got, tables, err := fileLimitConns(0, groups, true, quiet); err != nil || tables != 150 || got != (600-fdReserve-4*groups-150)/2 {
		t.Errorf("on Pebble under a limit of 600: %d connections, %d tables, %v", got, tables, err)
	}
	if _, _, err := fileLimitConns(fits, groups, true, quiet); !errors.Is(err, ErrConfig) {
		t.Errorf("--max-connections %d on Pebble: %v, want ErrConfig (the file cache's share)", fits, err)
	}
	_, _, err := fileLimitConns(fits+1, groups, false, quiet)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ulimit") {
		t.Errorf("--max-connections %d over a limit of 600: %v, want ErrConfig saying what to do", fits+1, err)
	}
	low.Cur = 200
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fileLimitConns(0, groups, false, quiet); !errors.Is(err, ErrConfig) {
		t.Errorf("default under a limit of 200: %v, want ErrConfig", err)
	}
}
