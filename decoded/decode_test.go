package decoded_test

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/decoded"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

type owner struct {
	Name  string
	Since time.Time
}

type account struct {
	Balance int64
	Owner   *owner
	Items   []int
	Tags    map[string]bool
	Key     []byte
	Max     uint64
	Debt    int32
	Rate    float64
	Ratio   float32
	None    *owner
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	require.NoError(t, err)
	return b
}

func mustMap(t *testing.T, v any) *decoded.Map {
	t.Helper()
	m, ok := v.(*decoded.Map)
	require.True(t, ok, "%T is not a *Map: %s", v, decoded.Format(v, 0))
	return m
}

var since = time.Date(2024, 3, 1, 12, 30, 0, 5, time.UTC)

func sampleAccount() *account {
	return &account{
		Balance: -762,
		Owner:   &owner{Name: "ann", Since: since},
		Items:   []int{1, 2, 3},
		Tags:    map[string]bool{"vip": true},
		Key:     []byte{0x0a, 0x0b},
		Max:     math.MaxUint64,
		Debt:    -5,
		Rate:    0.25,
		Ratio:   1.5,
	}
}

// A Go struct encoded by msgpack decodes field by field, in declaration
// order, with each kind of value as the value model says.
func TestDecodeStruct(t *testing.T) {
	v := decoded.Decode(encode(t, sampleAccount()))
	m := mustMap(t, v)
	var keys []any
	for _, e := range m.Entries {
		keys = append(keys, e.Key)
	}
	assert.Equal(t, []any{"Balance", "Owner", "Items", "Tags", "Key", "Max", "Debt", "Rate", "Ratio", "None"}, keys)

	get := func(path string) any {
		t.Helper()
		v, ok := decoded.Lookup(v, path)
		require.True(t, ok, path)
		return v
	}
	assert.Equal(t, int64(-762), get("Balance"))
	assert.Equal(t, "ann", get("Owner.Name"))
	assert.Equal(t, since, get("Owner.Since"))
	assert.Equal(t, []any{int64(1), int64(2), int64(3)}, get("Items"))
	assert.Equal(t, int64(3), get("Items[2]"))
	assert.Equal(t, true, get("Tags.vip"))
	assert.Equal(t, []byte{0x0a, 0x0b}, get("Key"))
	assert.Equal(t, uint64(math.MaxUint64), get("Max"))
	assert.Equal(t, int64(-5), get("Debt"))
	assert.Equal(t, 0.25, get("Rate"))
	assert.Equal(t, 1.5, get("Ratio"))
	assert.Nil(t, get("None"))

	assert.Equal(t,
		`{Balance: -762, Owner: {Name: "ann", Since: 2024-03-01T12:30:00.000000005Z}, Items: [1, 2, 3], Tags: {vip: true}, Key: <2 bytes: 0a0b>, Max: 18446744073709551615, Debt: -5, Rate: 0.25, Ratio: 1.5, None: null}`,
		decoded.Format(v, 0))
}

// Integers are int64 whatever width they were written in, and uint64
// only above int64's range: one field, one kind.
func TestDecodeIntegers(t *testing.T) {
	for _, c := range []struct {
		in   any
		want any
	}{
		{uint8(200), int64(200)},
		{uint64(1) << 63, uint64(1) << 63},
		{uint64(math.MaxInt64), int64(math.MaxInt64)},
		{int64(math.MinInt64), int64(math.MinInt64)},
		{int8(-1), int64(-1)},
		{0, int64(0)},
		{float32(-0.5), -0.5},
		{math.Inf(1), math.Inf(1)},
		{"", ""},
		{[]byte{}, []byte{}},
		{[]any{}, []any{}},
		{time.Unix(1, 0), time.Unix(1, 0).UTC()},
		{time.Unix(1<<40, 7), time.Unix(1<<40, 7).UTC()},
		{time.Date(1000, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(1000, 1, 1, 0, 0, 0, 1, time.UTC)},
	} {
		assert.Equal(t, c.want, decoded.Decode(encode(t, c.in)), "%T %v", c.in, c.in)
	}
}

// Maps keep their stored order, keys of any kind included.
func TestDecodeMapOrder(t *testing.T) {
	b := []byte{0x83, 0xa1, 'b', 0x01, 0x05, 0x02, 0xa1, 'a', 0xc0}
	m := mustMap(t, decoded.Decode(b))
	assert.Equal(t, []decoded.Entry{{Key: "b", Value: int64(1)}, {Key: int64(5), Value: int64(2)}, {Key: "a", Value: nil}}, m.Entries)
	v, ok := m.Get("a")
	assert.True(t, ok)
	assert.Nil(t, v)
	_, ok = m.Get("c")
	assert.False(t, ok)
	assert.Equal(t, `{b: 1, 5: 2, a: null}`, decoded.Format(m, 0))
	v, ok = decoded.Lookup(m, "[5]")
	assert.True(t, ok)
	assert.Equal(t, int64(2), v)
}

// Extensions other than a timestamp are kept as their type and bytes; a
// timestamp extension of a size no timestamp has is one of them.
func TestDecodeExt(t *testing.T) {
	assert.Equal(t, decoded.Ext{Type: 5, Data: []byte{1, 2}}, decoded.Decode([]byte{0xd5, 0x05, 1, 2}))
	assert.Equal(t, decoded.Ext{Type: 7, Data: []byte{}}, decoded.Decode([]byte{0xc7, 0x00, 0x07}))
	assert.Equal(t, decoded.Ext{Type: -1, Data: []byte{1, 2}}, decoded.Decode([]byte{0xd5, 0xff, 1, 2}))
	// Nanoseconds beyond a second are no timestamp.
	assert.Equal(t, decoded.Ext{Type: -1, Data: []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}},
		decoded.Decode([]byte{0xc7, 12, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}))
	assert.Equal(t, "<ext 5, 2 bytes: 0102>", decoded.Format(decoded.Ext{Type: 5, Data: []byte{1, 2}}, 0))
}

// Bytes that are not exactly one msgpack value are Undecoded, with their
// size and bytes, and a reason that says so.
func TestDecodeNotMsgpack(t *testing.T) {
	state := encode(t, sampleAccount())
	for name, b := range map[string][]byte{
		"empty":                  {},
		"json from MarshalState": []byte(`{"Balance":762,"Owner":"ann"}`),
		"text":                   []byte("hello"),
		"trailing bytes":         append(append([]byte{}, state...), 0x01),
		"two values":             {0x01, 0x02},
		"truncated":              state[:len(state)-3],
		"never used code":        {0xc1},
		"array32 of 2^32-1":      {0xdd, 0xff, 0xff, 0xff, 0xff},
		"str32 of 2^32-1":        {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"deep":                   append([]byte(strings.Repeat("\x91", 200)), 0x01),
	} {
		v := decoded.Decode(b)
		u, ok := v.(decoded.Undecoded)
		require.True(t, ok, "%s: %T %s", name, v, decoded.Format(v, 0))
		assert.Equal(t, len(b), u.Size, name)
		assert.Equal(t, b, u.Bytes, name)
		assert.True(t, strings.HasPrefix(u.Reason, "not msgpack: "), "%s: %s", name, u.Reason)
		assert.Regexp(t, `^<`+strconv.Itoa(len(b))+` bytes?, not msgpack>$`, decoded.Format(u, 0), name)
	}
	u := decoded.Decode(append(append([]byte{}, state...), 0x01, 0x02)).(decoded.Undecoded)
	assert.Equal(t, "not msgpack: a value of "+strconv.Itoa(len(state))+" bytes, then 2 bytes more", u.Reason)
}

// Nesting up to the bound decodes; one level more is Undecoded.
func TestDecodeDepth(t *testing.T) {
	nest := func(n int) []byte { return append([]byte(strings.Repeat("\x91", n)), 0x01) }
	_, ok := decoded.Decode(nest(64)).([]any)
	assert.True(t, ok)
	u, ok := decoded.Decode(nest(65)).(decoded.Undecoded)
	require.True(t, ok)
	assert.Contains(t, u.Reason, "nested more than 64 deep")
}

// A departed participant has no state; another's state is decoded.
func TestState(t *testing.T) {
	assert.Nil(t, decoded.State(snapshot.Participant{ID: "a", Departed: true}))
	assert.Equal(t, int64(1), decoded.State(snapshot.Participant{ID: "a", State: []byte{0x01}}))
}

// Messages decode recorded messages, within their envelope or not, with
// the type name as registered; other payloads are Undecoded.
func TestMessages(t *testing.T) {
	type deposit struct{ Amount int64 }
	data := encode(t, deposit{Amount: 5})
	env := encode(t, map[string]any{"s": &actor.PID{Address: "node1", Id: "acct-1"}, "d": msgpack.RawMessage(data)})
	got := decoded.Messages([]snapshot.Message{
		{Seq: 1, Payload: persistence.RecordedMessage{Type: "deposit", Data: data}},
		{Seq: 2, Payload: persistence.RecordedMessage{Type: "~deposit", Data: data}},
		{Seq: 3, Payload: persistence.RecordedMessage{Type: "@deposit", Data: env}},
		{Seq: 4, Payload: persistence.RecordedMessage{Type: "@~deposit", Data: []byte{0xc1}}},
		{Seq: 5, Payload: persistence.RecordedMessage{Type: "proto", Data: []byte{0x08, 0x96, 0x01}}},
		{Seq: 6, Payload: "a string"},
	})
	require.Len(t, got, 6)
	want := &decoded.Map{Entries: []decoded.Entry{{Key: "Amount", Value: int64(5)}}}
	assert.Equal(t, decoded.Message{Seq: 1, Type: "deposit", Value: want, Size: len(data)}, got[0])
	assert.Equal(t, decoded.Message{Seq: 2, Type: "deposit", Value: want, Size: len(data)}, got[1])
	assert.Equal(t, decoded.Message{Seq: 3, Type: "deposit", Sender: "node1/acct-1", Value: want, Size: len(env)}, got[2])

	assert.Equal(t, "deposit", got[3].Type)
	u, ok := got[3].Value.(decoded.Undecoded)
	require.True(t, ok)
	assert.Equal(t, 1, u.Size)
	assert.Equal(t, "<1 byte, not a readable envelope>", decoded.Format(u, 0))

	assert.Equal(t, "proto", got[4].Type)
	assert.Equal(t, "<3 bytes, not msgpack>", decoded.Format(got[4].Value, 0))

	assert.Equal(t, "string", got[5].Type)
	assert.Equal(t, "<0 bytes, not a recorded message>", decoded.Format(got[5].Value, 0))
}
