package persistence_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// allocBound is what decoding len bytes may allocate for its result: the
// decoder charges every slice and string it makes, and may make no more
// than a small multiple of its input (the smallest encodings of a
// participant or message cost about 25 times their size in memory).
func allocBound(n int) int { return 32*n + 4096 }

// validEncodings returns small valid encodings: the fuzzing engine
// minimizes every input it finds interesting, which takes long on large
// ones.
func validEncodings(f *testing.F) [][]byte {
	var out [][]byte
	for i, g := range []*snapshot.Global{
		{ID: 1},
		storetest.NewGlobal(2, storetest.Shape{Participants: 2, StateSize: 3, Channels: 1, InFlight: 1, MessageSize: 2}),
		storetest.NewGlobal(3, storetest.Shape{Participants: 3, StateSize: 2, Channels: 4, InFlight: 2, MessageSize: 1}),
		randomGlobal(rand.New(rand.NewPCG(4, 4)), 4),
		randomGlobal(rand.New(rand.NewPCG(5, 5)), 4),
		storetest.NewGlobal(6, storetest.Shape{Participants: 3, StateSize: 1, Channels: 2, InFlight: 1, MessageSize: 1, Waiting: 2, Edges: 2, Violations: 1}),
		waitsGlobal(),
	} {
		b, err := persistence.EncodeGlobal(g)
		if err != nil {
			f.Fatalf("seed %d: %v", i, err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzDecodeGlobal decodes arbitrary bytes, as found in a damaged file:
// the decoder never panics, allocates within allocBound, reports failures
// as ErrCorrupt (or ErrFormatVersion), and whatever it accepts passes
// Verify and survives a round trip. With fix set the checksum is
// recomputed first, so that mutations reach the body's decoder.
//
//	go test ./persistence -run '^$' -fuzz FuzzDecodeGlobal -fuzztime 30s
func FuzzDecodeGlobal(f *testing.F) {
	for _, b := range validEncodings(f) {
		f.Add(b, false)
		f.Add(b, true)
	}
	for _, g := range []*snapshot.Global{edgeGlobal(), randomGlobal(rand.New(rand.NewPCG(6, 6)), 4)} {
		f.Add(encodeV1(f, g), true)
		f.Add(encodeV2(f, g), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix {
			data = persistence.FixChecksum(bytes.Clone(data))
		}
		g, alloc, err := persistence.DecodeGlobalCounted(data, false)
		if alloc > allocBound(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d, more than %d", len(data), alloc, allocBound(len(data)))
		}
		// Strings sharing data's memory (as the FileStore's do) change
		// nothing else: the same result, or the same fault.
		aliased, aliasedAlloc, aliasedErr := persistence.DecodeGlobalCounted(data, true)
		require.LessOrEqual(t, aliasedAlloc, alloc)
		if err != nil {
			require.Equal(t, err, aliasedErr)
			if !errors.Is(err, persistence.ErrCorrupt) && !errors.Is(err, persistence.ErrFormatVersion) {
				t.Fatalf("error neither corrupt nor version: %v", err)
			}
			return
		}
		require.NoError(t, aliasedErr)
		requireSame(t, g, aliased)
		require.NoError(t, g.Verify())
		again, err := persistence.EncodeGlobal(g)
		require.NoError(t, err)
		g2, err := persistence.DecodeGlobal(again)
		require.NoError(t, err)
		requireSame(t, g, g2)
	})
}

// FuzzDecodeManifest is FuzzDecodeGlobal for manifests.
//
//	go test ./persistence -run '^$' -fuzz FuzzDecodeManifest -fuzztime 30s
func FuzzDecodeManifest(f *testing.F) {
	for _, m := range []persistence.Manifest{
		{ID: 1, Files: []persistence.ManifestFile{{Name: persistence.DataName, Size: 4096, CRC: 0x12345678}}},
		{ID: math.MaxUint64, Files: []persistence.ManifestFile{{Name: "a", Size: persistence.MaxEncodedSize}, {Name: "b"}}},
		{ID: 3},
	} {
		b, err := persistence.EncodeManifest(m)
		require.NoError(f, err)
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		decodes(t, data, fix, persistence.DecodeManifest, persistence.EncodeManifest)
	})
}

// decodes checks one fuzz input of an envelope decoder: decode returns a
// value or an error of the damage class, and what it returns encodes back
// to bytes that decode to the same value. With fix, the envelope's
// checksum is made to match first, so that the input reaches the body.
func decodes[T any](t *testing.T, data []byte, fix bool, decode func([]byte) (T, error), encode func(T) ([]byte, error)) {
	if fix {
		data = persistence.FixChecksum(bytes.Clone(data))
	}
	v, err := decode(data)
	if err != nil {
		if !errors.Is(err, persistence.ErrCorrupt) && !errors.Is(err, persistence.ErrFormatVersion) {
			t.Fatalf("error neither corrupt nor version: %v", err)
		}
		return
	}
	again, err := encode(v)
	require.NoError(t, err)
	v2, err := decode(again)
	require.NoError(t, err)
	require.Equal(t, v, v2)
}

// FuzzDecodeOwner feeds the owner record's decoder arbitrary bytes (with
// the checksum fixed or not): it returns a record or an error of the
// damage class, never panics, and what it returns encodes back to a
// record that decodes the same.
//
//	go test ./persistence -run '^$' -fuzz FuzzDecodeOwner -fuzztime 30s
func FuzzDecodeOwner(f *testing.F) {
	since := time.Date(2026, 12, 1, 8, 0, 0, 123, time.UTC)
	for _, r := range []persistence.OwnerRecord{
		{Owner: persistence.Owner{System: "bank", Generation: 3, Host: "vm", PID: 4242, Since: since}, High: 41},
		{Owner: persistence.Owner{System: strings.Repeat("é", 127), Generation: math.MaxUint64, PID: -1, Since: time.Unix(0, 0).UTC()}, High: 1<<63 - 1},
		{},
	} {
		b, err := persistence.EncodeOwner(r)
		require.NoError(f, err)
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		decodes(t, data, fix, persistence.DecodeOwner, persistence.EncodeOwner)
	})
}

// FuzzRoundTrip encodes and decodes random valid snapshots built from a
// seed: names with odd bytes, nil and empty states and data, extreme
// counters and times, waits and violations. encode(g) must be what the
// package documentation describes (encodeV5), decode(encode(g)) must be
// g, and the decoding of g in format versions 1 to 4 must be g without
// what they do not keep (waits and violations before 3, receiver counts
// before 4, sums before 5).
//
//	go test ./persistence -run '^$' -fuzz FuzzRoundTrip -fuzztime 30s
func FuzzRoundTrip(f *testing.F) {
	for seed := range uint64(16) {
		f.Add(seed, seed*7)
	}
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		g := randomGlobal(rand.New(rand.NewPCG(s1, s2)), 24)
		require.NoError(t, g.Verify())
		b, err := persistence.EncodeGlobal(g)
		require.NoError(t, err)
		// The body is msgpack, to its last byte.
		var body any
		r := bytes.NewReader(b[persistence.HeaderSize : len(b)-4])
		require.NoError(t, msgpack.NewDecoder(r).Decode(&body))
		require.Zero(t, r.Len())
		require.Equal(t, encodeV5(t, g), b)
		// What versions 1 and 2 wrote decodes to the same, but for what
		// they do not keep.
		for _, enc := range []struct {
			b    []byte
			want *snapshot.Global
		}{{b, g}, {encodeV1(t, g), withoutWaits(g)}, {encodeV2(t, g), withoutWaits(g)}, {encodeV3(t, g), withoutCounts(g)}, {encodeV4(t, g), withoutSums(g)}} {
			for _, alias := range []bool{false, true} {
				got, alloc, err := persistence.DecodeGlobalCounted(enc.b, alias)
				require.NoError(t, err)
				require.LessOrEqual(t, alloc, allocBound(len(enc.b)))
				requireSame(t, enc.want, got)
			}
		}
	})
}

// randomGlobal returns a valid snapshot drawn from rng, with fewer than
// size participants and 2*size channels.
func randomGlobal(rng *rand.Rand, size int) *snapshot.Global {
	pick := func(options ...string) string { return options[rng.IntN(len(options))] }
	name := func() string {
		switch rng.IntN(4) {
		case 0:
			return pick("", "a", "\x00", "é", "node-1/$42/child", strings.Repeat("long", 20))
		default:
			b := make([]byte, rng.IntN(12))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			return string(b)
		}
	}
	data := func() []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		default:
			b := make([]byte, rng.IntN(12*size))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			return b
		}
	}
	when := func() time.Time {
		switch rng.IntN(3) {
		case 0:
			return time.Time{}
		default:
			return time.Unix(rng.Int64N(1<<40)-1<<39, rng.Int64N(int64(time.Second))).In(time.FixedZone("Z", 3600*rng.IntN(12)))
		}
	}
	g := &snapshot.Global{ID: snapshot.SnapshotID(max(1, rng.Uint64()>>rng.IntN(64))), Mode: snapshot.Mode(rng.IntN(256)), Start: when(), End: when()}
	ids := map[string]bool{}
	for range rng.IntN(size) {
		ids[name()] = true
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for id := range ids {
			if !yield(id) {
				return
			}
		}
	})
	number := func() uint64 {
		switch rng.IntN(3) {
		case 0:
			return 0
		case 1:
			return math.MaxUint64 - uint64(rng.IntN(2))
		default:
			return rng.Uint64() >> rng.IntN(64)
		}
	}
	for _, id := range names {
		p := snapshot.Participant{ID: snapshot.ProcessID(id), Kind: pick("account", "", "router"), State: data()}
		if rng.IntN(5) == 0 {
			p.Kind, p.State, p.Departed = "", nil, true
		}
		if rng.IntN(3) == 0 {
			w := &snapshot.Waits{Any: rng.IntN(2) == 0, Timer: rng.IntN(3) == 0}
			for range rng.IntN(4) {
				// A participant, or a process that is not one.
				to := name()
				if len(names) > 0 && rng.IntN(3) != 0 {
					to = names[rng.IntN(len(names))]
				}
				w.Edges = append(w.Edges, snapshot.Wait{To: snapshot.ProcessID(to), Request: number(), Type: pick("bank.Transfer", "", "fork", name()), Since: when()})
			}
			p.Waits = w
		}
		g.Participants = append(g.Participants, p)
	}
	for range rng.IntN(3) {
		g.Violations = append(g.Violations, snapshot.Violation{Invariant: pick("conservation", "", name()), Err: pick("", "total is 999, want 1000", name()+strings.Repeat("e", rng.IntN(300)))})
	}
	seen := map[snapshot.Channel]bool{}
	for range rng.IntN(2 * size) {
		var c snapshot.Channel
		if len(names) == 0 || rng.IntN(6) == 0 {
			// Nothing crossed it: its ends need not be participants.
			c = snapshot.Channel{From: snapshot.ProcessID(name()), To: snapshot.ProcessID(name())}
			if !seen[c] {
				seen[c] = true
				g.Channels = append(g.Channels, snapshot.ChannelState{Channel: c})
			}
			continue
		}
		c = snapshot.Channel{From: snapshot.ProcessID(names[rng.IntN(len(names))]), To: snapshot.ProcessID(names[rng.IntN(len(names))])}
		if seen[c] {
			continue
		}
		seen[c] = true
		k := rng.IntN(6)
		cs := snapshot.ChannelState{Channel: c}
		switch rng.IntN(3) {
		case 0:
			cs.Received = math.MaxUint64 - uint64(k)
		default:
			cs.Received = uint64(rng.IntN(1 << 20))
		}
		for j := range k {
			cs.Messages = append(cs.Messages, snapshot.Message{Seq: cs.Received + 1 + uint64(j), Payload: persistence.RecordedMessage{Type: pick("t", "", "bank.Transfer", name()), Data: data()}})
		}
		cs.Sent = cs.Received + uint64(k)
		g.Channels = append(g.Channels, cs)
	}
	slices.SortFunc(g.Channels, func(x, y snapshot.ChannelState) int {
		if r := strings.Compare(string(x.Channel.From), string(y.Channel.From)); r != 0 {
			return r
		}
		return strings.Compare(string(x.Channel.To), string(y.Channel.To))
	})
	if rng.IntN(2) == 0 {
		storetest.BalanceReceivers(g, func(_ int, k uint64) uint64 { return min(number(), math.MaxUint64-k) })
	}
	if rng.IntN(2) == 0 {
		storetest.BalanceSums(g, min(number(), math.MaxUint64-uint64(g.TotalInFlight())))
	}
	return g
}
