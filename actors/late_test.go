package actors

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

type lateMsg struct{ N int }

type unregistered struct{ N int }

// A turn's late channel state reaches the guardian as one report per
// snapshot, in the order it came, each message as encoded on arrival; a
// channel whose message cannot be encoded leaves no trace.
func TestLateChannelsReportByTurn(t *testing.T) {
	types := newMessageTypes()
	require.NoError(t, types.register(reflect.TypeFor[*lateMsg](), "late"))
	var l lateChannels
	l.enc.types = types
	ch := func(from string) snapshot.Channel {
		return snapshot.Channel{From: snapshot.ProcessID(from), To: "r"}
	}
	msgs := func(seq uint64, ns ...int) []snapshot.Message {
		var out []snapshot.Message
		for i, n := range ns {
			out = append(out, snapshot.Message{Seq: seq + uint64(i), Payload: &lateMsg{N: n}})
		}
		return out
	}
	var got []*reportMsg
	collect := func(r *reportMsg) { got = append(got, r) }
	for turn := range 3 {
		got = nil
		require.NoError(t, l.add(snapshot.ChannelRecord{Snapshot: 4, Channel: ch("a"), Messages: msgs(10, 1)}))
		bad := append(msgs(20, 2), snapshot.Message{Seq: 21, Payload: &unregistered{}})
		require.Error(t, l.add(snapshot.ChannelRecord{Snapshot: 4, Channel: ch("b"), Messages: bad}))
		require.NoError(t, l.add(snapshot.ChannelRecord{Snapshot: 5, Channel: ch("c"), Messages: msgs(30, 3, 4)}))
		require.NoError(t, l.add(snapshot.ChannelRecord{Snapshot: 4, Channel: ch("d"), Messages: msgs(40, 5)}))
		if turn == 2 {
			// One snapshot only: the common turn.
			l.flush(func(*reportMsg) {})
			require.NoError(t, l.add(snapshot.ChannelRecord{Snapshot: 6, Channel: ch("a"), Messages: msgs(11, 6)}))
			l.flush(collect)
			require.Len(t, got, 1)
			require.Equal(t, snapshot.SnapshotID(6), got[0].id)
			requireLate(t, types, got[0].channels[0], "a", 11, 6)
			continue
		}
		l.flush(collect)
		require.Len(t, got, 2)
		require.Equal(t, snapshot.SnapshotID(4), got[0].id)
		require.Len(t, got[0].channels, 2)
		requireLate(t, types, got[0].channels[0], "a", 10, 1)
		requireLate(t, types, got[0].channels[1], "d", 40, 5)
		require.Equal(t, snapshot.SnapshotID(5), got[1].id)
		require.Len(t, got[1].channels, 1)
		requireLate(t, types, got[1].channels[0], "c", 30, 3, 4)
	}
	called := false
	l.flush(func(*reportMsg) { called = true })
	require.False(t, called, "an empty turn reports nothing")
}

func requireLate(t *testing.T, types *messageTypes, c snapshot.ChannelRecord, from string, seq uint64, ns ...int) {
	t.Helper()
	require.Equal(t, snapshot.ProcessID(from), c.Channel.From)
	require.Len(t, c.Messages, len(ns))
	for i, n := range ns {
		require.Equal(t, seq+uint64(i), c.Messages[i].Seq)
		rm, ok := c.Messages[i].Payload.(RecordedMessage)
		require.True(t, ok)
		v, err := types.decode(rm)
		require.NoError(t, err)
		require.Equal(t, &lateMsg{N: n}, v)
	}
}

// A turn's late channel state costs the same few allocations however
// many channels it holds.
func TestLateChannelsAllocations(t *testing.T) {
	types := newMessageTypes()
	require.NoError(t, types.register(reflect.TypeFor[*lateMsg](), "late"))
	var l lateChannels
	l.enc.types = types
	in := make([]snapshot.ChannelRecord, 8)
	for i := range in {
		in[i] = snapshot.ChannelRecord{Snapshot: 3, Channel: snapshot.Channel{From: "s", To: "r"},
			Messages: []snapshot.Message{{Seq: 1, Payload: &lateMsg{N: i}}}}
	}
	var sink *reportMsg
	n := testing.AllocsPerRun(50, func() {
		for _, c := range in {
			_ = l.add(c)
		}
		l.flush(func(r *reportMsg) { sink = r })
	})
	_ = sink
	// Bytes, messages, payloads, channels and the report.
	require.LessOrEqual(t, n, 5.0)
}

// A record held for the turn's end goes in one report with its
// snapshot's channels of the turn, ahead of the other snapshots'; held
// records without channels go alone, in the order recorded.
func TestLateChannelsCarryHeldRecords(t *testing.T) {
	types := newMessageTypes()
	require.NoError(t, types.register(reflect.TypeFor[*lateMsg](), "late"))
	var l lateChannels
	l.enc.types = types
	rec := func(id snapshot.SnapshotID) *reportMsg {
		return newRecordReport(id, snapshot.LocalRecord{Snapshot: id, Process: "r"}, nil)
	}
	add := func(id snapshot.SnapshotID, from string, seq uint64, n int) {
		require.NoError(t, l.add(snapshot.ChannelRecord{Snapshot: id, Channel: snapshot.Channel{From: snapshot.ProcessID(from), To: "r"},
			Messages: []snapshot.Message{{Seq: seq, Payload: &lateMsg{N: n}}}}))
	}
	var got []*reportMsg
	collect := func(r *reportMsg) { got = append(got, r) }

	// The common turn: a record and the channel state captured with it.
	l.hold(rec(7))
	add(7, "a", 3, 1)
	add(7, "b", 9, 2)
	l.flush(collect)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].rec)
	require.Equal(t, snapshot.SnapshotID(7), got[0].id)
	require.Len(t, got[0].channels, 2)
	requireLate(t, types, got[0].channels[0], "a", 3, 1)
	requireLate(t, types, got[0].channels[1], "b", 9, 2)

	// Two records, channels of an older snapshot and of the second.
	got = nil
	l.hold(rec(8))
	add(6, "c", 4, 3)
	l.hold(rec(9))
	add(9, "a", 5, 4)
	l.flush(collect)
	require.Len(t, got, 3)
	require.Equal(t, []snapshot.SnapshotID{8, 9, 6}, []snapshot.SnapshotID{got[0].id, got[1].id, got[2].id})
	require.NotNil(t, got[0].rec)
	require.Empty(t, got[0].channels)
	require.NotNil(t, got[1].rec)
	require.Len(t, got[1].channels, 1)
	requireLate(t, types, got[1].channels[0], "a", 5, 4)
	require.Nil(t, got[2].rec)
	requireLate(t, types, got[2].channels[0], "c", 4, 3)

	// A record alone, and a record with another snapshot's channels.
	got = nil
	l.hold(rec(10))
	l.flush(collect)
	l.hold(rec(11))
	add(10, "d", 6, 5)
	l.flush(collect)
	require.Len(t, got, 3)
	require.Equal(t, []snapshot.SnapshotID{10, 11, 10}, []snapshot.SnapshotID{got[0].id, got[1].id, got[2].id})
	require.Empty(t, got[1].channels)
	require.Nil(t, got[2].rec)

	called := false
	l.flush(func(*reportMsg) { called = true })
	require.False(t, called, "nothing is held after a flush")
}

// A record's report is allocated per participant per snapshot, most of
// what an idle snapshot allocates: it stays in the 256-byte size class
// (a field more moves it to 288, an eighth more for the collector).
func TestRecordReportFitsItsSizeClass(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(recordReport{}), uintptr(256))
}
