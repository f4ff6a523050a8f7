package decoded_test

import (
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/decoded"
)

// allocBound is what Decode may allocate for n bytes of input: every
// element costs a byte of input at least, and a few dozen bytes of
// memory at most (a slot, a boxed value, a map entry).
func allocBound(n int) uint64 { return 64*uint64(n) + 16<<10 }

// Decode never panics, allocates in proportion to its input whatever the
// input claims, and whatever it returns can be formatted, written as
// JSON and compared with itself.
func FuzzDecode(f *testing.F) {
	for _, v := range []any{
		sampleAccount(), map[string]any{"a": []any{1, "x", nil, 2.5}}, []byte{1, 2, 3},
		time.Unix(1<<40, 5), uint64(1) << 63, -1, "ünïcödé",
	} {
		f.Add(encode(f, v))
	}
	for _, b := range [][]byte{
		{}, {0xc1}, {0xdd, 0xff, 0xff, 0xff, 0xff}, {0xdf, 0x80, 0, 0, 0, 1, 1},
		{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, {0xc9, 0xff, 0xff, 0xff, 0xff, 0x05},
		{0xd5, 0x05, 1, 2}, {0xd6, 0xff, 0, 0, 0, 1}, []byte(`{"Balance":762}`),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		v := decoded.Decode(b)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > allocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d bytes", len(b), got)
		}
		if u, ok := v.(decoded.Undecoded); ok {
			require.Equal(t, len(b), u.Size)
		}
		_ = decoded.Format(v, 0)
		s := decoded.Format(v, 40)
		require.LessOrEqual(t, len([]rune(s)), 40)
		out, err := json.Marshal(decoded.JSON(v, true))
		require.NoError(t, err)
		require.True(t, json.Valid(out))
		require.Empty(t, decoded.Diff(v, v, 0))
		for _, c := range decoded.Diff(v, decoded.Decode(nil), 0) {
			_ = c.String()
		}
	})
}
