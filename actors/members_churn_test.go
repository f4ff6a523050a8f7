package actors_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Short-lived participants across members: tokens travel between hubs
// placed on three members, each hop through a courier its hub spawns
// (on the hub's member) from a small pool of names, which hands the token
// to a hub on any member and stops. Names of dropped couriers are given
// again while the other members' participants still hold channels with
// the ones before.

// xToken is a token on its way between hubs.
type xToken struct{ Hop int }

// xChurn is the wiring the hubs and couriers of every member share.
type xChurn struct {
	hubs     []*actor.PID
	couriers atomic.Int64
	reused   atomic.Int64
	names    int // each hub's pool of courier names
	mu       sync.Mutex
	seeds    *rand.Rand
}

// rng returns a courier's own generator, seeded from the shared one.
func (c *xChurn) rng() *rand.Rand {
	c.mu.Lock()
	defer c.mu.Unlock()
	return rand.New(rand.NewPCG(c.seeds.Uint64(), 0))
}

// xStart makes a hub send off the tokens it holds.
type xStart struct{}

// xHub sends every token it gets on through a new courier of its member;
// Held is what it holds and has not sent off yet.
type xHub struct {
	Held    int
	c       *xChurn        `msgpack:"-"`
	sys     *actors.System `msgpack:"-"`
	spawned int            `msgpack:"-"`
}

func (h *xHub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *xStart:
		for ; h.Held > 0; h.Held-- {
			h.pass(ctx, 0)
		}
	case *xToken:
		h.pass(ctx, m.Hop+1)
	}
}

// pass sends a token off through a courier named from the hub's pool: a
// name still taken, or not yet dropped, gives way to one used once.
func (h *xHub) pass(ctx actor.Context, hop int) {
	h.c.couriers.Add(1)
	h.spawned++
	pid, err := ctx.SpawnNamed(h.sys.Props("courier"), fmt.Sprintf("courier-%d", h.spawned%h.c.names))
	switch {
	case err == nil && h.spawned > h.c.names:
		h.c.reused.Add(1)
	case errors.Is(err, actors.ErrNameStopped) || errors.Is(err, actor.ErrNameExists):
		pid, err = ctx.SpawnNamed(h.sys.Props("courier"), fmt.Sprintf("courier-once-%d", h.spawned))
	}
	if err != nil {
		panic(err)
	}
	ctx.Send(pid, &xToken{Hop: hop})
}

// xCourier hands its token to a random hub and stops.
type xCourier struct {
	actors.Stateless
	c   *xChurn
	rng *rand.Rand
}

func (k *xCourier) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*xToken); ok {
		ctx.Send(k.c.hubs[k.rng.IntN(len(k.c.hubs))], m)
		ctx.Stop(ctx.Self())
	}
}

// startChurnCluster starts three members whose hubs pass tokens through
// couriers to each other.
func startChurnCluster(t *testing.T, hubs, tokens int, opts ...actors.Option) (*memNet, []*actors.System, *xChurn) {
	t.Helper()
	net := &memNet{}
	var members []*memMember
	for i := range 3 {
		members = append(members, net.add(fmt.Sprintf("m%d", i)))
	}
	c := &xChurn{names: 8, seeds: rand.New(rand.NewPCG(3, 4))}
	for i := range hubs {
		name := fmt.Sprintf("hub-%d", i)
		c.hubs = append(c.hubs, actor.NewPID(members[0].Owner(name), name))
	}
	store := persistence.NewMemory()
	var systems []*actors.System
	for _, m := range members {
		o := append([]actors.Option{actors.WithMessage[*xToken]("test.xchurn.token"), actors.WithMessage[*xStart]("test.xchurn.start"),
			actors.WithStore(store), actors.WithTransport(m), actors.WithTimeout(5 * time.Second)}, opts...)
		sys, err := actors.NewSystem(o...)
		require.NoError(t, err)
		require.NoError(t, sys.RegisterKind("hub", func() actor.Actor { return &xHub{Held: tokens / hubs, c: c, sys: sys} }))
		require.NoError(t, sys.RegisterKind("courier", func() actor.Actor { return &xCourier{c: c, rng: c.rng()} }))
		systems = append(systems, sys)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := len(systems) - 1; i >= 0; i-- {
			require.NoError(t, systems[i].Shutdown(ctx))
		}
	})
	for _, sys := range systems {
		sys.MembersChanged()
	}
	for i, m := range members {
		for _, pid := range c.hubs {
			if pid.Address == m.addr {
				_, err := systems[i].Spawn("hub", pid.Id)
				require.NoError(t, err)
			}
		}
	}
	eventually(t, "every hub reachable from every member", func() bool {
		for _, sys := range systems {
			for _, pid := range c.hubs {
				if !sys.Reachable(pid.Id) {
					return false
				}
			}
		}
		return true
	})
	for _, pid := range c.hubs {
		systems[0].Root().Send(pid, &xStart{})
	}
	return net, systems, c
}

// xHeld counts the tokens g holds: kept by hubs, and in flight.
func xHeld(t *testing.T, g *snapshot.Global) int {
	t.Helper()
	held := 0
	for _, p := range g.Participants {
		if strings.HasPrefix(string(p.ID), "hub-") && !strings.Contains(string(p.ID), "/") && !p.Departed {
			var h struct{ Held int }
			require.NoError(t, msgpack.Unmarshal(p.State, &h))
			held += h.Held
		}
	}
	return held + g.TotalInFlight()
}

// Couriers come and go on every member while snapshots are taken from
// every member in turn; names of dropped couriers are given again. Every
// snapshot holds every token.
func TestStoppedParticipantsAcrossMembers(t *testing.T) {
	for _, mode := range []snapshot.Mode{snapshot.Unaligned, snapshot.Aligned, snapshot.Epochs} {
		inits := []actors.Initiation{actors.Broadcast, actors.Flooding}
		if mode == snapshot.Epochs {
			inits = append(inits, actors.Lazy)
		}
		for _, init := range inits {
			t.Run(fmt.Sprintf("%s/initiation=%d", mode, init), func(t *testing.T) {
				const hubs, tokens = 6, 12
				_, systems, c := startChurnCluster(t, hubs, tokens, actors.WithMode(mode), actors.WithInitiation(init))
				for i := range 30 {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					g, err := systems[i%3].Snapshot(ctx)
					cancel()
					require.NoError(t, err)
					require.NoError(t, g.Verify())
					require.Equal(t, tokens, xHeld(t, g), "snapshot %d holds every token", g.ID)
				}
				t.Logf("%d couriers came and went, %d under the name of one before", c.couriers.Load(), c.reused.Load())
				assert.Positive(t, c.reused.Load(), "names of dropped couriers are given again")
			})
		}
	}
}
