package hosts

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// netnsDir is where iproute2 keeps the bind mounts that name namespaces.
const netnsDir = "/run/netns"

// netnsPath is the file naming namespace ns.
func netnsPath(ns string) string { return filepath.Join(netnsDir, ns) }

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

// inNetns runs fn on an OS thread that is inside the network namespace
// named by the file nsPath, then moves the thread back. Sockets fn creates
// stay in that namespace for their whole life, whichever thread uses them
// later. fn must not start goroutines that create sockets (they would run
// on other threads, in the harness's namespace) and must not block for
// long: it holds an OS thread. If the thread cannot be moved back it is
// left locked, so the runtime discards it when the goroutine ends.
func inNetns(nsPath string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("hosts: open own namespace: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("hosts: open namespace: %w", err)
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("hosts: enter namespace %s: %w", nsPath, err)
			return
		}
		ferr := fn()
		if err := setns(orig); err != nil {
			// Stay locked: the thread dies with this goroutine.
			errc <- fmt.Errorf("hosts: leave namespace %s: %w", nsPath, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// checkLiteral refuses an address whose host part is not an IP literal: a
// name would be resolved on other goroutines, hence other threads, hence
// in the harness's namespace.
func checkLiteral(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: address %q: %v", ErrInvalidConfig, address, err)
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%w: address %q: host must be an IP literal", ErrInvalidConfig, address)
	}
	return nil
}

// Dial connects from inside the host's namespace, as a process on the host
// would: network is as for net.Dial ("tcp", "tcp4", "udp", ...), address
// an IP literal and port. It blocks for up to timeout (0: no limit but the
// system's). The connection may be used from any goroutine.
func (h *Host) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if err := checkLiteral(address); err != nil {
		return nil, err
	}
	var c net.Conn
	err := inNetns(netnsPath(h.ns), func() error {
		var err error
		c, err = (&net.Dialer{Timeout: timeout}).Dial(network, address)
		return err
	})
	return c, err
}

// Listen opens a stream listener inside the host's namespace (network and
// address as for net.Listen, address an IP literal or empty host and a
// port). It does not block.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	if err := checkLiteral(address); err != nil {
		return nil, err
	}
	var l net.Listener
	err := inNetns(netnsPath(h.ns), func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}

// ListenPacket opens a datagram socket inside the host's namespace
// (network and address as for net.ListenPacket, address an IP literal or
// empty host and a port). It does not block.
func (h *Host) ListenPacket(network, address string) (net.PacketConn, error) {
	if err := checkLiteral(address); err != nil {
		return nil, err
	}
	var pc net.PacketConn
	err := inNetns(netnsPath(h.ns), func() error {
		var err error
		pc, err = net.ListenPacket(network, address)
		return err
	})
	return pc, err
}

// writeSysctl writes a /proc/sys file as seen from inside namespace ns (""
// for the harness's). A file that does not exist (IPv6 compiled out, say)
// is not an error.
func writeSysctl(ns, path, value string) error {
	write := func() error {
		err := os.WriteFile(path, []byte(value), 0o644)
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if ns == "" {
		return write()
	}
	return inNetns(netnsPath(ns), write)
}
