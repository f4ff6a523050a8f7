package snapshot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

func newSumsProcess(t *testing.T, id snapshot.ProcessID) *snapshot.Process {
	t.Helper()
	p, err := snapshot.NewProcess(snapshot.Config{ID: id, Mode: snapshot.Epochs, Sums: true})
	require.NoError(t, err)
	return p
}

// Rule (sums): a send counts one total and stamps the epoch alone; a
// record carries the two totals and names no channel.
func TestSumsRecordsCarryTotals(t *testing.T) {
	p := newSumsProcess(t, "a")
	assert.Equal(t, snapshot.Stamp{}, p.Send("b"))
	assert.Equal(t, snapshot.Stamp{}, p.Send("c"))
	require.NoError(t, p.Receive("b", snapshot.Stamp{}, "x"))
	require.NoError(t, p.Start(1))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	r := rd.Records[0]
	assert.Equal(t, uint64(2), r.SentTotal)
	assert.Equal(t, uint64(1), r.ReceivedTotal)
	assert.Empty(t, r.Sent)
	assert.Empty(t, r.Received)
	assert.False(t, r.Changes)
	assert.Equal(t, snapshot.Stamp{Epoch: 1}, p.Send("b"))
	assert.Zero(t, p.Received("b"), "a receipt from the sender's epoch makes no entry")
}

// Rule (sums): a message from an older epoch is channel state, reported
// with no number and no entry for its channel: the coordinator numbers
// each channel's messages in the order they are reported. A channel has
// an entry only while a capture reported messages on it that are still
// to come, so that their receipt is not reported again.
func TestSumsReportsInFlightWithoutEntries(t *testing.T) {
	p := newSumsProcess(t, "c")
	require.NoError(t, p.Receive("a", snapshot.Stamp{Epoch: 2}, "new"))
	rd := take(p)
	require.Len(t, rd.Records, 2)
	for _, payload := range []string{"old1", "old2"} {
		require.NoError(t, p.Receive("b", snapshot.Stamp{Epoch: 1}, payload))
	}
	rd = take(p)
	ch := snapshot.Channel{From: "b", To: "c"}
	assert.Equal(t, []snapshot.ChannelRecord{
		{Snapshot: 2, Channel: ch, Messages: []snapshot.Message{{Payload: "old1"}}},
		{Snapshot: 2, Channel: ch, Messages: []snapshot.Message{{Payload: "old2"}}},
	}, rd.Channels)

	var h snapshot.InHandle
	require.NoError(t, p.Capture(&h, "d", 0, []snapshot.Queued{{Epoch: 1, Payload: "q1"}, {Epoch: 2, Payload: "q2"}}))
	dc := snapshot.Channel{From: "d", To: "c"}
	assert.Equal(t, []snapshot.ChannelRecord{{Snapshot: 2, Channel: dc, Messages: []snapshot.Message{{Seq: 1, Payload: "q1"}}}}, take(p).Channels)
	require.NoError(t, p.ReceiveNextOn(&h, "d", snapshot.Stamp{Epoch: 1}, "q1"))
	assert.Empty(t, take(p).Channels, "captured already")
	assert.Zero(t, p.Received("d"), "nothing captured is left to come: the entry went")
	require.NoError(t, p.Capture(&h, "e", 0, []snapshot.Queued{{Epoch: 2}}))
	assert.Empty(t, take(p).Channels, "nothing older than its epoch")

	// The coordinator numbers the parts of a channel in their order.
	a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 2, Mode: snapshot.Epochs, Sums: true, Participants: []snapshot.ProcessID{"b", "c"}})
	require.NoError(t, err)
	require.NoError(t, a.AddRecord(snapshot.LocalRecord{Snapshot: 2, Process: "b", SentTotal: 2}))
	require.NoError(t, a.AddRecord(snapshot.LocalRecord{Snapshot: 2, Process: "c"}))
	for _, cr := range rd.Channels {
		require.NoError(t, a.AddChannel(cr))
	}
	require.Equal(t, snapshot.Complete, a.Status(time.Time{}).State)
	g, err := a.Global()
	require.NoError(t, err)
	require.NoError(t, g.Verify())
	assert.Equal(t, []snapshot.ChannelState{{Channel: ch, Sent: 2, Received: 0, Messages: []snapshot.Message{{Seq: 1, Payload: "old1"}, {Seq: 2, Payload: "old2"}}}}, g.Channels)
	assert.Empty(t, rd.Channels[0].Messages[0].Seq, "the receiver's report is not written")
}

// Rule (sums): what is queued for a process that stops is reported for
// the snapshots it recorded that no capture reported it for, and counted
// lost by epoch in its final record.
func TestSumsLoseReportsAndCounts(t *testing.T) {
	p := newSumsProcess(t, "c")
	require.NoError(t, p.Start(1))
	take(p)
	var h snapshot.InHandle
	require.NoError(t, p.Capture(&h, "a", 0, []snapshot.Queued{{Epoch: 0, Payload: "m1"}}))
	assert.Len(t, take(p).Channels, 1)
	require.NoError(t, p.Lose("a", []snapshot.Queued{{Epoch: 0, Payload: "m1"}, {Epoch: 0, Payload: "m2"}, {Epoch: 1, Payload: "m3"}}))
	ch := snapshot.Channel{From: "a", To: "c"}
	assert.Equal(t, []snapshot.ChannelRecord{{Snapshot: 1, Channel: ch, Messages: []snapshot.Message{{Seq: 2, Payload: "m2"}}}}, take(p).Channels,
		"m1 was captured already; m3 was sent after the sender's record")
	final := p.Counters()
	require.NotNil(t, final.Lost)
	assert.Equal(t, snapshot.EpochCounts{{Epoch: 0, N: 2}, {Epoch: 1, N: 1}}, *final.Lost)
	assert.Equal(t, snapshot.SnapshotID(1), final.Epoch)

	q := newEpochProcess(t, "d")
	assert.ErrorIs(t, q.Lose("a", []snapshot.Queued{{}}), snapshot.ErrConfig)
}

// Counting in sums needs the Epochs mode, and keeps no channel counts to
// restore.
func TestSumsConfig(t *testing.T) {
	_, err := snapshot.NewProcess(snapshot.Config{ID: "a", Mode: snapshot.Aligned, Sums: true})
	assert.ErrorIs(t, err, snapshot.ErrConfig)
	_, err = snapshot.NewProcess(snapshot.Config{ID: "a", Mode: snapshot.Epochs, Sums: true, Sent: []snapshot.PeerCount{{Peer: "b", N: 1}}})
	assert.ErrorIs(t, err, snapshot.ErrConfig)
	_, err = snapshot.NewCoordinator(snapshot.CoordinatorConfig{Mode: snapshot.Unaligned, Sums: true})
	assert.ErrorIs(t, err, snapshot.ErrConfig)
	p := newSumsProcess(t, "a")
	assert.True(t, p.ChildConfig("b").Sums, "a child counts as its creator does")
}

// Rule (sums): a snapshot completes when everything sent before the
// records was received before them or is in flight; a message lost with
// a stopped receiver aborts a snapshot that receiver recorded, and counts
// as received in one it stands in departed, and in those after its drop.
func TestSumsCoordinatorLost(t *testing.T) {
	now := time.Unix(0, 0)
	c, err := snapshot.NewCoordinator(snapshot.CoordinatorConfig{Mode: snapshot.Epochs, Sums: true})
	require.NoError(t, err)
	live := []snapshot.ProcessID{"a", "b"}
	id, err := c.Start(now, live, "")
	require.NoError(t, err)
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "a", SentTotal: 3, ReceivedTotal: 1}))
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "b", SentTotal: 1, ReceivedTotal: 2}))
	m, ok := c.Missing(id)
	require.True(t, ok)
	assert.Equal(t, &snapshot.SumGap{Sent: 4, Received: 3}, m.Sums)
	rd := c.Ready()
	assert.ElementsMatch(t, live, rd.Recapture, "the sums cannot say who is owed: everyone is asked")
	require.NoError(t, c.Channel(now, snapshot.ChannelRecord{Snapshot: id, Channel: snapshot.Channel{From: "a", To: "b"}, Messages: []snapshot.Message{{Seq: 1, Payload: "x"}}}))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	require.NotNil(t, rd.Over[0].Global)
	g := rd.Over[0].Global
	require.NoError(t, g.Verify())
	assert.Equal(t, &snapshot.SumCounts{Sent: 4, Received: 3}, g.Sums)
	g.Channels = nil
	assert.ErrorIs(t, g.Verify(), snapshot.ErrImbalance, "a channel left out shows in the sums")

	// b recorded 2 and stops; a message of epoch 1 to it is lost.
	id2, _ := c.Start(now, live, "")
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id2, Process: "b", SentTotal: 1, ReceivedTotal: 2}))
	c.Lost(now, "b", 1, 1) // before b's stop: kept until it
	assert.Empty(t, c.Ready().Over)
	require.NoError(t, c.Stopped(now, "b", snapshot.LocalRecord{Process: "b", SentTotal: 1, ReceivedTotal: 2, Epoch: id2}, []snapshot.SnapshotID{id2}, id2, 0))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	var le *snapshot.LostError
	require.ErrorAs(t, rd.Over[0].Err, &le)
	assert.Equal(t, snapshot.ProcessID("b"), le.Receiver)

	// Snapshot 3: b stands in departed; a message of epoch 2 lost with
	// it counts as received.
	id3, _ := c.Start(now, []snapshot.ProcessID{"a"}, "")
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id3, Process: "a", SentTotal: 5, ReceivedTotal: 1}))
	m, _ = c.Missing(id3)
	assert.Equal(t, &snapshot.SumGap{Sent: 6, Received: 4}, m.Sums, "b's final stands in; its lost message of epoch 1 counts")
	c.Lost(now, "b", 2, 1)
	c.Ready()
	require.NoError(t, c.Channel(now, snapshot.ChannelRecord{Snapshot: id3, Channel: snapshot.Channel{From: "a", To: "a"}, Messages: []snapshot.Message{{Seq: 1}}}))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	require.NotNil(t, rd.Over[0].Global, "%v", rd.Over[0].Err)
	assert.Equal(t, []snapshot.Drop{{Process: "b", After: id3}}, rd.Drops)

	// After its drop, b's totals are the base of every snapshot.
	id4, _ := c.Start(now, []snapshot.ProcessID{"a"}, "")
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id4, Process: "a", SentTotal: 5, ReceivedTotal: 2}))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	require.NotNil(t, rd.Over[0].Global, "%v", rd.Over[0].Err)
	assert.Equal(t, &snapshot.SumCounts{Sent: 6, Received: 6}, rd.Over[0].Global.Sums, "a's 5 and 2; b's 1 and 2, and its 2 lost")
}

// Counting in sums, a snapshot that starts after a participant left the
// live ones but before its stop reached the coordinator (the glue's
// registry and the coordinator learn of a stop in turn) takes it as
// departed when the stop comes: its sent, received and lost messages are
// in the others' sums, and without it the snapshot could never balance.
func TestSumsStopAfterALaterStart(t *testing.T) {
	now := time.Unix(0, 0)
	c, err := snapshot.NewCoordinator(snapshot.CoordinatorConfig{Mode: snapshot.Epochs, Sums: true})
	require.NoError(t, err)
	id1, err := c.Start(now, []snapshot.ProcessID{"a", "b"}, "")
	require.NoError(t, err)
	c.Ready()
	// a sent b a message of epoch 0, then recorded; b recorded before it
	// came, stopped with it queued, and lost it.
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id1, Process: "a", SentTotal: 1}))
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id1, Process: "b"}))
	require.NoError(t, c.Channel(now, snapshot.ChannelRecord{Snapshot: id1, Channel: snapshot.Channel{From: "a", To: "b"}, Messages: []snapshot.Message{{Seq: 1, Payload: "x"}}}))
	rd := c.Ready()
	require.Len(t, rd.Over, 1)
	require.NotNil(t, rd.Over[0].Global, "%v", rd.Over[0].Err)

	// Snapshot 2 starts with a alone: b's stop has not come yet.
	id2, err := c.Start(now, []snapshot.ProcessID{"a"}, "")
	require.NoError(t, err)
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id2, Process: "a", SentTotal: 1}))
	assert.Empty(t, c.Ready().Over, "a's message to b is counted sent, and nothing received yet")
	lost := snapshot.EpochCounts{{Epoch: 0, N: 1}}
	require.NoError(t, c.Stopped(now, "b", snapshot.LocalRecord{Process: "b", Epoch: id1, Lost: &lost}, []snapshot.SnapshotID{id1}, id1, 0))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	g := rd.Over[0].Global
	require.NotNil(t, g, "%v", rd.Over[0].Err)
	require.NoError(t, g.Verify())
	assert.Equal(t, &snapshot.SumCounts{Sent: 1, Received: 1}, g.Sums, "b stands in with the message it lost")
	p, ok := g.Participant("b")
	require.True(t, ok)
	assert.True(t, p.Departed)
}
