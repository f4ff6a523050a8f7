package persistence_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// sumsGlobal is the snapshot in testdata/v5/sums.dat: waitsGlobal as an
// epoch snapshot counted in sums, sent at the largest a uint64 holds.
func sumsGlobal() *snapshot.Global {
	g := waitsGlobal()
	g.Mode = snapshot.Epochs
	storetest.BalanceSums(g, 1<<64-1-uint64(g.TotalInFlight()))
	return g
}

// TestDecodeVersion5 decodes the version-5 fixture (testdata/v5, kept as
// written): sums beside waits and violations, what both this build's
// encoder and encodeV5, written apart from it, write.
func TestDecodeVersion5(t *testing.T) {
	stored := readFixture(t, "testdata/v5/sums.dat", 5, encodeV5(t, sumsGlobal()))
	enc, err := persistence.EncodeGlobal(sumsGlobal())
	require.NoError(t, err)
	assert.Equal(t, stored, enc, "the encoder writes what version 5 wrote")
	requireDecodes(t, stored, sumsGlobal())
	got, err := persistence.DecodeGlobal(stored)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(sumsGlobal(), got))
	both := storetest.NewGlobal(5, storetest.Shape{Participants: 12, StateSize: 10, Channels: 16, InFlight: 3, MessageSize: 10, ReceiverCounts: true, Sums: true})
	for _, g := range []*snapshot.Global{
		{ID: 1},
		{ID: 2, Mode: snapshot.Epochs, Sums: &snapshot.SumCounts{}},
		countsGlobal(),
		storetest.NewGlobal(3, storetest.Shape{Participants: 12, StateSize: 10, Channels: 16, InFlight: 3, MessageSize: 10, Sums: true}),
		storetest.NewGlobal(4, storetest.Shape{Participants: 1000, StateSize: 30, Channels: 3000, InFlight: 2, MessageSize: 30, Waiting: 900, Edges: 5, Violations: 20, Sums: true}),
		both,
	} {
		b := encodeV5(t, g)
		enc, err := persistence.EncodeGlobal(g)
		require.NoError(t, err)
		require.Equal(t, b, enc, "snapshot %d", g.ID)
		requireDecodes(t, b, g)
	}
}

// A version-5 file whose sums are damaged: not a pair, not numbers, or
// numbers that do not balance with the messages in flight (a channel, or
// a message, left out) is refused as corrupt.
func TestDecodeVersion5RefusesBadSums(t *testing.T) {
	g := sumsGlobal()
	withSums := func(write func(e *msgpack.Encoder)) []byte {
		c := *g
		c.Sums = nil
		return withLastField(t, encodeV5(t, &c), write)
	}
	pair := func(sent, received uint64) func(e *msgpack.Encoder) {
		return func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeUint(sent)
			_ = e.EncodeUint(received)
		}
	}
	good := withSums(pair(g.Sums.Sent, g.Sums.Received))
	got, err := persistence.DecodeGlobal(good)
	require.NoError(t, err, "the test's own encoding")
	requireSame(t, g, got)

	k := uint64(g.TotalInFlight())
	for _, tc := range []struct {
		name, reason string
		write        func(e *msgpack.Encoder)
	}{
		{"not an array", "sums: want an array", func(e *msgpack.Encoder) { _ = e.EncodeUint(7) }},
		{"three numbers", "sums: want 2 fields, got 3", func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(3)
			for range 3 {
				_ = e.EncodeUint(1)
			}
		}},
		{"not numbers", "messages sent before the records", func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeString("x")
			_ = e.EncodeString("y")
		}},
		{"one short", "sums do not balance", pair(g.Sums.Sent-1, g.Sums.Received)},
		{"one over", "sums do not balance", pair(g.Sums.Sent, g.Sums.Received-1)},
		{"received more than sent", "sums do not balance", pair(k, k+1)},
		{"wrapped", "sums do not balance", pair(k-1, 1<<64-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := persistence.DecodeGlobal(withSums(tc.write))
			var ce *persistence.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, ce.Error(), tc.reason)
		})
	}

	// The same bytes as version 4, which has no twelfth field, are refused.
	_, err = persistence.DecodeGlobal(persistence.Reseal(good, 4))
	var ce *persistence.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Error(), "want 11")
}
