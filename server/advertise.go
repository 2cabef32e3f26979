package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// advertiseResolveWait bounds how long the start waits for an
// --advertise-gossip host name to resolve. A Kubernetes pod's own DNS
// record (headless service) can appear a few seconds after the pod
// starts.
const advertiseResolveWait = 30 * time.Second

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

// resolveAdvertise turns an --advertise-gossip host:port (checked by
// Validate) into IP:port: memberlist announces IP addresses only. A host
// name is looked up, retried with backoff for up to wait; an IPv4
// address is preferred when the name has both kinds.
func resolveAdvertise(addr string, wait time.Duration, log *slog.Logger) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%w: --advertise-gossip %q: %v", ErrConfig, addr, err)
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	deadline := time.Now().Add(wait)
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
		cancel()
		if err == nil && len(ips) > 0 {
			ip := ips[0]
			for _, c := range ips {
				if c.To4() != nil {
					ip = c
					break
				}
			}
			resolved := net.JoinHostPort(ip.String(), port)
			log.Info("resolved --advertise-gossip", "host", host, "advertise", resolved)
			return resolved, nil
		}
		if err == nil {
			err = fmt.Errorf("no address for %s", host)
		}
		if time.Now().Add(delay).After(deadline) {
			return "", fmt.Errorf("%w: --advertise-gossip %s: host %s did not resolve within %v (%v): give a name this node's resolver knows, or its IP address",
				ErrConfig, addr, host, wait, err)
		}
		log.Info("waiting for --advertise-gossip to resolve", "host", host, "err", err)
		time.Sleep(delay)
	}
}
