package actors

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/snapshot"
)

// A workload of short-lived participants: K tokens travel between hubs,
// each hop through a courier that a hub spawns for it, which hands the
// token on and stops. Thousands of participants come and go.

// churnToken is a token on its way; Hop numbers its hops.
type churnToken struct{ Hop int }

// churnStart makes a hub send off the tokens it holds.
type churnStart struct{}

// churn is the shared wiring of a churn workload, on one system or
// several (members of a cluster).
type churn struct {
	hubs     []*actor.PID
	names    int          // each hub's pool of courier names
	couriers atomic.Int64 // spawned so far
	reused   atomic.Int64 // of them, under the name of one that stopped
	park     atomic.Bool  // hubs keep the tokens that reach them
	parked   atomic.Int64
	allIn    chan struct{} // closed when every token is parked
	tokens   int64
	mu       sync.Mutex
	seeds    *rand.Rand // each courier's generator is seeded from it
}

func newChurn(names int, tokens int64, seed uint64) *churn {
	return &churn{names: names, tokens: tokens, allIn: make(chan struct{}), seeds: rand.New(rand.NewPCG(seed, 2))}
}

// register gives sys the kinds "hub", each holding held tokens at first,
// and "courier".
func (c *churn) register(sys *System, held int) error {
	if err := sys.RegisterKind("hub", func() actor.Actor { return &hub{Held: held, c: c, sys: sys} }); err != nil {
		return err
	}
	return sys.RegisterKind("courier", func() actor.Actor {
		c.mu.Lock()
		defer c.mu.Unlock()
		return &courier{c: c, rng: rand.New(rand.NewPCG(c.seeds.Uint64(), 0))}
	})
}

// hub forwards every token through a new courier of its system to a
// random hub, or keeps it once the workload parks. Held, the tokens it
// keeps, is its state.
type hub struct {
	Held    int
	c       *churn  `msgpack:"-"` // the test's harness
	sys     *System `msgpack:"-"` // its member's, which spawns its couriers
	spawned int     `msgpack:"-"` // names couriers: a restarted hub starts again
}

func (h *hub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *churnStart:
		for ; h.Held > 0; h.Held-- {
			h.pass(ctx, 0)
		}
	case *churnToken:
		if h.c.park.Load() {
			h.Held++
			if h.c.parked.Add(1) == h.c.tokens {
				close(h.c.allIn)
			}
			return
		}
		h.pass(ctx, m.Hop+1)
	}
}

// pass sends a token off through a new courier. Couriers take their names
// from a small pool per hub, so that names of stopped ones are given
// again once dropped; a name still taken or not yet dropped gives way to a new one.
func (h *hub) pass(ctx actor.Context, hop int) {
	h.c.couriers.Add(1)
	h.spawned++
	name := fmt.Sprintf("courier-%d", h.spawned%h.c.names)
	pid, err := ctx.SpawnNamed(h.sys.Props("courier"), name)
	switch {
	case err == nil && h.spawned > h.c.names:
		h.c.reused.Add(1)
	case errors.Is(err, ErrNameStopped) || errors.Is(err, actor.ErrNameExists):
		pid, err = ctx.SpawnNamed(h.sys.Props("courier"), fmt.Sprintf("courier-once-%d", h.spawned))
	}
	if err != nil {
		panic(err)
	}
	ctx.Send(pid, &churnToken{Hop: hop})
}

// courier hands its one token to a random hub and stops.
type courier struct {
	Stateless
	c   *churn
	rng *rand.Rand
}

func (k *courier) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*churnToken); ok {
		ctx.Send(k.c.hubs[k.rng.IntN(len(k.c.hubs))], m)
		ctx.Stop(ctx.Self())
	}
}

// held counts the tokens g holds: kept by hubs, and in flight; and the
// departed participants it lists.
func (c *churn) held(t *testing.T, g *snapshot.Global) (held int, departed []snapshot.ProcessID) {
	t.Helper()
	for _, p := range g.Participants {
		if p.Departed {
			departed = append(departed, p.ID)
			continue
		}
		if strings.HasPrefix(string(p.ID), "hub-") && !strings.Contains(string(p.ID), "/") { // not a courier
			var h struct{ Held int }
			require.NoError(t, msgpack.Unmarshal(p.State, &h))
			held += h.Held
		}
	}
	return held + g.TotalInFlight(), departed
}

// Participants that stopped long ago leave the snapshots: a complete
// snapshot that shows everything a stopped participant sent as received
// lets the guardian drop it, and the participants that exchanged messages
// with it forget its channels. Every snapshot still holds every token.
func TestStoppedParticipantsLeaveTheSnapshots(t *testing.T) {
	forModes(t, func(t *testing.T, mode Option) {
		const hubs, tokens = 8, 16
		sys, err := NewSystem(testMessages, mode, WithTimeout(testTimeout))
		require.NoError(t, err)
		defer shutdown(t, sys)
		c := newChurn(16, tokens, 1)
		require.NoError(t, c.register(sys, tokens/hubs))
		for i := range hubs {
			pid, err := sys.Spawn("hub", fmt.Sprintf("hub-%d", i))
			require.NoError(t, err)
			c.hubs = append(c.hubs, pid)
		}
		for _, pid := range c.hubs {
			sys.Root().Send(pid, &churnStart{})
		}

		// How many snapshots a departed courier stays in, on average:
		// without the drop, every one would stay in every later snapshot.
		ctx := context.Background()
		const rounds = 40
		appearances := 0
		for range rounds {
			g, err := sys.Snapshot(ctx)
			require.NoError(t, err)
			require.NoError(t, g.Verify())
			held, departed := c.held(t, g)
			require.Equal(t, tokens, held, "snapshot %d holds every token", g.ID)
			appearances += len(departed)
		}
		c.park.Store(true)
		waitFor(t, c.allIn)
		spawned := int(c.couriers.Load())
		require.Greater(t, spawned, 500, "the workload churned")
		mean := float64(appearances) / float64(spawned)
		t.Logf("%d couriers came and went, %d of them under the name of one before; a departed one stayed in %.2f snapshots on average", spawned, c.reused.Load(), mean)
		assert.Positive(t, c.reused.Load(), "names of dropped couriers are given again")
		assert.Less(t, mean, 3.0, "departed participants leave the snapshots (they would stay in about %d each)", rounds/2)

		// Parked, the couriers stop; a snapshot that shows them drained
		// lets them go. None is left a few snapshots later.
		var g *snapshot.Global
		for range 10 {
			g, err = sys.Snapshot(ctx)
			require.NoError(t, err)
			held, departed := c.held(t, g)
			require.Equal(t, tokens, held)
			if len(departed) == 0 && len(g.Participants) == hubs {
				break
			}
		}
		assert.Len(t, g.Participants, hubs, "only the hubs are left")
		// Nor is anything of them left in the registry: a dropped courier's
		// stopped entry (its sender key) goes with its name.
		sys.reg.mu.RLock()
		keys, live, stopped := len(sys.reg.byKey), len(sys.reg.byID), len(sys.reg.stopped)
		sys.reg.mu.RUnlock()
		assert.Equal(t, live+stopped, keys, "sender keys of %d live participants and %d stopped ones not yet dropped", live, stopped)
		assert.Equal(t, hubs, live)
		for _, ch := range g.Channels {
			assert.True(t, strings.HasPrefix(string(ch.Channel.From), "hub-") && strings.HasPrefix(string(ch.Channel.To), "hub-"), "channel %s", ch.Channel)
		}
	})
}

// A hurried start records the newest snapshot still running among those
// it was asked for: one aborted meanwhile leaves the older ones to it.
func TestNewestPending(t *testing.T) {
	r := &registry{}
	assert.Equal(t, snapshot.SnapshotID(6), r.newestPending(4, 6), "none started yet")
	r.mu.Lock()
	r.addPendingLocked(5)
	r.addPendingLocked(6)
	r.endPendingLocked(6) // aborted
	r.mu.Unlock()
	assert.Equal(t, snapshot.SnapshotID(5), r.newestPending(4, 6))
	assert.Equal(t, snapshot.SnapshotID(0), r.newestPending(5, 6), "5 recorded already")
	assert.Equal(t, snapshot.SnapshotID(7), r.newestPending(4, 7), "started elsewhere, not here yet")
	assert.Equal(t, snapshot.SnapshotID(0), r.newestPending(6, 6))
}
