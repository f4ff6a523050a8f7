package decoded

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// ErrQuery is wrapped by the error ParseQuery returns for a query it
// cannot read; the message names the column where reading stopped.
var ErrQuery = errors.New("decoded: bad query")

// Query selects values by one comparison of a field: PATH OP LITERAL,
// OP one of == != < <= > >=, LITERAL a number, a quoted string, true,
// false or null. Examples: `Balance < 0`, `Owner.Name == "ann"`,
// `Accounts["acct 1"].Balance >= 100.5`. Numbers compare numerically
// across int64/uint64/float64, exactly; strings lexically (byte by
// byte); true, false and null only with == and != (`X != null`: X is
// there and not null). A missing path or mismatched kinds never match,
// with != as with the others.
type Query struct {
	src   string
	path  []step
	op    string
	value any // int64, uint64, float64, string, bool or nil
}

// ops are the comparisons, the two-byte ones first.
var ops = []string{"==", "!=", "<=", ">=", "<", ">"}

// ParseQuery reads a query. Its error wraps ErrQuery and names the
// column (from 1) where reading stopped.
func ParseQuery(s string) (*Query, error) {
	fail := func(pos int, format string, args ...any) (*Query, error) {
		return nil, fmt.Errorf("%w %q at column %d: %s", ErrQuery, s, pos+1, fmt.Sprintf(format, args...))
	}
	i := skipSpace(s, 0)
	if i == len(s) {
		return fail(i, "a query is PATH OP VALUE, as in Balance < 0")
	}
	steps, n, err := parsePath(s[i:])
	if err != nil {
		return fail(i+n, "%v", err)
	}
	if len(steps) == 0 {
		return fail(i, "a path is expected, as in Owner.Name")
	}
	i = skipSpace(s, i+n)
	q := &Query{src: s, path: steps}
	for _, op := range ops {
		if strings.HasPrefix(s[i:], op) {
			q.op = op
			break
		}
	}
	if q.op == "" {
		return fail(i, "a comparison is expected: == != < <= > >=")
	}
	opAt := i
	i = skipSpace(s, i+len(q.op))
	lit := s[i:]
	var end int
	switch {
	case lit == "":
		return fail(i, "a value is expected: a number, a quoted string, true, false or null")
	case lit[0] == '"' || lit[0] == '`':
		quoted, err := strconv.QuotedPrefix(lit)
		if err != nil {
			return fail(i, "the string is not closed or not valid")
		}
		q.value, _ = strconv.Unquote(quoted)
		end = len(quoted)
	default:
		end = strings.IndexAny(lit, " \t\n")
		if end < 0 {
			end = len(lit)
		}
		word := lit[:end]
		switch word {
		case "true", "false":
			q.value = word == "true"
		case "null":
			q.value = nil
		default:
			v, ok := parseNumber(word)
			if !ok {
				return fail(i, "%q is not a number, a quoted string, true, false or null", word)
			}
			q.value = v
		}
	}
	if rest := skipSpace(s, i+end); rest != len(s) {
		return fail(rest, "nothing may follow the value")
	}
	switch q.value.(type) {
	case nil, bool:
		if q.op != "==" && q.op != "!=" {
			return fail(opAt, "%s compares numbers and strings; use == or != with %s", q.op, Format(q.value, 0))
		}
	}
	return q, nil
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	return i
}

// parseNumber reads a number literal as an int64, else a uint64, else a
// float64.
func parseNumber(s string) (any, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) {
		return f, true
	}
	return nil, false
}

// String returns the query as it was given.
func (q *Query) String() string { return q.src }

// Match reports whether v has the path and its value satisfies the
// comparison.
func (q *Query) Match(v any) bool {
	got, ok := lookup(v, q.path)
	if !ok {
		return false
	}
	var c int
	switch want := q.value.(type) {
	case nil:
		return (got == nil) == (q.op == "==")
	case bool:
		b, ok := got.(bool)
		return ok && (b == want) == (q.op == "==")
	case string:
		s, ok := got.(string)
		if !ok {
			return false
		}
		c = strings.Compare(s, want)
	default:
		if c, ok = compareNumbers(got, want); !ok {
			return false
		}
	}
	switch q.op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

// compareNumbers compares two int64, uint64 or float64 values exactly;
// ok is false when either is not a number, or is NaN.
func compareNumbers(a, b any) (c int, ok bool) {
	fa, aFloat := a.(float64)
	fb, bFloat := b.(float64)
	if aFloat && math.IsNaN(fa) || bFloat && math.IsNaN(fb) {
		return 0, false
	}
	if aFloat && bFloat {
		return cmp3(fa < fb, fa > fb), true
	}
	if !aFloat && !bFloat {
		return compareInts(a, b)
	}
	x, xok := toBigFloat(a)
	y, yok := toBigFloat(b)
	if !xok || !yok {
		return 0, false
	}
	return x.Cmp(y), true
}

func cmp3(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

// compareInts compares two int64 or uint64 values.
func compareInts(a, b any) (int, bool) {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp3(x < y, x > y), true
		case uint64:
			if x < 0 {
				return -1, true
			}
			return cmp3(uint64(x) < y, uint64(x) > y), true
		}
	case uint64:
		switch y := b.(type) {
		case uint64:
			return cmp3(x < y, x > y), true
		case int64:
			if y < 0 {
				return 1, true
			}
			return cmp3(x < uint64(y), x > uint64(y)), true
		}
	}
	return 0, false
}

func toBigFloat(v any) (*big.Float, bool) {
	switch v := v.(type) {
	case int64:
		return new(big.Float).SetInt64(v), true
	case uint64:
		return new(big.Float).SetUint64(v), true
	case float64:
		return big.NewFloat(v), true
	}
	return nil, false
}
