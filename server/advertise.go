package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"
)

// Waits of resolveAdvertise at start. A Kubernetes pod's own DNS record
// (headless service) can appear a few seconds after the pod starts, and
// after a restart it can still name the pod's old IP address for a few
// seconds (endpoint propagation, then the record's TTL).
const (
	advertiseResolveWait = 30 * time.Second
	advertiseStaleWait   = 15 * time.Second
)

// listensEverywhere says whether a bound address is the unspecified one
// (0.0.0.0 or ::), which no other host can dial.
func listensEverywhere(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// resolver is what resolveAdvertise needs of the system: DNS, this
// machine's addresses and a clock (tests pass fakes).
type resolver struct {
	lookup   func(ctx context.Context, host string) ([]net.IP, error)
	localIPs func() ([]net.IP, error)
	now      func() time.Time
	sleep    func(time.Duration)
}

// systemResolver resolves with the process's resolver and this machine's
// interfaces.
func systemResolver() resolver {
	return resolver{
		lookup: func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		},
		localIPs: func() ([]net.IP, error) {
			addrs, err := net.InterfaceAddrs()
			var ips []net.IP
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					ips = append(ips, n.IP)
				}
			}
			return ips, err
		},
		now:   time.Now,
		sleep: time.Sleep,
	}
}

// resolveAdvertise turns an --advertise-gossip host:port (checked by
// Validate) into IP:port: memberlist announces IP addresses only. An IP
// address is taken as it is. A host name is looked up, retried with
// backoff for up to wait while it does not resolve. Among its addresses
// one of this machine's is taken (IPv4 first); while none is, the lookup
// is retried for up to staleWait, since a stale record would have the
// others gossip to an address nobody holds; after that (NAT: the name
// is someone else's address that forwards here) the first address is
// taken, with a warning.
func (r resolver) resolveAdvertise(addr string, wait, staleWait time.Duration, log *slog.Logger) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%w: --advertise-gossip %q: %v", ErrConfig, addr, err)
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	start := r.now()
	var firstResolved time.Time
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, err := r.lookup(ctx, host)
		cancel()
		if err == nil && len(ips) == 0 {
			err = fmt.Errorf("no address for %s", host)
		}
		if err == nil {
			if firstResolved.IsZero() {
				firstResolved = r.now()
			}
			local, _ := r.localIPs() // none known: every address is taken as not local
			pick, isLocal := pickAdvertised(ips, local)
			resolved := net.JoinHostPort(pick.String(), port)
			if isLocal {
				log.Info("resolved --advertise-gossip", "host", host, "advertise", resolved)
				return resolved, nil
			}
			if !r.now().Add(delay).Before(firstResolved.Add(staleWait)) {
				log.Warn("--advertise-gossip resolves to no address of this machine; announcing it anyway (NAT?). If it is a stale DNS record, the others cannot gossip with this node: restart it once the record is current",
					"host", host, "advertise", resolved, "addresses", fmt.Sprint(ips))
				return resolved, nil
			}
			log.Info("--advertise-gossip resolves to no address of this machine yet (a stale DNS record?); retrying", "host", host, "addresses", fmt.Sprint(ips))
		} else {
			if !r.now().Add(delay).Before(start.Add(wait)) {
				return "", fmt.Errorf("%w: --advertise-gossip %s: host %s did not resolve within %v (%v): give a name this node's resolver knows, or its IP address",
					ErrConfig, addr, host, wait, err)
			}
			log.Info("waiting for --advertise-gossip to resolve", "host", host, "err", err)
		}
		r.sleep(delay)
	}
}

// pickAdvertised picks, of a name's addresses, one of this machine's
// (IPv4 first), else the first IPv4 address, else the first; it says
// whether the pick is local.
func pickAdvertised(ips, local []net.IP) (net.IP, bool) {
	isLocal := func(ip net.IP) bool { return slices.ContainsFunc(local, ip.Equal) }
	for _, want := range []func(net.IP) bool{
		func(ip net.IP) bool { return isLocal(ip) && ip.To4() != nil },
		isLocal,
		func(ip net.IP) bool { return ip.To4() != nil },
	} {
		for _, ip := range ips {
			if want(ip) {
				return ip, isLocal(ip)
			}
		}
	}
	return ips[0], false
}
