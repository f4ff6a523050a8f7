package snapshot_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newCoordinator(t *testing.T, cfg snapshot.CoordinatorConfig) *snapshot.Coordinator {
	t.Helper()
	c, err := snapshot.NewCoordinator(cfg)
	require.NoError(t, err)
	return c
}

// one is the counts of a single channel.
func one(peer snapshot.ProcessID, n uint64) []snapshot.PeerCount {
	return []snapshot.PeerCount{pc(peer, n)}
}

// Rule: snapshots are numbered after the highest id used before (a
// store's, or a restored snapshot's), and a broadcast start goes to the
// participants live at the start.
func TestCoordinatorNumbersAfterAndBroadcasts(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{After: 41})
	id, err := c.Start(t0, ids("a", "b"), "")
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(42), id)
	rd := c.Ready()
	assert.Equal(t, []snapshot.Start{{Snapshot: 42, To: ids("a", "b")}}, rd.Starts)
	assert.False(t, c.HasReady(), "Ready hands each action over once")

	id, err = c.Start(t0, ids("a", "b"), "b")
	require.NoError(t, err)
	assert.Equal(t, []snapshot.Start{{Snapshot: id, Initiator: "b"}}, c.Ready().Starts)
	_, err = c.Start(t0, ids("a"), "b")
	require.NoError(t, err)
	assert.Equal(t, ids("a"), c.Ready().Starts[0].To, "an initiator not live makes it a broadcast")
	assert.Equal(t, []snapshot.SnapshotID{42, 43, 44}, c.Pending())
	oldest, ok := c.Oldest()
	assert.True(t, ok)
	assert.Equal(t, snapshot.SnapshotID(42), oldest)
}

// Rule: no id past 2^63-1 is given: the numbering never wraps around.
func TestCoordinatorIDsExhausted(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{After: 1<<63 - 2})
	_, err := c.Start(t0, ids("a"), "")
	require.NoError(t, err)
	_, err = c.Start(t0, ids("a"), "")
	require.ErrorIs(t, err, snapshot.ErrIDsExhausted)
}

// Rule: a snapshot is over once every participant's record is in and
// every channel balances; the outcome carries the Global to store.
func TestCoordinatorCompletes(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{})
	id, _ := c.Start(t0, ids("a", "b"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(id, "a", one("b", 0), nil)))
	assert.False(t, c.HasReady())
	require.NoError(t, c.Record(t0, rec(id, "b", nil, one("a", 0))))
	rd := c.Ready()
	require.Len(t, rd.Over, 1)
	require.NoError(t, rd.Over[0].Err)
	assert.Equal(t, id, rd.Over[0].Global.ID)
	assert.Empty(t, c.Pending())
	_, ok := c.Oldest()
	assert.False(t, ok, "none in progress")
	require.NoError(t, c.Record(t0, rec(id, "a", nil, nil)), "a record of a snapshot over is ignored")
}

// Rule: a snapshot not complete by its deadline aborts at the first tick
// past it, naming what it waited for.
func TestCoordinatorDeadline(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{Timeout: time.Second})
	id, _ := c.Start(t0, ids("a", "b"), "")
	c.Ready()
	c.Tick(t0.Add(999 * time.Millisecond))
	assert.False(t, c.HasReady())
	c.Tick(t0.Add(time.Second))
	rd := c.Ready()
	require.Len(t, rd.Over, 1)
	require.ErrorIs(t, rd.Over[0].Err, snapshot.ErrTimeout)
	assert.Contains(t, rd.Over[0].Err.Error(), "not recorded: a, b")
	assert.Equal(t, id, rd.Over[0].Snapshot)
}

// Rule: sweeps initiate a snapshot at every live participant whose record
// is missing, SweepAfter after the start and every SweepAfter after.
func TestCoordinatorSweeps(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{SweepAfter: time.Second})
	id, _ := c.Start(t0, ids("a", "b", "c"), "a")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(id, "a", nil, nil)))
	c.Tick(t0.Add(time.Second))
	assert.Equal(t, []snapshot.Initiate{{Snapshot: id, Process: "b"}, {Snapshot: id, Process: "c"}}, c.Ready().Initiates)
	c.Tick(t0.Add(1500 * time.Millisecond))
	assert.Empty(t, c.Ready().Initiates)
	c.Tick(t0.Add(2 * time.Second))
	assert.Len(t, c.Ready().Initiates, 2)
}

// Rule: a participant that stops before it records a snapshot stands in
// it with its final counters; one that recorded it and stops reports
// nothing more; a message on its way to it at the cut, lost with it,
// aborts the snapshot.
func TestCoordinatorStopped(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{})
	id, _ := c.Start(t0, ids("a", "b"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(id, "a", one("b", 2), nil)))
	require.NoError(t, c.Stopped(t0, "b", rec(0, "b", nil, one("a", 2)), nil, c.Last(), 0))
	rd := c.Ready()
	completeWithDeparted(t, rd, "b")

	// Recorded, then stopped with a message still on its way: lost.
	c = newCoordinator(t, snapshot.CoordinatorConfig{})
	id, _ = c.Start(t0, ids("a", "b"), "")
	require.NoError(t, c.Record(t0, rec(id, "a", one("b", 1), nil)))
	require.NoError(t, c.Record(t0, rec(id, "b", nil, one("a", 0))))
	err := c.Stopped(t0, "b", rec(0, "b", nil, one("a", 0)), []snapshot.SnapshotID{id}, c.Last(), 0)
	require.Error(t, err, "the run says the channel to b cannot balance")
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	var be *snapshot.BalanceError
	require.True(t, errors.As(rd.Over[0].Err, &be), "%v", rd.Over[0].Err)
	assert.Equal(t, snapshot.Channel{From: "a", To: "b"}, be.Channel)
}

// Rule: a child born before its parent's record is required by the run,
// and one whose stop came before its birth was heard of stands in with
// its final counters: the run does not wait for its record.
func TestCoordinatorRequireStopped(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{})
	id, _ := c.Start(t0, ids("a"), "")
	c.Ready()
	// The child c stopped (after receiving one message from a) before
	// the run heard it was born.
	require.NoError(t, c.Stopped(t0, "c", rec(0, "c", nil, one("a", 1)), nil, c.Last(), 0))
	c.Require(id, "c")
	require.NoError(t, c.Record(t0, rec(id, "a", one("c", 1), nil)))
	completeWithDeparted(t, c.Ready(), "c")
}

// completeWithDeparted checks that rd ends one snapshot, complete, with p
// standing in as departed.
func completeWithDeparted(t *testing.T, rd snapshot.CoordinatorReady, p snapshot.ProcessID) {
	t.Helper()
	require.Len(t, rd.Over, 1)
	require.NoError(t, rd.Over[0].Err)
	pt, ok := rd.Over[0].Global.Participant(p)
	require.True(t, ok)
	assert.True(t, pt.Departed)
}

// Rule: a stopped participant stands in every snapshot from its stop
// until a complete one started after the stop shows it drained; then, at
// the first moment no snapshot runs, it is dropped: its peers and those
// that sent to it since it stopped forget it, and later snapshots do not
// hold it.
func TestCoordinatorDropsDrained(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{})
	require.NoError(t, c.Stopped(t0, "b", rec(0, "b", one("a", 1), nil), nil, c.Last(), 0))
	c.SentTo("c", "b")
	first, _ := c.Start(t0, ids("a", "c"), "")
	second, _ := c.Start(t0, ids("a", "c"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(first, "a", nil, one("b", 1))))
	require.NoError(t, c.Record(t0, rec(first, "c", nil, nil)))
	rd := c.Ready()
	require.Len(t, rd.Over, 1)
	assert.Empty(t, rd.Drops, "not while a snapshot runs")
	require.NoError(t, c.Record(t0, rec(second, "a", nil, one("b", 1))))
	require.NoError(t, c.Record(t0, rec(second, "c", nil, nil)))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	assert.Equal(t, []snapshot.Drop{{Process: "b", Peers: ids("a", "c"), After: second}}, rd.Drops)

	third, _ := c.Start(t0, ids("a", "c"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(third, "a", nil, nil)))
	require.NoError(t, c.Record(t0, rec(third, "c", nil, nil)))
	g := c.Ready().Over[0].Global
	_, held := g.Participant("b")
	assert.False(t, held, "a dropped participant is in no later snapshot")
}

// Rule: a child that its parent's record names, dropped before the
// snapshot began, is left out (its parent had not heard it was gone);
// a child under its name given again, part of the snapshot already
// (born before the record), stays required.
func TestCoordinatorRequireChildDropped(t *testing.T) {
	for _, again := range []bool{false, true} {
		c := newCoordinator(t, snapshot.CoordinatorConfig{})
		require.NoError(t, c.Stopped(t0, "p/c", rec(0, "p/c", nil, nil), nil, c.Last(), 0))
		first, _ := c.Start(t0, ids("p"), "")
		c.Ready()
		require.NoError(t, c.Record(t0, rec(first, "p", nil, nil)))
		rd := c.Ready()
		require.Len(t, rd.Over, 1)
		require.Len(t, rd.Drops, 1, "p/c is dropped")

		second, _ := c.Start(t0, ids("p"), "")
		c.Ready()
		if again {
			c.Require(second, "p/c") // born again, before p's record
		}
		c.RequireChild(second, "p/c")
		require.NoError(t, c.Record(t0, rec(second, "p", nil, nil)))
		rd = c.Ready()
		if again {
			assert.Empty(t, rd.Over, "the new p/c is awaited")
			m, ok := c.Missing(second)
			require.True(t, ok)
			assert.Equal(t, ids("p/c"), m.Participants)
			continue
		}
		require.Len(t, rd.Over, 1)
		require.NoError(t, rd.Over[0].Err)
		_, held := rd.Over[0].Global.Participant("p/c")
		assert.False(t, held)
	}
	// Without the drop (a child not yet heard of) it is required, as
	// Require does.
	c := newCoordinator(t, snapshot.CoordinatorConfig{})
	id, _ := c.Start(t0, ids("p"), "")
	c.Ready()
	c.RequireChild(id, "p/c")
	require.NoError(t, c.Record(t0, rec(id, "p", nil, nil)))
	assert.Empty(t, c.Ready().Over, "p/c is awaited")
}

// Rule: a stop that comes after a round of drops its participant never
// took (it stopped first) stands in without the participants dropped in
// that round; one that took the round is taken as it is.
func TestCoordinatorLateStopForgetsRoundsNotTaken(t *testing.T) {
	for _, tookIt := range []bool{false, true} {
		c := newCoordinator(t, snapshot.CoordinatorConfig{})
		require.NoError(t, c.Stopped(t0, "b", rec(0, "b", one("a", 1), nil), nil, c.Last(), 0))
		first, _ := c.Start(t0, ids("a", "c"), "")
		c.Ready()
		require.NoError(t, c.Record(t0, rec(first, "a", nil, one("b", 1))))
		require.NoError(t, c.Record(t0, rec(first, "c", nil, nil)))
		rd := c.Ready()
		require.Len(t, rd.Over, 1)
		require.Equal(t, []snapshot.Drop{{Process: "b", Peers: ids("a"), After: first}}, rd.Drops)
		// a stopped before the round reached it, with b still among its
		// peers; its stop comes late, after the next snapshot began.
		c.Stopping("a")
		second, _ := c.Start(t0, ids("c"), "")
		c.Ready()
		require.NoError(t, c.Record(t0, rec(second, "c", nil, nil)))
		assert.Empty(t, c.Ready().Over, "a, stopped, is awaited")
		var took snapshot.SnapshotID
		if tookIt {
			took = first
		}
		require.NoError(t, c.Stopped(t0, "a", rec(0, "a", nil, one("b", 1)), nil, first, took))
		rd = c.Ready()
		if !tookIt {
			completeWithDeparted(t, rd, "a")
			_, held := rd.Over[0].Global.Participant("b")
			assert.False(t, held, "b was dropped in a round a never took")
		} else {
			// Having taken the round, a's final names a b given again,
			// which this snapshot does not know: it waits for it.
			assert.Empty(t, rd.Over)
		}
	}
}

// Rule: rounds of drops grow across coordinators. A coordinator that
// takes over starts its ids after every id before, and numbers its
// rounds by them: a stop that took the last round of the coordinator
// before, and comes late to this one, is struck the names this one
// dropped since; it is not taken as having taken them.
func TestCoordinatorRoundsGrowAcrossCoordinators(t *testing.T) {
	before := newCoordinator(t, snapshot.CoordinatorConfig{})
	require.NoError(t, before.Stopped(t0, "b", rec(0, "b", nil, nil), nil, before.Last(), 0))
	first, _ := before.Start(t0, ids("a", "c", "d"), "")
	before.Ready()
	for _, p := range ids("a", "c", "d") {
		require.NoError(t, before.Record(t0, rec(first, p, nil, nil)))
	}
	rd := before.Ready()
	require.Len(t, rd.Drops, 1)
	took := rd.Drops[0].After // the round; every participant took it

	c := newCoordinator(t, snapshot.CoordinatorConfig{After: before.Last()})
	require.NoError(t, c.Stopped(t0, "d", rec(0, "d", nil, one("a", 1)), nil, c.Last(), took))
	second, _ := c.Start(t0, ids("a", "c"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(second, "a", one("d", 1), nil)))
	require.NoError(t, c.Record(t0, rec(second, "c", nil, nil)))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	require.Len(t, rd.Drops, 1)
	assert.Greater(t, rd.Drops[0].After, took, "the round after a takeover follows the rounds before it")
	// a stopped before d's round reached it, with d among its peers.
	c.Stopping("a")
	third, _ := c.Start(t0, ids("c"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(third, "c", nil, nil)))
	require.NoError(t, c.Stopped(t0, "a", rec(0, "a", one("d", 1), nil), nil, second, took))
	rd = c.Ready()
	completeWithDeparted(t, rd, "a")
	_, held := rd.Over[0].Global.Participant("d")
	assert.False(t, held, "d was dropped in a round a never took")
}

// Rule: the names struck off a late stop's final are those dropped in
// the rounds it did not take, whether or not the coordinator named it
// among their peers: one that sent to a stopped participant after its
// stop (counted on the channel by its driver) forgets it too.
func TestCoordinatorLateStopForgetsSendsAfterAStop(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{})
	require.NoError(t, c.Stopped(t0, "b", rec(0, "b", nil, nil), nil, c.Last(), 0))
	first, _ := c.Start(t0, ids("a", "c"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(first, "a", nil, nil)))
	require.NoError(t, c.Record(t0, rec(first, "c", nil, nil)))
	rd := c.Ready()
	require.Len(t, rd.Over, 1)
	require.Equal(t, []snapshot.Drop{{Process: "b", After: first}}, rd.Drops, "b had no peers")
	// c sent to b after b stopped, then stopped itself before it took
	// the round that dropped b.
	c.Stopping("c")
	second, _ := c.Start(t0, ids("a"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(second, "a", nil, nil)))
	require.NoError(t, c.Stopped(t0, "c", rec(0, "c", one("b", 1), nil), nil, first, 0))
	rd = c.Ready()
	completeWithDeparted(t, rd, "c")
	_, held := rd.Over[0].Global.Participant("b")
	assert.False(t, held)
}

// Rule: a participant said to be stopping before a start takes part in
// that snapshot, which waits for its stop: a receiver's count of its
// messages would otherwise balance against its earlier records without
// it, in the Epochs mode.
func TestCoordinatorStoppingIsRequired(t *testing.T) {
	c, id := epochsAfterOneMessage(t)
	c.Stopping("a")
	next, _ := c.Start(t0, ids("b"), "")
	c.Ready()
	r := rec(next, "b", nil, one("a", 1))
	r.Prev = id
	require.NoError(t, c.Record(t0, r))
	assert.Empty(t, c.Ready().Over, "a's stop is on its way")
	final := rec(0, "a", one("b", 1), nil)
	final.Prev, final.Prior = id, []uint64{1}
	require.NoError(t, c.Stopped(t0, "a", final, nil, id, 0))
	completeWithDeparted(t, c.Ready(), "a")
}

// epochsAfterOneMessage returns a coordinator in the Epochs mode whose
// first snapshot, of a and b, is complete: a sent b one message, which b
// received before its record. Its Ledger holds their counters.
func epochsAfterOneMessage(t *testing.T) (*snapshot.Coordinator, snapshot.SnapshotID) {
	t.Helper()
	c := newCoordinator(t, snapshot.CoordinatorConfig{Mode: snapshot.Epochs})
	id, _ := c.Start(t0, ids("a", "b"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(id, "a", one("b", 1), nil)))
	require.NoError(t, c.Record(t0, rec(id, "b", nil, one("a", 1))))
	require.Len(t, c.Ready().Over, 1)
	return c, id
}

// Rule: a participant born while snapshots run takes part in each.
func TestCoordinatorJoin(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{})
	id, _ := c.Start(t0, ids("a"), "")
	c.Ready()
	assert.Equal(t, []snapshot.SnapshotID{id}, c.Join("n"))
	require.NoError(t, c.Record(t0, rec(id, "a", nil, nil)))
	assert.False(t, c.HasReady(), "the joined participant's record is awaited")
	require.NoError(t, c.Record(t0, rec(id, "n", nil, nil)))
	assert.Len(t, c.Ready().Over, 1)
}

// Rule (aligned mode): the awaited sets are handed out before the first
// start after the learned channels changed, without the back edges.
func TestCoordinatorAwaited(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{Learn: true})
	id, _ := c.Start(t0, ids("a", "b"), "")
	assert.Nil(t, c.Ready().Awaited, "nothing learned yet")
	require.NoError(t, c.Record(t0, rec(id, "a", one("b", 1), one("b", 1))))
	require.NoError(t, c.Record(t0, rec(id, "b", one("a", 1), one("a", 1))))
	c.Ready()
	next, _ := c.Start(t0, ids("a", "b"), "")
	rd := c.Ready()
	require.NotNil(t, rd.Awaited)
	assert.Equal(t, next, rd.Awaited.From)
	assert.Len(t, rd.Awaited.Sets, 1, "one of the two channels of the cycle is a back edge")
	_, _ = c.Start(t0, ids("a", "b"), "")
	assert.Nil(t, c.Ready().Awaited, "handed out once until the graph changes")
}

// Rule: an input carries the time, and a deadline is judged at it: an
// input past the deadline of a snapshot still pending aborts it, with no
// Tick in between, so a later record cannot complete it.
func TestCoordinatorDeadlineJudgedAtInput(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{Timeout: time.Second})
	id, _ := c.Start(t0, ids("a", "b"), "")
	c.Ready()
	require.NoError(t, c.Record(t0.Add(2*time.Second), rec(id, "a", nil, nil)))
	rd := c.Ready()
	require.Len(t, rd.Over, 1)
	require.ErrorIs(t, rd.Over[0].Err, snapshot.ErrTimeout)
	require.NoError(t, c.Record(t0.Add(2*time.Second), rec(id, "b", nil, nil)))
	assert.False(t, c.HasReady(), "over already")
}

// Rule: drops wait for a moment no snapshot runs; DropsWaiting says so,
// for a caller that holds starts back meanwhile.
func TestCoordinatorDropsWaiting(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{})
	require.NoError(t, c.Stopped(t0, "b", rec(0, "b", one("a", 1), nil), nil, c.Last(), 0))
	first, _ := c.Start(t0, ids("a"), "")
	second, _ := c.Start(t0, ids("a"), "")
	require.NoError(t, c.Record(t0, rec(first, "a", nil, one("b", 1))))
	assert.True(t, c.DropsWaiting(), "b is drained, but snapshot 2 runs")
	require.NoError(t, c.Record(t0, rec(second, "a", nil, one("b", 1))))
	assert.False(t, c.DropsWaiting())
	assert.Len(t, c.Ready().Drops, 1)
}

// Rule: in the Epochs mode, once every participant of a snapshot has
// recorded, the coordinator names, once, the receivers of the channels
// still owed messages (Ready.Recapture): those were all sent before
// their senders' records. A channel that balances names nobody.
func TestCoordinatorRecapture(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{Mode: snapshot.Epochs})
	id, _ := c.Start(t0, ids("a", "b", "c"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, rec(id, "b", nil, []snapshot.PeerCount{pc("a", 1), pc("c", 2)})))
	require.NoError(t, c.Record(t0, rec(id, "c", one("b", 2), nil)))
	assert.False(t, c.HasReady(), "a has not recorded")
	require.NoError(t, c.Record(t0, rec(id, "a", one("b", 3), nil)))
	rd := c.Ready()
	assert.Equal(t, ids("b"), rd.Recapture, "b is owed two messages from a; c->b balances")
	assert.Empty(t, rd.Over)

	require.NoError(t, c.Channel(t0, snapshot.ChannelRecord{Snapshot: id, Channel: snapshot.Channel{From: "a", To: "b"},
		Messages: []snapshot.Message{{Seq: 2}}}))
	assert.False(t, c.HasReady(), "named once")
	require.NoError(t, c.Channel(t0, snapshot.ChannelRecord{Snapshot: id, Channel: snapshot.Channel{From: "a", To: "b"},
		Messages: []snapshot.Message{{Seq: 3}}}))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	require.NoError(t, rd.Over[0].Err)
	assert.Empty(t, rd.Recapture)

	// Nothing owed when every participant recorded: nobody is named.
	// Each record lists every counter, and follows the last (Prev),
	// whose counts it gives (Prior).
	prev := id
	follow := func(r snapshot.LocalRecord, prior ...uint64) snapshot.LocalRecord {
		r.Prev, r.Prior = prev, prior
		return r
	}
	id, _ = c.Start(t0, ids("a", "b", "c"), "")
	c.Ready()
	require.NoError(t, c.Record(t0, follow(rec(id, "a", one("b", 3), nil), 3)))
	require.NoError(t, c.Record(t0, follow(rec(id, "c", one("b", 2), nil), 2)))
	require.NoError(t, c.Record(t0, follow(rec(id, "b", nil, []snapshot.PeerCount{pc("a", 3), pc("c", 2)}))))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	assert.Empty(t, rd.Recapture)
}

// Rule: Channels takes a receiver's recordings as one report: those of
// each snapshot go to its run, in order, and one run's error does not
// keep the recordings of another from theirs.
func TestCoordinatorChannels(t *testing.T) {
	c := newCoordinator(t, snapshot.CoordinatorConfig{Mode: snapshot.Epochs})
	first, _ := c.Start(t0, ids("a", "b", "c"), "")
	second, _ := c.Start(t0, ids("a", "b", "c"), "")
	c.Ready()
	// The second records follow the first (Prev), whose counts they
	// give (Prior): nothing was sent between.
	for i, id := range []snapshot.SnapshotID{first, second} {
		a, b, c3 := rec(id, "a", one("c", 2), nil), rec(id, "b", one("c", 1), nil), rec(id, "c", nil, nil)
		if i == 1 {
			a.Prev, a.Prior = first, []uint64{2}
			b.Prev, b.Prior = first, []uint64{1}
			c3.Prev = first
		}
		for _, r := range []snapshot.LocalRecord{a, b, c3} {
			require.NoError(t, c.Record(t0, r))
		}
	}
	msgs := func(seqs ...uint64) []snapshot.Message {
		var out []snapshot.Message
		for _, s := range seqs {
			out = append(out, snapshot.Message{Seq: s})
		}
		return out
	}
	ac := snapshot.Channel{From: "a", To: "c"}
	bc := snapshot.Channel{From: "b", To: "c"}
	err := c.Channels(t0, []snapshot.ChannelRecord{
		{Snapshot: first, Channel: ac, Messages: msgs(1)},
		{Snapshot: first, Channel: bc, Messages: msgs(1)},
		{Snapshot: first, Channel: ac, Messages: msgs(2)}, // a part that follows
		{Snapshot: second, Channel: ac, Messages: msgs(1)},
		{Snapshot: second, Channel: ac, Messages: msgs(3)}, // one missing
		{Snapshot: second, Channel: bc, Messages: msgs(1)},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 3 reported after 1")
	rd := c.Ready()
	require.Len(t, rd.Over, 2)
	require.Equal(t, first, rd.Over[0].Snapshot)
	require.NoError(t, rd.Over[0].Err)
	got, ok := rd.Over[0].Global.Channel(ac)
	require.True(t, ok)
	assert.Equal(t, msgs(1, 2), got.Messages)
	got, ok = rd.Over[0].Global.Channel(bc)
	require.True(t, ok)
	assert.Equal(t, msgs(1), got.Messages)
	assert.Equal(t, second, rd.Over[1].Snapshot)
	assert.ErrorIs(t, rd.Over[1].Err, snapshot.ErrProtocol)
}

// Rule: a record that cannot be handed on whole (Failed) aborts its own
// snapshot, and its counters reach the Ledger: the next record of its
// process follows it, and the next snapshot completes.
func TestCoordinatorFailedKeepsTheLedgerInStep(t *testing.T) {
	c, first := epochsAfterOneMessage(t)

	// a sent one more, then could not hand its record on.
	second, _ := c.Start(t0, ids("a", "b"), "")
	c.Ready()
	failed := rec(second, "a", one("b", 2), nil)
	failed.Prev, failed.Prior, failed.Changes = first, []uint64{1}, true
	reason := errors.New("state of a: not now")
	require.NoError(t, c.Failed(t0, &failed, reason))
	rd := c.Ready()
	require.Len(t, rd.Over, 1)
	assert.ErrorIs(t, rd.Over[0].Err, reason)
	assert.Empty(t, rd.Resync)
	assert.False(t, rd.ResyncAll)

	// Nothing changed at a since: its next record lists nothing, and
	// follows the failed one.
	third, _ := c.Start(t0, ids("a", "b"), "")
	c.Ready()
	next := rec(third, "a", nil, nil)
	next.Prev, next.Changes = second, true
	require.NoError(t, c.Record(t0, next))
	b := rec(third, "b", nil, nil)
	b.Prev, b.Changes, b.ReceivedTotal = first, true, 2
	require.NoError(t, c.Record(t0, b))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	require.NoError(t, rd.Over[0].Err)
}

// Rule: a recording that comes, in one report, after the one that
// completes its snapshot is left out, as it is when the recordings come
// one at a time: the run is over between them.
func TestCoordinatorChannelsStopAtCompletion(t *testing.T) {
	for _, batch := range []bool{false, true} {
		c := newCoordinator(t, snapshot.CoordinatorConfig{})
		id, _ := c.Start(t0, ids("a", "b"), "")
		c.Ready()
		require.NoError(t, c.Record(t0, rec(id, "a", one("b", 1), nil)))
		require.NoError(t, c.Record(t0, rec(id, "b", nil, nil)))
		ab := snapshot.ChannelRecord{Snapshot: id, Channel: snapshot.Channel{From: "a", To: "b"}, Messages: []snapshot.Message{{Seq: 1}}}
		crs := []snapshot.ChannelRecord{ab, ab} // the second would be a second recording of a->b
		if batch {
			require.NoError(t, c.Channels(t0, crs))
		} else {
			for _, cr := range crs {
				require.NoError(t, c.Channel(t0, cr))
			}
		}
		rd := c.Ready()
		require.Len(t, rd.Over, 1, "batch %v", batch)
		require.NoError(t, rd.Over[0].Err, "batch %v", batch)
	}
}
