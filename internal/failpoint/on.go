//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Enabled reports whether this build has failpoints.
const Enabled = true

type point struct {
	action  string
	after   int
	calls   int
	release chan struct{} // "hold": closed when the point is disarmed
}

var (
	mu     sync.Mutex
	points map[string]*point
)

func init() {
	if err := Arm(os.Getenv(EnvVar)); err != nil {
		fmt.Fprintf(os.Stderr, "failpoint: %s: %v\n", EnvVar, err)
		os.Exit(2)
	}
}

// Arm replaces the armed failpoints with those in spec (the
// CUTKV_FAILPOINTS syntax); an empty spec disarms all.
func Arm(spec string) error {
	ps := map[string]*point{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, act, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("%q is not name=action[@after]", item)
		}
		p := &point{action: act, release: make(chan struct{})}
		if a, n, ok := strings.Cut(act, "@"); ok {
			after, err := strconv.Atoi(n)
			if err != nil || after < 0 {
				return fmt.Errorf("%q: bad count %q", item, n)
			}
			p.action, p.after = a, after
		}
		switch p.action {
		case "error", "panic", "exit", "hold":
		default:
			return fmt.Errorf("%q: action must be error, panic, exit or hold", item)
		}
		known := false
		for _, n := range Names {
			known = known || n == name
		}
		if !known {
			return fmt.Errorf("%q: no failpoint named %q (known: %s)", item, name, strings.Join(Names, ", "))
		}
		ps[name] = p
	}
	mu.Lock()
	for _, old := range points {
		close(old.release) // holds end when their point is re-armed or disarmed
	}
	points = ps
	mu.Unlock()
	return nil
}

// Inject runs the failpoint's armed action, if any.
func Inject(name string) error {
	mu.Lock()
	p := points[name]
	if p == nil {
		mu.Unlock()
		return nil
	}
	p.calls++
	fire := p.calls > p.after
	mu.Unlock()
	if !fire {
		return nil
	}
	switch p.action {
	case "panic":
		panic("failpoint " + name)
	case "hold":
		<-p.release
		return nil
	case "exit":
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", name)
		os.Exit(ExitCode)
	}
	return fmt.Errorf("%w at %s", ErrInjected, name)
}

// Calls returns how many times the armed failpoint name was reached since
// it was armed (tests wait on it to know a hold is in place).
func Calls(name string) int {
	mu.Lock()
	defer mu.Unlock()
	if p := points[name]; p != nil {
		return p.calls
	}
	return 0
}
