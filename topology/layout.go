package topology

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/internalpb"
)

// Limits and defaults of a layout.
const (
	DefaultPartitions = 16
	MaxPartitions     = 4096
	// MaxReplicas is the replication factor of every group when there are
	// enough nodes; fewer nodes give fewer replicas.
	MaxReplicas = 3
)

// ErrBadLayout is returned for an initial cluster that cannot be laid out.
var ErrBadLayout = errors.New("topology: bad layout")

// Member is one node of the cluster as fixed at bootstrap.
type Member struct {
	ID       string // e.g. "n1"
	RaftID   uint64 // replica id in every raft group, 1..N in bootstrap order
	PeerAddr string // host:port of the member's peer listener
}

// Layout is the cluster's fixed shape: members, partition count and the
// replicas of every group (group 0 = metadata, 1..Partitions = data).
type Layout struct {
	// ClusterID is random, agreed by the members at bootstrap (see
	// package server); New sets it to Digest until then.
	ClusterID uint64
	// Digest is derived from what the cluster is bootstrapped from (the
	// token, the members, the partition count): members started with the
	// same settings compute the same one and agree on ClusterID only with
	// each other. 0 for layouts written before it existed.
	Digest     uint64
	Partitions uint32
	Members    []Member
	// Groups[g] lists the raft ids holding group g.
	Groups [][]uint64
}

// MaxMemberIDLen bounds a member id.
const MaxMemberIDLen = 64

// ValidMemberID reports whether id may name a member: 1 to MaxMemberIDLen
// bytes of letters, digits, '.', '_' and '-' (it appears in certificates,
// file names and logs).
func ValidMemberID(id string) bool {
	if id == "" || len(id) > MaxMemberIDLen {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// ParseInitialCluster parses "n1=127.0.0.1:7301,n2=127.0.0.1:7302" (peer
// addresses) into
// members with raft ids 1..N in the order given.
func ParseInitialCluster(s string) ([]Member, error) {
	var ms []Member
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%w: initial cluster entry %q is not id=host:port", ErrBadLayout, part)
		}
		if !ValidMemberID(id) {
			return nil, fmt.Errorf("%w: initial cluster entry %q: a node id is 1-%d letters, digits, '.', '_' or '-'", ErrBadLayout, part, MaxMemberIDLen)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: initial cluster entry %q: %v", ErrBadLayout, part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: node id %q appears twice in the initial cluster", ErrBadLayout, id)
		}
		seen[id] = true
		ms = append(ms, Member{ID: id, RaftID: uint64(len(ms) + 1), PeerAddr: addr})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: the initial cluster names no node", ErrBadLayout)
	}
	return ms, nil
}

// New lays out a new cluster. Its Digest is derived from the token, the
// members and the partition count, so every node computes the same one;
// ClusterID starts equal to it, until the members agree on a random one.
func New(token string, members []Member, partitions uint32) (*Layout, error) {
	if partitions == 0 || partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: partition count %d not in 1..%d", ErrBadLayout, partitions, MaxPartitions)
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: no members", ErrBadLayout)
	}
	l := &Layout{Partitions: partitions, Members: append([]Member(nil), members...)}
	h := fnv.New64a()
	fmt.Fprintf(h, "cutkv|%s|%d", token, partitions)
	for _, m := range members {
		fmt.Fprintf(h, "|%s=%s", m.ID, m.PeerAddr)
	}
	l.Digest = h.Sum64()
	if l.Digest == 0 {
		l.Digest = 1
	}
	l.ClusterID = l.Digest
	n := len(members)
	r := min(n, MaxReplicas)
	l.Groups = make([][]uint64, partitions+1)
	for g := 0; g <= int(partitions); g++ {
		reps := make([]uint64, r)
		for i := 0; i < r; i++ {
			reps[i] = members[(g+i)%n].RaftID
		}
		l.Groups[g] = reps
	}
	return l, nil
}

// GroupsOf returns the groups that have a replica on raftID, ascending.
func (l *Layout) GroupsOf(raftID uint64) []uint64 {
	var gs []uint64
	for g, reps := range l.Groups {
		for _, id := range reps {
			if id == raftID {
				gs = append(gs, uint64(g))
				break
			}
		}
	}
	return gs
}

// Member returns the member with the given node id.
func (l *Layout) Member(id string) (Member, bool) {
	for _, m := range l.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// MemberByRaftID returns the member with the given raft id.
func (l *Layout) MemberByRaftID(raftID uint64) (Member, bool) {
	for _, m := range l.Members {
		if m.RaftID == raftID {
			return m, true
		}
	}
	return Member{}, false
}

// PartitionOf returns the partition holding key.
func (l *Layout) PartitionOf(key []byte) uint64 { return keyspace.PartitionOf(key, l.Partitions) }

// Proto converts the layout into its raft-record form.
func (l *Layout) Proto() *internalpb.ClusterLayout {
	pl := &internalpb.ClusterLayout{ClusterId: l.ClusterID, Partitions: l.Partitions, Digest: l.Digest}
	for _, m := range l.Members {
		pl.Members = append(pl.Members, &internalpb.MemberInfo{Id: m.ID, RaftId: m.RaftID, PeerAddr: m.PeerAddr})
	}
	for _, reps := range l.Groups {
		pl.Groups = append(pl.Groups, &internalpb.Replicas{RaftIds: append([]uint64(nil), reps...)})
	}
	return pl
}

// FromProto converts and validates a layout read from disk or raft: it
// refuses a layout without a cluster id. See FromProtoPending.
func FromProto(pl *internalpb.ClusterLayout) (*Layout, error) {
	l, err := FromProtoPending(pl)
	if err == nil && l.ClusterID == 0 {
		err = fmt.Errorf("%w: no cluster id", ErrBadLayout)
	}
	return l, err
}

// FromProtoPending is FromProto for a layout whose cluster id may still
// be 0 (a restored data dir before its first start). Every field is
// checked: member ids valid and unique, raft ids 1..N in order, peer
// addresses host:port, every group's replicas distinct members.
func FromProtoPending(pl *internalpb.ClusterLayout) (*Layout, error) {
	if pl == nil {
		return nil, fmt.Errorf("%w: missing", ErrBadLayout)
	}
	l := &Layout{ClusterID: pl.GetClusterId(), Digest: pl.GetDigest(), Partitions: pl.GetPartitions()}
	if l.Partitions == 0 || l.Partitions > MaxPartitions || len(pl.GetMembers()) == 0 || len(pl.GetGroups()) != int(l.Partitions)+1 {
		return nil, fmt.Errorf("%w: cluster %s with %d partitions, %d members, %d groups",
			ErrBadLayout, FormatClusterID(l.ClusterID), l.Partitions, len(pl.GetMembers()), len(pl.GetGroups()))
	}
	ids := map[string]bool{}
	for i, m := range pl.GetMembers() {
		addr := m.GetPeerAddr()
		if addr == "" {
			addr = m.GetLegacyAddr()
		}
		if !ValidMemberID(m.GetId()) || ids[m.GetId()] || m.GetRaftId() != uint64(i+1) {
			return nil, fmt.Errorf("%w: member %d (%q, raft id %d) is not a unique valid id with raft id %d", ErrBadLayout, i, m.GetId(), m.GetRaftId(), i+1)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: member %s: peer address %q: %v", ErrBadLayout, m.GetId(), addr, err)
		}
		ids[m.GetId()] = true
		l.Members = append(l.Members, Member{ID: m.GetId(), RaftID: m.GetRaftId(), PeerAddr: addr})
	}
	for g, reps := range pl.GetGroups() {
		seen := map[uint64]bool{}
		if len(reps.GetRaftIds()) == 0 || len(reps.GetRaftIds()) > MaxReplicas {
			return nil, fmt.Errorf("%w: group %d has %d replicas", ErrBadLayout, g, len(reps.GetRaftIds()))
		}
		for _, r := range reps.GetRaftIds() {
			if r == 0 || r > uint64(len(l.Members)) || seen[r] {
				return nil, fmt.Errorf("%w: group %d names raft id %d twice or outside 1..%d", ErrBadLayout, g, r, len(l.Members))
			}
			seen[r] = true
		}
		l.Groups = append(l.Groups, append([]uint64(nil), reps.GetRaftIds()...))
	}
	return l, nil
}

// FormatClusterID renders a cluster id the way logs, files, JSON and
// snapshot stores show it: 16 hex digits.
func FormatClusterID(id uint64) string { return fmt.Sprintf("%016x", id) }

// ParseClusterID reads an id written by FormatClusterID (leading zeros
// may be left out).
func ParseClusterID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil || id == 0 || len(s) > 16 {
		return 0, fmt.Errorf("%w: cluster id %q is not 1-16 hex digits", ErrBadLayout, s)
	}
	return id, nil
}

// DescribeMembers renders l's members as --initial-cluster does.
func (l *Layout) DescribeMembers() string {
	parts := make([]string, len(l.Members))
	for i, m := range l.Members {
		parts[i] = m.ID + "=" + m.PeerAddr
	}
	return strings.Join(parts, ",")
}

// SortedMemberIDs returns the member ids in order.
func (l *Layout) SortedMemberIDs() []string {
	ids := make([]string, 0, len(l.Members))
	for _, m := range l.Members {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return ids
}
