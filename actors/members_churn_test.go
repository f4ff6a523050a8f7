package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// startChurnCluster starts three members whose hubs, placed over them,
// pass tokens through couriers (actors.Churn): each courier lives on its
// hub's member and hands its token to a hub on any member. Names of
// dropped couriers are given again while the other members' participants
// still hold channels with the ones before.
func startChurnCluster(t *testing.T, hubs, tokens int, opts ...actors.Option) ([]*actors.System, *actors.Churn) {
	t.Helper()
	net := &memNet{}
	var members []*memMember
	for i := range 3 {
		members = append(members, net.add(fmt.Sprintf("m%d", i)))
	}
	w := actors.NewChurn(8, tokens, 3)
	var pids []*actor.PID
	for i := range hubs {
		name := fmt.Sprintf("hub-%d", i)
		pids = append(pids, actor.NewPID(members[0].Owner(name), name))
	}
	w.SetHubs(pids)
	store := persistence.NewMemory()
	var systems []*actors.System
	for _, m := range members {
		o := append([]actors.Option{actors.ChurnMessages, actors.WithStore(store), actors.WithTransport(m), actors.WithTimeout(5 * time.Second)}, opts...)
		sys, err := actors.NewSystem(o...)
		require.NoError(t, err)
		require.NoError(t, w.Register(sys, tokens/hubs))
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
		for _, pid := range pids {
			if pid.Address == m.addr {
				_, err := systems[i].Spawn("hub", pid.Id)
				require.NoError(t, err)
			}
		}
	}
	eventually(t, "every hub reachable from every member", func() bool {
		for _, sys := range systems {
			for _, pid := range pids {
				if !sys.Reachable(pid.Id) {
					return false
				}
			}
		}
		return true
	})
	for _, pid := range pids {
		systems[0].Root().Send(pid, w.Start())
	}
	return systems, w
}

// Couriers come and go on every member while snapshots are taken from
// every member in turn; names of dropped couriers are given again. Every
// snapshot holds every token.
func TestStoppedParticipantsAcrossMembers(t *testing.T) {
	forModesAndInitiations(t, func(t *testing.T, mode snapshot.Mode, init actors.Initiation) {
		const hubs, tokens = 6, 12
		systems, w := startChurnCluster(t, hubs, tokens, actors.WithMode(mode), actors.WithInitiation(init))
		for i := range 30 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			g, err := systems[i%3].Snapshot(ctx)
			cancel()
			require.NoError(t, err)
			require.NoError(t, g.Verify())
			require.Equal(t, tokens, w.Held(t, g), "snapshot %d holds every token", g.ID)
		}
		spawned, reused := w.Couriers()
		t.Logf("%d couriers came and went, %d under the name of one before", spawned, reused)
		assert.Positive(t, reused, "names of dropped couriers are given again")
	})
}
