package actors

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// sameContent compares two snapshots but for their ids and times. Of
// two counted differently (one in sums, numbering each channel's
// messages in flight from 1), it compares the messages in flight and not
// their numbers.
func sameContent(t *testing.T, want, got *snapshot.Global) {
	t.Helper()
	require.Equal(t, len(want.Participants), len(got.Participants))
	for i, p := range want.Participants {
		q := got.Participants[i]
		assert.Equal(t, p.ID, q.ID)
		assert.Equal(t, p.Kind, q.Kind)
		assert.Equal(t, p.State, q.State, "state of %s", p.ID)
	}
	require.Equal(t, len(want.Channels), len(got.Channels))
	for i, c := range want.Channels {
		d := got.Channels[i]
		assert.Equal(t, c.Channel, d.Channel)
		if (want.Sums == nil) != (got.Sums == nil) {
			require.Len(t, d.Messages, len(c.Messages), "in flight on %s", c.Channel)
			for j, m := range c.Messages {
				assert.Equal(t, m.Payload, d.Messages[j].Payload, "message %d in flight on %s", j, c.Channel)
			}
			continue
		}
		assert.Equal(t, c.Sent, d.Sent, "sent on %s", c.Channel)
		assert.Equal(t, c.Received, d.Received, "received on %s", c.Channel)
		assert.Equal(t, c.Messages, d.Messages, "in flight on %s", c.Channel)
	}
}

func TestRestoreTakesTheSameSnapshotFirst(t *testing.T) {
	forModes(t, func(t *testing.T, mode Option) {
		store := persistence.NewMemory()
		b := newBank(t, 200, 1000, 21, WithStore(store), mode)
		ctx := context.Background()
		var g *snapshot.Global
		for range 3 {
			var err error
			g, err = b.sys.Snapshot(ctx)
			require.NoError(t, err)
			b.check(t, g)
		}
		require.Positive(t, g.TotalInFlight())
		shutdown(t, b.sys)

		sys, err := Restore(ctx, store, g.ID, testMessages, WithTimeout(testTimeout), WithKind("account", func() actor.Actor {
			return &account{rng: rand.New(rand.NewPCG(1, 2)), paused: &b.paused, order: &b.order}
		}))
		require.NoError(t, err)
		defer shutdown(t, sys)

		first, err := store.Load(ctx, g.ID+1)
		require.NoError(t, err, "the restored system's first snapshot is stored")
		assert.Equal(t, g.Mode, sys.cfg.mode, "the restored system takes the snapshot's mode")
		sameContent(t, g, first)

		// The bank runs on from the restored state, money conserved.
		b.sys = sys
		b.pids = b.pids[:0]
		for _, id := range sys.Participants() {
			b.pids = append(b.pids, actor.NewPID(sys.ActorSystem().Address(), string(id)))
		}
		for i, pid := range b.pids {
			sys.Root().Send(pid, &peers{pids: []*actor.PID{b.pids[(i+1)%len(b.pids)], b.pids[(i+7)%len(b.pids)]}})
		}
		for _, pid := range b.pids {
			sys.Root().Send(pid, &kick{n: 1})
		}
		b.total = 200 * 1000
		for range 5 {
			next, err := sys.Snapshot(ctx)
			require.NoError(t, err)
			require.NoError(t, next.Verify())
			require.NoError(t, checkMoney(next, b.total))
			require.NoError(t, checkChannelsFromStates(next))
			assert.Greater(t, next.ID, first.ID)
		}
		require.NoError(t, b.order.err(), "the replay kept each channel's order")
	})
}

func checkMoney(g *snapshot.Global, total int64) error {
	return snapshotConservation(g, total)
}

func TestRestoreNeedsKinds(t *testing.T) {
	store := persistence.NewMemory()
	b := newBank(t, 5, 10, 1, WithStore(store))
	g, err := b.sys.Snapshot(context.Background())
	require.NoError(t, err)
	shutdown(t, b.sys)
	_, err = Restore(context.Background(), store, g.ID, testMessages)
	require.ErrorIs(t, err, ErrRestore)
	require.ErrorIs(t, err, ErrUnknownKind)
	_, err = Restore(context.Background(), store, 999, testMessages)
	require.ErrorIs(t, err, persistence.ErrNotFound)
}

// Restoring a snapshot older than the newest in the store numbers the
// restored system's snapshots after the newest: no id is reused.
func TestRestoreOlderSnapshot(t *testing.T) {
	store := persistence.NewMemory()
	b := newBank(t, 20, 100, 5, WithStore(store))
	ctx := context.Background()
	var ids []snapshot.SnapshotID
	for range 3 {
		g, err := b.sys.Snapshot(ctx)
		require.NoError(t, err)
		ids = append(ids, g.ID)
	}
	shutdown(t, b.sys)
	old, err := store.Load(ctx, ids[0])
	require.NoError(t, err)

	sys, err := Restore(ctx, store, ids[0], testMessages, WithTimeout(testTimeout), WithKind("account", func() actor.Actor {
		return &account{rng: rand.New(rand.NewPCG(1, 2)), paused: &b.paused, order: &b.order}
	}))
	require.NoError(t, err)
	defer shutdown(t, sys)
	first, err := store.Load(ctx, ids[2]+1)
	require.NoError(t, err, "numbered after the newest stored")
	sameContent(t, old, first)
	next, err := sys.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, ids[2]+2, next.ID)
}

// A restore brings back a departed participant as departed; the restored
// system drops it as the original would, and gives its name again.
func TestRestoreDropsDeparted(t *testing.T) {
	store := persistence.NewMemory()
	sys, pids, events := probes(t, 2, WithStore(store))
	sys.Root().Send(pids[0], &sendTo{to: pids[1], msg: &note{Text: "a"}})
	require.Equal(t, "a", waitFor(t, events))
	require.NoError(t, sys.Root().StopFuture(pids[0]).Wait())
	ctx := context.Background()
	g, err := sys.Snapshot(ctx)
	require.NoError(t, err)
	p0, ok := g.Participant("p0")
	require.True(t, ok)
	require.True(t, p0.Departed)
	shutdown(t, sys)

	restored, err := Restore(ctx, store, g.ID, testMessages, WithTimeout(testTimeout), WithKind("probe", func() actor.Actor { return &probe{} }))
	require.NoError(t, err)
	defer shutdown(t, restored)
	// The restored system's first snapshot, taken by Restore, is the
	// restored one, p0 departed; it shows p0 drained, so the next has no
	// p0 and the name is free.
	first, err := store.Load(ctx, g.ID+1)
	require.NoError(t, err)
	_, ok = first.Participant("p0")
	assert.True(t, ok)
	next, err := restored.Snapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, next.Verify())
	_, ok = next.Participant("p0")
	assert.False(t, ok)
	_, err = restored.Spawn("probe", "p0")
	require.NoError(t, err)
}

// A request caught in flight keeps its sender: after a restore, the
// receiver's Respond reaches the participant that asked.
func TestRequestInFlightKeepsItsSender(t *testing.T) {
	sys, pids, events, recorded := probesTraced(t, 2, WithStore(persistence.NewMemory()), WithInitiation(InOrder)) // the start read behind what is queued
	release := block(t, sys, pids[0])
	sys.Root().Send(pids[0], &requestTo{to: pids[1], msg: &ping{N: 1}}) // before p0 records
	pending := startAsync(sys)
	require.Equal(t, snapshot.ProcessID("p1"), waitFor(t, recorded))
	release()
	require.Equal(t, "pong 2", waitFor(t, events), "answered before the restore")
	r := waitFor(t, pending)
	require.NoError(t, r.err)
	g := r.global
	c, ok := g.Channel(snapshot.Channel{From: "p0", To: "p1"})
	require.True(t, ok)
	require.Len(t, c.Messages, 1, "the request is in flight at the cut")
	rm := c.Messages[0].Payload.(RecordedMessage)
	v, err := DecodeEnvelope(rm, testMessages)
	require.NoError(t, err)
	env, ok := v.(*actor.MessageEnvelope)
	require.True(t, ok, "%T", v)
	assert.Equal(t, "p0", env.Sender.Id)
	assert.Equal(t, &ping{N: 1}, env.Message)
	plain, err := DecodeMessage(rm, testMessages)
	require.NoError(t, err)
	assert.Equal(t, &ping{N: 1}, plain)
	typed, err := DecodeAs[*ping](rm)
	require.NoError(t, err)
	assert.Equal(t, 1, typed.N)
	require.NoError(t, CheckDecodes(g, testMessages, WithKind("probe", func() actor.Actor { return &probe{} })))
	store := sys.cfg.store
	shutdown(t, sys)

	restoredEvents := make(chan string, 10)
	restored, err := Restore(context.Background(), store, g.ID, testMessages, WithTimeout(testTimeout),
		WithKind("probe", func() actor.Actor { return &probe{events: restoredEvents} }))
	require.NoError(t, err)
	defer shutdown(t, restored)
	assert.Equal(t, "pong 2", waitFor(t, restoredEvents), "the replayed request is answered to p0")
}

// A restored child participant has its parent again: ctx.Parent() names
// it, as before the snapshot.
func TestRestoredChildKeepsItsParent(t *testing.T) {
	store := persistence.NewMemory()
	sys, pids, _ := probes(t, 1, WithStore(store))
	done := make(chan *actor.PID, 1)
	sys.Root().Send(pids[0], &spawnKid{name: "kid", done: done})
	kid := waitFor(t, done)
	parent := make(chan *actor.PID, 1)
	sys.Root().Send(kid, &askParent{reply: parent})
	require.Equal(t, "p0", waitFor(t, parent).Id)
	g, err := sys.Snapshot(context.Background())
	require.NoError(t, err)
	shutdown(t, sys)

	restored, err := Restore(context.Background(), store, g.ID, testMessages, WithTimeout(testTimeout),
		WithKind("probe", func() actor.Actor { return &probe{} }))
	require.NoError(t, err)
	defer shutdown(t, restored)
	restored.Root().Send(actor.NewPID(restored.ActorSystem().Address(), "p0/kid"), &askParent{reply: parent})
	got := waitFor(t, parent)
	require.NotNil(t, got, "the restored child has a parent")
	assert.Equal(t, "p0", got.Id)
}

// A snapshot keeps, in the file store, what proves it as it was counted:
// its sums counted in sums, its receiver counts per channel. A restore
// counts as the snapshot was unless told otherwise, and either way its
// snapshots, the first (the restored state) and those after, while the
// replayed transfers go round, check out.
func TestRestoreCountsAsTheSnapshotWas(t *testing.T) {
	for _, from := range []Counting{InSums, PerChannel} {
		t.Run(map[Counting]string{InSums: "from sums", PerChannel: "from per channel"}[from], func(t *testing.T) {
			restoreCounting(t, from)
		})
	}
}

func restoreCounting(t *testing.T, from Counting) {
	ctx := context.Background()
	store, err := persistence.Open(ctx, t.TempDir())
	require.NoError(t, err)
	b := newBank(t, 100, 1000, 17, WithStore(store), WithMode(snapshot.Epochs), WithCounting(from))
	var g *snapshot.Global
	for range 3 {
		g, err = b.sys.Snapshot(ctx)
		require.NoError(t, err)
		b.check(t, g)
	}
	require.Positive(t, g.TotalInFlight())
	shutdown(t, b.sys)
	stored, err := store.Load(ctx, g.ID)
	require.NoError(t, err)
	if from == InSums {
		require.NotNil(t, g.Sums)
		require.Equal(t, g.Sums, stored.Sums, "the store keeps the sums")
	} else {
		require.True(t, stored.ReceiverCounts, "the store keeps the receiver counts")
	}

	kind := WithKind("account", func() actor.Actor {
		return &account{rng: rand.New(rand.NewPCG(1, 2)), paused: &b.paused, order: &b.order}
	})
	for _, tc := range []struct {
		name string
		opts []Option
		sums bool
	}{
		{"as stored", nil, from == InSums},
		{"per channel", []Option{WithCounting(PerChannel)}, false},
		{"in sums", []Option{WithCounting(InSums)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, err := Restore(ctx, store, g.ID, append([]Option{testMessages, WithTimeout(testTimeout), kind}, tc.opts...)...)
			require.NoError(t, err)
			defer shutdown(t, sys)
			assert.Equal(t, tc.sums, sys.cfg.sums())
			var shots []*snapshot.Global
			for range 3 {
				next, err := sys.Snapshot(ctx)
				require.NoError(t, err)
				shots = append(shots, next)
			}
			first, err := store.Load(ctx, shots[0].ID-1)
			require.NoError(t, err)
			sameContent(t, g, first)
			for _, s := range append([]*snapshot.Global{first}, shots...) {
				require.NoError(t, s.Verify())
				assert.Equal(t, tc.sums, s.Sums != nil, "snapshot %d counted in sums", s.ID)
				assert.Equal(t, !tc.sums, s.ReceiverCounts, "snapshot %d counted per channel", s.ID)
				require.NoError(t, checkMoney(s, b.total))
				require.NoError(t, checkChannelsFromStates(s))
			}
			require.NoError(t, b.order.err(), "the replay kept each channel's order")
		})
	}
}
