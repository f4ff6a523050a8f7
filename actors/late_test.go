package actors

import (
	"reflect"
	"testing"

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
