package snapshottest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

// busySnapshot runs a bank until one of its snapshots holds messages in
// flight, so that the checkers have something to catch.
func busySnapshot(t *testing.T) (*snapshot.Global, *snapshottest.BankResult) {
	t.Helper()
	for seed := uint64(1); seed < 100; seed++ {
		res, err := snapshottest.BankRun{
			Config:    snapshottest.Config{Seed: seed, Graph: snapshottest.TwoRings(4), MaxDelay: 5},
			Initial:   50,
			Rate:      3,
			Ticks:     40,
			Snapshots: 2,
		}.Run()
		require.NoError(t, err, "seed %d", seed)
		for _, g := range res.Network.Completed() {
			if g.TotalInFlight() >= 2 {
				return g, res
			}
		}
	}
	t.Fatal("no snapshot with messages in flight")
	return nil, nil
}

func inFlight(g *snapshot.Global) int {
	for i, c := range g.Channels {
		if len(c.Messages) > 0 {
			return i
		}
	}
	return -1
}

func TestCheckersCatchCorruption(t *testing.T) {
	g, res := busySnapshot(t)
	tr := res.Network.Trace()
	require.NoError(t, snapshottest.CheckAll(g, tr, res.Total))

	t.Run("dropped in-flight message", func(t *testing.T) {
		bad := *g
		bad.Channels = append([]snapshot.ChannelState(nil), g.Channels...)
		i := inFlight(&bad)
		bad.Channels[i].Messages = bad.Channels[i].Messages[1:]
		bad.Channels[i].Received++ // keep the counters balanced: only the trace can tell
		require.NoError(t, bad.Verify())
		assert.ErrorContains(t, tr.CheckChannels(&bad), "recorded seqs")
		assert.ErrorContains(t, snapshottest.CheckConservation(&bad, res.Total, snapshottest.BalanceOf, snapshottest.AmountOf), "not conserved")
	})
	t.Run("reordered in-flight messages", func(t *testing.T) {
		bad := *g
		bad.Channels = append([]snapshot.ChannelState(nil), g.Channels...)
		i := inFlight(&bad)
		ms := append([]snapshot.Message(nil), bad.Channels[i].Messages...)
		ms = append(ms, ms[0])
		ms = ms[1:]
		bad.Channels[i].Messages = ms
		if len(ms) > 1 {
			assert.Error(t, tr.CheckChannels(&bad))
		}
	})
	t.Run("wrong balance", func(t *testing.T) {
		bad := *g
		bad.Participants = append([]snapshot.Participant(nil), g.Participants...)
		bad.Participants[0].State = res.Bank.State(0)
		v, _ := snapshottest.BalanceOf(bad.Participants[0].State)
		orig, _ := snapshottest.BalanceOf(g.Participants[0].State)
		if v == orig {
			bad.Participants[0].State = []byte{0x02}
		}
		assert.ErrorContains(t, snapshottest.CheckConservation(&bad, res.Total, snapshottest.BalanceOf, snapshottest.AmountOf), "not conserved")
	})
}

func TestCheckCutCatchesMessageFromTheFuture(t *testing.T) {
	tr := snapshottest.NewTrace()
	ch := snapshot.Channel{From: "a", To: "b"}
	tr.Recorded("a", 1)
	tr.Sent(ch, 1) // sent after a recorded
	tr.Received(ch, 1)
	tr.Recorded("b", 1) // ... but received before b recorded
	g := &snapshot.Global{ID: 1, Participants: []snapshot.Participant{{ID: "a"}, {ID: "b"}}}
	assert.ErrorContains(t, tr.CheckCut(g), "received before b recorded but sent after a recorded")
	assert.NoError(t, tr.CheckChannels(g), "nothing in flight either way")
}

func TestNetworkReplaysFromSeed(t *testing.T) {
	run := func() []string {
		var lines []string
		_, err := snapshottest.BankRun{
			Config:    snapshottest.Config{Seed: 42, Graph: snapshottest.Ring(5), MaxDelay: 4, Declare: snapshottest.DeclareRandom, Log: func(l string) { lines = append(lines, l) }},
			Initial:   10,
			Rate:      2,
			Ticks:     30,
			Snapshots: 3,
			Broadcast: 0.5,
		}.Run()
		require.NoError(t, err)
		return lines
	}
	a, b := run(), run()
	require.NotEmpty(t, a)
	assert.Equal(t, a, b)
}

func TestSnapshotTimesOutInNetwork(t *testing.T) {
	// Flooding from a, which no channel leaves, with no sweep: b and c are
	// never reached, so the snapshot must time out, not hang.
	g := snapshottest.Graph{Names: []snapshot.ProcessID{"a", "b", "c"}, Edges: []snapshottest.Edge{{From: 1, To: 0}, {From: 2, To: 0}}}
	bank := snapshottest.NewBank(g, 5, 1)
	n, err := snapshottest.NewNetwork(snapshottest.Config{Seed: 1, Graph: g, MaxDelay: 2, Timeout: 20}, bank)
	require.NoError(t, err)
	n.StartSnapshot(0)
	require.NoError(t, n.Drain(100))
	require.Len(t, n.Aborted(), 1)
	assert.ErrorIs(t, n.Aborted()[0], snapshot.ErrTimeout)
	assert.ErrorContains(t, n.Aborted()[0], "not recorded: b, c")
}
