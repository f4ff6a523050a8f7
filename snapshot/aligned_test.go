package snapshot_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

func newAligned(t *testing.T, id snapshot.ProcessID, out, in, back []snapshot.ProcessID) *snapshot.Process {
	t.Helper()
	p, err := snapshot.NewProcess(snapshot.Config{ID: id, Mode: snapshot.Aligned, Outgoing: out, Incoming: in, BackEdges: back})
	require.NoError(t, err)
	return p
}

func stamp(p *snapshot.Process, from snapshot.ProcessID) snapshot.Stamp {
	return snapshot.Stamp{Seq: p.Received(from) + 1}
}

// Rule: the first barrier on a channel blocks it; the process records once
// barriers came on every input, with empty channel state, forwards
// barriers and unblocks.
func TestRuleAlignedBarrierBlocksUntilAligned(t *testing.T) {
	p := newAligned(t, "c", ids("d"), ids("a", "b"), nil)
	require.NoError(t, p.Receive("b", stamp(p, "b"), "b1"))
	require.NoError(t, p.Marker("a", 1))
	rd := take(p)
	assert.Empty(t, rd.Records, "still awaiting b")
	assert.Equal(t, ids("a"), rd.Pause)
	id, awaiting := p.Awaiting()
	assert.Equal(t, snapshot.SnapshotID(1), id)
	assert.Equal(t, ids("b"), awaiting)

	err := p.Receive("a", snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{1}}, "a1")
	assert.ErrorIs(t, err, snapshot.ErrProtocol, "a message on a blocked channel is refused")

	require.NoError(t, p.Receive("b", stamp(p, "b"), "b2"))
	require.NoError(t, p.Marker("b", 1))
	rd = take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "a", N: 0}, {Peer: "b", N: 2}}, rd.Records[0].Received)
	assert.Equal(t, []snapshot.MarkerSend{{Snapshot: 1, To: "d"}}, rd.Markers)
	assert.Equal(t, ids("a"), rd.Resume, "b was blocked and unblocked in one step: only a is resumed")
	assert.Empty(t, rd.Pause)
	assert.Empty(t, rd.Channels, "no channel state off back edges")
	assert.Equal(t, []snapshot.SnapshotID{1}, rd.Finished)
	assert.Empty(t, p.Blocked())
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{1}}, "a1"))
}

// Rule: a back edge is not waited for; what arrives on it after the record
// and before its barrier is its channel state.
func TestRuleAlignedBackEdgeIsLogged(t *testing.T) {
	p := newAligned(t, "head", ids("x"), ids("src", "tail"), ids("tail"))
	require.NoError(t, p.Marker("src", 1))
	rd := take(p)
	require.Len(t, rd.Records, 1, "recorded without waiting for the back edge")
	assert.Empty(t, rd.Pause)
	require.NoError(t, p.Receive("tail", stamp(p, "tail"), "t1"))
	require.NoError(t, p.Receive("tail", stamp(p, "tail"), "t2"))
	require.NoError(t, p.Marker("tail", 1))
	rd = take(p)
	require.Len(t, rd.Channels, 1)
	assert.Equal(t, snapshot.Channel{From: "tail", To: "head"}, rd.Channels[0].Channel)
	assert.Equal(t, []snapshot.Message{{Seq: 1, Payload: "t1"}, {Seq: 2, Payload: "t2"}}, rd.Channels[0].Messages)
	assert.Equal(t, ids("tail"), snapshot.BackEdgesIn(p))
}

// Rule: a coordinator's Start records at once at a process without inputs,
// waits at one with inputs, and queues behind a pending snapshot.
func TestRuleAlignedStart(t *testing.T) {
	src := newAligned(t, "src", ids("a"), nil, nil)
	require.NoError(t, src.Start(1))
	assert.Len(t, take(src).Records, 1)

	p := newAligned(t, "a", nil, ids("src"), nil)
	require.NoError(t, p.Start(1))
	require.NoError(t, p.Start(2))
	assert.Empty(t, take(p).Records)
	require.NoError(t, p.Marker("src", 1))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, snapshot.SnapshotID(1), rd.Records[0].Snapshot)
	id, awaiting := p.Awaiting()
	assert.Equal(t, snapshot.SnapshotID(2), id, "the queued start begins once 1 records")
	assert.Equal(t, ids("src"), awaiting)
	require.NoError(t, p.Marker("src", 2))
	assert.Len(t, take(p).Records, 1)
	assert.ErrorIs(t, p.Start(0), snapshot.ErrInvalidID)
	p.Forget(1)
	assert.ErrorIs(t, p.Start(1), snapshot.ErrFinished)
}

// Rule: a barrier of another snapshot, or an Initiate, records the pending
// snapshot as it stands: the channels still awaited are logged until their
// barriers, so the cut stays consistent.
func TestRuleAlignedOtherSnapshotForcesRecord(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a", "b"), nil)
	require.NoError(t, p.Marker("a", 1))
	require.NoError(t, p.Marker("a", 2))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, snapshot.SnapshotID(1), rd.Records[0].Snapshot)
	assert.Equal(t, ids("a"), rd.Pause, "a blocked for 1, unblocked, blocked for 2: one net pause")
	require.NoError(t, p.Receive("b", stamp(p, "b"), "b1"))
	require.NoError(t, p.Marker("b", 1))
	rd = take(p)
	require.Len(t, rd.Channels, 1)
	assert.Equal(t, []snapshot.Message{{Seq: 1, Payload: "b1"}}, rd.Channels[0].Messages, "1 logged b after its forced record")
	require.Len(t, rd.Records, 0, "2 still awaits b's barrier")
	require.NoError(t, p.Marker("b", 2))
	rd = take(p)
	require.Len(t, rd.Records, 1)
	assert.Empty(t, rd.Channels)

	q := newAligned(t, "q", nil, ids("a"), nil)
	require.NoError(t, q.Start(1))
	require.NoError(t, q.Initiate(2))
	rd = take(q)
	require.Len(t, rd.Records, 2)
	assert.Equal(t, snapshot.SnapshotID(1), rd.Records[0].Snapshot, "records stay in id order")
}

// Rule: forgetting a pending snapshot (aborted elsewhere) unblocks its
// channels and begins the next queued one.
func TestRuleAlignedForgetPendingUnblocks(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a", "b"), nil)
	require.NoError(t, p.Marker("a", 1))
	require.NoError(t, p.Start(2))
	assert.Equal(t, ids("a"), take(p).Pause)
	p.Forget(1)
	rd := take(p)
	assert.Equal(t, ids("a"), rd.Resume)
	id, awaiting := p.Awaiting()
	assert.Equal(t, snapshot.SnapshotID(2), id)
	assert.Equal(t, ids("a", "b"), awaiting)
	require.NoError(t, p.Marker("a", 1), "a late barrier of a forgotten snapshot is ignored")
}

// Rule: a departed sender is no longer awaited.
func TestRuleAlignedDepartedNotAwaited(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a", "b"), nil)
	require.NoError(t, p.Marker("a", 1))
	assert.Equal(t, ids("a"), take(p).Pause)
	p.Departed("b")
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, ids("a"), rd.Resume)
}

// Rule: the first message of a new channel acts as the marker of every
// snapshot its sender had recorded, also of those that recording one of
// them recorded first: here recording 2 forces 3, queued behind 1 and
// begun when 1 recorded, to record; the message is after the sender's
// record of 3, so it is not 3's channel state.
func TestRuleAlignedFirstMessageClosesForcedRecords(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a"), nil)
	require.NoError(t, p.Start(1))
	require.NoError(t, p.Start(3)) // queued behind 1
	first := snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{1, 2, 3}}
	require.NoError(t, p.Receive("new", first, "n1"))
	rd := take(p)
	var recorded []snapshot.SnapshotID
	for _, r := range rd.Records {
		recorded = append(recorded, r.Snapshot)
	}
	assert.ElementsMatch(t, []snapshot.SnapshotID{1, 2, 3}, recorded)
	for _, c := range rd.Channels {
		if c.Channel.From == "new" {
			assert.Empty(t, c.Messages, "snapshot %d", c.Snapshot)
		}
	}
	assert.Zero(t, p.Recorded(), "n1 is channel state of no snapshot")
}

// Rule: a sender that departed before anything of it came is not awaited
// when an awaited set names it (a coordinator that learnt the channel from
// the sender's record): no barrier will come from it. A message from a
// new sender under the name makes it a sender like any other again.
func TestRuleAlignedDepartedBeforeItsFirstMessageNotAwaited(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a"), nil)
	p.Departed("b") // b never sent to c
	p.SetAwaited(1, ids("a", "b"))
	require.NoError(t, p.Marker("a", 1))
	require.Len(t, take(p).Records, 1, "b is not awaited")

	require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: 1, Horizon: 1}, "b1")) // a new b
	require.NoError(t, p.Start(2))
	_, awaiting := p.Awaiting()
	assert.Equal(t, ids("a", "b"), awaiting, "the new b is awaited")
}

// Rule: the first message of a channel whose sender had recorded the
// pending snapshot stands for its barrier: the channel is blocked and the
// message held (Ready.Hold, not accounted for) until the snapshot records;
// given again then, it is received after the record.
func TestRuleAlignedFirstMessageHeld(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a"), nil)
	require.NoError(t, p.Start(1))
	first := snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{1}}
	require.NoError(t, p.Receive("new", first, "n1"))
	require.True(t, p.HasReady())
	require.True(t, p.Ready().Hold, "held behind the barrier it stands for")
	rd := take(p)
	assert.Empty(t, rd.Records)
	assert.Equal(t, ids("new"), rd.Pause)
	assert.True(t, p.IsBlocked("new"))
	assert.Zero(t, p.Received("new"), "a held message is not accounted for")

	require.NoError(t, p.Marker("a", 1))
	rd = take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "a", N: 0}, {Peer: "new", N: 0}}, rd.Records[0].Received)
	assert.Equal(t, ids("new"), rd.Resume)
	assert.Empty(t, rd.Channels, "no channel state: both channels aligned")
	require.NoError(t, p.Receive("new", first, "n1"), "given again once unblocked")
	assert.Equal(t, uint64(1), p.Received("new"))

	// A first message that names a snapshot this process has not heard of
	// makes it record at once instead, logging what it awaited.
	q := newAligned(t, "q", nil, ids("a"), nil)
	require.NoError(t, q.Start(1))
	require.NoError(t, q.Receive("new", snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{1, 2}}, "n1"))
	rd = take(q)
	require.Len(t, rd.Records, 2)
	require.NoError(t, q.Marker("a", 1))
	rd = take(q)
	require.Len(t, rd.Channels, 1, "a, awaited when the record was forced, closes on its barrier")
	assert.Empty(t, rd.Channels[0].Messages)
}

// Rule: a process never waits for its own barrier, nor around a cycle that
// its back edges break.
func TestBackEdges(t *testing.T) {
	ch := func(f, t snapshot.ProcessID) snapshot.Channel { return snapshot.Channel{From: f, To: t} }
	ring := []snapshot.Channel{ch("a", "b"), ch("b", "c"), ch("c", "a")}
	assert.Equal(t, []snapshot.Channel{ch("c", "a")}, snapshot.BackEdges(ring, nil))
	assert.Equal(t, []snapshot.Channel{ch("a", "b")}, snapshot.BackEdges(ring, ids("b")), "the search starts at the roots")
	pipeline := []snapshot.Channel{ch("src", "w1"), ch("src", "w2"), ch("w1", "agg"), ch("w2", "agg"), ch("agg", "src"), ch("agg", "agg")}
	assert.Equal(t, []snapshot.Channel{ch("agg", "agg"), ch("agg", "src")}, snapshot.BackEdges(pipeline, nil))
	dag := []snapshot.Channel{ch("a", "b"), ch("a", "c"), ch("b", "c")}
	assert.Empty(t, snapshot.BackEdges(dag, nil))
	assert.Empty(t, snapshot.BackEdges(nil, nil))
}

// Without back edges, the processes of a ring wait for each other: the
// snapshot never records, is aborted at its deadline, and each process
// names the channel it still waits on.
func TestAlignedMissingBackEdgeTimesOut(t *testing.T) {
	n, err := snapshottest.NewNetwork(snapshottest.Config{
		Seed: 1, Graph: snapshottest.Ring(3), MaxDelay: 2, Timeout: 50, Mode: snapshot.Aligned, NoBackEdges: true,
	}, snapshottest.NewBank(snapshottest.Ring(3), 100, 1))
	require.NoError(t, err)
	n.StartSnapshot(-1)
	for range 10 {
		n.Tick(true)
	}
	for i := range 3 {
		id, awaiting := n.Process(i).Awaiting()
		assert.Equal(t, snapshot.SnapshotID(1), id)
		assert.Equal(t, ids(n.Graph().Names[(i+2)%3]), awaiting)
	}
	require.NoError(t, n.Drain(1000))
	require.Len(t, n.Aborted(), 1)
	assert.True(t, errors.Is(n.Aborted()[0], snapshot.ErrTimeout), "%v", n.Aborted()[0])
	for i := range 3 {
		id, _ := n.Process(i).Awaiting()
		assert.Zero(t, id, "forgotten after the abort")
		assert.Empty(t, n.Process(i).Blocked())
	}
}

// Rule: with SetAwaited, only the listed inputs are waited for; the others
// are logged until their barriers.
func TestRuleAlignedSetAwaited(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a", "b"), nil)
	p.SetAwaited(0, ids("a"))
	require.NoError(t, p.Receive("b", stamp(p, "b"), "b1"))
	require.NoError(t, p.Marker("a", 1))
	rd := take(p)
	require.Len(t, rd.Records, 1, "b is not awaited")
	require.NoError(t, p.Receive("b", stamp(p, "b"), "b2"))
	require.NoError(t, p.Marker("b", 1))
	rd = take(p)
	require.Len(t, rd.Channels, 1)
	assert.Equal(t, []snapshot.Message{{Seq: 2, Payload: "b2"}}, rd.Channels[0].Messages)
	snapshot.AwaitAll(p)
	require.NoError(t, p.Start(2))
	_, awaiting := p.Awaiting()
	assert.Equal(t, ids("a", "b"), awaiting)
}

// Rule: a set given for snapshot id and above leaves the snapshots below
// it with the set they had, even those that begin here later: each
// snapshot waits along one graph.
func TestRuleAlignedAwaitedSetsByID(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a", "b"), nil)
	p.SetAwaited(0, ids("a"))
	p.SetAwaited(3, ids("b"))
	require.NoError(t, p.Start(2))
	id, awaiting := p.Awaiting()
	assert.Equal(t, snapshot.SnapshotID(2), id)
	assert.Equal(t, ids("a"), awaiting, "snapshot 2 waits as the set for it says")
	require.NoError(t, p.Marker("a", 2))
	require.Len(t, take(p).Records, 1)
	require.NoError(t, p.Start(3))
	_, awaiting = p.Awaiting()
	assert.Equal(t, ids("b"), awaiting)
	p.SetAwaited(2, ids("a", "b")) // replaces the set for 3 and above
	p.Forget(3)
	require.NoError(t, p.Start(4))
	_, awaiting = p.Awaiting()
	assert.Equal(t, ids("a", "b"), awaiting)
}

// Over random cyclic graphs without back edges, aligned snapshots may wait
// for each other around a cycle: each is aborted at its deadline, its
// blocked channels are released, and every message is delivered in the
// end; snapshots that do complete pass every check.
func TestAlignedAbortsReleaseBlockedChannels(t *testing.T) {
	aborted := 0
	for s := uint64(1); s <= 200; s++ {
		r := rand.New(rand.NewPCG(s, 0xab))
		g := snapshottest.RandomGraph(r, 2+r.IntN(20), r.IntN(2) == 0)
		run := snapshottest.BankRun{
			Config: snapshottest.Config{
				Seed: s, Graph: g, MaxDelay: 1 + r.IntN(5), Mode: snapshot.Aligned,
				NoBackEdges: true, Timeout: 40,
			},
			Initial: 100, Rate: 2, Ticks: 60, Snapshots: 1 + r.IntN(4), Broadcast: 1,
		}
		res, err := run.Run()
		if err != nil && !errors.Is(err, snapshot.ErrTimeout) {
			t.Fatalf("seed %d: %v", s, err)
		}
		n := res.Network
		aborted += len(n.Aborted())
		require.True(t, n.Quiet(), "seed %d: messages held after the aborts", s)
		for i := range g.Len() {
			require.Empty(t, n.Process(i).Blocked(), "seed %d", s)
		}
		require.Equal(t, res.Total, res.Bank.Total(), "seed %d: money delivered", s)
		for _, gl := range n.Completed() {
			require.NoError(t, snapshottest.CheckAll(gl, n.Trace(), res.Total), "seed %d", s)
		}
	}
	require.Greater(t, aborted, 100, "cycles without back edges made snapshots wait")
}

func TestShallowBackEdges(t *testing.T) {
	ch := func(f, t snapshot.ProcessID) snapshot.Channel { return snapshot.Channel{From: f, To: t} }
	ring := []snapshot.Channel{ch("a", "b"), ch("b", "c"), ch("c", "a")}
	assert.Equal(t, []snapshot.Channel{ch("c", "a")}, snapshot.ShallowBackEdges(ring, nil))
	pipeline := []snapshot.Channel{ch("src", "w1"), ch("src", "w2"), ch("w1", "agg"), ch("w2", "agg"), ch("agg", "w1"), ch("agg", "w2"), ch("agg", "agg")}
	assert.Equal(t, []snapshot.Channel{ch("agg", "agg"), ch("agg", "w1"), ch("agg", "w2")}, snapshot.ShallowBackEdges(pipeline, nil),
		"the loop is entered at the workers: the feedback is what goes back")
	dag := []snapshot.Channel{ch("a", "b"), ch("b", "c"), ch("a", "c")}
	assert.Empty(t, snapshot.ShallowBackEdges(dag, nil), "an acyclic graph keeps every channel")
	assert.Equal(t, []snapshot.Channel{ch("a", "a")}, snapshot.ShallowBackEdges([]snapshot.Channel{ch("a", "a")}, nil))

	for s := range uint64(500) {
		r := rand.New(rand.NewPCG(s, 3))
		var g snapshottest.Graph
		switch s % 3 {
		case 0:
			g = snapshottest.RandomDAG(r, 2+r.IntN(40))
		default:
			g = snapshottest.RandomGraph(r, 2+r.IntN(40), s%3 == 1)
		}
		var chans []snapshot.Channel
		for _, e := range g.Edges {
			chans = append(chans, snapshot.Channel{From: g.Names[e.From], To: g.Names[e.To]})
		}
		for _, find := range []func([]snapshot.Channel, []snapshot.ProcessID) []snapshot.Channel{snapshot.BackEdges, snapshot.ShallowBackEdges} {
			back := find(chans, nil)
			_, ok := longestPath(chans, back)
			require.True(t, ok, "seed %d: a cycle is left", s)
			if s%3 == 0 {
				require.Empty(t, back, "seed %d: acyclic", s)
			}
		}
	}

	// A ring of 1,000 with random chords: both leave no cycle; the shallow
	// set leaves no long chain of awaited channels.
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 10, 1000} {
		g := snapshottest.RingWithChords(r, n, 2)
		var chans []snapshot.Channel
		for _, e := range g.Edges {
			chans = append(chans, snapshot.Channel{From: g.Names[e.From], To: g.Names[e.To]})
		}
		deep, ok := longestPath(chans, snapshot.BackEdges(chans, nil))
		require.True(t, ok, "BackEdges leaves a cycle")
		shallow, ok := longestPath(chans, snapshot.ShallowBackEdges(chans, nil))
		require.True(t, ok, "ShallowBackEdges leaves a cycle")
		t.Logf("ring of %d with chords: longest awaited chain %d with BackEdges, %d with ShallowBackEdges", n, deep, shallow)
		if n == 1000 {
			assert.Greater(t, deep, 100)
			assert.Less(t, shallow, 40)
		}
	}
}

// longestPath returns the longest path of chans without skip, and false if
// a cycle is left.
func longestPath(chans, skip []snapshot.Channel) (int, bool) {
	drop := make(map[snapshot.Channel]bool)
	for _, c := range skip {
		drop[c] = true
	}
	succ := make(map[snapshot.ProcessID][]snapshot.ProcessID)
	indeg := make(map[snapshot.ProcessID]int)
	for _, c := range chans {
		indeg[c.From] += 0
		if !drop[c] {
			succ[c.From] = append(succ[c.From], c.To)
			indeg[c.To]++
		}
	}
	var queue []snapshot.ProcessID
	for p, d := range indeg {
		if d == 0 {
			queue = append(queue, p)
		}
	}
	depth := make(map[snapshot.ProcessID]int)
	seen, longest := 0, 0
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		seen++
		longest = max(longest, depth[u])
		for _, v := range succ[u] {
			depth[v] = max(depth[v], depth[u]+1)
			if indeg[v]--; indeg[v] == 0 {
				queue = append(queue, v)
			}
		}
	}
	return longest, seen == len(indeg)
}

// DropPeer keeps the back-edge declaration of the name: a new process
// under it is not awaited on the declared back edge (else two processes
// on the cycle would wait for each other's barriers).
func TestDropPeerKeepsBackEdge(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a", "b"), ids("b"))
	p.Departed("b")
	p.DropPeer("b")
	require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: 1}, "a new b"))
	require.NoError(t, p.Start(1))
	_, awaiting := p.Awaiting()
	assert.Equal(t, ids("a"), awaiting)
}
