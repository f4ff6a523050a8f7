package persistence_test

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"slices"
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

func TestEncodeRoundTrip(t *testing.T) {
	for _, g := range []*snapshot.Global{
		{ID: 1},
		{ID: 1<<64 - 1, Mode: 200, Start: time.Unix(-1<<40, 999999999).UTC(), End: time.Unix(1<<40, 1).UTC()},
		storetest.NewGlobal(2, storetest.Small),
		storetest.NewGlobal(3, storetest.Shape{Participants: 1000, StateSize: 100, Channels: 3000, InFlight: 2, MessageSize: 300}),
		{ID: 4, Participants: []snapshot.Participant{{ID: "", State: []byte{}}, {ID: "x", Departed: true}}},
	} {
		b, err := persistence.EncodeGlobal(g)
		require.NoError(t, err)
		got, err := persistence.DecodeGlobal(b)
		require.NoError(t, err)
		requireSame(t, g, got)
	}
}

// requireSame checks that got is want exactly, nil and empty slices
// aside, and instants compared as instants (the stored form keeps neither
// their location nor their monotonic reading).
func requireSame(t testing.TB, want, got *snapshot.Global) {
	t.Helper()
	require.True(t, want.Start.Equal(got.Start) && want.End.Equal(got.End), "times: want %v %v, got %v %v", want.Start, want.End, got.Start, got.End)
	require.Equal(t, canonical(want), canonical(got))
}

// readFixture returns the snapshot fixture at path, kept as format
// version wrote it, and requires the test's own encoder of that version
// to write the same bytes, reference.
func readFixture(t *testing.T, path string, version byte, reference []byte) []byte {
	t.Helper()
	stored, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "ASNAPGLB\x00"+string([]byte{version}), string(stored[:persistence.HeaderSize]))
	assert.Equal(t, stored, reference, "the test's encoder writes what version %d wrote", version)
	return stored
}

// requireDecodes requires b to decode to want, with strings of their own
// and sharing b's memory.
func requireDecodes(t testing.TB, b []byte, want *snapshot.Global) {
	t.Helper()
	for _, alias := range []bool{false, true} {
		got, _, err := persistence.DecodeGlobalCounted(b, alias)
		require.NoError(t, err)
		requireSame(t, want, got)
	}
}

// canonical returns a copy of g with its instants as stored (the start
// and end zeroed, as requireSame compares them apart) and empty slices
// nil. g is not changed.
func canonical(g *snapshot.Global) *snapshot.Global {
	c := *g
	c.Start, c.End = time.Time{}, time.Time{}
	c.Participants = nil
	for _, p := range g.Participants {
		if p.Waits != nil {
			w := *p.Waits
			w.Edges = nil
			for _, e := range p.Waits.Edges {
				e.Since = time.Unix(e.Since.Unix(), int64(e.Since.Nanosecond())).UTC()
				w.Edges = append(w.Edges, e)
			}
			p.Waits = &w
		}
		c.Participants = append(c.Participants, p)
	}
	c.Channels = nil
	for _, ch := range g.Channels {
		if len(ch.Messages) == 0 {
			ch.Messages = nil
		}
		c.Channels = append(c.Channels, ch)
	}
	if len(c.Violations) == 0 {
		c.Violations = nil
	}
	return &c
}

// withoutWaits returns a copy of g as versions 1 and 2 keep it: without
// its waits, violations and receiver counts. g is not changed.
func withoutWaits(g *snapshot.Global) *snapshot.Global {
	c := withoutCounts(g)
	for i := range c.Participants {
		c.Participants[i].Waits = nil
	}
	c.Violations = nil
	return c
}

// withoutCounts returns a copy of g as version 3 keeps it: without its
// receiver counts or sums. g is not changed.
func withoutCounts(g *snapshot.Global) *snapshot.Global {
	c := *withoutSums(g)
	c.ReceiverCounts = false
	c.Participants = slices.Clone(g.Participants)
	for i := range c.Participants {
		c.Participants[i].SentTo, c.Participants[i].Received = 0, 0
	}
	return &c
}

// withoutSums returns a copy of g as version 4 keeps it: without its
// sums. g is not changed.
func withoutSums(g *snapshot.Global) *snapshot.Global {
	c := *g
	c.Sums = nil
	return &c
}

func TestEncodeRefuses(t *testing.T) {
	g := storetest.NewGlobal(1, storetest.Small)
	g.Channels[0].Messages[1].Payload = 42
	_, err := persistence.EncodeGlobal(g)
	require.ErrorIs(t, err, persistence.ErrPayloadType)
	assert.Contains(t, err.Error(), "int")

	long := &snapshot.Global{ID: 1, Participants: []snapshot.Participant{{ID: snapshot.ProcessID(strings.Repeat("x", persistence.MaxNameSize+1))}}}
	_, err = persistence.EncodeGlobal(long)
	require.ErrorIs(t, err, persistence.ErrTooLarge)
	assert.Contains(t, err.Error(), "65536")

	_, err = persistence.EncodeGlobal(&snapshot.Global{})
	require.ErrorIs(t, err, snapshot.ErrInvalidID)

	// Waits and violations within the limits, and one past each.
	for _, tc := range []struct {
		name string
		g    func(g *snapshot.Global)
		want string
	}{
		{"edges", func(g *snapshot.Global) {
			g.Participants[0].Waits = &snapshot.Waits{Edges: make([]snapshot.Wait, persistence.MaxWaits+1)}
		}, "65537"},
		{"target", func(g *snapshot.Global) {
			g.Participants[0].Waits = &snapshot.Waits{Edges: []snapshot.Wait{{To: snapshot.ProcessID(strings.Repeat("x", persistence.MaxNameSize+1))}}}
		}, "65537"},
		{"type", func(g *snapshot.Global) {
			g.Participants[0].Waits = &snapshot.Waits{Edges: []snapshot.Wait{{Type: strings.Repeat("x", persistence.MaxNameSize+1)}}}
		}, "65537"},
		{"violations", func(g *snapshot.Global) { g.Violations = make([]snapshot.Violation, persistence.MaxViolations+1) }, "65537"},
		{"invariant", func(g *snapshot.Global) {
			g.Violations = []snapshot.Violation{{Invariant: strings.Repeat("x", persistence.MaxNameSize+1)}}
		}, "65537"},
		{"error", func(g *snapshot.Global) {
			g.Violations = []snapshot.Violation{{Err: strings.Repeat("x", persistence.MaxViolationSize+1)}}
		}, "1048577"},
	} {
		g := storetest.NewGlobal(1, storetest.Small)
		tc.g(g)
		_, err := persistence.EncodeGlobal(g)
		require.ErrorIs(t, err, persistence.ErrTooLarge, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
	full := storetest.NewGlobal(1, storetest.Small)
	full.Participants[0].Waits = &snapshot.Waits{Edges: make([]snapshot.Wait, persistence.MaxWaits)}
	full.Violations = []snapshot.Violation{{Invariant: strings.Repeat("x", persistence.MaxNameSize), Err: strings.Repeat("x", persistence.MaxViolationSize)}}
	b, err := persistence.EncodeGlobal(full)
	require.NoError(t, err)
	got, err := persistence.DecodeGlobal(b)
	require.NoError(t, err)
	requireSame(t, full, got)
}

// body returns an envelope around a msgpack body written by fn, with a
// valid checksum.
func body(t testing.TB, fn func(e *msgpack.Encoder)) []byte {
	var buf bytes.Buffer
	buf.WriteString("ASNAPGLB\x00\x01")
	fn(msgpack.NewEncoder(&buf))
	buf.Write(make([]byte, 4))
	return persistence.FixChecksum(buf.Bytes())
}

// header writes the fields of a snapshot before its participants.
func header(e *msgpack.Encoder) {
	_ = e.EncodeArrayLen(8)
	for range 6 {
		_ = e.EncodeUint(1)
	}
}

func requireCorruptAt(t *testing.T, data []byte, off int64, reason string) {
	t.Helper()
	_, err := persistence.DecodeGlobal(data)
	var ce *persistence.CorruptError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, persistence.ErrCorrupt)
	assert.Equal(t, off, ce.Offset, "%v", err)
	assert.Contains(t, ce.Reason, reason)
}

func TestDecodeFaults(t *testing.T) {
	valid, err := persistence.EncodeGlobal(storetest.NewGlobal(9, storetest.Small))
	require.NoError(t, err)
	n := int64(len(valid))
	const h = persistence.HeaderSize

	requireCorruptAt(t, nil, 0, "truncated")
	requireCorruptAt(t, valid[:10], 10, "truncated")
	requireCorruptAt(t, append([]byte("XSNAPGLB"), valid[8:]...), 0, "magic")
	requireCorruptAt(t, valid[:n-1], n-5, "checksum")
	flipped := bytes.Clone(valid)
	flipped[n/2] ^= 1
	requireCorruptAt(t, flipped, n-4, "checksum")
	_, err = persistence.DecodeGlobal(persistence.Reseal(valid, 7))
	require.ErrorIs(t, err, persistence.ErrFormatVersion)
	require.NotErrorIs(t, err, persistence.ErrCorrupt)

	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(7) }), h, "want 8 fields")
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) { _ = e.EncodeString("x") }), h, "want an array")
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(8)
		_ = e.EncodeUint(0)
	}), h+1, "id is 0")
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(8)
		_ = e.EncodeInt(-1)
	}), h+1, "unsigned")
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) {
		header(e)
		_ = e.EncodeArrayLen(1)
	}), h+7, "cannot fit")
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) {
		header(e)
		_ = e.EncodeArrayLen(persistence.MaxParticipants + 1)
	}), h+7, "limit")
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) {
		header(e)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(4)
		_ = e.EncodeBytes([]byte("id"))
		_ = e.EncodeString("kind")
		_ = e.EncodeNil()
		_ = e.EncodeBool(false)
	}), h+9, "want a string")
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) {
		header(e)
		_ = e.EncodeArrayLen(0)
		_ = e.EncodeArrayLen(0)
		_ = e.EncodeNil()
	}), h+9, "after the end")
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) {
		header(e)
		_ = e.EncodeArrayLen(0)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(5)
		_ = e.EncodeString("a")
		_ = e.EncodeString("b")
		_ = e.EncodeUint(2)
		_ = e.EncodeUint(1)
		_ = e.EncodeArrayLen(0)
	}), h, "fails Verify")
	// The nanoseconds of a time must be below one second.
	requireCorruptAt(t, body(t, func(e *msgpack.Encoder) {
		_ = e.EncodeArrayLen(8)
		_ = e.EncodeUint(1)
		_ = e.EncodeUint(0)
		_ = e.EncodeInt(0)
		_ = e.EncodeUint(uint64(time.Second))
	}), h+4, "nanoseconds")

	// Every truncation of the body, with a checksum that matches it, is
	// reported as corruption.
	for k := int64(h); k < n-4; k++ {
		cut := append(bytes.Clone(valid[:k]), 0, 0, 0, 0)
		_, err := persistence.DecodeGlobal(persistence.FixChecksum(cut))
		require.ErrorIs(t, err, persistence.ErrCorrupt, "body cut at %d", k)
	}
}

// body2 is body in format version 2.
func body2(t testing.TB, fn func(e *msgpack.Encoder)) []byte {
	return persistence.Reseal(body(t, fn), 2)
}

// header2 writes the fields of a version-2 snapshot before its
// participants.
func header2(e *msgpack.Encoder) {
	_ = e.EncodeArrayLen(9)
	for range 6 {
		_ = e.EncodeUint(1)
	}
}

// participant writes a participant with a one-letter id.
func participant(e *msgpack.Encoder, id string) {
	_ = e.EncodeArrayLen(4)
	_ = e.EncodeString(id)
	_ = e.EncodeString("k")
	_ = e.EncodeNil()
	_ = e.EncodeBool(false)
}

func TestDecodeFaultsVersion2(t *testing.T) {
	const h = persistence.HeaderSize
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) { _ = e.EncodeArrayLen(8) }), h, "want 9 fields")
	// The message count comes before the channels, bounded.
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) {
		header2(e)
		_ = e.EncodeArrayLen(0)
		_ = e.EncodeUint(persistence.MaxMessages + 1)
	}), h+8, "limit")
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) {
		header2(e)
		_ = e.EncodeArrayLen(0)
		_ = e.EncodeUint(1 << 20)
	}), h+8, "cannot fit")
	// The channels and the messages counted must fit together.
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) {
		header2(e)
		_ = e.EncodeArrayLen(0)
		_ = e.EncodeUint(4)
		_ = e.EncodeArrayLen(2)
		_, _ = e.Writer().Write(make([]byte, 12))
	}), h+9, "2 elements and 4 messages cannot fit")
	// channel encodes a channel from participant 0 to participant 1 with
	// the given number of messages.
	channel := func(e *msgpack.Encoder, messages int) {
		_ = e.EncodeArrayLen(5)
		_ = e.EncodeUint(0)
		_ = e.EncodeUint(1)
		_ = e.EncodeUint(uint64(messages))
		_ = e.EncodeUint(0)
		_ = e.EncodeArrayLen(messages)
		for range messages {
			_ = e.EncodeArrayLen(2)
			_ = e.EncodeString("t")
			_ = e.EncodeNil()
		}
	}
	// A channel's end is a participant's index, within range.
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) {
		header2(e)
		_ = e.EncodeArrayLen(1)
		participant(e, "a")
		_ = e.EncodeUint(0)
		_ = e.EncodeArrayLen(1)
		channel(e, 0)
	}), h+19, "participant 1, but there are 1")
	// The channels hold as many messages as counted, no more, no fewer.
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) {
		header2(e)
		_ = e.EncodeArrayLen(2)
		participant(e, "a")
		participant(e, "b")
		_ = e.EncodeUint(1)
		_ = e.EncodeArrayLen(1)
		channel(e, 2)
	}), h+29, "beyond the message count of 1")
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) {
		header2(e)
		_ = e.EncodeArrayLen(2)
		participant(e, "a")
		participant(e, "b")
		_ = e.EncodeUint(3)
		_ = e.EncodeArrayLen(1)
		channel(e, 2)
		_, _ = e.Writer().Write(make([]byte, 8)) // room for the third
	}), h+38, "message count is 3, but the channels hold 2")
	// Ends given by name, when they are participants, are checked as in
	// version 1: here the receiver is not one, yet the channel was used.
	requireCorruptAt(t, body2(t, func(e *msgpack.Encoder) {
		header2(e)
		_ = e.EncodeArrayLen(1)
		participant(e, "a")
		_ = e.EncodeUint(0)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(5)
		_ = e.EncodeString("a")
		_ = e.EncodeString("z")
		_ = e.EncodeUint(1)
		_ = e.EncodeUint(1)
		_ = e.EncodeArrayLen(0)
	}), h, "fails Verify")
	// Valid, the same ends given by index and by name.
	for _, byName := range []bool{false, true} {
		g, err := persistence.DecodeGlobal(body2(t, func(e *msgpack.Encoder) {
			header2(e)
			_ = e.EncodeArrayLen(2)
			participant(e, "a")
			participant(e, "b")
			_ = e.EncodeUint(0)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(5)
			if byName {
				_ = e.EncodeString("b")
				_ = e.EncodeString("a")
			} else {
				_ = e.EncodeUint(1)
				_ = e.EncodeUint(0)
			}
			_ = e.EncodeUint(4)
			_ = e.EncodeUint(4)
			_ = e.EncodeArrayLen(0)
		}))
		require.NoError(t, err)
		assert.Equal(t, snapshot.Channel{From: "b", To: "a"}, g.Channels[0].Channel)
	}
}

// TestDecodeHugeLengths feeds lengths of up to 4 GiB claimed by a few
// bytes: the decoder refuses them without allocating for them.
func TestDecodeHugeLengths(t *testing.T) {
	inputs := map[string][]byte{
		"participants": body(t, func(e *msgpack.Encoder) {
			header(e)
			_, _ = e.Writer().Write([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
		}),
		"participants-under-limit": body(t, func(e *msgpack.Encoder) {
			header(e)
			_ = e.EncodeArrayLen(persistence.MaxParticipants)
		}),
		"string": body(t, func(e *msgpack.Encoder) {
			header(e)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(4)
			_, _ = e.Writer().Write([]byte{0xdb, 0xff, 0xff, 0xff, 0xff})
		}),
		"state": body(t, func(e *msgpack.Encoder) {
			header(e)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(4)
			_ = e.EncodeString("a")
			_ = e.EncodeString("k")
			_, _ = e.Writer().Write([]byte{0xc6, 0x03, 0xff, 0xff, 0xff})
		}),
		"messages": body(t, func(e *msgpack.Encoder) {
			header(e)
			_ = e.EncodeArrayLen(0)
			_ = e.EncodeArrayLen(1)
			_ = e.EncodeArrayLen(5)
			_ = e.EncodeString("a")
			_ = e.EncodeString("b")
			_ = e.EncodeUint(0)
			_ = e.EncodeUint(0)
			_, _ = e.Writer().Write([]byte{0xdd, 0x00, 0xff, 0xff, 0xff})
		}),
		"edges": body3(t, func(e *msgpack.Encoder) {
			header3(e)
			_ = e.EncodeArrayLen(1)
			waiter(e, "a", 0, func(*msgpack.Encoder) {})
			// The array header of 0 edges, made one of 65535.
			e.Writer().(*bytes.Buffer).Truncate(e.Writer().(*bytes.Buffer).Len() - 1)
			_, _ = e.Writer().Write([]byte{0xdc, 0xff, 0xff})
		}),
		"violations": body3(t, func(e *msgpack.Encoder) {
			header3(e)
			_ = e.EncodeArrayLen(0)
			tail3(e, func(e *msgpack.Encoder) { _, _ = e.Writer().Write([]byte{0xdd, 0x00, 0x00, 0xff, 0xff}) })
		}),
		"violation error": body3(t, func(e *msgpack.Encoder) {
			header3(e)
			_ = e.EncodeArrayLen(0)
			tail3(e, func(e *msgpack.Encoder) {
				_ = e.EncodeArrayLen(1)
				_ = e.EncodeArrayLen(2)
				_ = e.EncodeString("i")
				_, _ = e.Writer().Write([]byte{0xdb, 0x00, 0x0f, 0xff, 0xff})
			})
		}),
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := persistence.DecodeGlobal(data)
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, persistence.ErrCorrupt)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "bytes allocated")
		})
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := persistence.Manifest{ID: 77, Files: []persistence.ManifestFile{{Name: "global.dat", Size: 1234, CRC: 0xdeadbeef}, {Name: "x", Size: 0, CRC: 0}}}
	b, err := persistence.EncodeManifest(m)
	require.NoError(t, err)
	got, err := persistence.DecodeManifest(b)
	require.NoError(t, err)
	assert.Equal(t, m, got)
	for _, bad := range []persistence.Manifest{
		{ID: 0},
		{ID: 1, Files: []persistence.ManifestFile{{Name: "../x"}}},
		{ID: 1, Files: []persistence.ManifestFile{{Name: ".hidden"}}},
		{ID: 1, Files: []persistence.ManifestFile{{Name: "MANIFEST"}}},
		{ID: 1, Files: []persistence.ManifestFile{{Name: "a"}, {Name: "a"}}},
		{ID: 1, Files: []persistence.ManifestFile{{Name: "a", Size: -1}}},
	} {
		_, err := persistence.EncodeManifest(bad)
		require.Error(t, err, "%+v", bad)
	}
	_, err = persistence.DecodeManifest(make([]byte, 1<<17))
	require.ErrorIs(t, err, persistence.ErrCorrupt)
	global, err := persistence.EncodeGlobal(&snapshot.Global{ID: 77})
	require.NoError(t, err)
	_, err = persistence.DecodeManifest(global)
	require.ErrorIs(t, err, persistence.ErrCorrupt, "a snapshot is not a manifest")
}

func TestCorruptErrorMessage(t *testing.T) {
	err := error(&persistence.CorruptError{File: "/d/snap-1/global.dat", Offset: 12, Reason: "checksum mismatch"})
	assert.Equal(t, "persistence: corrupt snapshot: /d/snap-1/global.dat at offset 12: checksum mismatch", err.Error())
	assert.True(t, errors.Is(err, persistence.ErrCorrupt))
}

// TestEncodeSplit checks that the FileStore's two-piece encoding is, piece
// after piece, the bytes EncodeGlobal returns, however it splits: not at
// all (small), inside the participants (whose waits name participants of
// both pieces by index), or after all of them (channels the larger half).
func TestEncodeSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape storetest.Shape
		split bool
	}{
		{"small", storetest.Small, false},
		{"states", storetest.BenchShape, true},
		{"waits", storetest.Shape{Participants: 10000, StateSize: 10, Channels: 100, InFlight: 1, MessageSize: 10, Waiting: 10000, Edges: 3, Violations: 3}, true},
		{"channels", storetest.Shape{Participants: 50, StateSize: 10, Channels: 2000, InFlight: 4, MessageSize: 100}, true},
		{"empty", storetest.Shape{}, false},
		{"large states", storetest.Shape{Participants: 20, StateSize: 100 << 10, Channels: 10, InFlight: 2, MessageSize: 10, Waiting: 5, Edges: 2}, true},
		{"one large state", storetest.Shape{Participants: 1, StateSize: 200 << 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := storetest.NewGlobal(3, tc.shape)
			want, err := persistence.EncodeGlobal(g)
			require.NoError(t, err)
			segs, split, err := persistence.EncodeSplit(g)
			require.NoError(t, err)
			assert.Equal(t, tc.split, split, "split")
			assert.Equal(t, want, bytes.Join(segs, nil))
			if tc.shape.StateSize >= 32<<10 {
				// Each large state is a segment of its own: referred
				// to, not copied.
				refs, large := 0, 0
				for i := range g.Participants {
					st := g.Participants[i].State
					if len(st) == 0 {
						continue // departed
					}
					large++
					for _, s := range segs {
						if len(s) == len(st) && &s[0] == &st[0] {
							refs++
						}
					}
				}
				assert.Positive(t, large)
				assert.Equal(t, large, refs)
			}
		})
	}
}
