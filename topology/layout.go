package topology

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strconv"
	"strings"

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
	GRPCAddr string // host:port
}

// Layout is the cluster's fixed shape: members, partition count and the
// replicas of every group (group 0 = metadata, 1..Partitions = data).
type Layout struct {
	ClusterID  uint64
	Partitions uint32
	Members    []Member
	// Groups[g] lists the raft ids holding group g.
	Groups [][]uint64
}

// ParseInitialCluster parses "n1=127.0.0.1:7001,n2=127.0.0.1:7002" into
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
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: initial cluster entry %q: %v", ErrBadLayout, part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: node id %q appears twice in the initial cluster", ErrBadLayout, id)
		}
		seen[id] = true
		ms = append(ms, Member{ID: id, RaftID: uint64(len(ms) + 1), GRPCAddr: addr})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%w: the initial cluster names no node", ErrBadLayout)
	}
	return ms, nil
}

// New lays out a new cluster. The cluster id is derived from the token,
// the members and the partition count, so every node computes the same one.
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
		fmt.Fprintf(h, "|%s=%s", m.ID, m.GRPCAddr)
	}
	l.ClusterID = h.Sum64()
	if l.ClusterID == 0 {
		l.ClusterID = 1
	}
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
func (l *Layout) PartitionOf(key []byte) uint64 { return PartitionOf(key, l.Partitions) }

// Proto converts the layout into its raft-record form.
func (l *Layout) Proto() *internalpb.ClusterLayout {
	pl := &internalpb.ClusterLayout{ClusterId: l.ClusterID, Partitions: l.Partitions}
	for _, m := range l.Members {
		pl.Members = append(pl.Members, &internalpb.MemberInfo{Id: m.ID, RaftId: m.RaftID, GrpcAddr: m.GRPCAddr})
	}
	for _, reps := range l.Groups {
		pl.Groups = append(pl.Groups, &internalpb.Replicas{RaftIds: append([]uint64(nil), reps...)})
	}
	return pl
}

// FromProto converts and validates a layout read from disk or raft.
func FromProto(pl *internalpb.ClusterLayout) (*Layout, error) {
	if pl == nil {
		return nil, fmt.Errorf("%w: missing", ErrBadLayout)
	}
	l := &Layout{ClusterID: pl.GetClusterId(), Partitions: pl.GetPartitions()}
	for _, m := range pl.GetMembers() {
		l.Members = append(l.Members, Member{ID: m.GetId(), RaftID: m.GetRaftId(), GRPCAddr: m.GetGrpcAddr()})
	}
	for _, g := range pl.GetGroups() {
		l.Groups = append(l.Groups, append([]uint64(nil), g.GetRaftIds()...))
	}
	if l.ClusterID == 0 || l.Partitions == 0 || len(l.Members) == 0 || len(l.Groups) != int(l.Partitions)+1 {
		return nil, fmt.Errorf("%w: cluster %d with %d partitions, %d members, %d groups",
			ErrBadLayout, l.ClusterID, l.Partitions, len(l.Members), len(l.Groups))
	}
	return l, nil
}

// FormatClusterID renders a cluster id the way logs and files show it.
func FormatClusterID(id uint64) string { return strconv.FormatUint(id, 16) }

// SortedMemberIDs returns the member ids in order.
func (l *Layout) SortedMemberIDs() []string {
	ids := make([]string, 0, len(l.Members))
	for _, m := range l.Members {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return ids
}
