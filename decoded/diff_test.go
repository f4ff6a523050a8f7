package decoded_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/decoded"
)

func lines(cs []decoded.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

// Changes between two states of a struct are named field by field, in
// key order: nested fields, slice elements, map keys.
func TestDiffStructs(t *testing.T) {
	a := sampleAccount()
	b := sampleAccount()
	b.Balance = 801
	b.Owner.Name = "bob"
	b.Items = []int{1, 5}
	b.Tags = map[string]bool{"new": true}
	b.Key = []byte{0x0a}
	b.None = &owner{Name: "x", Since: since}
	va, vb := decoded.Decode(encode(t, a)), decoded.Decode(encode(t, b))
	assert.Equal(t, []string{
		"Balance -762 -> 801",
		"Items[1] 2 -> 5",
		"- Items[2] 3",
		"Key <2 bytes: 0a0b> -> <1 byte: 0a>",
		`None null -> {Name: "x", Since: 2024-03-01T12:30:00.000000005Z}`,
		`Owner.Name "ann" -> "bob"`,
		"+ Tags.new true",
		"- Tags.vip true",
	}, lines(decoded.Diff(va, vb, 0)))
	assert.Equal(t, []string{"+ Items[2] 3", "+ Tags.vip true"}, lines(decoded.Diff(
		decoded.Decode(encode(t, map[string]any{"Items": []int{1, 2}, "Tags": map[string]bool{}})),
		decoded.Decode(encode(t, map[string]any{"Items": []int{1, 2, 3}, "Tags": map[string]bool{"vip": true}})), 0)))

	assert.Empty(t, decoded.Diff(va, decoded.Decode(encode(t, a)), 0))
	assert.Len(t, decoded.Diff(va, vb, 3), 3)
	assert.Equal(t, "Balance -762 -> 801", decoded.Diff(va, vb, 1)[0].String())

	c := decoded.Diff(va, vb, 0)[2]
	assert.Equal(t, decoded.Change{Path: "Items[2]", From: int64(3), Removed: true}, c)
}

func TestDiffKinds(t *testing.T) {
	m := func(es ...decoded.Entry) *decoded.Map { return &decoded.Map{Entries: es} }
	for _, c := range []struct {
		name string
		a, b any
		want []string
	}{
		{"equal scalars", int64(1), int64(1), nil},
		{"int and float", int64(1), 1.0, []string{"1 -> 1.0"}},
		{"int and uint", int64(1), uint64(1) << 63, []string{"1 -> 9223372036854775808"}},
		{"scalar and map", "x", m(), []string{`"x" -> {}`}},
		{"map and array", m(decoded.Entry{Key: "A", Value: []any{}}), m(decoded.Entry{Key: "A", Value: m()}), []string{"A [] -> {}"}},
		{"nil and nil", nil, nil, nil},
		{"undecoded pair",
			decoded.Undecoded{Size: 2, Reason: "not msgpack: a", Bytes: []byte{1, 2}},
			decoded.Undecoded{Size: 3, Reason: "not msgpack: b", Bytes: []byte{1, 2, 3}},
			[]string{"<2 bytes, not msgpack> -> <3 bytes, not msgpack>"}},
		{"equal undecoded",
			decoded.Undecoded{Size: 2, Reason: "not msgpack: a", Bytes: []byte{1, 2}},
			decoded.Undecoded{Size: 2, Reason: "not msgpack: a", Bytes: []byte{1, 2}}, nil},
		{"undecoded and value", decoded.Undecoded{Size: 1, Reason: "not msgpack: a"}, int64(1), []string{"<1 byte, not msgpack> -> 1"}},
		{"keys not words", m(decoded.Entry{Key: "a b", Value: int64(1)}, decoded.Entry{Key: int64(3), Value: true}),
			m(decoded.Entry{Key: "a b", Value: int64(2)}, decoded.Entry{Key: int64(3), Value: false}),
			[]string{"[3] true -> false", `["a b"] 1 -> 2`}},
		{"nested arrays", []any{[]any{int64(1)}}, []any{[]any{int64(2), int64(3)}}, []string{"[0][0] 1 -> 2", "+ [0][1] 3"}},
		{"ext", decoded.Ext{Type: 1, Data: []byte{1}}, decoded.Ext{Type: 2, Data: []byte{1}}, []string{"<ext 1, 1 byte: 01> -> <ext 2, 1 byte: 01>"}},
	} {
		got := lines(decoded.Diff(c.a, c.b, 0))
		if c.want == nil {
			assert.Empty(t, got, c.name)
			continue
		}
		assert.Equal(t, c.want, got, c.name)
	}
}

// Large maps give their changes in key order.
func TestDiffLargeMaps(t *testing.T) {
	a, b := map[string]int{}, map[string]int{}
	for i := range 100 {
		k := "acct-" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		a[k] = i
		b[k] = i
	}
	b["acct-Ba"] = -1
	delete(b, "acct-Ca")
	b["new"] = 7
	got := lines(decoded.Diff(decoded.Decode(encode(t, a)), decoded.Decode(encode(t, b)), 0))
	assert.Equal(t, []string{"acct-Ba 1 -> -1", "- acct-Ca 2", "+ new 7"}, got)
}

// Change.String bounds each value it shows.
func TestChangeStringBounded(t *testing.T) {
	long := make([]any, 1000)
	for i := range long {
		long[i] = int64(i)
	}
	s := decoded.Change{Path: "Items", From: nil, To: long}.String()
	assert.Less(t, len(s), 200)
	assert.Contains(t, s, "…")
}

// msgpack writes a Go map in no fixed order: the same two maps, written
// in any orders, give the same changes, and numbers compare as numbers.
func TestDiffIgnoresMapOrder(t *testing.T) {
	m := func(es ...decoded.Entry) *decoded.Map { return &decoded.Map{Entries: es} }
	e := func(k any, v int64) decoded.Entry { return decoded.Entry{Key: k, Value: v} }
	a1 := m(e(int64(10), 1), e(int64(9), 1), e("x", 1), e(int64(2), 5))
	a2 := m(e("x", 1), e(int64(2), 5), e(int64(10), 1), e(int64(9), 1))
	b1 := m(e(int64(9), 2), e("y", 1), e(int64(10), 1), e("x", 1))
	b2 := m(e(int64(10), 1), e("x", 1), e("y", 1), e(int64(9), 2))
	want := []string{"- [2] 5", "[9] 1 -> 2", "+ y 1"}
	for _, a := range []*decoded.Map{a1, a2} {
		for _, b := range []*decoded.Map{b1, b2} {
			assert.Equal(t, want, lines(decoded.Diff(a, b, 0)))
		}
	}
	// A real Go map, written many times: one answer.
	before, after := map[string]int{}, map[string]int{}
	for i := range 40 {
		before[fmt.Sprint("k", i)] = i
		after[fmt.Sprint("k", i)] = i + i%3/2
	}
	first := lines(decoded.Diff(decoded.Decode(encode(t, before)), decoded.Decode(encode(t, after)), 0))
	require.Len(t, first, 13)
	for range 20 {
		require.Equal(t, first, lines(decoded.Diff(decoded.Decode(encode(t, before)), decoded.Decode(encode(t, after)), 0)))
	}
}
