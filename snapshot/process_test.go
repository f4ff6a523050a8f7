package snapshot_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

func newProcess(t *testing.T, id snapshot.ProcessID, out, in []snapshot.ProcessID) *snapshot.Process {
	t.Helper()
	p, err := snapshot.NewProcess(snapshot.Config{ID: id, Outgoing: out, Incoming: in})
	require.NoError(t, err)
	return p
}

// take returns the pending actions and acknowledges them.
func take(p *snapshot.Process) snapshot.Ready {
	rd := p.Ready()
	out := snapshot.Ready{
		Records:  append([]snapshot.LocalRecord(nil), rd.Records...),
		Markers:  append([]snapshot.MarkerSend(nil), rd.Markers...),
		Channels: append([]snapshot.ChannelRecord(nil), rd.Channels...),
		Finished: append([]snapshot.SnapshotID(nil), rd.Finished...),
		Pause:    append([]snapshot.ProcessID(nil), rd.Pause...),
		Resume:   append([]snapshot.ProcessID(nil), rd.Resume...),
	}
	p.Advance()
	return out
}

func ids(xs ...snapshot.ProcessID) []snapshot.ProcessID { return xs }

// Rule: initiating records the local state, sends a marker on every
// outgoing channel in declaration order, and starts recording every
// incoming channel.
func TestRuleInitiateRecordsAndSendsMarkers(t *testing.T) {
	p := newProcess(t, "a", ids("c", "b"), ids("b", "c"))
	require.NoError(t, p.Initiate(1))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, snapshot.SnapshotID(1), rd.Records[0].Snapshot)
	assert.Equal(t, []snapshot.MarkerSend{{Snapshot: 1, To: "c"}, {Snapshot: 1, To: "b"}}, rd.Markers)
	assert.Empty(t, rd.Channels)
	assert.Empty(t, rd.Finished, "both incoming channels are being recorded")

	require.NoError(t, p.Marker("b", 1))
	rd = take(p)
	assert.Equal(t, []snapshot.ChannelRecord{{Snapshot: 1, Channel: snapshot.Channel{From: "b", To: "a"}}}, rd.Channels)
	require.NoError(t, p.Marker("c", 1))
	rd = take(p)
	assert.Len(t, rd.Channels, 1)
	assert.Equal(t, []snapshot.SnapshotID{1}, rd.Finished)
}

// Rule: the first marker for s on channel c records the state; c's state
// is empty; markers go out on every outgoing channel; every other incoming
// channel is recorded.
func TestRuleFirstMarkerRecords(t *testing.T) {
	p := newProcess(t, "b", ids("c"), ids("a", "c"))
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1}, "m1"))
	require.False(t, p.HasReady(), "no snapshot: no actions")
	require.NoError(t, p.Marker("a", 7))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "a", N: 1}, {Peer: "c", N: 0}}, rd.Records[0].Received)
	assert.Equal(t, []snapshot.MarkerSend{{Snapshot: 7, To: "c"}}, rd.Markers)
	assert.Empty(t, rd.Channels, "the marker's channel closes empty without a record")
	// A message after the marker on a is not channel state.
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 2}, "m2"))
	require.NoError(t, p.Receive("c", snapshot.Stamp{Seq: 1}, "c1"))
	require.NoError(t, p.Marker("c", 7))
	rd = take(p)
	require.Len(t, rd.Channels, 1)
	assert.Equal(t, []snapshot.Message{{Seq: 1, Payload: "c1"}}, rd.Channels[0].Messages)
}

// Rule: a later marker for s on c closes c's recording; its state is the
// messages received on c since the local record, in order.
func TestRuleLaterMarkerClosesChannel(t *testing.T) {
	p := newProcess(t, "b", nil, ids("a", "c"))
	require.NoError(t, p.Receive("c", snapshot.Stamp{Seq: 1}, "before"))
	require.NoError(t, p.Marker("a", 1))
	take(p)
	for i, m := range []string{"x", "y", "z"} {
		require.NoError(t, p.Receive("c", snapshot.Stamp{Seq: uint64(i + 2)}, m))
	}
	require.NoError(t, p.Marker("c", 1))
	require.NoError(t, p.Receive("c", snapshot.Stamp{Seq: 5}, "after"))
	rd := take(p)
	require.Len(t, rd.Channels, 1)
	assert.Equal(t, []snapshot.Message{{Seq: 2, Payload: "x"}, {Seq: 3, Payload: "y"}, {Seq: 4, Payload: "z"}}, rd.Channels[0].Messages)
	assert.Equal(t, 0, p.Recorded(), "nothing held once every recording closed")
}

// Rule (decision 3): a local record counts, per outgoing channel, the
// messages sent before it, and per incoming channel the messages received
// before it.
func TestRuleRecordCounters(t *testing.T) {
	p := newProcess(t, "a", nil, nil)
	p.Send("b")
	p.Send("b")
	p.Send("c")
	require.NoError(t, p.Receive("d", snapshot.Stamp{Seq: 1}, nil))
	require.NoError(t, p.Initiate(3))
	rd := take(p)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "b", N: 2}, {Peer: "c", N: 1}}, rd.Records[0].Sent)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "d", N: 1}}, rd.Records[0].Received)
	assert.Equal(t, []snapshot.MarkerSend{{Snapshot: 3, To: "b"}, {Snapshot: 3, To: "c"}}, rd.Markers, "discovered channels get markers")
}

// Rule: concurrent snapshots record a message received on a channel that
// several of them record once, shared by every recording.
func TestRuleConcurrentSnapshotsShareRecordedMessages(t *testing.T) {
	p := newProcess(t, "b", nil, ids("a", "c"))
	require.NoError(t, p.Initiate(1))
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1}, "m1"))
	require.NoError(t, p.Initiate(2))
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 2}, "m2"))
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 3}, "m3"))
	assert.Equal(t, 3, p.Recorded(), "three messages held once for two snapshots")
	require.NoError(t, p.Marker("a", 1))
	require.NoError(t, p.Marker("a", 2))
	rd := take(p)
	require.Len(t, rd.Channels, 2)
	one, two := rd.Channels[0].Messages, rd.Channels[1].Messages
	assert.Equal(t, []snapshot.Message{{1, "m1"}, {2, "m2"}, {3, "m3"}}, one)
	assert.Equal(t, []snapshot.Message{{2, "m2"}, {3, "m3"}}, two)
	assert.Same(t, &one[1], &two[0], "the second recording is a view of the same log")
}

// Rule (decision 2): the first message on a channel carries the snapshots
// its sender recorded; later messages carry only their sequence number.
func TestRuleFirstStampCarriesRecorded(t *testing.T) {
	p := newProcess(t, "a", nil, nil)
	assert.Equal(t, snapshot.Stamp{Seq: 1}, p.Send("x"))
	require.NoError(t, p.Initiate(4))
	require.NoError(t, p.Initiate(2))
	take(p)
	assert.Equal(t, snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{2, 4}}, p.Send("y"))
	assert.Equal(t, snapshot.Stamp{Seq: 2}, p.Send("y"))
	p.Forget(1)
	p.Forget(2)
	assert.Equal(t, snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{4}, Horizon: 2}, p.Send("z"))
}

// Rule (decision 2): a first message whose sender had recorded s acts as a
// marker for s: the receiver records before taking it in, and the channel's
// state is empty.
func TestRuleFirstMessageActsAsMarker(t *testing.T) {
	p := newProcess(t, "b", ids("c"), nil)
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{5}}, "after"))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "a", N: 0}}, rd.Records[0].Received, "recorded before the message")
	assert.Equal(t, []snapshot.MarkerSend{{Snapshot: 5, To: "c"}}, rd.Markers)
	assert.Equal(t, []snapshot.SnapshotID{5}, rd.Finished)
	assert.Equal(t, 0, p.Recorded())
}

// Rule (decision 2): a channel first used after the receiver recorded s, by
// a sender that had not recorded s, carries channel state for s until the
// sender's marker.
func TestRuleLateChannelIsRecorded(t *testing.T) {
	p := newProcess(t, "b", nil, nil)
	require.NoError(t, p.Initiate(1))
	take(p)
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1}, "pre"))
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 2}, "pre2"))
	require.NoError(t, p.Marker("a", 1))
	rd := take(p)
	require.Len(t, rd.Channels, 1)
	assert.Equal(t, []snapshot.Message{{1, "pre"}, {2, "pre2"}}, rd.Channels[0].Messages)
}

// Rule (decision 2): a declared channel, recorded since the record, closes
// empty when its first message says the sender had recorded.
func TestRuleDeclaredChannelClosedByFirstStamp(t *testing.T) {
	p := newProcess(t, "b", nil, ids("a"))
	require.NoError(t, p.Initiate(1))
	take(p)
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{1}}, "post"))
	rd := take(p)
	require.Len(t, rd.Channels, 1)
	assert.Empty(t, rd.Channels[0].Messages)
	assert.Equal(t, []snapshot.SnapshotID{1}, rd.Finished)
}

// Rule: FIFO is an assumption the algorithm checks: a gap or a duplicate
// on a channel is an error, and nothing is recorded.
func TestRuleSequenceChecked(t *testing.T) {
	p := newProcess(t, "b", nil, nil)
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1}, nil))
	err := p.Receive("a", snapshot.Stamp{Seq: 3}, nil)
	var se *snapshot.SequenceError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, uint64(2), se.Expected)
	require.ErrorIs(t, p.Receive("a", snapshot.Stamp{Seq: 1}, nil), snapshot.ErrSequence)
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 2}, nil))
}

// Rule: one marker per snapshot per channel; a second is a protocol error.
func TestRuleSecondMarkerRejected(t *testing.T) {
	p := newProcess(t, "b", nil, ids("a"))
	require.NoError(t, p.Marker("a", 1))
	require.ErrorIs(t, p.Marker("a", 1), snapshot.ErrProtocol)
	require.ErrorIs(t, p.Marker("a", 0), snapshot.ErrInvalidID)
	require.ErrorIs(t, p.Initiate(0), snapshot.ErrInvalidID)
}

// Rule: initiating a snapshot already recorded does nothing (a broadcast
// marker after a peer's marker).
func TestRuleInitiateIdempotent(t *testing.T) {
	p := newProcess(t, "b", ids("c"), ids("a"))
	require.NoError(t, p.Marker("a", 1))
	take(p)
	require.NoError(t, p.Initiate(1))
	assert.False(t, p.HasReady())
}

// Rule: a forgotten snapshot is over: its recordings are dropped, late
// markers are ignored, and initiating it again is an error.
func TestRuleForget(t *testing.T) {
	p := newProcess(t, "b", ids("c"), ids("a"))
	require.NoError(t, p.Initiate(1))
	take(p)
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1}, "x"))
	assert.Equal(t, 1, p.Recorded())
	p.Forget(1)
	assert.Equal(t, 0, p.Recorded())
	assert.Empty(t, p.Active())
	require.NoError(t, p.Marker("a", 1))
	assert.False(t, p.HasReady())
	require.ErrorIs(t, p.Initiate(1), snapshot.ErrFinished)
	// A first message naming only finished snapshots changes nothing.
	require.NoError(t, p.Receive("z", snapshot.Stamp{Seq: 1, Horizon: 1}, nil))
	assert.False(t, p.HasReady())
}

// Rule: with no snapshot in progress, neither path produces actions.
func TestRuleNoSnapshotNoActions(t *testing.T) {
	p := newProcess(t, "a", nil, nil)
	for i := range 10 {
		p.Send("b")
		require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: uint64(i + 1)}, i))
	}
	assert.False(t, p.HasReady())
	assert.Equal(t, 0, p.Recorded())
}

func TestNewProcessRejectsBadConfig(t *testing.T) {
	_, err := snapshot.NewProcess(snapshot.Config{})
	require.ErrorIs(t, err, snapshot.ErrConfig)
	_, err = snapshot.NewProcess(snapshot.Config{ID: "a", Mode: 9})
	require.ErrorIs(t, err, snapshot.ErrConfig)
}

func rec(id snapshot.SnapshotID, p snapshot.ProcessID, sent, received []snapshot.PeerCount) snapshot.LocalRecord {
	return snapshot.LocalRecord{Snapshot: id, Process: p, Sent: sent, Received: received}
}

func pc(p snapshot.ProcessID, n uint64) snapshot.PeerCount { return snapshot.PeerCount{Peer: p, N: n} }

// Rule (decision 3): the assembler completes only when every participant
// recorded and every channel balances, and says what is missing meanwhile.
func TestRuleAssemblerCompletesByCounters(t *testing.T) {
	now := time.Unix(100, 0)
	a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Participants: ids("a", "b")})
	require.NoError(t, err)
	require.NoError(t, a.AddRecord(rec(1, "a", []snapshot.PeerCount{pc("b", 3)}, nil)))
	assert.Equal(t, snapshot.Pending, a.Status(now).State)
	assert.Equal(t, ids("b"), a.Missing().Participants)

	require.NoError(t, a.AddRecord(rec(1, "b", nil, []snapshot.PeerCount{pc("a", 1)})))
	assert.Equal(t, snapshot.Pending, a.Status(now).State)
	m := a.Missing()
	assert.Empty(t, m.Participants)
	require.Len(t, m.Channels, 1)
	assert.Equal(t, snapshot.ChannelGap{Channel: snapshot.Channel{From: "a", To: "b"}, Sent: 3, Received: 1, Open: true}, m.Channels[0])
	_, err = a.Global()
	require.ErrorIs(t, err, snapshot.ErrIncomplete)

	require.NoError(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 1, Channel: snapshot.Channel{From: "a", To: "b"},
		Messages: []snapshot.Message{{2, "x"}, {3, "y"}}}))
	require.Equal(t, snapshot.Complete, a.Status(now).State)
	g, err := a.Global()
	require.NoError(t, err)
	require.NoError(t, g.Verify())
	assert.Equal(t, now, g.End)
	assert.Len(t, g.InFlight(snapshot.Channel{From: "a", To: "b"}), 2)
}

// Rule (decision 3): a channel whose receiver took in everything sent
// before the sender's record balances without waiting for its marker, and
// a channel that carried nothing does not make its far end a participant.
func TestRuleAssemblerBalancedWithoutMarker(t *testing.T) {
	a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 2})
	require.NoError(t, err)
	require.NoError(t, a.AddRecord(rec(2, "a", []snapshot.PeerCount{pc("b", 2), pc("ghost", 0)}, nil)))
	require.NoError(t, a.AddRecord(rec(2, "b", nil, []snapshot.PeerCount{pc("a", 2)})))
	require.Equal(t, snapshot.Complete, a.Status(time.Time{}).State)
}

// Rule (decision 3): a closed recording that does not balance means a lost
// or duplicated message: the snapshot aborts, naming the channel and the
// counts.
func TestRuleAssemblerAbortsOnImbalance(t *testing.T) {
	a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 3})
	require.NoError(t, err)
	require.NoError(t, a.AddRecord(rec(3, "a", []snapshot.PeerCount{pc("b", 3)}, nil)))
	require.NoError(t, a.AddRecord(rec(3, "b", nil, []snapshot.PeerCount{pc("a", 1)})))
	err = a.AddChannel(snapshot.ChannelRecord{Snapshot: 3, Channel: snapshot.Channel{From: "a", To: "b"}, Messages: []snapshot.Message{{2, nil}}})
	require.ErrorIs(t, err, snapshot.ErrAborted)
	require.ErrorIs(t, err, snapshot.ErrImbalance)
	assert.Contains(t, err.Error(), "a->b does not balance: sent 3 before record, received 1 before record, recorded 1")
	assert.Equal(t, snapshot.Aborted, a.Status(time.Time{}).State)
}

// Rule (decision 6): a snapshot not complete at its deadline aborts with
// ErrTimeout and says what it waited for.
func TestRuleAssemblerDeadline(t *testing.T) {
	start := time.Unix(0, 0)
	a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 4, Participants: ids("a", "b"), Start: start, Deadline: start.Add(time.Second)})
	require.NoError(t, err)
	require.NoError(t, a.AddRecord(rec(4, "a", nil, nil)))
	assert.Equal(t, snapshot.Pending, a.Status(start.Add(999*time.Millisecond)).State)
	st := a.Status(start.Add(time.Second))
	require.Equal(t, snapshot.Aborted, st.State)
	require.ErrorIs(t, st.Err, snapshot.ErrTimeout)
	var ae *snapshot.AbortError
	require.ErrorAs(t, st.Err, &ae)
	assert.Equal(t, ids("b"), ae.Missing.Participants)
	assert.Contains(t, st.Err.Error(), "not recorded: b")
}

// Rule: a participant records once per snapshot; a channel closes once.
func TestRuleAssemblerRejectsDuplicates(t *testing.T) {
	a, _ := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 5})
	require.NoError(t, a.AddRecord(rec(5, "a", nil, nil)))
	require.ErrorIs(t, a.AddRecord(rec(5, "a", nil, nil)), snapshot.ErrProtocol)
	b, _ := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 5})
	cr := snapshot.ChannelRecord{Snapshot: 5, Channel: snapshot.Channel{From: "a", To: "b"}}
	require.NoError(t, b.AddChannel(cr))
	require.ErrorIs(t, b.AddChannel(cr), snapshot.ErrProtocol)
	require.Error(t, b.AddRecord(rec(6, "a", nil, nil)), "another snapshot's record")
	b.Abort(errors.New("participant stopped"))
	assert.Contains(t, b.Status(time.Time{}).Err.Error(), "snapshot 5 aborted")
}

// Verify names the channel and its counts.
func TestGlobalVerify(t *testing.T) {
	g := &snapshot.Global{ID: 9,
		Participants: []snapshot.Participant{{ID: "a"}, {ID: "b"}},
		Channels:     []snapshot.ChannelState{{Channel: snapshot.Channel{From: "a", To: "b"}, Sent: 4, Received: 2, Messages: []snapshot.Message{{3, nil}}}},
	}
	err := g.Verify()
	require.ErrorIs(t, err, snapshot.ErrImbalance)
	assert.EqualError(t, err, "snapshot 9: channel a->b does not balance: sent 4 before record, received 2 before record, recorded 1")
	g.Channels[0].Messages = append(g.Channels[0].Messages, snapshot.Message{Seq: 5})
	assert.ErrorContains(t, g.Verify(), "message 1 has sequence 5, want 4")
	g.Channels[0].Messages[1].Seq = 4
	require.NoError(t, g.Verify())
	g.Participants = g.Participants[:1]
	assert.ErrorContains(t, g.Verify(), "b is not a participant")
}

// Rule (decision 7): a process born after its creator recorded s is not
// part of s: markers and stamps naming s are ignored.
func TestRuleBornAfterTheCut(t *testing.T) {
	p, err := snapshot.NewProcess(snapshot.Config{ID: "child", Incoming: ids("parent"), Finished: []snapshot.SnapshotID{3}})
	require.NoError(t, err)
	require.NoError(t, p.Receive("parent", snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{3}}, nil))
	require.NoError(t, p.Marker("x", 3))
	assert.False(t, p.HasReady())
	require.NoError(t, p.Marker("x", 4))
	assert.Len(t, take(p).Records, 1, "later snapshots are its own")
}

// Rule (decision 7): when a sender stops, every recording of its channel
// closes with what arrived, and later snapshots do not wait for it.
func TestRuleDepartedSenderClosesChannel(t *testing.T) {
	p := newProcess(t, "b", nil, ids("a", "c"))
	require.NoError(t, p.Marker("c", 1))
	take(p)
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 1}, "last words"))
	p.Departed("a")
	rd := take(p)
	require.Len(t, rd.Channels, 1)
	assert.Equal(t, []snapshot.Message{{Seq: 1, Payload: "last words"}}, rd.Channels[0].Messages)
	assert.Equal(t, []snapshot.SnapshotID{1}, rd.Finished)
	require.NoError(t, p.Marker("c", 2))
	rd = take(p)
	assert.Equal(t, []snapshot.SnapshotID{2}, rd.Finished, "a departed, c's marker came: nothing open")
}

// Stop closes the open recordings with what they logged; the counters
// then tell whether a message in flight at the cut was lost with the
// stopped process (aborted) or not (complete).
func TestStopClosesRecordings(t *testing.T) {
	for _, lost := range []bool{false, true} {
		b := newProcess(t, "b", nil, ids("a"))
		require.NoError(t, b.Receive("a", snapshot.Stamp{Seq: 1}, "before"))
		require.NoError(t, b.Initiate(1))
		rd := take(b)
		require.Len(t, rd.Records, 1)
		bRec := rd.Records[0]
		require.NoError(t, b.Receive("a", snapshot.Stamp{Seq: 2}, "in flight"))
		b.Stop()
		rd = take(b)
		require.Len(t, rd.Channels, 1)
		assert.Equal(t, []snapshot.SnapshotID{1}, rd.Finished)
		assert.Len(t, rd.Channels[0].Messages, 1)

		sent := uint64(2)
		if lost {
			sent = 3 // a third message reached b's mailbox after it stopped
		}
		asm, _ := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Participants: ids("a", "b")})
		require.NoError(t, asm.AddRecord(rec(1, "a", []snapshot.PeerCount{pc("b", sent)}, nil)))
		require.NoError(t, asm.AddRecord(bRec))
		err := asm.AddChannel(rd.Channels[0])
		if lost {
			var be *snapshot.BalanceError
			require.ErrorAs(t, err, &be)
			assert.Equal(t, snapshot.Aborted, asm.Status(time.Time{}).State)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, snapshot.Complete, asm.Status(time.Time{}).State)
	}
}

// Assembler.Stopped: a channel to a process that stopped, unbalanced by
// what it received and recorded, aborts the snapshot, whether the sender
// recorded before or after; balanced ones complete.
func TestAssemblerStopped(t *testing.T) {
	for _, senderFirst := range []bool{true, false} {
		a, _ := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Participants: ids("a", "b", "c")})
		sender := rec(1, "a", []snapshot.PeerCount{pc("b", 1)}, nil) // b never heard of a
		if senderFirst {
			require.NoError(t, a.AddRecord(sender))
		}
		require.NoError(t, a.AddRecord(rec(1, "b", nil, []snapshot.PeerCount{pc("c", 2)})))
		require.NoError(t, a.AddRecord(rec(1, "c", []snapshot.PeerCount{pc("b", 2)}, nil)))
		err := a.Stopped("b")
		if !senderFirst {
			require.NoError(t, err, "a has not recorded yet")
			err = a.AddRecord(sender)
		}
		var be *snapshot.BalanceError
		require.ErrorAs(t, err, &be)
		assert.Equal(t, snapshot.Channel{From: "a", To: "b"}, be.Channel)
		assert.Equal(t, snapshot.Aborted, a.Status(time.Time{}).State)
	}
	a, _ := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Participants: ids("b", "c")})
	require.NoError(t, a.AddRecord(rec(1, "b", nil, []snapshot.PeerCount{pc("c", 2)})))
	require.NoError(t, a.Stopped("b"))
	require.NoError(t, a.AddRecord(rec(1, "c", []snapshot.PeerCount{pc("b", 2)}, nil)))
	assert.Equal(t, snapshot.Complete, a.Status(time.Time{}).State)
}

// DropPeer: records from then on do not name the peer, what was logged
// for it is let go, and a late Departed does not bring the channel back.
func TestDropPeer(t *testing.T) {
	p := newProcess(t, "a", ids("b", "c"), ids("b", "c"))
	for seq := uint64(1); seq <= 2; seq++ {
		require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: seq}, seq))
	}
	p.Send("b")
	require.NoError(t, p.Initiate(1))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, []snapshot.PeerCount{pc("b", 2), pc("c", 0)}, rd.Records[0].Received)
	require.NoError(t, p.Receive("c", snapshot.Stamp{Seq: 1}, "logged"))
	assert.Equal(t, 1, p.Recorded())

	p.DropPeer("b")
	p.DropPeer("c")
	assert.Equal(t, 0, p.Recorded(), "c's log is let go")
	rd = take(p)
	require.Len(t, rd.Channels, 2, "snapshot 1's recordings close, as by Departed")
	p.Forget(1)
	p.Departed("b") // its departure came after the drop
	require.NoError(t, p.Initiate(2))
	rd = take(p)
	require.Len(t, rd.Records, 1)
	assert.Empty(t, rd.Records[0].Sent)
	assert.Empty(t, rd.Records[0].Received)
	assert.Empty(t, rd.Markers)
	assert.Empty(t, p.Counters().Sent)
	assert.Zero(t, p.Received("b"))
}

// Handles count on the channels that Send and Receive count on by name;
// a handle whose channel was dropped finds the new channel under the name
// (a new process given the dropped one's name), and never counts on the
// old one.
func TestHandles(t *testing.T) {
	p := newProcess(t, "a", nil, nil)
	var out snapshot.OutHandle
	var in snapshot.InHandle
	for seq := uint64(1); seq <= 3; seq++ {
		require.NoError(t, p.ReceiveNextOn(&in, "b", snapshot.Stamp{Seq: 99}, seq), "the number is the channel's next, whatever the stamp says")
		assert.Equal(t, snapshot.Stamp{Seq: seq}, p.SendOn(&out, "b"))
	}
	assert.Equal(t, snapshot.Stamp{Seq: 4}, p.Send("b"), "one channel, by name or by handle")
	require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: 4}, 4))
	require.NoError(t, p.ReceiveNextOn(&in, "b", snapshot.Stamp{}, 5), "the handle counts on after a receive by name")
	assert.Equal(t, uint64(5), p.Received("b"))
	assert.Equal(t, []snapshot.PeerCount{pc("b", 4)}, p.Counters().Sent)

	p.DropPeer("b")
	p.Departed("b")
	assert.Equal(t, snapshot.Stamp{Seq: 1}, p.SendOn(&out, "b"), "a new channel under the name")
	require.NoError(t, p.ReceiveNextOn(&in, "b", snapshot.Stamp{}, "new"))
	assert.Equal(t, uint64(1), p.Received("b"), "the handle left the dropped channel")
	assert.Equal(t, []snapshot.PeerCount{pc("b", 1)}, p.Counters().Sent)
	assert.Equal(t, []snapshot.PeerCount{pc("b", 1)}, p.Counters().Received)
}

// Markers of a dropped sender still on their way, before its departure,
// are stale: they do not open its channel again (every later record would
// name it). Its departure ends that; a new sender under the name is a
// sender like any other.
func TestDropPeerStaleMarkers(t *testing.T) {
	p := newProcess(t, "a", nil, nil)
	require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: 1}, "b1"))
	require.NoError(t, p.Initiate(1))
	take(p)
	p.Forget(1)
	take(p)
	p.DropPeer("b")
	take(p)
	require.NoError(t, p.Marker("b", 1), "finished")
	require.NoError(t, p.Marker("b", 2), "not started here: a stale marker does not start it")
	assert.False(t, p.HasReady())
	require.NoError(t, p.Initiate(3))
	rd := take(p)
	require.Len(t, rd.Records, 1)
	assert.Empty(t, rd.Records[0].Received, "b is not named again")

	p.DropPeer("b") // told twice (a peer, and a sender to it since it stopped)
	require.NoError(t, p.Marker("b", 2), "still stale")
	assert.False(t, p.HasReady())
	p.Departed("b") // the last of the old b
	require.NoError(t, p.Marker("b", 3), "a new b, declared to a, that recorded 3")
	assert.Equal(t, []snapshot.PeerCount{pc("b", 0)}, p.Counters().Received)
}

// DropPeer of a sender blocked by a pending aligned snapshot resumes it,
// and the snapshot no longer awaits it.
func TestDropPeerAligned(t *testing.T) {
	p := newAligned(t, "c", nil, ids("a", "b"), nil)
	require.NoError(t, p.Marker("a", 1))
	assert.Equal(t, ids("a"), take(p).Pause)
	p.DropPeer("a")
	rd := take(p)
	assert.Equal(t, ids("a"), rd.Resume)
	assert.Empty(t, rd.Records, "still awaiting b")
	require.NoError(t, p.Marker("b", 1))
	rd = take(p)
	require.Len(t, rd.Records, 1)
	assert.Equal(t, []snapshot.PeerCount{pc("b", 0)}, rd.Records[0].Received)
}

// Rule (decision 7): a process that stopped before a snapshot stands in with
// its final counters: channels from it balance against them, channels to it
// are left out.
func TestRuleAssemblerDeparted(t *testing.T) {
	a, _ := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 8, Participants: ids("b")})
	require.NoError(t, a.AddDeparted(rec(8, "a", []snapshot.PeerCount{pc("b", 3)}, []snapshot.PeerCount{pc("b", 1)})))
	require.NoError(t, a.AddRecord(rec(8, "b", []snapshot.PeerCount{pc("a", 5)}, []snapshot.PeerCount{pc("a", 2)})))
	assert.Equal(t, snapshot.Pending, a.Status(time.Time{}).State, "one message from a still to be recorded")
	require.NoError(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 8, Channel: snapshot.Channel{From: "a", To: "b"}, Messages: []snapshot.Message{{Seq: 3}}}))
	require.Equal(t, snapshot.Complete, a.Status(time.Time{}).State)
	g, _ := a.Global()
	require.NoError(t, g.Verify())
	p, _ := g.Participant("a")
	assert.True(t, p.Departed)
	_, ok := g.Channel(snapshot.Channel{From: "b", To: "a"})
	assert.False(t, ok, "messages to a stopped process are dead letters")
}

// AssemblerConfig.Departed adds only the departed processes a record or a
// channel recording names, with the same result as AddDeparted: a, named
// by b's record; c, named only by a channel recording that arrives before
// any record naming it; d, named by no one, is left out.
func TestAssemblerDepartedLookup(t *testing.T) {
	finals := map[snapshot.ProcessID]snapshot.LocalRecord{
		"a": rec(0, "a", []snapshot.PeerCount{pc("b", 3)}, []snapshot.PeerCount{pc("b", 1)}),
		"c": rec(0, "c", []snapshot.PeerCount{pc("b", 2)}, nil),
		"d": rec(0, "d", []snapshot.PeerCount{pc("x", 4)}, nil),
	}
	var asked []snapshot.ProcessID
	a, _ := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 8, Participants: ids("b"),
		Departed: func(id snapshot.ProcessID) (snapshot.LocalRecord, bool) {
			asked = append(asked, id)
			r, ok := finals[id]
			return r, ok
		}})
	require.NoError(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 8, Channel: snapshot.Channel{From: "c", To: "b"}, Messages: []snapshot.Message{{Seq: 1}, {Seq: 2}}}))
	require.NoError(t, a.AddRecord(rec(8, "b", []snapshot.PeerCount{pc("a", 5)}, []snapshot.PeerCount{pc("a", 2)})))
	assert.Equal(t, snapshot.Pending, a.Status(time.Time{}).State, "one message from a still to be recorded")
	require.NoError(t, a.AddChannel(snapshot.ChannelRecord{Snapshot: 8, Channel: snapshot.Channel{From: "a", To: "b"}, Messages: []snapshot.Message{{Seq: 3}}}))
	require.Equal(t, snapshot.Complete, a.Status(time.Time{}).State)
	assert.Equal(t, []snapshot.ProcessID{"c", "a"}, asked, "each asked once, d never")
	g, _ := a.Global()
	require.NoError(t, g.Verify())
	for _, id := range []snapshot.ProcessID{"a", "c"} {
		p, ok := g.Participant(id)
		require.True(t, ok, id)
		assert.True(t, p.Departed, id)
	}
	_, ok := g.Participant("d")
	assert.False(t, ok, "named by no record")
	assert.Len(t, g.InFlight(snapshot.Channel{From: "c", To: "b"}), 2)
	assert.Equal(t, ids("b"), a.Peers("a"))
	assert.Equal(t, ids("b"), a.Peers("c"))
	assert.Equal(t, ids(), a.Peers("b"), "its peers are departed")
	assert.Empty(t, a.Peers("d"))
}

// Rule (decision 7): a child created before its parent records s takes part
// in s; one created after does not.
func TestRuleChildConfig(t *testing.T) {
	parent := newProcess(t, "parent", nil, nil)
	require.NoError(t, parent.Initiate(1))
	take(parent)
	parent.Forget(1)
	require.NoError(t, parent.Initiate(2))
	take(parent)
	cfg := parent.ChildConfig("child")
	assert.Equal(t, snapshot.Config{ID: "child", Incoming: ids("parent"), Finished: []snapshot.SnapshotID{2}, Horizon: 1}, cfg)
	child, err := snapshot.NewProcess(cfg)
	require.NoError(t, err)
	require.NoError(t, child.Marker("parent", 2))
	assert.False(t, child.HasReady(), "born after the cut of 2")
	require.NoError(t, child.Marker("parent", 3))
	assert.True(t, child.HasReady(), "3 is the child's")
	c := child.Counters()
	assert.Equal(t, []snapshot.PeerCount{{Peer: "parent", N: 0}}, c.Received)
	assert.Equal(t, uint64(0), child.Received("parent"))
}

// A child born after its parent's cut of s names s in its first messages,
// even once s is below its horizon: a receiver that has not recorded s
// records it before the message, which comes after the cut.
func TestChildFirstMessageActsAsMarker(t *testing.T) {
	parent := newProcess(t, "parent", nil, nil)
	require.NoError(t, parent.Initiate(1))
	take(parent)
	child, err := snapshot.NewProcess(parent.ChildConfig("child"))
	require.NoError(t, err)
	st := child.Send("h")
	assert.Equal(t, []snapshot.SnapshotID{1}, st.Recorded)
	h := newProcess(t, "h", nil, nil)
	require.NoError(t, h.Receive("child", st, "post-cut"))
	rd := take(h)
	require.Len(t, rd.Records, 1, "h records 1 before the message")
	assert.Equal(t, []snapshot.PeerCount{pc("child", 0)}, rd.Records[0].Received)
}

// A restored process continues its channels' sequences.
func TestRestoredCounters(t *testing.T) {
	p, err := snapshot.NewProcess(snapshot.Config{ID: "b", Sent: []snapshot.PeerCount{pc("c", 7)}, Received: []snapshot.PeerCount{pc("a", 4)}})
	require.NoError(t, err)
	assert.Equal(t, snapshot.Stamp{Seq: 8}, p.Send("c"))
	require.ErrorIs(t, p.Receive("a", snapshot.Stamp{Seq: 1}, nil), snapshot.ErrSequence)
	require.NoError(t, p.Receive("a", snapshot.Stamp{Seq: 5}, nil))
	assert.Equal(t, uint64(5), p.Received("a"))
}

// Discard drops what a process logged for a doomed snapshot but keeps it
// active, so that its first messages still name it.
func TestDiscard(t *testing.T) {
	p := newProcess(t, "a", ids("b"), ids("b", "c"))
	require.NoError(t, p.Initiate(1))
	take(p)
	require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: 1}, "m1"))
	require.NoError(t, p.Receive("c", snapshot.Stamp{Seq: 1}, "m2"))
	assert.Equal(t, 2, p.Recorded())
	p.Discard(1)
	assert.Equal(t, 0, p.Recorded())
	require.NoError(t, p.Receive("b", snapshot.Stamp{Seq: 2}, "m3"))
	assert.Equal(t, 0, p.Recorded(), "nothing more logged for it")
	require.NoError(t, p.Marker("b", 1))
	assert.Empty(t, take(p).Channels, "no channel record for a discarded snapshot")
	assert.Equal(t, []snapshot.SnapshotID{1}, p.Active())
	assert.Equal(t, []snapshot.SnapshotID{1}, p.Send("d").Recorded, "a first message still names it")
	require.NoError(t, snapshot.CheckLogged(p))
}

// An Assembler given the Numbering of an earlier one assembles the same
// Global as one given none: when the records name the same peers (the
// Numbering is then passed on unchanged: no record needed a lookup), when
// a process and a channel are new, and when a process of the earlier
// snapshot is gone (its channels are not in the later Global).
// assembleWith assembles recs, which must complete snapshot id, given
// the Numbering nb, and returns the Global and the next Numbering.
func assembleWith(t *testing.T, id snapshot.SnapshotID, parts []snapshot.ProcessID, nb *snapshot.Numbering, recs []snapshot.LocalRecord) (*snapshot.Global, *snapshot.Numbering) {
	t.Helper()
	a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: id, Participants: parts, Numbering: nb})
	require.NoError(t, err)
	for _, r := range recs {
		require.NoError(t, a.AddRecord(r))
	}
	require.Equal(t, snapshot.Complete, a.Status(time.Unix(100, 0)).State)
	g, err := a.Global()
	require.NoError(t, err)
	require.NoError(t, g.Verify())
	return g, a.Numbering()
}

func TestAssemblerNumbering(t *testing.T) {
	assemble := func(id snapshot.SnapshotID, parts []snapshot.ProcessID, nb *snapshot.Numbering, recs []snapshot.LocalRecord) (*snapshot.Global, *snapshot.Numbering) {
		t.Helper()
		return assembleWith(t, id, parts, nb, recs)
	}
	same := func(id snapshot.SnapshotID, parts []snapshot.ProcessID, nb *snapshot.Numbering, recs func(snapshot.SnapshotID) []snapshot.LocalRecord) *snapshot.Numbering {
		t.Helper()
		want, _ := assemble(id, parts, nil, recs(id))
		got, next := assemble(id, parts, nb, recs(id))
		assert.Equal(t, want, got)
		return next
	}
	abc := func(id snapshot.SnapshotID) []snapshot.LocalRecord {
		return []snapshot.LocalRecord{
			rec(id, "a", []snapshot.PeerCount{pc("b", 2), pc("c", 0)}, []snapshot.PeerCount{pc("c", 1)}),
			rec(id, "b", nil, []snapshot.PeerCount{pc("a", 2)}),
			rec(id, "c", []snapshot.PeerCount{pc("a", 1)}, []snapshot.PeerCount{pc("a", 0)}),
		}
	}
	_, n1 := assemble(1, ids("a", "b", "c"), nil, abc(1))
	require.NotNil(t, n1)
	n2 := same(2, ids("a", "b", "c"), n1, abc)
	assert.Same(t, n1, n2, "the same records need no new numbering")

	// d is new, talks to a; b is gone.
	acd := func(id snapshot.SnapshotID) []snapshot.LocalRecord {
		return []snapshot.LocalRecord{
			rec(id, "a", []snapshot.PeerCount{pc("c", 0), pc("d", 4)}, []snapshot.PeerCount{pc("c", 1)}),
			rec(id, "c", []snapshot.PeerCount{pc("a", 1)}, []snapshot.PeerCount{pc("a", 0)}),
			rec(id, "d", nil, []snapshot.PeerCount{pc("a", 4)}),
		}
	}
	n3 := same(3, ids("a", "c", "d"), n2, acd)
	require.NotNil(t, n3)
	assert.NotSame(t, n2, n3)
	g, _ := assemble(4, ids("a", "c", "d"), n3, acd(4))
	for _, c := range g.Channels {
		assert.NotEqual(t, snapshot.ProcessID("b"), c.Channel.To, "a channel of a process gone")
	}
	same(4, ids("a", "c", "d"), n3, acd)
}

// An Assembler given the Numbering of the snapshot before assembles what
// one given none does while a process's channels change from record to
// record: grown at the end (the usual case, as a process lists its
// channels in the order it made them), reordered, dropped from the front,
// fewer.
func TestAssemblerNumberingGrowingShapes(t *testing.T) {
	assemble := func(id snapshot.SnapshotID, nb *snapshot.Numbering, recs []snapshot.LocalRecord) (*snapshot.Global, *snapshot.Numbering) {
		t.Helper()
		return assembleWith(t, id, ids("a", "b", "c", "d"), nb, recs)
	}
	// a sends to outs and receives from ins; each peer mirrors it.
	records := func(id snapshot.SnapshotID, outs, ins []string) []snapshot.LocalRecord {
		var sent, received []snapshot.PeerCount
		mirror := map[string]*snapshot.LocalRecord{}
		for _, p := range []string{"b", "c", "d"} {
			mirror[p] = &snapshot.LocalRecord{Snapshot: id, Process: snapshot.ProcessID(p)}
		}
		for i, p := range outs {
			sent = append(sent, pc(snapshot.ProcessID(p), uint64(i+1)))
			mirror[p].Received = append(mirror[p].Received, pc("a", uint64(i+1)))
		}
		for i, p := range ins {
			received = append(received, pc(snapshot.ProcessID(p), uint64(10+i)))
			mirror[p].Sent = append(mirror[p].Sent, pc("a", uint64(10+i)))
		}
		recs := []snapshot.LocalRecord{rec(id, "a", sent, received)}
		for _, p := range []string{"b", "c", "d"} {
			recs = append(recs, *mirror[p])
		}
		return recs
	}
	var nb *snapshot.Numbering
	for i, step := range []struct{ outs, ins []string }{
		{[]string{"b"}, []string{"c"}},
		{[]string{"b", "c"}, []string{"c", "d"}},      // grown at the ends
		{[]string{"b", "c", "d"}, []string{"c", "d"}}, // one more sent
		{[]string{"c", "d"}, []string{"d", "c", "b"}}, // b dropped from the front; received reordered
		{[]string{"c"}, []string{"d"}},                // shorter
		{[]string{"c", "b", "d"}, []string{"d", "b"}},
	} {
		id := snapshot.SnapshotID(i + 1)
		want, _ := assemble(id, nil, records(id, step.outs, step.ins))
		got, next := assemble(id, nb, records(id, step.outs, step.ins))
		assert.Equal(t, want, got, "step %d", i)
		if next != nil {
			nb = next
		}
	}
}

// Numberings grown from one another, a few channels at a time, keep
// what they add in a layer over a shared base: every Assembler given one
// assembles what an Assembler given none does, along a chain of them and
// on two branches grown from the same Numbering with different channels,
// and the base is rebuilt once the layer outgrows an eighth of it.
func TestAssemblerNumberingLayers(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	const n = 64
	name := func(i int) snapshot.ProcessID { return snapshot.ProcessID(fmt.Sprintf("p%02d", i)) }
	var parts []snapshot.ProcessID
	for i := range n {
		parts = append(parts, name(i))
	}
	// chans lists each process's peers, in the order added: a ring, then
	// chords.
	type graph struct{ outs, ins [][]int }
	grow := func(g graph, k int) graph {
		h := graph{outs: make([][]int, n), ins: make([][]int, n)}
		for i := range n {
			h.outs[i], h.ins[i] = slices.Clone(g.outs[i]), slices.Clone(g.ins[i])
		}
		for added := 0; added < k; {
			from, to := rng.IntN(n), rng.IntN(n)
			if from == to || slices.Contains(h.outs[from], to) {
				continue
			}
			h.outs[from] = append(h.outs[from], to)
			h.ins[to] = append(h.ins[to], from)
			added++
		}
		return h
	}
	records := func(id snapshot.SnapshotID, g graph) []snapshot.LocalRecord {
		var recs []snapshot.LocalRecord
		for i := range n {
			var sent, received []snapshot.PeerCount
			for _, j := range g.outs[i] {
				sent = append(sent, pc(name(j), uint64(id)*uint64(i+j+1)))
			}
			for _, j := range g.ins[i] {
				received = append(received, pc(name(j), uint64(id)*uint64(i+j+1)))
			}
			recs = append(recs, rec(id, name(i), sent, received))
		}
		return recs
	}
	id := snapshot.SnapshotID(0)
	step := func(nb *snapshot.Numbering, g graph) *snapshot.Numbering {
		t.Helper()
		id++
		want, _ := assembleWith(t, id, parts, nil, records(id, g))
		got, next := assembleWith(t, id, parts, nb, records(id, g))
		require.Equal(t, want, got, "snapshot %d (seed %d)", id, seed)
		require.NotNil(t, next)
		return next
	}
	g := graph{outs: make([][]int, n), ins: make([][]int, n)}
	for i := range n {
		g.outs[i], g.ins[i] = []int{(i + 1) % n}, []int{(i + n - 1) % n}
	}
	nb := step(nil, g)
	base, extra := snapshot.NumberingLayers(nb)
	require.Equal(t, 2*n, base)
	require.Zero(t, extra)
	layered, rebuilt := 0, 0
	for range 12 {
		g = grow(g, 3)
		prev, _ := snapshot.NumberingLayers(nb)
		nb = step(nb, g)
		if b, e := snapshot.NumberingLayers(nb); e > 0 {
			require.Equal(t, prev, b, "a layer keeps its base")
			layered++
		} else if b > prev {
			rebuilt++
		}
	}
	require.Positive(t, layered, "some Numberings are layered")
	require.Positive(t, rebuilt, "a layer grown past an eighth of the base is folded in")
	// Two branches from one Numbering, each adding other channels, then
	// each grown on: neither sees the other's numbers.
	g1, g2 := grow(g, 2), grow(g, 2)
	b1, b2 := step(nb, g1), step(nb, g2)
	for range 3 {
		g1, g2 = grow(g1, 2), grow(g2, 2)
		b1, b2 = step(b1, g1), step(b2, g2)
	}
	step(nb, g)
}
