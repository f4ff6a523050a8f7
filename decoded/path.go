package decoded

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// A path names a value inside another, as Diff writes it and Lookup and
// Query read it: map keys after dots ("Owner.Name"), array indexes in
// brackets ("Items[3]"). A key that is not a plain word (letters, digits,
// '_', '-') is written quoted in brackets (Accounts["a b"]), an integer
// key as an index (Scores[7]), any other key as Format writes it.

// step is one step of a path: a map key, or an index when index is
// true (which also finds an integer map key).
type step struct {
	key   any
	index bool
	n     int64
}

// isWord reports whether a string key is written after a dot.
func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r != '_' && r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// joinKey appends map key k to path.
func joinKey(path string, k any) string {
	switch k := k.(type) {
	case string:
		if isWord(k) {
			if path == "" {
				return k
			}
			return path + "." + k
		}
		return path + "[" + strconv.Quote(k) + "]"
	case int64:
		return path + "[" + strconv.FormatInt(k, 10) + "]"
	case uint64:
		return path + "[" + strconv.FormatUint(k, 10) + "]"
	}
	return path + "[" + Format(k, 0) + "]"
}

// joinIndex appends array index i to path.
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// parsePath reads the path s starts with, up to a space or a
// comparison; pos is the offset of the byte after it, or of the byte
// that could not be read.
func parsePath(s string) (steps []step, pos int, err error) {
	i := 0
	for i < len(s) {
		switch {
		case s[i] == '[':
			st, n, err := parseBracket(s[i:])
			if err != nil {
				return nil, i, err
			}
			steps = append(steps, st)
			i += n
			continue
		case s[i] == '.':
			if i == 0 {
				return nil, i, fmt.Errorf("a path starts with a name, not a dot")
			}
			i++
		case i > 0 && isSpaceOrOp(s[i]):
			return steps, i, nil // the end of a path in a query
		case i > 0:
			return nil, i, fmt.Errorf("a dot or a bracket is expected")
		}
		j := i
		for j < len(s) && s[j] != '.' && s[j] != '[' && s[j] != ']' && s[j] != '"' && !isSpaceOrOp(s[j]) {
			j++
		}
		if j == i {
			return nil, i, fmt.Errorf("a name is expected")
		}
		steps = append(steps, step{key: s[i:j]})
		i = j
	}
	return steps, i, nil
}

// isSpaceOrOp reports whether c ends a name in a path: a space or the
// start of a comparison.
func isSpaceOrOp(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '=' || c == '!' || c == '<' || c == '>'
}

// parseBracket reads a bracketed step at the start of s and returns its
// length.
func parseBracket(s string) (step, int, error) {
	if strings.HasPrefix(s, `["`) {
		q, err := strconv.QuotedPrefix(s[1:])
		if err != nil {
			return step{}, 0, fmt.Errorf("a quoted key is not closed")
		}
		k, _ := strconv.Unquote(q)
		n := 1 + len(q)
		if n >= len(s) || s[n] != ']' {
			return step{}, 0, fmt.Errorf("] is expected after the key")
		}
		return step{key: k}, n + 1, nil
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return step{}, 0, fmt.Errorf("] is missing")
	}
	inner := s[1:end]
	if n, err := strconv.ParseInt(inner, 10, 64); err == nil {
		return step{index: true, n: n, key: n}, end + 1, nil
	}
	if u, err := strconv.ParseUint(inner, 10, 64); err == nil {
		return step{key: u}, end + 1, nil
	}
	if inner == "" {
		return step{}, 0, fmt.Errorf("an index or a quoted key is expected in brackets")
	}
	// Another key, as Format writes it: matched by its formatting.
	return step{key: formattedKey(inner)}, end + 1, nil
}

// formattedKey is a map key given as Format writes it.
type formattedKey string

// Lookup follows a dotted path ("Owner.Name", "Items[2]",
// `Accounts["a b"].Balance`) into v. The empty path is v itself.
func Lookup(v any, path string) (any, bool) {
	steps, n, err := parsePath(path)
	if err != nil || n != len(path) {
		return nil, false
	}
	return lookup(v, steps)
}

func lookup(v any, steps []step) (any, bool) {
	for _, st := range steps {
		switch c := v.(type) {
		case []any:
			if !st.index || st.n < 0 || st.n >= int64(len(c)) {
				return nil, false
			}
			v = c[st.n]
		case *Map:
			found := false
			for _, e := range c.Entries {
				if keyMatches(e.Key, st.key) {
					v, found = e.Value, true
					break
				}
			}
			if !found {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return v, true
}

// keyMatches reports whether a map's key is the key of a path step.
func keyMatches(k, want any) bool {
	switch w := want.(type) {
	case formattedKey:
		return Format(k, 0) == string(w)
	case string:
		s, ok := k.(string)
		return ok && s == w
	}
	return equal(k, want)
}
