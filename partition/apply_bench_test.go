package partition

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cutkv/cutkv/engine"
	"github.com/cutkv/cutkv/proto/internalpb"
)

// BenchmarkApplyPut applies one put per entry, as the apply loop and a
// restart's WAL replay do, to random keys of a keyspace of 100,000 (256 B
// values), in memory and on Pebble.
func BenchmarkApplyPut(b *testing.B) {
	const keys = 100_000
	value := make([]byte, 256)
	cmds := make([]*internalpb.Command, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range cmds {
		cmds[i] = &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: fmt.Appendf(nil, "key-%08d", rng.IntN(keys)), Value: value}}}
	}
	run := func(b *testing.B, p *Partition) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := p.ApplyCommand(uint64(i+1), cmds[i%len(cmds)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, New(1)) })
	b.Run("pebble", func(b *testing.B) {
		env, err := engine.NewEnv(engine.EnvConfig{CacheSize: 64 << 20, FS: vfs.Default})
		if err != nil {
			b.Fatal(err)
		}
		defer env.Close()
		p, err := Open(env, b.TempDir(), 1)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		run(b, p)
	})
}
