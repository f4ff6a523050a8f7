package snapshot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

func newEpochProcess(t *testing.T, id snapshot.ProcessID) *snapshot.Process {
	t.Helper()
	p, err := snapshot.NewProcess(snapshot.Config{ID: id, Mode: snapshot.Epochs})
	require.NoError(t, err)
	return p
}

// Rule (Epochs): every stamp carries the sender's epoch; a start records
// and sends no marker.
func TestEpochStartRecordsWithoutMarkers(t *testing.T) {
	p := newEpochProcess(t, "a")
	assert.Equal(t, snapshot.Stamp{Seq: 1}, p.Send("b"))
	require.NoError(t, p.Start(1))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "b", N: 1}}, rd.Records[0].Sent)
	assert.Empty(t, rd.Markers)
	assert.Equal(t, []snapshot.SnapshotID{1}, rd.Finished, "nothing is open: in-flight messages are reported as they come")
	assert.Equal(t, snapshot.Stamp{Seq: 2, Epoch: 1}, p.Send("b"))
	assert.Equal(t, snapshot.SnapshotID(1), p.Epoch())
}

// Rule (Epochs): a message from a newer epoch records every snapshot up
// to it first, with one state; one from an older epoch is channel state
// of each snapshot above its epoch, reported at once.
func TestEpochMessagesRecordAndReport(t *testing.T) {
	p := newEpochProcess(t, "c")
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1, Epoch: 2}, "new"))
	rd := take(p)
	require.Len(t, rd.Records, 2)
	assert.Equal(t, snapshot.SnapshotID(1), rd.Records[0].Snapshot)
	assert.Equal(t, snapshot.SnapshotID(2), rd.Records[1].Snapshot)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "a", N: 0}}, rd.Records[0].Received, "recorded before the message")

	require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: 1, Epoch: 1}, "old"))
	rd = take(p)
	assert.Equal(t, []snapshot.ChannelRecord{{Snapshot: 2, Channel: snapshot.Channel{From: "b", To: "c"}, Messages: []snapshot.Message{{Seq: 1, Payload: "old"}}}}, rd.Channels)

	p.Forget(2)
	require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: 2, Epoch: 1}, "late"))
	assert.Empty(t, take(p).Channels, "a snapshot forgotten takes no more")
}

// Rule (Epochs): a sender's epoch never goes back on a channel, and one
// message cannot move the receiver's epoch without bound.
func TestEpochRefusesBadStamps(t *testing.T) {
	p := newEpochProcess(t, "c")
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1, Epoch: 3}, nil))
	take(p)
	err := p.Receive("a", snapshot.Stamp{Seq: 2, Epoch: 2}, nil)
	assert.ErrorIs(t, err, snapshot.ErrProtocol)
	err = p.Receive("b", snapshot.Stamp{Seq: 1, Epoch: 1 << 40}, nil)
	assert.ErrorIs(t, err, snapshot.ErrProtocol)
	assert.Equal(t, snapshot.SnapshotID(3), p.Epoch())
}

// Rule (Epochs): a child is born at its creator's epoch and takes part in
// the snapshots after it only.
func TestEpochChildConfig(t *testing.T) {
	p := newEpochProcess(t, "a")
	require.NoError(t, p.Start(2))
	take(p)
	child, err := snapshot.NewProcess(p.ChildConfig("k"))
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(2), child.Epoch())
	assert.ErrorIs(t, child.Start(2), snapshot.ErrFinished)
	require.NoError(t, child.Start(3))
	rd := take(child)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, snapshot.SnapshotID(3), rd.Records[0].Snapshot)
}

// The Assembler of an Epochs snapshot adds up a channel's state from
// parts, in sequence order, and completes when the counters balance.
func TestEpochAssemblerAddsParts(t *testing.T) {
	a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Mode: snapshot.Epochs, Participants: ids("a", "b")})
	require.NoError(t, err)
	ab := snapshot.Channel{From: "a", To: "b"}
	require.NoError(t, a.AddRecord(snapshot.LocalRecord{Snapshot: 1, Process: "a", Sent: []snapshot.PeerCount{{Peer: "b", N: 3}}}))
	require.NoError(t, a.AddRecord(snapshot.LocalRecord{Snapshot: 1, Process: "b", Received: []snapshot.PeerCount{{Peer: "a", N: 1}}}))
	require.NoError(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 1, Channel: ab, Messages: []snapshot.Message{{Seq: 2, Payload: "x"}}}))
	assert.Equal(t, snapshot.Pending, a.Status(time.Time{}).State)
	require.NoError(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 1, Channel: ab, Messages: []snapshot.Message{{Seq: 3, Payload: "y"}}}))
	require.Equal(t, snapshot.Complete, a.Status(time.Time{}).State)
	g, err := a.Global()
	require.NoError(t, err)
	require.NoError(t, g.Verify())
	cs, _ := g.Channel(ab)
	assert.Equal(t, []snapshot.Message{{Seq: 2, Payload: "x"}, {Seq: 3, Payload: "y"}}, cs.Messages)

	// A part out of sequence aborts.
	a, err = snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Mode: snapshot.Epochs})
	require.NoError(t, err)
	require.NoError(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 1, Channel: ab, Messages: []snapshot.Message{{Seq: 2}}}))
	assert.ErrorIs(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 1, Channel: ab, Messages: []snapshot.Message{{Seq: 2}}}), snapshot.ErrProtocol)

	// So does state that does not start right after the receiver's
	// record, even if the counts balance.
	a, err = snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Mode: snapshot.Epochs, Participants: ids("a", "b")})
	require.NoError(t, err)
	require.NoError(t, a.AddRecord(snapshot.LocalRecord{Snapshot: 1, Process: "a", Sent: []snapshot.PeerCount{{Peer: "b", N: 2}}}))
	require.NoError(t, a.AddRecord(snapshot.LocalRecord{Snapshot: 1, Process: "b", Received: []snapshot.PeerCount{{Peer: "a", N: 1}}}))
	assert.ErrorIs(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 1, Channel: ab, Messages: []snapshot.Message{{Seq: 3}}}), snapshot.ErrProtocol)
}
