package actors_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// tally is a small restorable actor.
type tally struct{ N int64 }

type bump struct{ By int64 }

func (t *tally) Receive(ctx actor.Context) {
	if b, ok := ctx.Message().(*bump); ok {
		t.N += b.By
	}
}

// ringSnapshot is a stored snapshot of n tallies on a ring, with one
// message in flight on every tenth channel.
func ringSnapshot(b *testing.B, n int) *snapshot.Global {
	state, _ := msgpack.Marshal(&tally{N: 42})
	data, _ := msgpack.Marshal(&bump{By: 1})
	g := &snapshot.Global{ID: 7}
	name := func(i int) snapshot.ProcessID { return snapshot.ProcessID(fmt.Sprintf("t%07d", i)) }
	for i := range n {
		g.Participants = append(g.Participants, snapshot.Participant{ID: name(i), Kind: "tally", State: state})
		c := snapshot.ChannelState{Channel: snapshot.Channel{From: name(i), To: name((i + 1) % n)}, Sent: 5, Received: 5}
		if i%10 == 0 {
			c.Received = 4
			c.Messages = []snapshot.Message{{Seq: 5, Payload: persistence.RecordedMessage{Type: "bench.bump", Data: data}}}
		}
		g.Channels = append(g.Channels, c)
	}
	// Sorted by construction: names are zero-padded, channels by sender.
	if err := g.Verify(); err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkRestore measures actors.Restore of n small actors: load, respawn
// with state, replay, and the restored system's first snapshot, complete
// and stored (ns/op is one whole restore).
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("actors=%d", n), func(b *testing.B) {
			g := ringSnapshot(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				store := persistence.NewMemory()
				if err := store.Save(ctx, g); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				sys, err := actors.Restore(ctx, store, g.ID, append([]actors.Option{actors.WithKind("tally", func() actor.Actor { return &tally{} })}, benchMessages...)...)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := sys.Shutdown(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
