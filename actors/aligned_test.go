package actors

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/snapshot"
)

// seenBy decodes a probe's state in g.
func seenBy(t *testing.T, g *snapshot.Global, id snapshot.ProcessID) []string {
	t.Helper()
	p, ok := g.Participant(id)
	require.True(t, ok, "participant %s", id)
	var pr probe
	require.NoError(t, msgpack.Unmarshal(p.State, &pr))
	return pr.Seen
}

// alignedFixture is four probes: p0 and p1 feed p2; p3 is apart. A first
// snapshot shows the guardian the channels p0->p2 and p1->p2, so that p2
// waits for both from the second on.
func alignedFixture(t *testing.T, opts ...Option) (*System, []string, chan string, func() (pending <-chan result, releaseP1 func())) {
	t.Helper()
	sys, pids, events, recorded := probesTraced(t, 4, append([]Option{WithMode(snapshot.Aligned)}, opts...)...)
	sys.Root().Send(pids[0], &sendTo{to: pids[2], msg: &note{Text: "from p0"}})
	sys.Root().Send(pids[1], &sendTo{to: pids[2], msg: &note{Text: "from p1"}})
	got := []string{waitFor(t, events), waitFor(t, events)}
	assert.ElementsMatch(t, []string{"from p0", "from p1"}, got)
	_, err := sys.Snapshot(context.Background())
	require.NoError(t, err)
	for len(recorded) > 0 {
		<-recorded
	}

	// The second snapshot: p1 is held in a handler, so p2 waits for its
	// barrier; p0 records, and its barrier pauses it at p2. p0 then sends
	// "after" to p2 (behind its barrier) and "p0 done" to p3.
	second := func() (<-chan result, func()) {
		release := block(t, sys, pids[1])
		pending := startAsync(sys)
		for waitFor(t, recorded) != "p0" {
		}
		sys.Root().Send(pids[0], &sendTo{to: pids[2], msg: &note{Text: "after"}})
		deliverNote(t, sys, events, pids[0], pids[3], "p0 done")
		// Others keep flowing to p2 while p0 is paused there.
		sys.Root().Send(pids[2], &note{Text: "external"})
		require.Equal(t, "external", waitFor(t, events))
		return pending, release
	}
	names := []string{"p0", "p1", "p2", "p3"}
	return sys, names, events, second
}

// A paused sender's messages wait for the record, while other senders'
// flow; the snapshot holds no channel state off back edges.
func TestAlignedPausesSenderUntilRecord(t *testing.T) {
	sys, _, events, second := alignedFixture(t)
	defer shutdown(t, sys)
	pending, release := second()
	release()
	r := waitFor(t, pending)
	require.NoError(t, r.err)
	assert.Equal(t, "after", waitFor(t, events), "delivered once p2 recorded")
	g := r.global
	require.NoError(t, g.Verify())
	assert.Equal(t, snapshot.Aligned, g.Mode)
	seen := seenBy(t, g, "p2")
	assert.ElementsMatch(t, []string{"from p0", "from p1", "external"}, seen, "p2 recorded without the message behind p0's barrier")
	assert.Zero(t, g.TotalInFlight())
}

// An aborted aligned snapshot unblocks what it blocked.
func TestAlignedAbortUnblocks(t *testing.T) {
	clk := newManualClock()
	sys, _, events, second := alignedFixture(t, WithTimeout(time.Minute), withClock(clk))
	defer shutdown(t, sys)
	pending, release := second()
	defer release()
	clk.waitArmed(t, time.Minute) // the second snapshot's deadline
	// The records of p0 and p3 reach the guardian as messages: the
	// deadline comes after them.
	waitMissing(t, sys, 2, "p1", "p2")
	clk.Advance(time.Minute)
	r := waitFor(t, pending)
	require.ErrorIs(t, r.err, snapshot.ErrTimeout)
	assert.Contains(t, r.err.Error(), "aligned barriers still awaited on p1->p2")
	assert.Contains(t, r.err.Error(), "senders held: p0->p2")
	assert.Equal(t, "after", waitFor(t, events), "p0 resumed at p2 after the abort, while p1 is still held")
}

// Messages held for a sender paused behind its barrier count against
// WithMaxRecorded (docs/design.md, decision 8), even when the paused sender's are
// the only ones coming: past the budget the aligned snapshot is aborted
// and the sender resumed, its messages delivered in order.
func TestAlignedHeldMessagesCountAgainstBudget(t *testing.T) {
	sys, _, events, second := alignedFixture(t, WithMaxRecorded(3))
	defer shutdown(t, sys)
	pending, release := second() // p0 paused at p2, "after" held
	defer release()
	pid := func(name string) *actor.PID { return actor.NewPID(sys.ActorSystem().Address(), name) }
	for i := range 4 {
		sys.Root().Send(pid("p0"), &sendTo{to: pid("p2"), msg: &note{Text: fmt.Sprintf("flood %d", i)}})
	}
	r := waitFor(t, pending)
	require.ErrorIs(t, r.err, ErrOverBudget)
	assert.Contains(t, r.err.Error(), "p2 holds")
	assert.Contains(t, r.err.Error(), "above 3 (WithMaxRecorded)")
	got := []string{waitFor(t, events)}
	for range 4 {
		got = append(got, waitFor(t, events))
	}
	assert.Equal(t, []string{"after", "flood 0", "flood 1", "flood 2", "flood 3"}, got, "p0 resumed at p2, in order, while p1 is still held")
	release()
	g, err := sys.Snapshot(context.Background())
	require.NoError(t, err)
	require.NoError(t, g.Verify())
}

// A participant that stops while it holds a sender paused, with more of
// that sender's messages posted to it but not yet sorted, holds nothing
// for any snapshot any more: its part of WithMaxRecorded's count leaves
// with it, and what its mailbox sorts afterwards is not counted again
// (the shutdown helper checks the count is zero).
func TestStoppedAlignedParticipantLeavesNothingCounted(t *testing.T) {
	sys, _, events, second := alignedFixture(t)
	defer shutdown(t, sys)
	pending, releaseP1 := second() // p0 paused at p2, "after" held
	defer releaseP1()
	pid := func(name string) *actor.PID { return actor.NewPID(sys.ActorSystem().Address(), name) }
	releaseP2 := block(t, sys, pid("p2"))
	defer releaseP2()
	for i := range 5 {
		sys.Root().Send(pid("p0"), &sendTo{to: pid("p2"), msg: &note{Text: fmt.Sprintf("flood %d", i)}})
	}
	sys.Root().Send(pid("p0"), &sendTo{to: pid("p3"), msg: &note{Text: "p0 flooded"}})
	for waitFor(t, events) != "p0 flooded" {
	}
	stopped := sys.Root().StopFuture(pid("p2"))
	releaseP2()
	require.NoError(t, stopped.Wait())
	releaseP1()
	waitFor(t, pending)
}

// Without the back-edge search, a ring whose back edge is not declared
// makes its participants wait for each other: the snapshot times out with
// a reason naming the channels; declaring the back edge mends it.
func TestAlignedMissingBackEdgeTimesOut(t *testing.T) {
	// A clock that moves only when told: no deadline cuts the snapshots
	// short but the one the test runs out.
	ring := func(t *testing.T, clk *manualClock, opts ...Option) *System {
		sys, pids, events := probes(t, 3, append([]Option{WithMode(snapshot.Aligned), WithBackEdgeSearch(nil), WithTimeout(time.Minute), withClock(clk)}, opts...)...)
		for i := range 3 {
			sys.Root().Send(pids[i], &sendTo{to: pids[(i+1)%3], msg: &note{Text: "hi"}})
		}
		for range 3 {
			waitFor(t, events)
		}
		_, err := sys.Snapshot(context.Background()) // shows the guardian the ring
		require.NoError(t, err)
		return sys
	}
	t.Run("missing", func(t *testing.T) {
		clk := newManualClock()
		sys := ring(t, clk)
		defer shutdown(t, sys)
		pending := startAsync(sys)
		clk.waitArmed(t, time.Minute) // its deadline
		clk.Advance(time.Minute)
		err := waitFor(t, pending).err
		require.ErrorIs(t, err, snapshot.ErrTimeout)
		assert.Contains(t, err.Error(), "aligned barriers still awaited on p0->p1, p1->p2, p2->p0")
	})
	t.Run("declared", func(t *testing.T) {
		sys := ring(t, newManualClock(), WithBackEdges(snapshot.Channel{From: "p2", To: "p0"}))
		defer shutdown(t, sys)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for range 3 {
			g, err := sys.Snapshot(ctx) // fails rather than hangs if it stalls
			require.NoError(t, err)
			require.NoError(t, g.Verify())
		}
	})
}

func TestAlignedOptions(t *testing.T) {
	_, err := NewSystem(testMessages, WithBackEdges(snapshot.Channel{From: "a"}))
	require.ErrorIs(t, err, ErrConfig)
	_, err = NewSystem(testMessages, WithMode(snapshot.Mode(9)))
	require.ErrorIs(t, err, ErrConfig)
}

// A participant that crashes while it holds a sender paused: the
// snapshot is aborted, and the sender's held message reaches the
// restarted actor.
func TestAlignedCrashWhilePausedResumes(t *testing.T) {
	sys, _, events, second := alignedFixture(t)
	defer shutdown(t, sys)
	pending, release := second()
	defer release()
	sys.Root().Send(actor.NewPID(sys.ActorSystem().Address(), "p2"), &boom{})
	r := waitFor(t, pending)
	require.ErrorIs(t, r.err, ErrParticipantRestarted)
	assert.Contains(t, r.err.Error(), "p2")
	assert.Equal(t, "after", waitFor(t, events), "p0 resumed at the restarted p2")
	release()
	g, err := sys.Snapshot(context.Background())
	require.NoError(t, err)
	require.NoError(t, g.Verify())
}

// The first message of a new channel, from a sender that has recorded
// the snapshot its receiver is aligning, stands for that sender's
// barrier: it is held (not delivered, not counted) until the receiver
// records, then delivered before anything else from that sender.
func TestAlignedHoldsFirstMessageOfNewChannel(t *testing.T) {
	sys, _, events, second := alignedFixture(t)
	defer shutdown(t, sys)
	pending, release := second() // p2 aligns, waiting for p1; p3 has recorded
	defer release()
	pid := func(name string) *actor.PID { return actor.NewPID(sys.ActorSystem().Address(), name) }
	sys.Root().Send(pid("p3"), &sendTo{to: pid("p2"), msg: &note{Text: "from p3"}})
	sys.Root().Send(pid("p3"), &sendTo{to: pid("p2"), msg: &note{Text: "from p3 again"}})
	sys.Root().Send(pid("p3"), &sendTo{to: pid("p3"), msg: &note{Text: "p3 sent"}})
	require.Equal(t, "p3 sent", waitFor(t, events))
	release()
	r := waitFor(t, pending)
	require.NoError(t, r.err)
	got := []string{waitFor(t, events), waitFor(t, events), waitFor(t, events)}
	assert.ElementsMatch(t, []string{"after", "from p3", "from p3 again"}, got)
	assert.Less(t, slices.Index(got, "from p3"), slices.Index(got, "from p3 again"), "the held message goes first")
	g := r.global
	require.NoError(t, g.Verify())
	assert.NotContains(t, seenBy(t, g, "p2"), "from p3")
	assert.Zero(t, g.TotalInFlight(), "no channel state: p2 recorded when p1's barrier came")
}
