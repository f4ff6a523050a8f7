package decoded_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/decoded"
)

func TestLookup(t *testing.T) {
	v := decoded.Decode(encode(t, map[string]any{
		"Owner":    map[string]any{"Name": "ann"},
		"Items":    []any{int64(1), []any{"x", "y"}},
		"Accounts": map[string]any{"a b": int64(3), "acct-1": int64(4)},
		"ByID":     map[int]string{7: "seven"},
	}))
	for path, want := range map[string]any{
		"Owner.Name":         "ann",
		"Items[0]":           int64(1),
		"Items[1][1]":        "y",
		`Accounts["a b"]`:    int64(3),
		"Accounts.acct-1":    int64(4),
		`Accounts["acct-1"]`: int64(4),
		"ByID[7]":            "seven",
		`Owner["Name"]`:      "ann",
		"":                   v,
	} {
		got, ok := decoded.Lookup(v, path)
		require.True(t, ok, path)
		assert.Equal(t, want, got, path)
	}
	for _, path := range []string{
		"Missing", "Owner.Missing", "Items[2]", "Items[-1]", "Items.x", "Owner.Name.More", "Owner[0]",
		"Owner..Name", ".Owner", "Items[", "Items[]", `Accounts["a b"`, "Owner Name", "Items[0]x",
	} {
		_, ok := decoded.Lookup(v, path)
		assert.False(t, ok, path)
	}
	// Diff's paths are Lookup's.
	w := decoded.Decode(encode(t, map[string]any{
		"Owner":    map[string]any{"Name": "bob"},
		"Items":    []any{int64(1), []any{"x", "z"}},
		"Accounts": map[string]any{"a b": int64(5), "acct-1": int64(4)},
		"ByID":     map[int]string{7: "SEVEN"},
	}))
	for _, c := range decoded.Diff(v, w, 0) {
		got, ok := decoded.Lookup(w, c.Path)
		require.True(t, ok, c.Path)
		assert.Equal(t, c.To, got, c.Path)
	}
}

func TestParseQueryErrors(t *testing.T) {
	for q, want := range map[string]string{
		"":                 `column 1: a query is PATH OP VALUE`,
		"Balance":          `column 8: a comparison is expected`,
		"Balance <":        `column 10: a value is expected`,
		"Balance < x":      `column 11: "x" is not a number`,
		"Balance < 0 1":    `column 13: nothing may follow the value`,
		`Name == "ann`:     `column 9: the string is not closed`,
		"Flag < true":      `column 6: < compares numbers and strings; use == or != with true`,
		"Owner >= null":    `column 7: >= compares numbers and strings`,
		"== 3":             `column 1: a name is expected`,
		"Items[ == 1":      `column 6: ] is missing`,
		"Owner..Name == 1": `column 7: a name is expected`,
		"Balance =< 0":     `column 9: a comparison is expected`,
	} {
		_, err := decoded.ParseQuery(q)
		require.Error(t, err, q)
		assert.True(t, errors.Is(err, decoded.ErrQuery), q)
		assert.Contains(t, err.Error(), want, q)
	}
}

func TestQueryMatch(t *testing.T) {
	acct := func(balance any) any {
		return decoded.Decode(encode(t, map[string]any{"Balance": balance, "Owner": map[string]any{"Name": "ann"}, "Open": true, "Note": nil}))
	}
	cases := []struct {
		q     string
		v     any
		match bool
	}{
		{"Balance < 0", acct(-5), true},
		{"Balance < 0", acct(5), false},
		{"Balance<0", acct(-5), true},
		{"Balance < 0", acct(-0.5), true},
		{"Balance < -0.5", acct(-1), true},
		{"Balance <= -0.5", acct(-0.5), true},
		{"Balance == 1", acct(1.0), true},
		{"Balance == 1.0", acct(1), true},
		{"Balance == 9007199254740993", acct(9007199254740992.0), false}, // exact, not through float64
		{"Balance > 9223372036854775807", acct(uint64(math.MaxUint64)), true},
		{"Balance == 18446744073709551615", acct(uint64(math.MaxUint64)), true},
		{"Balance > -1", acct(uint64(math.MaxUint64)), true},
		{"Balance < 18446744073709551615", acct(-1), true},
		{"Balance >= 1e3", acct(1000), true},
		{"Balance != 3", acct(4), true},
		{"Balance != 3", acct("3"), false}, // mismatched kinds never match
		{"Balance == 3", acct(math.NaN()), false},
		{"Balance != 3", acct(math.NaN()), false},
		{`Owner.Name == "ann"`, acct(0), true},
		{"Owner.Name == `ann`", acct(0), true},
		{`Owner.Name < "bob"`, acct(0), true},
		{`Owner.Name > "bob"`, acct(0), false},
		{`Owner.Name == 3`, acct(0), false},
		{"Open == true", acct(0), true},
		{"Open != false", acct(0), true},
		{"Open == 1", acct(0), false},
		{"Note == null", acct(0), true},
		{"Note != null", acct(0), false},
		{"Owner != null", acct(0), true},
		{"Missing == null", acct(0), false}, // a missing path never matches
		{"Missing != 3", acct(0), false},
		{"Balance < 0", decoded.Undecoded{Size: 3}, false},
		{"Balance < 0", nil, false},
	}
	for _, c := range cases {
		q, err := decoded.ParseQuery(c.q)
		require.NoError(t, err, c.q)
		assert.Equal(t, c.match, q.Match(c.v), "%s on %s", c.q, decoded.Format(c.v, 0))
		assert.Equal(t, c.q, q.String())
	}
}
