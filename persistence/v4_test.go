package persistence_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// countsGlobal is the snapshot in testdata/v4/counts.dat: waitsGlobal as
// an epoch snapshot that keeps its receiver counts, the largest a uint64
// holds among them.
func countsGlobal() *snapshot.Global {
	g := waitsGlobal()
	g.Mode = snapshot.Epochs
	storetest.BalanceReceivers(g, func(i int, k uint64) uint64 { return 1<<64 - 1 - k - uint64(i) })
	return g
}

// TestDecodeVersion4 decodes the version-4 fixture (testdata/v4, kept as
// written by an earlier build): receiver counts beside waits and
// violations, what encodeV4 writes.
func TestDecodeVersion4(t *testing.T) {
	stored := readFixture(t, "testdata/v4/counts.dat", 4, encodeV4(t, countsGlobal()))
	requireDecodes(t, stored, countsGlobal())
	got, err := persistence.DecodeGlobal(stored)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(countsGlobal(), got))
	for _, g := range []*snapshot.Global{
		{ID: 1},
		{ID: 2, ReceiverCounts: true},
		waitsGlobal(),
		storetest.NewGlobal(3, storetest.Shape{Participants: 12, StateSize: 10, Channels: 16, InFlight: 3, MessageSize: 10, ReceiverCounts: true}),
		storetest.NewGlobal(4, storetest.Shape{Participants: 1000, StateSize: 30, Channels: 3000, InFlight: 2, MessageSize: 30, Waiting: 900, Edges: 5, Violations: 20, ReceiverCounts: true}),
	} {
		requireDecodes(t, encodeV4(t, g), g)
	}
}

// A version-4 file whose receiver counts are damaged: too few or too
// many, not numbers, or numbers that do not balance with the channels
// (a channel, or a message, left out) is refused as corrupt.
func TestDecodeVersion4RefusesBadCounts(t *testing.T) {
	g := countsGlobal()
	n := 2 * len(g.Participants)
	withCounts := func(write func(e *msgpack.Encoder)) []byte {
		c := *g
		c.ReceiverCounts = false
		return withLastField(t, encodeV4(t, &c), write)
	}
	good := withCounts(func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(n)
		for _, p := range g.Participants {
			_ = e.EncodeUint(p.SentTo)
			_ = e.EncodeUint(p.Received)
		}
	})
	got, err := persistence.DecodeGlobal(good)
	require.NoError(t, err, "the test's own encoding")
	requireSame(t, g, got)

	for _, tc := range []struct {
		name, reason string
		write        func(e *msgpack.Encoder)
	}{
		{"too few", "receiver counts: 5 numbers for 3 participants, want 6", func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(n - 1)
			for range n - 1 {
				_ = e.EncodeUint(0)
			}
		}},
		{"not an array", "receiver counts: want an array", func(e *msgpack.Encoder) { _ = e.EncodeBool(true) }},
		{"not numbers", "sent to a participant", func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(n)
			for range n {
				_ = e.EncodeString("x")
			}
		}},
		{"one short", "does not balance", func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(n)
			for i, p := range g.Participants {
				if i == 0 {
					p.SentTo++ // a message in flight to it left out
				}
				_ = e.EncodeUint(p.SentTo)
				_ = e.EncodeUint(p.Received)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := persistence.DecodeGlobal(withCounts(tc.write))
			var ce *persistence.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, ce.Error(), tc.reason)
		})
	}

	// The same bytes as version 3, which has no eleventh field, are refused.
	_, err = persistence.DecodeGlobal(persistence.Reseal(good, 3))
	var ce *persistence.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Error(), "want 10")
}

// withLastField returns b, an encoding whose last field is nil, with
// what write encodes in its place, and its checksum made to match.
func withLastField(t testing.TB, b []byte, write func(e *msgpack.Encoder)) []byte {
	t.Helper()
	require.Equal(t, byte(0xc0), b[len(b)-5], "the last field is nil")
	body := slices.Clip(b[:len(b)-5]) // less the nil and the checksum
	return persistence.FixChecksum(append(append(body, encodeWith(t, write)...), 0, 0, 0, 0))
}

// encodeWith returns what write encodes.
func encodeWith(t testing.TB, write func(e *msgpack.Encoder)) []byte {
	t.Helper()
	var buf bytes.Buffer
	write(msgpack.NewEncoder(&buf))
	return buf.Bytes()
}
