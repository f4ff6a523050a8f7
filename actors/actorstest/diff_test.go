package actorstest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/snapshot"
)

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	require.NoError(t, err)
	return b
}

type cell struct {
	Value int64
	Name  string
	Log   []int
	Seen  map[string]bool
}

// A state that differs is named field by field, in key order,
// uninterrupted first.
func TestStateDiffFields(t *testing.T) {
	a := marshal(t, &cell{Value: 1, Name: "a", Log: []int{1, 2}, Seen: map[string]bool{"x": true}})
	b := marshal(t, &cell{Value: 2, Name: "a", Log: []int{1, 3, 4}, Seen: map[string]bool{"y": true}})
	assert.Equal(t, []string{
		"state.Log[1]: 2 != 3",
		"state.Log[2]: absent != 4",
		"state.Seen.x: true != absent",
		"state.Seen.y: absent != true",
		"state.Value: 1 != 2",
	}, stateDiff(a, b))
}

// Past maxDifferences, the lines say how many more there are.
func TestStateDiffBounded(t *testing.T) {
	a := marshal(t, make([]int, 20))
	b := make([]int, 20)
	for i := range b {
		b[i] = i + 1
	}
	got := stateDiff(a, marshal(t, b))
	require.Len(t, got, maxDifferences+1)
	assert.Equal(t, "state[0]: 0 != 1", got[0])
	assert.Equal(t, "and 12 more", got[maxDifferences])
}

// Bytes that are not msgpack, and equal values encoded differently, are
// compared as bytes.
func TestStateDiffBytes(t *testing.T) {
	assert.Equal(t, []string{"state: 3 bytes != 3 bytes, first difference at byte 1"},
		stateDiff([]byte(`{1}`), []byte(`{2}`)))
	assert.Equal(t, []string{"state: 1 bytes != 2 bytes, first difference at byte 0"},
		stateDiff([]byte{0x01}, []byte{0xcc, 0x01})) // 1 as a fixint and as a uint8
	assert.Equal(t, []string{"state: 1 bytes != 2 bytes, first difference at byte 1"},
		stateDiff([]byte{0x01}, []byte{0x01, 0x02}))
}

// Messages in flight that differ are named by channel, index and field.
func TestInboxDiff(t *testing.T) {
	type add struct{ N int }
	global := func(ns ...int) *snapshot.Global {
		var ms []snapshot.Message
		for i, n := range ns {
			ms = append(ms, snapshot.Message{Seq: uint64(i + 1), Payload: actors.RecordedMessage{Type: "add", Data: marshal(t, add{N: n})}})
		}
		return &snapshot.Global{Channels: []snapshot.ChannelState{{Channel: snapshot.Channel{From: "a", To: "b"}, Messages: ms}}}
	}
	assert.Equal(t, []string{"in flight from a [1].N: 2 != 3"}, inboxDiff(global(1, 2), global(1, 3), "b"))
	assert.Equal(t, []string{"in flight from a: 2 messages != 1"}, inboxDiff(global(1, 2), global(1), "b"))
	assert.Empty(t, inboxDiff(global(1, 2), global(1, 2), "b"))
}
