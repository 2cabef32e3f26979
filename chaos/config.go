package chaos

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind names a kind of fault.
type Kind string

// The fault kinds (DESIGN.md invariant 7; issue 13).
const (
	IsolateNode       Kind = "isolate-node"        // one node cut off from the others, both ways
	IsolateLeader     Kind = "isolate-leader"      // the leader of a partition cut off
	IsolateMetaLeader Kind = "isolate-meta-leader" // group 0's leader cut off
	Split23           Kind = "split-2-3"           // 5 nodes: two against three
	Split14           Kind = "split-1-4"           // 5 nodes: one against four
	OneWay            Kind = "one-way"             // packets from one node to another dropped
	RandomLoss        Kind = "random-loss"         // a share of one node's packets dropped at random
	KillRestart       Kind = "kill-restart"        // kill -9, later restarted from its data dir
	PauseLeader       Kind = "pause-leader"        // SIGSTOP of a partition's leader
	PauseCoordinator  Kind = "pause-coordinator"   // SIGSTOP of a node coordinating 2PC transactions
	PauseMetaMidCut   Kind = "pause-meta-mid-cut"  // SIGSTOP of group 0's leader while a cut is in flight
	Swizzle           Kind = "swizzle"             // links clogged one by one, opened again in another order
	SnapshotCatchUp   Kind = "snapshot-catch-up"   // a follower cut off past the compacted log, caught up by a raft snapshot
	RestartAll        Kind = "restart-all"         // every node killed, then all restarted at once
	LoseUnsynced      Kind = "lose-unsynced"       // a node killed and its files cut to their fsynced lengths
	ClockSkew         Kind = "clock-skew"          // one node's wall clock moved 1-15 min forward or back (internal/clock)
	DiskFull          Kind = "disk-full"           // a node's disk filled: it must exit naming the file; restarted once freed
	Delay             Kind = "delay"               // peer links slowed by 20-200 ms with jitter (issue 17)
	CrashPoint        Kind = "crash-point"         // a node restarted to exit at a named crash point (crashpoint.go)
)

// AllKinds lists every kind, in a fixed order.
var AllKinds = []Kind{IsolateNode, IsolateLeader, IsolateMetaLeader, Split23, Split14, OneWay, RandomLoss,
	KillRestart, PauseLeader, PauseCoordinator, PauseMetaMidCut, Swizzle, SnapshotCatchUp, RestartAll, LoseUnsynced, ClockSkew, DiskFull, Delay,
	CrashPoint}

// needs5 says whether a kind needs five nodes.
func (k Kind) needs5() bool { return k == Split23 || k == Split14 }

// Config is a run's settings (doc.go, "Knobs").
type Config struct {
	Soak          time.Duration
	Seed          uint64
	SeedSource    string // where the seed came from, for the log
	Kinds         []Kind
	Nodes         int // 0: rounds of 3 and of 5
	RecoveryBound time.Duration
	RoundSeed     uint64 // not 0: one round with this seed (a failed round's replay)
	Out           string // "" : a temporary directory
	Journal       string // "" : none
	Commit        string
}

// configFromEnv reads the knobs.
func configFromEnv(repo string) (Config, error) {
	c := Config{Soak: 5 * time.Minute, RecoveryBound: 30 * time.Second, Commit: gitCommit(repo)}
	if s := os.Getenv("CUTKV_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("CUTKV_SOAK=%q: want a positive duration such as 5m", s)
		}
		c.Soak = d
	}
	seed := firstSet("CUTKV_SEED", "SEED")
	switch {
	case seed != "":
		v, err := strconv.ParseUint(seed, 10, 64)
		if err != nil {
			return c, fmt.Errorf("seed %q: want an unsigned integer", seed)
		}
		c.Seed, c.SeedSource = v, "the environment"
	case c.Commit != "":
		b, _ := hex.DecodeString(c.Commit[:16])
		for _, x := range b {
			c.Seed = c.Seed<<8 | uint64(x)
		}
		c.SeedSource = "commit " + c.Commit[:12]
	default:
		c.Seed, c.SeedSource = rand.Uint64(), "random"
	}
	switch k := os.Getenv("CUTKV_CHAOS_KINDS"); k {
	case "":
		c.Kinds = pickKinds(c.Seed)
	case "all":
		c.Kinds = slices.Clone(AllKinds)
	default:
		for _, name := range strings.Split(k, ",") {
			kind := Kind(strings.TrimSpace(name))
			if !slices.Contains(AllKinds, kind) {
				return c, fmt.Errorf("CUTKV_CHAOS_KINDS: unknown kind %q (kinds: %v)", kind, AllKinds)
			}
			c.Kinds = append(c.Kinds, kind)
		}
	}
	if s := os.Getenv("CUTKV_CHAOS_NODES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || (n != 3 && n != 5) {
			return c, fmt.Errorf("CUTKV_CHAOS_NODES=%q: want 3 or 5", s)
		}
		c.Nodes = n
	}
	if s := os.Getenv("CUTKV_CHAOS_RECOVERY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("CUTKV_CHAOS_RECOVERY=%q: want a positive duration", s)
		}
		c.RecoveryBound = d
	}
	if s := os.Getenv("CUTKV_CHAOS_ROUND_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return c, fmt.Errorf("CUTKV_CHAOS_ROUND_SEED=%q: want an unsigned integer", s)
		}
		c.RoundSeed = v
	}
	c.Out = os.Getenv("CUTKV_CHAOS_OUT")
	switch j := os.Getenv("CUTKV_CHAOS_JOURNAL"); j {
	case "-":
	case "":
		c.Journal = repo + "/docs/reliability/journal.jsonl"
	default:
		c.Journal = j
	}
	return c, nil
}

func firstSet(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// gitCommit is the repository's HEAD, "" if unknown.
func gitCommit(repo string) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(out))
	if len(s) < 16 {
		return ""
	}
	return s
}

// pickKinds is the seed's choice of kinds: five of them, so that every
// kind runs across a few commits.
func pickKinds(seed uint64) []Kind {
	r := rand.New(rand.NewPCG(seed, 0xc4a05))
	ks := slices.Clone(AllKinds)
	r.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
	ks = ks[:5]
	slices.SortFunc(ks, func(a, b Kind) int { return slices.Index(AllKinds, a) - slices.Index(AllKinds, b) })
	return ks
}

// round is one cluster's share of a run.
type round struct {
	nodes int
	kinds []Kind
	soak  time.Duration // of faults and load, before the checks
	seed  uint64
}

// plan splits a run into rounds: one of 5 nodes when a kind needs five,
// one of 3 for the other kinds when the run is long enough for two.
func plan(c Config) []round {
	var five, any []Kind
	for _, k := range c.Kinds {
		if k.needs5() {
			five = append(five, k)
		} else {
			any = append(any, k)
		}
	}
	mk := func(n int, ks []Kind, share time.Duration, i uint64) round {
		if c.RoundSeed != 0 {
			return round{nodes: n, kinds: ks, soak: share, seed: c.RoundSeed}
		}
		return round{nodes: n, kinds: ks, soak: share, seed: c.Seed ^ (i * 0x9e3779b97f4a7c15)}
	}
	switch {
	case c.RoundSeed != 0 && c.Nodes == 0:
		n := 3
		if len(five) > 0 {
			n = 5
		}
		return []round{mk(n, c.Kinds, c.Soak, 1)}
	case c.Nodes == 3:
		return []round{mk(3, any, c.Soak, 1)}
	case c.Nodes == 5:
		return []round{mk(5, c.Kinds, c.Soak, 1)}
	case len(five) == 0 && c.Soak < 4*time.Minute:
		return []round{mk(3, any, c.Soak, 1)}
	case c.Soak < 4*time.Minute || len(any) == 0:
		return []round{mk(5, c.Kinds, c.Soak, 1)}
	}
	return []round{mk(3, any, c.Soak/2, 1), mk(5, append(five, any...), c.Soak/2, 2)}
}

// overrideRecovery sets the recovery bound from the -chaos.recovery flag;
// 0 (not given) keeps the environment's or the default.
func (c *Config) overrideRecovery(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("-chaos.recovery=%v: want a positive duration", d)
	}
	if d > 0 {
		c.RecoveryBound = d
	}
	return nil
}
