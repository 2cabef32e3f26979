package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/wal"
)

// StateMachine is a group's replicated state. The loop calls it in entry
// index order; it must not block on I/O.
type StateMachine interface {
	// ApplyCommand applies the command of the normal entry at index and
	// returns the result handed to the proposer's waiter. An error is a
	// broken invariant (an entry this version cannot apply) and stops the
	// node.
	ApplyCommand(index uint64, cmd *internalpb.Command) (any, error)
	// SetApplied records that index was applied without a command (raft's
	// empty entries and configuration changes).
	SetApplied(index uint64)
	// Materialize returns the state at its applied index, detached: the
	// loop calls it between entries and encodes it elsewhere while
	// applying goes on (DESIGN.md, "Checkpoints"); Close releases it.
	Materialize() Image
	// LoadImage replaces the whole state with an encoded one (a
	// materialization at start, a raft snapshot from the leader). A
	// damaged image must leave the state unchanged.
	LoadImage(r io.Reader) error
}

// Image is a state machine's state at one applied index, detached from
// it, to be encoded into a materialization file. (An alias, so that a
// state machine's method may return the anonymous interface.)
type Image = interface {
	Applied() uint64
	Encode(w io.Writer) error
	Close()
}

// Transport carries raft messages to other nodes.
type Transport interface {
	// Send queues msgs for the node with raft id to. It must not block;
	// messages may be dropped (raft retransmits), in which case the
	// transport reports the peer with Store.ReportUnreachable.
	Send(to uint64, msgs []*internalpb.GroupMessage)
}

// GroupConfig names one group this node holds a replica of.
type GroupConfig struct {
	ID    uint64
	Peers []uint64 // raft ids of all replicas, this node included
	SM    StateMachine
}

// Config configures a Store. Validate fills defaults.
type Config struct {
	// RaftID is this node's replica id in every group; non-zero.
	RaftID uint64
	// Groups held by this node.
	Groups []GroupConfig
	// WAL is the node's opened write-ahead log; the store replays it on Open
	// and owns appends to it afterwards.
	WAL *wal.WAL
	// Transport sends messages to peers.
	Transport Transport
	// Bootstrap creates groups with an empty log with their peers as
	// initial members (a new cluster). Without it an empty group waits to
	// be filled by its leader.
	Bootstrap bool
	// TickInterval is the raft logical clock period; default 100ms.
	TickInterval time.Duration
	// ElectionTicks is raft's election timeout in ticks; default 10.
	ElectionTicks int
	// HeartbeatTicks is raft's heartbeat period in ticks; default 1.
	HeartbeatTicks int
	// BalanceInterval is how often a leader hands a group back to its
	// preferred replica (the first in Peers) when that one is caught up, so
	// that leaders spread over the nodes; 0 means 3s, negative disables.
	BalanceInterval time.Duration
	// OrphanWait bounds how long a proposal whose leader stepped down
	// waits for its outcome: within it, the entry applying answers it, and
	// an entry of a later term applying first proves it was overwritten (a
	// term's entries precede every later term's in the log), so the common
	// case, a leadership transfer, is answered definitely; past it the
	// caller learns that the outcome is unknown (this replica may be cut
	// off). Default: two election timeouts.
	OrphanWait time.Duration
	// MaxSizePerMsg bounds the entries' bytes in one append message; default 1 MiB.
	MaxSizePerMsg uint64
	// Logger for the store; default slog.Default().
	Logger *slog.Logger
	// Clock is the node's known cut version (DESIGN.md, consistent cut
	// rules 1-2): every proposal is stamped with it, raised to at least
	// every version already in the group's log, and entries appended here
	// raise it. Default: a clock of the store's own.
	Clock *cut.Clock
	// MaterializeDir holds the groups' materialization files; empty turns
	// materialization off (the WAL then keeps every group's whole log).
	MaterializeDir string
	// MaterializeInterval: RunMaterializer materializes a group whose
	// newest materialization is older; default 1m.
	MaterializeInterval time.Duration
	// MaterializeBytes: RunMaterializer materializes a group whose WAL
	// tail passed it; default 64 MiB.
	MaterializeBytes int64
	// CatchUpEntries are kept in memory below a materialization for
	// followers a little behind; one further behind gets the
	// materialization as a raft snapshot. Default 5000.
	CatchUpEntries uint64
	// Fetch copies the materialization of group at index from the node
	// with raft id from into path (a raft snapshot that node sent), or,
	// when dirOK (the group's state machine installs checkpoints) and
	// that node keeps it as a checkpoint directory, into the checkpoint
	// directory of that name beside path. Nil: snapshots from leaders
	// cannot be installed.
	Fetch func(ctx context.Context, from, group, index uint64, path string, dirOK bool) error
	// OnFatal is called once, from the loop, when the store cannot go on
	// (a WAL write or fsync failed, an entry could not be applied, a
	// leader's commit index lies beyond this node's log: ErrLogBehind).
	// The store has already stopped acknowledging.
	OnFatal func(error)
	// Rejected is called with the reason each time Receive drops a peer's
	// message before raft sees it: one of RejectReasons (RejectDecode,
	// RejectUnknownGroup, RejectNotAMember, RejectWrongSender,
	// RejectWrongRecipient, RejectBadType, RejectMalformed), for the
	// cutkv_peer_rejected_total{reason} counter. It is called from
	// Receive's callers' goroutines, concurrently, and must not block.
	// Default: nothing.
	Rejected func(reason string)
	// OnMaterialize, if set, is called after each materialization this
	// store writes (not those fetched from a leader), from the goroutine
	// that wrote it; it must not block.
	OnMaterialize func(Materialized)
}

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if c.RaftID == 0 {
		return errors.New("raftstore: config: RaftID must be non-zero")
	}
	if c.WAL == nil || c.Transport == nil {
		return errors.New("raftstore: config: WAL and Transport are required")
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.HeartbeatTicks >= c.ElectionTicks {
		return fmt.Errorf("raftstore: config: heartbeat ticks %d must be below election ticks %d", c.HeartbeatTicks, c.ElectionTicks)
	}
	if c.BalanceInterval == 0 {
		c.BalanceInterval = 3 * time.Second
	}
	if c.OrphanWait <= 0 {
		c.OrphanWait = 2 * time.Duration(c.ElectionTicks) * c.TickInterval
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaterializeInterval <= 0 {
		c.MaterializeInterval = time.Minute
	}
	if c.MaterializeBytes <= 0 {
		c.MaterializeBytes = 64 << 20
	}
	if c.CatchUpEntries == 0 {
		c.CatchUpEntries = 5000
	}
	if c.Clock == nil {
		c.Clock = cut.NewClock()
	}
	if c.OnFatal == nil {
		c.OnFatal = func(error) {}
	}
	if c.Rejected == nil {
		c.Rejected = func(string) {}
	}
	for _, g := range c.Groups {
		if g.SM == nil || len(g.Peers) == 0 {
			return fmt.Errorf("raftstore: config: group %d needs a state machine and peers", g.ID)
		}
	}
	return nil
}

// GroupStatus is a snapshot of one group as this node sees it.
type GroupStatus struct {
	ID       uint64
	Leader   uint64 // raft id, 0 if unknown
	IsLeader bool
	Term     uint64
	Commit   uint64
	Applied  uint64
	Peers    []uint64
	// Materialized is the newest materialization's index (0: none), taken
	// at MaterializedAt (zero: none since start).
	Materialized   uint64
	MaterializedAt time.Time
}

type waiter struct {
	ch    chan result
	group uint64
	// term is the leader's term when the command was proposed; orphaned
	// is when that leader stepped down (zero while it leads; see
	// Config.OrphanWait).
	term     uint64
	orphaned time.Time
}

type result struct {
	val any
	err error
}

type readBatch struct {
	index   uint64 // read index once known
	waiters []chan error
}

// group is one raft group's replica; owned by the loop.
type group struct {
	id      uint64
	peers   []uint64
	rn      *raft.RawNode
	storage *raft.MemoryStorage
	sm      StateMachine
	applied uint64
	lead    uint64
	state   raft.StateType
	// logVersion is the highest cut version of any entry in this replica's
	// log (appended or proposed): a proposal is stamped with at least it,
	// so versions never decrease along the log (rule 2).
	logVersion uint64

	// lastIndex is the last index of raft's log (unstable entries
	// included) as of the last Ready handled; lastLow is at or below
	// raft's last index at every moment: lastIndex after each Ready,
	// lowered by the appends and snapshots stepped since (which may cut
	// the log's tail), while proposals and elections only lengthen the
	// log. Receive's checkCommit compares with them. Loop only.
	lastIndex, lastLow uint64

	// appliedTerm is the term of the newest entry applied (loop only).
	appliedTerm uint64
	// orphans are the waiters of proposals made while this replica led
	// the group, which it no longer does (see Config.OrphanWait).
	orphans map[uint64]*waiter

	readQueue    []chan error          // waiting for a read index request
	readInflight map[uint64]*readBatch // by request context
	readReady    []*readBatch          // index known, waiting for apply

	// Materializations (loop only): the newest durable one, the oldest
	// kept for falling back to (the WAL is kept from keepIndex+1), and
	// whether one is being written.
	matIndex, matTerm uint64
	keepIndex         uint64
	matBusy           bool
	matAt             time.Time // when the newest was taken

	// Hand-back to the preferred replica: failed attempts back off, so a
	// preferred replica that refuses (it is draining) is not asked every
	// round, each time costing the group an election timeout.
	balanceTries int
	balanceSkip  int

	counters groupCounters // read by Store.Counters from any goroutine
}

// Store hosts the raft groups of one node.
type Store struct {
	cfg    Config
	log    *slog.Logger
	groups map[uint64]*group
	order  []uint64 // group ids, ascending

	inbox chan func()
	stopc chan struct{}
	donec chan struct{}
	// mats counts the materializations writing in the background (added
	// on the loop): Stop waits for them, so that nothing writes into the
	// data dir once it returned.
	mats sync.WaitGroup

	waiters map[uint64]*waiter // loop only
	persist *persister
	// walNew: the WAL held no record at Open (a new node, or a data
	// directory a restore filled with materializations only).
	walNew   bool
	workErr  atomic.Pointer[error] // a persister failure for the loop to act on
	nextID   atomic.Uint64
	readSeq  uint64 // loop only
	draining atomic.Bool
	failed   atomic.Pointer[error]

	statusMu sync.RWMutex
	status   map[uint64]GroupStatus

	pinMu  sync.Mutex
	pins   map[uint64]map[uint64]uint64 // group → pin id → index
	pinSeq uint64

	fetchMu  sync.Mutex
	fetching map[uint64]bool // groups with a snapshot file being fetched

	rejectLog rejectLog // rate-limits the log of dropped peer messages

	startOnce sync.Once
	stopOnce  sync.Once
}

// Open replays the WAL into each group's raft storage and prepares the
// groups. The loop starts with Start.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "raftstore"),
		groups:  map[uint64]*group{},
		inbox:   make(chan func(), 4096),
		stopc:   make(chan struct{}),
		donec:   make(chan struct{}),
		waiters: map[uint64]*waiter{},
		status:  map[uint64]GroupStatus{},
		walNew:  cfg.WAL.LastIndex() == 0,
	}
	s.nextID.Store(rand.Uint64() >> 1)
	s.persist = newPersister(s)
	if cfg.MaterializeDir != "" {
		if err := os.MkdirAll(cfg.MaterializeDir, 0o755); err != nil {
			return nil, fmt.Errorf("raftstore: materialization dir: %w", err)
		}
		if err := os.MkdirAll(s.fetchedDir(), 0o755); err != nil {
			return nil, fmt.Errorf("raftstore: materialization dir: %w", err)
		}
		// Clones of checkpoint directories are read and removed by their
		// readers; a crash leaves them.
		if err := os.RemoveAll(s.clonesDir()); err != nil {
			return nil, fmt.Errorf("raftstore: materialization dir: %w", err)
		}
		for _, dir := range []string{cfg.MaterializeDir, s.fetchedDir()} {
			if left, err := checkpoint.RemoveTemp(dir); err != nil {
				return nil, fmt.Errorf("raftstore: materialization dir: %w", err)
			} else if len(left) > 0 {
				s.log.Info("removed unfinished materializations left by a crash", "dir", dir, "files", left)
			}
		}
	}
	logs, err := replay(cfg.WAL)
	if err != nil {
		return nil, err
	}
	if cfg.MaterializeDir != "" {
		if err := s.settleFetched(logs); err != nil {
			return nil, err
		}
	}
	for _, gc := range cfg.Groups {
		g, err := s.openGroup(gc, logs[gc.ID])
		if err != nil {
			return nil, err
		}
		s.groups[gc.ID] = g
		s.order = append(s.order, gc.ID)
	}
	sort.Slice(s.order, func(i, j int) bool { return s.order[i] < s.order[j] })
	if err := s.markRestored(); err != nil {
		return nil, err
	}
	for _, g := range s.groups {
		s.publishStatus(g)
	}
	return s, nil
}

// GroupLog is what the WAL holds for one group: its last hard state and
// its raft log (entries in index order, overwritten tails already cut).
// The log may start after index 1: the WAL front is truncated behind
// materializations, and a snapshot installed from the leader (Installed)
// replaces everything before it.
type GroupLog struct {
	HardState *raftpb.HardState
	Entries   []*raftpb.Entry
	// Installed is the newest raft snapshot installed from the leader,
	// nil if none.
	Installed *internalpb.MaterializedMark
	// Materialized is the newest mark of this node's own
	// materializations, nil if none. Such marks are written before each
	// WAL truncation, so that a group whose entries were all truncated
	// away still has the WAL vouch for its materialization (walKnows).
	Materialized *internalpb.MaterializedMark
	// pos[i] is where Entries[i] lies in the WAL.
	pos []walPos
}

// ReadLogs reads every group's log from a node's WAL, as a restart does.
// Tools that inspect a stopped node's history (the cut verifier) use it.
func ReadLogs(w *wal.WAL) (map[uint64]*GroupLog, error) { return replay(w) }

type groupLog = GroupLog

// replay reads the whole WAL. A later entry record for index i truncates
// the group's entries at >= i before being appended.
func replay(w *wal.WAL) (map[uint64]*groupLog, error) {
	logs := map[uint64]*groupLog{}
	get := func(g uint64) *groupLog {
		l := logs[g]
		if l == nil {
			l = &groupLog{}
			logs[g] = l
		}
		return l
	}
	err := w.Replay(func(idx uint64, r wal.Record) error {
		switch r.Type {
		case wal.RecordEntry:
			e := &raftpb.Entry{}
			if err := proto.Unmarshal(r.Data, e); err != nil {
				return fmt.Errorf("raftstore: wal record %d: group %d entry: %w", idx, r.Group, err)
			}
			l := get(r.Group)
			if n := len(l.Entries); n > 0 {
				first := l.Entries[0].GetIndex()
				switch {
				case e.GetIndex() < first:
					l.Entries, l.pos = l.Entries[:0], l.pos[:0]
				case e.GetIndex() <= l.Entries[n-1].GetIndex():
					l.Entries, l.pos = l.Entries[:e.GetIndex()-first], l.pos[:e.GetIndex()-first]
				case e.GetIndex() != l.Entries[n-1].GetIndex()+1:
					return fmt.Errorf("raftstore: wal record %d: group %d entry %d follows %d: gap in the log",
						idx, r.Group, e.GetIndex(), l.Entries[n-1].GetIndex())
				}
			}
			l.Entries = append(l.Entries, e)
			l.pos = append(l.pos, walPos{raft: e.GetIndex(), wal: idx, bytes: len(r.Data)})
		case wal.RecordMaterialized:
			mk := &internalpb.MaterializedMark{}
			if err := proto.Unmarshal(r.Data, mk); err != nil {
				return fmt.Errorf("raftstore: wal record %d: group %d materialization mark: %w", idx, r.Group, err)
			}
			l := get(r.Group)
			if mk.GetInstalled() && mk.GetIndex() >= l.Installed.GetIndex() {
				// A snapshot from the leader replaced the log up to its
				// index: the entries before it are of no use (and the next
				// entry follows the snapshot, not them).
				l.Installed = mk
				keep := 0
				for keep < len(l.Entries) && l.Entries[keep].GetIndex() <= mk.GetIndex() {
					keep++
				}
				l.Entries, l.pos = append([]*raftpb.Entry(nil), l.Entries[keep:]...), append([]walPos(nil), l.pos[keep:]...)
			} else if !mk.GetInstalled() && mk.GetIndex() >= l.Materialized.GetIndex() {
				l.Materialized = mk
			}
		case wal.RecordHardState:
			hs := &raftpb.HardState{}
			if err := proto.Unmarshal(r.Data, hs); err != nil {
				return fmt.Errorf("raftstore: wal record %d: group %d hard state: %w", idx, r.Group, err)
			}
			get(r.Group).HardState = hs
		}
		return nil
	})
	return logs, err
}

func (s *Store) openGroup(gc GroupConfig, l *groupLog) (*group, error) {
	st := raft.NewMemoryStorage()
	if l == nil {
		l = &groupLog{}
	}
	base, err := s.restoreBase(gc, l, st)
	if err != nil {
		return nil, err
	}
	empty := base == nil && len(l.Entries) == 0 && l.HardState == nil
	ents := l.Entries
	if base != nil {
		for len(ents) > 0 && ents[0].GetIndex() <= base.index {
			ents = ents[1:]
		}
	}
	if len(ents) > 0 {
		if err := st.Append(ents); err != nil {
			return nil, fmt.Errorf("raftstore: group %d: restore entries: %w", gc.ID, err)
		}
	}
	var hs *raftpb.HardState
	if l.HardState != nil || base != nil {
		hs = &raftpb.HardState{}
		if l.HardState != nil {
			hs = proto.Clone(l.HardState).(*raftpb.HardState)
		}
		if base != nil && hs.GetCommit() < base.index {
			// Commit-only hard states are written lazily; the
			// materialization proves its index was committed.
			hs.Commit = &base.index
		}
		if err := st.SetHardState(hs); err != nil {
			return nil, fmt.Errorf("raftstore: group %d: restore hard state: %w", gc.ID, err)
		}
	}
	rc := &raft.Config{
		ID:                        s.cfg.RaftID,
		ElectionTick:              s.cfg.ElectionTicks,
		HeartbeatTick:             s.cfg.HeartbeatTicks,
		Storage:                   st,
		MaxSizePerMsg:             s.cfg.MaxSizePerMsg,
		MaxInflightMsgs:           256,
		MaxCommittedSizePerReady:  64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: !forwardProposals,
		AsyncStorageWrites:        true,
		Logger:                    raftLogger{s.log.With("group", gc.ID)},
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, fmt.Errorf("raftstore: group %d: %w", gc.ID, err)
	}
	if empty && s.cfg.Bootstrap {
		peers := make([]raft.Peer, len(gc.Peers))
		for i, id := range gc.Peers {
			peers[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return nil, fmt.Errorf("raftstore: group %d: bootstrap: %w", gc.ID, err)
		}
	}
	var lv uint64
	for _, e := range ents {
		lv = max(lv, entryVersion(e))
	}
	if cv, ok := gc.SM.(interface{ CutVersion() uint64 }); ok {
		// Entries inside the materialization are gone from the log; the
		// state remembers the newest cut it saw (rule 2 on a restored
		// replica).
		lv = max(lv, cv.CutVersion())
	}
	s.cfg.Clock.Raise(lv)
	last, err := st.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("raftstore: group %d: last index: %w", gc.ID, err)
	}
	g := &group{
		lastIndex:    last, // bootstrap entries, if any, only lengthen it
		lastLow:      last,
		logVersion:   lv,
		id:           gc.ID,
		peers:        append([]uint64(nil), gc.Peers...),
		rn:           rn,
		storage:      st,
		sm:           gc.SM,
		readInflight: map[uint64]*readBatch{},
	}
	g.matAt = time.Now() // the interval counts from the start
	mark := l.Materialized
	if base != nil {
		g.applied, g.matIndex, g.matTerm, g.keepIndex = base.index, base.index, base.term, base.keep
		if base.index > mark.GetIndex() {
			mark = &internalpb.MaterializedMark{Index: base.index, Term: base.term}
		}
	}
	if hs != nil {
		hs = proto.Clone(hs).(*raftpb.HardState) // the persister's own
	}
	s.persist.replayed(g.id, l.pos, hs, l.Installed, mark)
	return g, nil
}

// Start starts the loop.
func (s *Store) Start() {
	s.startOnce.Do(func() {
		go s.persist.run()
		go s.run()
	})
}

// Stop stops the loop and fails every waiter with ErrStopped. It does not
// close the WAL.
func (s *Store) Stop() {
	s.stopOnce.Do(func() { close(s.stopc) })
	started := true
	s.startOnce.Do(func() { started = false; close(s.donec) })
	<-s.donec
	// The loop has exited: no materialization starts any more, and those
	// running end at their next call into the loop (ErrStopped).
	s.mats.Wait()
	if started {
		// After the loop: what it queued is written (and the commit
		// indexes flushed) before the caller closes the WAL.
		s.persist.close()
	}
}

// Err returns the fatal error that stopped the store, if any.
func (s *Store) Err() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// do runs fn on the loop. It fails when the store stops or ctx ends first.
func (s *Store) do(ctx context.Context, fn func()) error {
	if err := s.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrNotServing, err)
	}
	select {
	case s.inbox <- fn:
		return nil
	case <-s.stopc:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ping runs an empty call through the loop and returns once it ran: nil,
// or why it could not (the store's error, ErrStopped, ctx's error). A
// liveness check: a wedged loop makes it wait for ctx.
func (s *Store) Ping(ctx context.Context) error {
	ran := make(chan struct{})
	if err := s.do(ctx, func() { close(ran) }); err != nil {
		return err
	}
	select {
	case <-ran:
		return nil
	case <-s.stopc:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Propose replicates cmd through group's raft log and waits until it is
// applied on this node, returning the state machine's result. cmd.Id is
// set here. Errors ErrNotLeader, ErrProposalDropped, ErrNotServing and
// ErrUnknownGroup mean the command was not applied; a context error or
// ErrStopped leaves the outcome unknown.
func (s *Store) Propose(ctx context.Context, groupID uint64, cmd *internalpb.Command) (any, error) {
	if s.draining.Load() {
		if g := s.groups[groupID]; g != nil {
			g.counters.fail(FailDropped)
		}
		return nil, fmt.Errorf("%w: node is shutting down", ErrProposalDropped)
	}
	id := s.nextID.Add(1)
	cmd.Id = id
	cmd.CutVersion = max(cmd.GetCutVersion(), s.cfg.Clock.Load())
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("raftstore: marshal command: %w", err)
	}
	w := &waiter{ch: make(chan result, 1), group: groupID}
	err = s.do(ctx, func() {
		g := s.groups[groupID]
		if g == nil {
			w.ch <- result{err: fmt.Errorf("%w %d", ErrUnknownGroup, groupID)}
			return
		}
		if g.state != raft.StateLeader {
			g.counters.fail(FailNotLeader)
			w.ch <- result{err: &NotLeaderError{Group: groupID, Leader: g.lead}}
			return
		}
		if g.logVersion > cmd.GetCutVersion() {
			// The log holds a newer version than this node knew when it
			// marshaled (it just became leader over a newer tail).
			cmd.CutVersion = g.logVersion
			b, err := proto.Marshal(cmd)
			if err != nil {
				w.ch <- result{err: fmt.Errorf("raftstore: marshal command: %w", err)}
				return
			}
			data = b
		}
		if err := g.rn.Propose(data); err != nil {
			g.counters.fail(FailDropped)
			w.ch <- result{err: fmt.Errorf("%w: group %d: %v", ErrProposalDropped, groupID, err)}
			return
		}
		g.counters.proposals.Add(1)
		g.logVersion = cmd.GetCutVersion()
		s.cfg.Clock.Raise(g.logVersion)
		w.term = g.rn.BasicStatus().HardState.GetTerm()
		s.waiters[id] = w
	})
	if err != nil {
		return nil, err
	}
	select {
	case r := <-w.ch:
		return r.val, r.err
	case <-ctx.Done():
		s.forget(id)
		return nil, ctx.Err()
	case <-s.donec:
		// The loop answers every proposal it took before it ends. Without
		// an answer it never ran fn: nothing was proposed, which after a
		// fatal error ErrNotServing says.
		select {
		case r := <-w.ch:
			return r.val, r.err
		default:
		}
		if err := s.Err(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotServing, err)
		}
		return nil, ErrStopped
	}
}

func (s *Store) forget(id uint64) {
	select {
	case s.inbox <- func() {
		if w := s.waiters[id]; w != nil {
			if g := s.groups[w.group]; g != nil {
				delete(g.orphans, id)
			}
		}
		delete(s.waiters, id)
	}:
	case <-s.stopc:
	case <-s.donec: // the loop ended (a fatal error) and answered every waiter
	}
}

// ReadIndex waits until this node, as group's leader, has applied
// everything committed before the call: a read of the state machine after
// it returns is linearizable. ErrNotLeader means no read happened.
func (s *Store) ReadIndex(ctx context.Context, groupID uint64) error {
	ch := make(chan error, 1)
	err := s.do(ctx, func() {
		g := s.groups[groupID]
		if g == nil {
			ch <- fmt.Errorf("%w %d", ErrUnknownGroup, groupID)
			return
		}
		if g.state != raft.StateLeader {
			ch <- &NotLeaderError{Group: groupID, Leader: g.lead}
			return
		}
		g.readQueue = append(g.readQueue, ch)
	})
	if err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.donec:
		select {
		case err := <-ch:
			return err
		default:
		}
		if err := s.Err(); err != nil {
			return fmt.Errorf("%w: %v", ErrNotServing, err)
		}
		return ErrStopped
	}
}

// ReportUnreachable tells every group that messages to node to were lost.
func (s *Store) ReportUnreachable(to uint64) {
	select {
	case s.inbox <- func() {
		for _, g := range s.groups {
			g.rn.ReportUnreachable(to)
		}
	}:
	default: // the loop is busy; raft will notice through heartbeats
	}
}

// Status returns the group's status as last published by the loop.
func (s *Store) Status(groupID uint64) (GroupStatus, bool) {
	s.statusMu.RLock()
	defer s.statusMu.RUnlock()
	st, ok := s.status[groupID]
	return st, ok
}

// Groups returns the ids of the groups this node holds, ascending.
func (s *Store) Groups() []uint64 { return append([]uint64(nil), s.order...) }

// Leader returns the raft id of group's leader as this node sees it, 0 if
// unknown.
func (s *Store) Leader(groupID uint64) uint64 {
	st, _ := s.Status(groupID)
	return st.Leader
}

// LeaderCount returns how many groups this node leads.
func (s *Store) LeaderCount() int {
	s.statusMu.RLock()
	defer s.statusMu.RUnlock()
	n := 0
	for _, st := range s.status {
		if st.IsLeader {
			n++
		}
	}
	return n
}

// TransferLeadership hands every group this node leads to its most
// up-to-date active follower and stops accepting proposals; it returns
// when this node leads no group or ctx ends.
func (s *Store) TransferLeadership(ctx context.Context) error {
	s.draining.Store(true)
	for {
		if err := s.do(ctx, s.transferAllLocked); err != nil {
			return err
		}
		if s.LeaderCount() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftstore: still leading %d groups: %w", s.LeaderCount(), ctx.Err())
		case <-time.After(s.cfg.TickInterval):
		}
	}
}

// transferAllLocked runs on the loop.
func (s *Store) transferAllLocked() {
	for _, g := range s.groups {
		if g.state != raft.StateLeader {
			continue
		}
		st := g.rn.Status()
		if st.LeadTransferee != 0 {
			continue
		}
		var best, bestMatch uint64
		for id, pr := range st.Progress {
			if id == s.cfg.RaftID || !pr.RecentActive {
				continue
			}
			if best == 0 || pr.Match > bestMatch {
				best, bestMatch = id, pr.Match
			}
		}
		if best != 0 {
			g.rn.TransferLeader(best)
		}
	}
}

// balanceLocked hands each group this node leads back to its preferred
// replica when that one is active and fully caught up. Runs on the loop.
func (s *Store) balanceLocked() {
	for _, g := range s.groups {
		if g.state != raft.StateLeader || g.peers[0] == s.cfg.RaftID {
			g.balanceTries, g.balanceSkip = 0, 0
			continue
		}
		if g.balanceSkip > 0 {
			g.balanceSkip--
			continue
		}
		st := g.rn.Status()
		if st.LeadTransferee != 0 {
			continue
		}
		pr, ok := st.Progress[g.peers[0]]
		if ok && pr.RecentActive && pr.Match >= st.HardState.GetCommit() {
			g.rn.TransferLeader(g.peers[0])
			// Still leading at a later round means this attempt failed.
			g.balanceSkip = balanceBackoff(g.balanceTries)
			g.balanceTries++
		}
	}
}

// balanceBackoff is how many balance rounds to skip after the n-th
// (0-based) hand-back attempt that may fail: 0, 1, 3, 7, ... capped at 63.
func balanceBackoff(n int) int {
	return 1<<min(n, 6) - 1
}

func (s *Store) run() {
	defer close(s.donec)
	ticker := time.NewTicker(s.cfg.TickInterval)
	defer ticker.Stop()
	var balance <-chan time.Time
	if s.cfg.BalanceInterval > 0 {
		bt := time.NewTicker(s.cfg.BalanceInterval)
		defer bt.Stop()
		balance = bt.C
	}
	defer s.failAll(ErrStopped)
	for {
		select {
		case <-s.stopc:
			return
		case <-ticker.C:
			for _, id := range s.order {
				g := s.groups[id]
				g.rn.Tick()
				if len(g.orphans) > 0 {
					s.expireOrphans(g, false)
				}
			}
		case <-balance:
			if !s.draining.Load() {
				s.balanceLocked()
			}
		case fn := <-s.inbox:
			fn()
		}
	drain:
		for i := 0; i < 4096 && s.workErr.Load() == nil; i++ {
			select {
			case fn := <-s.inbox:
				fn()
			default:
				break drain
			}
		}
		if p := s.workErr.Load(); p != nil {
			s.fail(*p)
			return
		}
		// Stepping an apply response can make a new Ready at once (a
		// single voter commits as soon as its append is durable): handle
		// it now rather than a tick later.
		for {
			if err := s.handleReady(); err != nil {
				s.fail(err)
				return
			}
			if !s.hasReady() {
				break
			}
		}
	}
}

// hasReady says whether any group has a Ready to handle; loop only.
func (s *Store) hasReady() bool {
	for _, id := range s.order {
		if s.groups[id].rn.HasReady() {
			return true
		}
	}
	return false
}

// fail stops acknowledging for good.
func (s *Store) fail(err error) {
	s.failed.CompareAndSwap(nil, &err)
	s.log.Error("raft store stopped: it will not acknowledge anything more", "err", err)
	// A pending proposal may already be durable on the peers (sent in an
	// earlier round) or even here (a failed fsync may still have written
	// it): it can be committed without this node, so its outcome is
	// unknown. Only proposals refused from now on are certainly not applied.
	s.failAll(fmt.Errorf("%w: outcome unknown: %w", ErrStopped, err))
	s.cfg.OnFatal(err)
}

// failAll fails every waiter; loop only.
func (s *Store) failAll(err error) {
	for id, w := range s.waiters {
		w.ch <- result{err: err}
		delete(s.waiters, id)
	}
	for _, g := range s.groups {
		g.failReads(err)
	}
}

func (g *group) failReads(err error) {
	for _, ch := range g.readQueue {
		ch <- err
	}
	g.readQueue = nil
	for k, b := range g.readInflight {
		for _, ch := range b.waiters {
			ch <- err
		}
		delete(g.readInflight, k)
	}
	for _, b := range g.readReady {
		for _, ch := range b.waiters {
			ch <- err
		}
	}
	g.readReady = nil
}

// handleReady handles the Ready of every group that has one: it sends
// what may go out at once, applies committed entries (raft hands only
// locally durable ones over), and queues the storage appends for the
// persister, which answers later through stepLocal. Loop only.
func (s *Store) handleReady() error {
	type snapSent struct {
		g  *group
		to uint64
	}
	var (
		reqs      []appendReq
		out       map[uint64][]*internalpb.GroupMessage // made on first use: most turns send nothing
		snapsSent []snapSent
	)
	for _, id := range s.order {
		g := s.groups[id]
		if len(g.readQueue) > 0 {
			s.readSeq++
			var ctx [8]byte
			binary.BigEndian.PutUint64(ctx[:], s.readSeq)
			g.readInflight[s.readSeq] = &readBatch{waiters: g.readQueue}
			g.readQueue = nil
			g.rn.ReadIndex(ctx[:])
		}
		if !g.rn.HasReady() {
			// Nothing of the log is unhandled: lastIndex is raft's.
			g.lastLow = g.lastIndex
			continue
		}
		rd := g.rn.Ready()
		if rd.SoftState != nil {
			s.noteSoftState(g, rd.SoftState)
		}
		for _, rs := range rd.ReadStates {
			if len(rs.RequestCtx) != 8 {
				continue
			}
			seq := binary.BigEndian.Uint64(rs.RequestCtx)
			if b := g.readInflight[seq]; b != nil {
				delete(g.readInflight, seq)
				b.index = rs.Index
				g.readReady = append(g.readReady, b)
			}
		}
		for _, m := range rd.Messages {
			switch m.GetTo() {
			case raft.LocalAppendThread:
				// The append holds whatever raft's log gained since the
				// last Ready: its last entry (or, alone, its snapshot)
				// ends the log now.
				if ents := m.GetEntries(); len(ents) > 0 {
					g.lastIndex = ents[len(ents)-1].GetIndex()
				} else if snap := m.GetSnapshot(); snap != nil {
					g.lastIndex = snap.GetMetadata().GetIndex()
				}
				for _, e := range m.GetEntries() {
					g.logVersion = max(g.logVersion, entryVersion(e))
				}
				s.cfg.Clock.Raise(g.logVersion)
				reqs = append(reqs, appendReq{g: g, m: m})
			case raft.LocalApplyThread:
				if err := s.apply(g, m.GetEntries()); err != nil {
					return err
				}
				for _, resp := range m.GetResponses() {
					if err := g.rn.Step(resp); err != nil {
						return fmt.Errorf("raftstore: group %d: step apply response: %w", g.id, err)
					}
				}
			default:
				// Appends, heartbeats, vote requests: nothing here vouches
				// for local durability (acknowledgements ride on the
				// append message's responses), so they go out now and
				// followers write while this node writes.
				data, err := proto.Marshal(m)
				if err != nil {
					return fmt.Errorf("raftstore: marshal message: %w", err)
				}
				if out == nil {
					out = map[uint64][]*internalpb.GroupMessage{}
				}
				out[m.GetTo()] = append(out[m.GetTo()], &internalpb.GroupMessage{Group: g.id, Message: data})
				if m.GetType() == raftpb.MsgSnap {
					snapsSent = append(snapsSent, snapSent{g, m.GetTo()})
					g.counters.snapsSent.Add(1)
				}
			}
		}
		g.lastLow = g.lastIndex
		g.releaseReads()
		s.publishStatus(g)
	}
	for to, msgs := range out {
		s.cfg.Transport.Send(to, msgs)
	}
	for _, ss := range snapsSent {
		// The message only names the materialization; the follower fetches
		// the file and answers once it holds it. Until then the leader
		// probes, and sends the snapshot again.
		ss.g.rn.ReportSnapshot(ss.to, raft.SnapshotFinish)
	}
	if len(reqs) > 0 {
		s.persist.enqueue(reqs)
	}
	return nil
}

// stepLocal hands responses of durable appends back to their groups,
// through the loop. Called by the persister; blocks while the inbox is
// full; drops them once the loop has ended.
func (s *Store) stepLocal(local map[*group][]*raftpb.Message, installed map[*group]uint64) {
	fn := func() {
		for g, idx := range installed {
			// The state machine holds the snapshot's state now.
			g.applied = max(g.applied, idx)
			s.expireOrphans(g, true)
			g.matIndex, g.keepIndex, g.matAt = max(g.matIndex, idx), max(g.keepIndex, idx), time.Now()
			if cv, ok := g.sm.(interface{ CutVersion() uint64 }); ok {
				g.logVersion = max(g.logVersion, cv.CutVersion())
				s.cfg.Clock.Raise(g.logVersion)
			}
		}
		for g, msgs := range local {
			for _, m := range msgs {
				if err := g.rn.Step(m); err != nil {
					s.log.Debug("step local response", "group", g.id, "type", m.GetType().String(), "err", err)
				}
			}
		}
	}
	select {
	case s.inbox <- fn:
	case <-s.donec:
	}
}

// failFromWorker records a persister failure and wakes the loop, which
// stops for good.
func (s *Store) failFromWorker(err error) {
	s.workErr.CompareAndSwap(nil, &err)
	select {
	case s.inbox <- func() {}:
	case <-s.donec:
	default: // the inbox is full: the loop is awake anyway
	}
}

func (s *Store) noteSoftState(g *group, ss *raft.SoftState) {
	wasLeader := g.state == raft.StateLeader
	if ss.Lead != g.lead {
		if ss.Lead != 0 {
			g.counters.leaderChanges.Add(1)
		}
		s.log.Info("leader changed", "group", g.id, "leader", ss.Lead, "term", g.rn.BasicStatus().HardState.GetTerm())
	}
	g.lead, g.state = ss.Lead, ss.RaftState
	if wasLeader && g.state != raft.StateLeader {
		// Reads not yet served were not served: the client may retry.
		g.failReads(&NotLeaderError{Group: g.id, Leader: g.lead})
		// Proposals not yet applied may still be committed by the next
		// leader, or overwritten: they wait a little for the log to tell
		// (Config.OrphanWait), then learn that the outcome is unknown.
		now := time.Now()
		for id, w := range s.waiters {
			if w.group == g.id && w.orphaned.IsZero() {
				w.orphaned = now
				if g.orphans == nil {
					g.orphans = map[uint64]*waiter{}
				}
				g.orphans[id] = w
			}
		}
	}
}

func (g *group) releaseReads() {
	n := 0
	for _, b := range g.readReady {
		if b.index <= g.applied {
			for _, ch := range b.waiters {
				ch <- nil
			}
			continue
		}
		g.readReady[n] = b
		n++
	}
	g.readReady = g.readReady[:n]
}

func (s *Store) apply(g *group, ents []*raftpb.Entry) error {
	if len(ents) > 0 {
		if err := failpoint.Inject(failpoint.RaftBeforeApply); err != nil {
			return fmt.Errorf("raftstore: group %d: apply entries %d..%d: %w", g.id, ents[0].GetIndex(), ents[len(ents)-1].GetIndex(), err)
		}
	}
	for _, e := range ents {
		idx := e.GetIndex()
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.GetData()) == 0 {
				g.sm.SetApplied(idx)
				break
			}
			cmd := &internalpb.Command{}
			if err := proto.Unmarshal(e.GetData(), cmd); err != nil {
				return fmt.Errorf("raftstore: group %d entry %d: decode command: %w", g.id, idx, err)
			}
			val, err := g.sm.ApplyCommand(idx, cmd)
			if err != nil {
				return fmt.Errorf("raftstore: group %d entry %d: %w", g.id, idx, err)
			}
			if w := s.waiters[cmd.GetId()]; w != nil {
				delete(s.waiters, cmd.GetId())
				delete(g.orphans, cmd.GetId())
				w.ch <- result{val: val}
			}
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("raftstore: group %d entry %d: decode conf change: %w", g.id, idx, err)
			}
			g.rn.ApplyConfChange(&cc)
			g.sm.SetApplied(idx)
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("raftstore: group %d entry %d: decode conf change: %w", g.id, idx, err)
			}
			g.rn.ApplyConfChange(&cc)
			g.sm.SetApplied(idx)
		}
		g.applied = idx
		if t := e.GetTerm(); t > g.appliedTerm {
			g.appliedTerm = t
			s.dropOverwritten(g, t)
		}
	}
	return nil
}

// dropOverwritten answers g's proposals of terms before term, an entry of
// which was just applied without theirs: a term's entries precede every
// later term's in the log, so theirs were overwritten and never apply.
// It runs when the applied term grows, so it also answers the proposals
// of a leadership this replica lost and regained between two Readys
// (which noteSoftState never sees, and so never orphans).
func (s *Store) dropOverwritten(g *group, term uint64) {
	for id, w := range s.waiters {
		if w.group == g.id && w.term < term {
			delete(g.orphans, id)
			delete(s.waiters, id)
			g.counters.fail(FailOverwritten)
			w.ch <- result{err: fmt.Errorf("%w: group %d: its leader stepped down and a later term's entry took its place", ErrProposalDropped, g.id)}
		}
	}
}

// expireOrphans tells the callers of proposals orphaned for longer than
// Config.OrphanWait (or all of them, when the replica's state was replaced by
// a snapshot and their entries could have been applied unseen) that
// their outcome is unknown.
func (s *Store) expireOrphans(g *group, all bool) {
	now := time.Now()
	for id, w := range g.orphans {
		if all || now.Sub(w.orphaned) > s.cfg.OrphanWait {
			delete(g.orphans, id)
			delete(s.waiters, id)
			g.counters.fail(FailLeadershipLost)
			w.ch <- result{err: fmt.Errorf("%w: group %d lost its leader", ErrLeadershipLost, g.id)}
		}
	}
}

// entryVersion reads the cut version of a normal entry's command without
// decoding the rest (it runs for every appended entry); 0 for an entry
// without a command.
func entryVersion(e *raftpb.Entry) uint64 {
	if e.GetType() != raftpb.EntryNormal {
		return 0
	}
	b := e.GetData()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		if num == 2 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0
			}
			return v
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0
		}
		b = b[n:]
	}
	return 0
}

func (s *Store) publishStatus(g *group) {
	bs := g.rn.BasicStatus()
	st := GroupStatus{
		ID:       g.id,
		Leader:   bs.Lead,
		IsLeader: bs.RaftState == raft.StateLeader,
		Term:     bs.HardState.GetTerm(),
		Commit:   bs.HardState.GetCommit(),
		Applied:  g.applied,
		Peers:    g.peers,

		Materialized:   g.matIndex,
		MaterializedAt: g.matAt,
	}
	s.statusMu.Lock()
	s.status[g.id] = st
	s.statusMu.Unlock()
}

// raftLogger routes raft's log into slog; raft's info chatter goes to debug.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                 { r.l.Error(fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) {
	r.l.Error(fmt.Sprintf(format, v...))
	panic(fmt.Sprintf(format, v...))
}
func (r raftLogger) Panic(v ...any) { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) {
	panic(fmt.Sprintf(format, v...))
}
