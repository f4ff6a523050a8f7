package decoded_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/decoded"
)

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "null"},
		{true, "true"},
		{int64(-3), "-3"},
		{uint64(math.MaxUint64), "18446744073709551615"},
		{2.0, "2.0"},
		{1e300, "1e+300"},
		{math.NaN(), "NaN"},
		{math.Inf(-1), "-Inf"},
		{"a \"b\"\n", `"a \"b\"\n"`},
		{[]byte{}, "<0 bytes>"},
		{[]byte{0xff}, "<1 byte: ff>"},
		{[]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, "<12 bytes: 0001020304050607…>"},
		{time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC), "2024-03-01T12:00:00Z"},
		{decoded.Ext{Type: -3}, "<ext -3, 0 bytes>"},
		{decoded.Undecoded{Size: 58, Reason: "not msgpack: at byte 0: ..."}, "<58 bytes, not msgpack>"},
		{decoded.Undecoded{Size: 2}, "<2 bytes, undecoded>"},
		{[]any{}, "[]"},
		{[]any{int64(1), []any{"x"}}, `[1, ["x"]]`},
		{&decoded.Map{}, "{}"},
		{&decoded.Map{Entries: []decoded.Entry{
			{Key: "Owner", Value: "ann"}, {Key: "acct-1", Value: int64(1)}, {Key: "_x9", Value: nil},
			{Key: "9a", Value: nil}, {Key: "", Value: nil}, {Key: true, Value: 1.5},
		}}, `{Owner: "ann", "acct-1": 1, _x9: null, "9a": null, "": null, true: 1.5}`},
		{(*decoded.Map)(nil), "null"},
		{struct{}{}, "<struct {}>"},
	} {
		assert.Equal(t, c.want, decoded.Format(c.v, 0), "%#v", c.v)
	}
}

// max bounds the runes written, the last being an ellipsis; a value that
// fits is whole.
func TestFormatTruncates(t *testing.T) {
	v := &decoded.Map{Entries: []decoded.Entry{{Key: "Name", Value: "ünïcödé"}, {Key: "Items", Value: []any{int64(1), int64(2), int64(3)}}}}
	full := `{Name: "ünïcödé", Items: [1, 2, 3]}`
	assert.Equal(t, full, decoded.Format(v, 0))
	assert.Equal(t, full, decoded.Format(v, -1))
	assert.Equal(t, full, decoded.Format(v, utf8.RuneCountInString(full)))
	assert.Equal(t, `{Name: "ünïcödé", Items: [1, 2, 3…`, decoded.Format(v, utf8.RuneCountInString(full)-1))
	assert.Equal(t, `{Name: "ünï…`, decoded.Format(v, 12))
	assert.Equal(t, "…", decoded.Format(v, 1))
	for max := 1; max < 40; max++ {
		assert.LessOrEqual(t, utf8.RuneCountInString(decoded.Format(v, max)), max)
	}
}

func jsonOf(t *testing.T, v any, raw bool) string {
	t.Helper()
	b, err := json.Marshal(decoded.JSON(v, raw))
	require.NoError(t, err)
	return string(b)
}

// Every kind has a JSON form that encoding/json writes.
func TestJSON(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "null"},
		{false, "false"},
		{int64(math.MinInt64), "-9223372036854775808"},
		{uint64(math.MaxUint64), "18446744073709551615"},
		{0.5, "0.5"},
		{math.NaN(), `"NaN"`},
		{math.Inf(1), `"+Inf"`},
		{"ann", `"ann"`},
		{[]byte{1, 2, 3}, `{"$bytes":"AQID","size":3}`},
		{time.Date(2024, 3, 1, 12, 0, 0, 5, time.UTC), `"2024-03-01T12:00:00.000000005Z"`},
		{decoded.Ext{Type: 4, Data: []byte{1}}, `{"$ext":4,"data":"AQ=="}`},
		{decoded.Undecoded{Size: 2, Reason: "not msgpack: x", Bytes: []byte{1, 2}}, `{"$undecoded":"not msgpack: x","size":2}`},
		{[]any{int64(1), []byte{}}, `[1,{"$bytes":"","size":0}]`},
		{&decoded.Map{}, `{}`},
		{&decoded.Map{Entries: []decoded.Entry{
			{Key: "z", Value: int64(1)}, {Key: "a", Value: &decoded.Map{Entries: []decoded.Entry{{Key: int64(7), Value: []any{}}}}},
			{Key: []byte{1}, Value: nil},
		}}, `{"z":1,"a":{"7":[]},"\u003c1 byte: 01\u003e":null}`},
		{(*decoded.Map)(nil), "null"},
	} {
		assert.Equal(t, c.want, jsonOf(t, c.v, false), "%#v", c.v)
	}
	u := decoded.Undecoded{Size: 2, Reason: "not msgpack: x", Bytes: []byte{1, 2}}
	assert.Equal(t, `{"$undecoded":"not msgpack: x","bytes":"AQI=","size":2}`, jsonOf(t, u, true))
	m := &decoded.Map{Entries: []decoded.Entry{{Key: "s", Value: u}}}
	assert.Equal(t, `{"s":{"$undecoded":"not msgpack: x","bytes":"AQI=","size":2}}`, jsonOf(t, m, true))
	b, err := json.Marshal(m) // Map's own MarshalJSON leaves raw bytes out
	require.NoError(t, err)
	assert.Equal(t, `{"s":{"$undecoded":"not msgpack: x","size":2}}`, string(b))
}

// A decoded struct's JSON reads back with its fields in order.
func TestJSONOfDecoded(t *testing.T) {
	v := decoded.Decode(encode(t, sampleAccount()))
	got := jsonOf(t, v, false)
	assert.Equal(t, `{"Balance":-762,"Owner":{"Name":"ann","Since":"2024-03-01T12:30:00.000000005Z"},"Items":[1,2,3],"Tags":{"vip":true},"Key":{"$bytes":"Cgs=","size":2},"Max":18446744073709551615,"Debt":-5,"Rate":0.25,"Ratio":1.5,"None":null}`, got)
	assert.True(t, json.Valid([]byte(got)))
}
