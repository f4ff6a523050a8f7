package msgpackbound_test

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/msgpackbound"
)

// Every kind of value msgpack writes is one value of its full length.
func TestLenOfValues(t *testing.T) {
	type inner struct {
		B []byte
		S []string
		M map[string]int
	}
	for _, v := range []any{
		nil, true, false, 0, -1, 127, 128, -33, 1 << 15, 1 << 31, uint64(1) << 63, float32(1.5), 2.5,
		"", "a", strings.Repeat("s", 31), strings.Repeat("s", 32), strings.Repeat("s", 256), strings.Repeat("s", 1<<16),
		[]byte{}, []byte{1}, make([]byte, 256), make([]byte, 1<<16),
		[]int{}, make([]int, 15), make([]int, 16), make([]int, 1<<16),
		map[string]int{}, map[string]int{"a": 1}, map[int]bool{1: true, 2: false, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true, 10: true, 11: true, 12: true, 13: true, 14: true, 15: true, 16: true},
		time.Unix(1, 0), time.Unix(1<<40, 5), time.Date(1000, 1, 1, 0, 0, 0, 1, time.UTC),
		inner{B: []byte("x"), S: []string{"a", "b"}, M: map[string]int{"k": 1}},
		[]any{[]any{[]any{map[string]any{"a": []any{}}}}},
	} {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		n, err := msgpackbound.Len(append(b, 0xc1, 0xc1))
		require.NoError(t, err, "%T", v)
		require.Equal(t, len(b), n, "%T", v)
		require.NoError(t, msgpackbound.Unmarshal(b, new(msgpack.RawMessage)), "%T", v)
	}
}

// Claims beyond the bytes there are refused before anything is made for
// them, as is whatever is cut short.
func TestClaimsRefused(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":                     {},
		"array32 of 2^32-1":         {0xdd, 0xff, 0xff, 0xff, 0xff},
		"array16 of 3 in 2 bytes":   {0xdc, 0x00, 0x03, 0x01, 0x01},
		"map32 of 2^31 entries":     {0xdf, 0x80, 0x00, 0x00, 0x00, 0x01, 0x01},
		"fixmap of 1 in 1 byte":     {0x81, 0x01},
		"array nested in its claim": {0x92, 0x93, 0x01, 0x01, 0x01},
		"bin32 of 2^32-1":           {0xc6, 0xff, 0xff, 0xff, 0xff, 0x00},
		"str8 cut short":            {0xd9, 0x05, 'a'},
		"length cut short":          {0xdd, 0x00, 0x00},
		"ext32 of 2^32-1":           {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01},
		"fixext16 cut short":        {0xd8, 0x01, 0x00},
		"never used":                {0xc1},
		"too deep":                  append(bytes.Repeat([]byte{0x91}, msgpackbound.MaxDepth+1), 0x01),
	} {
		_, err := msgpackbound.Len(b)
		require.ErrorIs(t, err, msgpackbound.ErrMalformed, name)
	}
	_, err := msgpackbound.Len(append(bytes.Repeat([]byte{0x91}, msgpackbound.MaxDepth), 0x01))
	require.NoError(t, err, "as deep as allowed")
	err = msgpackbound.Unmarshal([]byte{0x01, 0x02}, new(int))
	require.ErrorIs(t, err, msgpackbound.ErrMalformed, "a value and more")
}

// What Unmarshal lets msgpack decode allocates in proportion to its
// size: an array claiming 2^24 elements in 8 bytes, which msgpack alone
// would make, is refused.
func TestUnmarshalBounded(t *testing.T) {
	b := []byte{0x81, 0xa1, 'm', 0xdd, 0x01, 0x00, 0x00, 0x00}
	var v struct {
		M [][]byte `msgpack:"m"`
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := msgpackbound.Unmarshal(b, &v)
	runtime.ReadMemStats(&after)
	require.True(t, errors.Is(err, msgpackbound.ErrMalformed), "%v", err)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<16))
}
