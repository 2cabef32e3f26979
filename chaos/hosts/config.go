package hosts

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MaxHosts is the largest Config.Hosts: host i's namespace and veth names
// end in one digit, and its address 10.231.S.(10+i) stays below the
// addresses a later layout might want.
const MaxHosts = 9

// MaxNameLen is the longest Config.Name (and CleanupStale prefix). The
// longest name derived from it, "<name>br", is then 8 bytes, well inside
// IFNAMSIZ (15 usable bytes).
const MaxNameLen = 6

// Sentinel errors. Every error this package returns that is one of these
// kinds wraps the sentinel (match with errors.Is) and says which run,
// host or command it concerns.
var (
	// ErrInvalidConfig: a Config or argument that can never work.
	ErrInvalidConfig = errors.New("hosts: invalid config")
	// ErrNotRoot: the caller is not root (every call that changes the
	// network or namespaces needs root).
	ErrNotRoot = errors.New("hosts: need root")
	// ErrNameInUse: another live Net (in this or another process) holds
	// the run name.
	ErrNameInUse = errors.New("hosts: run name in use")
	// ErrSubnetInUse: a route in the harness's namespace already overlaps
	// 10.231.<Subnet>.0/24.
	ErrSubnetInUse = errors.New("hosts: subnet in use")
	// ErrBadHost: a host index outside 1..Hosts (0 where the harness is
	// not allowed), or a host named twice.
	ErrBadHost = errors.New("hosts: bad host index")
	// ErrClosed: the Net was closed.
	ErrClosed = errors.New("hosts: net closed")
	// ErrExited: the process has exited and was reaped, so it can no
	// longer be signalled or inspected.
	ErrExited = errors.New("hosts: process exited")
	// ErrCommand: ip or nft failed; the message carries the command and
	// what it printed.
	ErrCommand = errors.New("hosts: command failed")
)

// Config describes one run's hosts.
type Config struct {
	// Name prefixes every namespace, interface and lock this run creates:
	// 1..MaxNameLen characters of [a-z0-9], e.g. "ck" plus a per-run id.
	// Two live Nets cannot share a Name (Setup returns ErrNameInUse).
	Name string
	// Hosts is the number of hosts, 1..MaxHosts. Host i (1-based) gets the
	// address 10.231.<Subnet>.(10+i).
	Hosts int
	// Subnet picks the run's network 10.231.<Subnet>.0/24. Runs alive at
	// the same time must pick different subnets; Setup refuses one that a
	// route in the harness's namespace already covers (ErrSubnetInUse).
	Subnet byte
	// ProxyPorts are TCP ports whose connections between hosts pass
	// through the harness's delay proxy (delay.go), so that Delay can slow
	// them: in each host a redirect rule sends connections from the other
	// hosts to port p to a proxy listener, which forwards them to p on the
	// host's own address. Empty: no proxy, and Delay fails.
	ProxyPorts []int
}

var nameRE = regexp.MustCompile(`^[a-z0-9]{1,6}$`)

// Validate reports whether c can be set up. It does no I/O.
func (c Config) Validate() error {
	if !nameRE.MatchString(c.Name) {
		return fmt.Errorf("%w: name %q must be 1..%d characters of [a-z0-9]", ErrInvalidConfig, c.Name, MaxNameLen)
	}
	if c.Hosts < 1 || c.Hosts > MaxHosts {
		return fmt.Errorf("%w: %d hosts, want 1..%d", ErrInvalidConfig, c.Hosts, MaxHosts)
	}
	for i, p := range c.ProxyPorts {
		if p < 1 || p > 65535 {
			return fmt.Errorf("%w: proxy port %d, want 1..65535", ErrInvalidConfig, p)
		}
		if slices.Contains(c.ProxyPorts[:i], p) {
			return fmt.Errorf("%w: proxy port %d named twice", ErrInvalidConfig, p)
		}
	}
	return nil
}

// The names of one run's objects. Every one of them is the run name plus
// a suffix from a fixed set, so that CleanupStale can tell a run's objects
// from anything else and recover the run name from each (parseRunObject).

// switchNS is the namespace holding the bridge.
func switchNS(name string) string { return name + "sw" }

// hostNS is host i's namespace.
func hostNS(name string, i int) string { return name + "n" + strconv.Itoa(i) }

// bridgeName is the bridge inside switchNS.
func bridgeName(name string) string { return name + "br" }

// uplinkName is the harness's end of the veth pair to the bridge: the only
// interface a run puts in the harness's namespace.
func uplinkName(name string) string { return name + "h" }

// uplinkPeer is the bridge port end of the uplink, inside switchNS.
func uplinkPeer(name string) string { return name + "u" }

// hostPort is the bridge port end of host i's veth pair, inside switchNS.
func hostPort(name string, i int) string { return name + "v" + strconv.Itoa(i) }

// hostIface is the name of host i's end of its veth pair, inside hostNS.
const hostIface = "eth0"

// subnetPrefix is the run's /24.
func subnetPrefix(s byte) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 231, s, 0}), 24)
}

// hostAddr is host i's address; i == 0 is the harness's (the uplink).
func hostAddr(s byte, i int) netip.Addr {
	if i == 0 {
		return netip.AddrFrom4([4]byte{10, 231, s, 1})
	}
	return netip.AddrFrom4([4]byte{10, 231, s, byte(10 + i)})
}

// parseRunObject returns the run name of a namespace (kind "ns") or a link
// in the harness's namespace (kind "link") created by this package, and
// whether name is one. It does no I/O.
func parseRunObject(kind, name string) (string, bool) {
	var run string
	switch kind {
	case "ns":
		switch {
		case strings.HasSuffix(name, "sw"):
			run = strings.TrimSuffix(name, "sw")
		case len(name) >= 3 && name[len(name)-2] == 'n' && name[len(name)-1] >= '1' && name[len(name)-1] <= '9':
			run = name[:len(name)-2]
		default:
			return "", false
		}
	case "link":
		if !strings.HasSuffix(name, "h") {
			return "", false
		}
		run = strings.TrimSuffix(name, "h")
	default:
		return "", false
	}
	return run, nameRE.MatchString(run)
}
