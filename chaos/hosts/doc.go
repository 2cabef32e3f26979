// Package hosts gives the chaos harness hosts of its own on one Linux
// machine: each host is a network namespace with one interface and one
// address, all hosts of a run share a private /24, and the package starts
// processes on them and cuts their links with nftables. Every call that
// changes namespaces, links, rules or processes needs root (Setup and
// CleanupStale check, and return ErrNotRoot); it also needs iproute2's ip
// and nftables' nft (on PATH, or in /usr/sbin or /sbin).
//
// # Layout of a run
//
// A run is named by Config.Name (say "ck7"; written <name> below) and
// uses 10.231.S.0/24 with S = Config.Subnet:
//
//	harness namespace           namespace <name>sw            namespace <name>n<i>
//	<name>h 10.231.S.1/24 ===== <name>u ─┐
//	                                     ├ bridge <name>br
//	                            <name>v<i> ┘ ================= eth0 10.231.S.(10+i)/24
//
// The bridge lives in a namespace of its own, not in the harness's: on a
// machine running Docker, br_netfilter passes bridged packets through the
// harness namespace's iptables FORWARD chain, whose policy is drop, so
// hosts on a bridge there could reach the harness but not each other. In
// <name>sw no rules exist, and the machine's firewall is never touched.
// The only object in the harness's namespace is the veth end <name>h,
// whose address gives the harness its route to the hosts. Hosts have no
// route but their /24 and IPv6 is off on every interface a run creates:
// nothing a host sends can leave the run's network.
//
// # Faults
//
// Each host's namespace holds the table inet cutkvchaos with two base
// chains, input and output (filter hooks, priority filter, policy
// accept), and with Config.ProxyPorts a third, proxy (see Delay below).
// The faults in force are kept as a model, the set of directed
// host-to-host links whose packets are dropped plus each host's loss
// percentage, and each host's two chains are a pure function of it (see
// faultSet.render): a fault call updates the model and rewrites, in one
// nft transaction per host, the chains of the hosts whose rules changed.
// Hence the calls compose (each adds to what is in force; Loss replaces
// its host's loss) and are idempotent, and Heal flushes input and output.
// Rules match host addresses 10.231.S.(10+i) only, never the harness's
// 10.231.S.1, so the harness keeps reaching every host whatever the
// faults. They match every IP protocol and drop packets of established
// connections too; ARP is not IP and keeps working, as it would behind a
// firewall that cuts a link.
//
// # Delay
//
// The kernel may lack netem, so delay is done in userspace, for the TCP
// ports of Config.ProxyPorts only. At Setup, for each such port every
// host gets a proxy listener of the harness's (a socket in the host's
// namespace, on an ephemeral port) and a third chain, proxy (nat hook
// prerouting), whose rule redirects connections from the other hosts to
// the port to that listener; the proxy dials the port on the host's own
// address and copies both ways. So every connection between hosts to a
// proxied port passes through the proxy of the host it is made to, from
// the first one on, and the node behind it sees it come from its own
// address. Delay sets a directed link's delay in the model; the proxies
// read it for every chunk they read (bytes from host a to b: the chunks
// a's proxy-side reader gets on connections a opened to b, and the
// answers on connections b opened to a) and hold the chunk that long.
// The rules never change after Setup, Heal flushes input and output only,
// and open connections stay proxied, at delay 0 after Heal: nothing has
// to be closed or re-dialled for a delay to start or end. Drop and loss
// rules still apply to proxied connections (they match addresses, and the
// link between the hosts is the same). A stream is never reordered (a
// chunk leaves after the one before it); only distinct connections can
// overtake each other. UDP is not proxied. RoundTrip measures a link's
// delay.
//
// # Proving a fault
//
// Reachable dials TCP from inside one host's namespace (the goroutine's
// OS thread enters it with setns, creates the socket, and leaves; see
// inNetns), UDPReachable sends datagrams one way. Host.Dial, Host.Listen
// and Host.ListenPacket give the same in-namespace sockets to the caller.
// Proc.Paused reads the kernel's process state.
//
// # Disks
//
// Host.MountDisk gives a host a small tmpfs at a path of the harness's
// choice (a node's data dir), so that a fault can fill it without filling
// the machine's disk; see disk.go. Its mounts carry the source name
// cutkvchaos-<name>n<i>, by which the cleanup of a run finds them;
// unmounting keeps their files at the same path.
//
// # Ownership and leftovers
//
// A live Net holds a flock on /run/cutkvchaos/<name>.lock. Close removes
// everything the run made. If the harness dies instead, the kernel drops
// the lock, and CleanupStale (with a prefix of the run names) finds the
// run's namespaces, links and disks by their names, sees the lock free and
// removes them and the processes in them; runs still locked are spared,
// so concurrent runs (with distinct names and subnets) can each clean up
// at start without harming the others.
package hosts
