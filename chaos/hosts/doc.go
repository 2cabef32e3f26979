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
// accept). The faults in force are kept as a model, the set of directed
// host-to-host links whose packets are dropped plus each host's loss
// percentage, and each host's two chains are a pure function of it (see
// faultSet.render): a fault call updates the model and rewrites, in one
// nft transaction per host, the chains of the hosts whose rules changed.
// Hence the calls compose (each adds to what is in force; Loss replaces
// its host's loss) and are idempotent, and Heal flushes every chain.
// Rules match host addresses 10.231.S.(10+i) only, never the harness's
// 10.231.S.1, so the harness keeps reaching every host whatever the
// faults. They match every IP protocol and drop packets of established
// connections too; ARP is not IP and keeps working, as it would behind a
// firewall that cuts a link.
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
