package persistence_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// waitsGlobal is the snapshot in testdata/v3/waits.dat: edgeGlobal with
// waits (none, empty, a timer alone, edges to participants by index and to
// other processes by name, extreme numbers and instants) and violations.
func waitsGlobal() *snapshot.Global {
	g := edgeGlobal()
	g.Participants[0].Waits = &snapshot.Waits{}
	g.Participants[1].Waits = &snapshot.Waits{Any: true, Edges: []snapshot.Wait{
		{To: "", Request: 1, Type: "bank.Transfer", Since: time.Unix(1<<31, 5).UTC()},
		{To: "a", Request: 1<<64 - 1, Type: strings.Repeat("t", 40), Since: time.Unix(-5, 999999999).UTC()},
		{To: "zz", Type: "fork"},
		{To: snapshot.ProcessID(strings.Repeat("b", 300)), Request: 300, Since: time.Unix(1<<33, 1).UTC()},
	}}
	g.Participants[2].Waits = &snapshot.Waits{Timer: true}
	g.Violations = []snapshot.Violation{
		{Invariant: "conservation", Err: "total balance is 999, want 1000"},
		{Invariant: "", Err: strings.Repeat("e", 300)},
	}
	return g
}

// TestDecodeVersion3 decodes the version-3 fixture (testdata/v3, kept as
// written by an earlier build): it holds waits and violations, and is
// what encodeV3 writes.
func TestDecodeVersion3(t *testing.T) {
	stored := readFixture(t, "testdata/v3/waits.dat", 3, encodeV3(t, waitsGlobal()))
	requireDecodes(t, stored, waitsGlobal())
	got, err := persistence.DecodeGlobal(stored)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(waitsGlobal(), got))
	for _, g := range []*snapshot.Global{
		{ID: 1},
		{ID: 2, Violations: []snapshot.Violation{{Invariant: "i", Err: "e"}}},
		storetest.NewGlobal(3, storetest.WithWaits),
		storetest.NewGlobal(4, storetest.Shape{Participants: 1000, StateSize: 30, Channels: 3000, InFlight: 2, MessageSize: 30, Waiting: 900, Edges: 5, Violations: 20}),
	} {
		b := encodeV3(t, g)
		requireDecodes(t, b, g)
	}
}

// TestEncodedSizeOfWaits measures what waits and violations cost in the
// stored form. A snapshot without them costs one byte more in version 3
// than in version 2 (the violations' empty array), whatever its size: a
// participant without waits is encoded as in version 2. Versions 4 and 5
// add one byte more each (nil for no receiver counts, nil for no sums).
func TestEncodedSizeOfWaits(t *testing.T) {
	g := storetest.NewGlobal(1, storetest.BenchShape)
	v5, err := persistence.EncodeGlobal(g)
	require.NoError(t, err)
	v2, v3, v4 := encodeV2(t, g), encodeV3(t, g), encodeV4(t, g)
	assert.Equal(t, len(v2)+1, len(v3), "%d participants without waits", len(g.Participants))
	assert.Equal(t, len(v3)+1, len(v4), "%d participants without receiver counts", len(g.Participants))
	assert.Equal(t, len(v4)+1, len(v5), "%d participants without sums", len(g.Participants))

	shape := storetest.BenchShape
	shape.Waiting, shape.Edges = shape.Participants, 1
	waiting, err := persistence.EncodeGlobal(storetest.NewGlobal(1, shape))
	require.NoError(t, err)
	shape.Edges = 3
	waiting3, err := persistence.EncodeGlobal(storetest.NewGlobal(1, shape))
	require.NoError(t, err)
	n := float64(len(g.Participants) - 1) // the departed one has no waits
	t.Logf("%d participants: %d bytes in version 2, %d in version 5; with one wait-for edge each %d (%.1f bytes a participant more), with three %d (%.1f more)",
		len(g.Participants), len(v2), len(v5), len(waiting), float64(len(waiting)-len(v5))/n, len(waiting3), float64(len(waiting3)-len(v5))/n)
}

// body3 is body in format version 3.
func body3(t testing.TB, fn func(e *msgpack.Encoder)) []byte {
	return persistence.Reseal(body(t, fn), 3)
}

// header3 writes the fields of a version-3 snapshot before its
// participants.
func header3(e *msgpack.Encoder) {
	_ = e.EncodeArrayLen(10)
	for range 6 {
		_ = e.EncodeUint(1)
	}
}

// waiter writes a participant with a one-letter id and waits whose edges
// edges writes, after their array header of n.
func waiter(e *msgpack.Encoder, id string, n int, edges func(e *msgpack.Encoder)) {
	_ = e.EncodeArrayLen(5)
	_ = e.EncodeString(id)
	_ = e.EncodeString("k")
	_ = e.EncodeNil()
	_ = e.EncodeBool(false)
	_ = e.EncodeArrayLen(3)
	_ = e.EncodeBool(false)
	_ = e.EncodeBool(false)
	_ = e.EncodeArrayLen(n)
	edges(e)
}

// edge writes a wait-for edge to participant to, since nsecs nanoseconds
// past the epoch.
func edge(e *msgpack.Encoder, to int, nsecs uint64) {
	_ = e.EncodeArrayLen(5)
	_ = e.EncodeUint(uint64(to))
	_ = e.EncodeUint(0)
	_ = e.EncodeString("t")
	_ = e.EncodeInt(0)
	_ = e.EncodeUint(nsecs)
}

// tail3 writes what follows the participants of a version-3 snapshot
// without channels: the message count, no channels, and the violations
// violations writes.
func tail3(e *msgpack.Encoder, violations func(e *msgpack.Encoder)) {
	_ = e.EncodeUint(0)
	_ = e.EncodeArrayLen(0)
	violations(e)
}

func noViolations(e *msgpack.Encoder) { _ = e.EncodeArrayLen(0) }

func TestDecodeFaultsVersion3(t *testing.T) {
	const h = persistence.HeaderSize
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(9) }), h, "want 10 fields")
	// Only version 3 has participants of 5 fields.
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) {
		header2(e)
		_ = e.EncodeArrayLen(1)
		waiter(e, "a", 0, func(*msgpack.Encoder) {})
		_ = e.EncodeUint(0)
		_ = e.EncodeArrayLen(0)
	}), h+8, "want 4 fields, got 5")
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(6)
		_, _ = e.Writer().Write(make([]byte, 12))
	}), h+8, "want 4 or 5 fields, got 6")
	// The waits: [any, timer, edges].
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(5)
		_ = e.EncodeString("a")
		_ = e.EncodeString("k")
		_ = e.EncodeNil()
		_ = e.EncodeBool(false)
		_ = e.EncodeNil()
		tail3(e, noViolations)
	}), h+15, "waits: want an array")
	// Edges are bounded by the limit and by the bytes left, before
	// anything is allocated for them.
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(1)
		waiter(e, "a", persistence.MaxWaits+1, func(*msgpack.Encoder) {})
	}), h+18, "more than the limit of 65536")
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(1)
		waiter(e, "a", 3, func(e *msgpack.Encoder) { edge(e, 0, 0) })
		tail3(e, noViolations)
	}), h+18, "3 elements cannot fit")
	// A target given by index is a participant.
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(1)
		waiter(e, "a", 1, func(e *msgpack.Encoder) { edge(e, 1, 0) })
		tail3(e, noViolations)
	}), h+20, "participant 1, but there are 1")
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(1)
		waiter(e, "a", 1, func(e *msgpack.Encoder) { edge(e, 0, uint64(time.Second)) })
		tail3(e, noViolations)
	}), h+25, "wait since nanoseconds: 1000000000")
	// Violations are bounded too, and so is each one's error.
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(0)
		tail3(e, func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(persistence.MaxViolations + 1) })
	}), h+10, "more than the limit of 65536")
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(0)
		tail3(e, func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(2) })
	}), h+10, "2 elements cannot fit")
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(0)
		tail3(e, func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeString("i")
			_ = e.EncodeString(strings.Repeat("e", persistence.MaxViolationSize+1))
		})
	}), h+14, "violation error: 1048577 bytes, more than the limit")
	requireCorruptAt(t, body3(t, func(e *msgpack.Encoder) {
		header3(e)
		_ = e.EncodeArrayLen(0)
		tail3(e, func(e *msgpack.Encoder) {
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeBytes([]byte("i"))
			_ = e.EncodeString("e")
		})
	}), h+12, "invariant: want a string")
	// Valid: a target by index, and the same by name, and one that is not
	// a participant.
	for _, byName := range []bool{false, true} {
		g, err := persistence.DecodeGlobal(body3(t, func(e *msgpack.Encoder) {
			header3(e)
			_ = e.EncodeArrayLen(2)
			waiter(e, "a", 2, func(e *msgpack.Encoder) {
				if byName {
					_ = e.EncodeArrayLen(5)
					_ = e.EncodeString("b")
					_ = e.EncodeUint(0)
					_ = e.EncodeString("t")
					_ = e.EncodeInt(0)
					_ = e.EncodeUint(0)
				} else {
					edge(e, 1, 0)
				}
				_ = e.EncodeArrayLen(5)
				_ = e.EncodeString("z")
				_ = e.EncodeUint(9)
				_ = e.EncodeString("u")
				_ = e.EncodeInt(-1)
				_ = e.EncodeUint(7)
			})
			participant(e, "b")
			tail3(e, noViolations)
		}))
		require.NoError(t, err)
		assert.Equal(t, []snapshot.Wait{
			{To: "b", Type: "t", Since: time.Unix(0, 0).UTC()},
			{To: "z", Request: 9, Type: "u", Since: time.Unix(-1, 7).UTC()},
		}, g.Participants[0].Waits.Edges)
		assert.Nil(t, g.Participants[1].Waits)
		assert.Nil(t, g.Violations)
	}
}
