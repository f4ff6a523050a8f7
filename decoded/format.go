package decoded

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Format writes v compactly in a JSON-like syntax for a terminal:
//
//	{Balance: 762, Owner: "ann", Items: [1, 2, 3]}
//
// Map keys that are identifiers are unquoted; strings are quoted as Go
// quotes them; []byte is shown as <12 bytes: 0a0b0c0d0e0f1011…> (its
// first 8 bytes); Undecoded as <58 bytes, not msgpack>; time.Time in
// RFC 3339; a float always with a point or an exponent, so that 1.0 and
// 1 differ. max > 0 truncates the result to max runes, ending in "…";
// max <= 0 writes it all. Formatting stops once max is reached, so a
// short view of a large value is cheap.
func Format(v any, max int) string {
	f := formatter{max: max}
	if max > 0 {
		f.b = make([]byte, 0, max+8)
	}
	f.value(v)
	if f.cut {
		// The last rune written gives way to the ellipsis.
		_, n := utf8.DecodeLastRune(f.b)
		f.b = append(f.b[:len(f.b)-n], "…"...)
	}
	return string(f.b)
}

// formatter writes values to b, up to max runes (all when max <= 0).
type formatter struct {
	b       []byte
	max     int
	runes   int
	cut     bool   // more than max runes were to be written
	scratch []byte // for numbers and quoted strings
}

func (f *formatter) full() bool { return f.cut }

// write appends s to f.b, or as much of it as max allows.
func (f *formatter) write(s string) {
	switch {
	case f.cut:
		return
	case f.max <= 0:
		f.b = append(f.b, s...)
		return
	case f.runes+len(s) <= f.max: // a rune takes a byte at least
		f.b = append(f.b, s...)
		f.runes += utf8.RuneCountInString(s)
		return
	}
	for _, r := range s {
		if f.runes == f.max {
			f.cut = true
			return
		}
		f.b = utf8.AppendRune(f.b, r)
		f.runes++
	}
}

// writeBytes is write for what f.scratch holds: ASCII, or quoted
// (valid UTF-8).
func (f *formatter) writeBytes(s []byte) {
	if f.max <= 0 && !f.cut {
		f.b = append(f.b, s...)
		return
	}
	f.write(string(s))
}

func (f *formatter) value(v any) {
	if f.full() {
		return
	}
	switch v := v.(type) {
	case nil:
		f.write("null")
	case bool:
		f.write(strconv.FormatBool(v))
	case int64:
		f.scratch = strconv.AppendInt(f.scratch[:0], v, 10)
		f.writeBytes(f.scratch)
	case uint64:
		f.scratch = strconv.AppendUint(f.scratch[:0], v, 10)
		f.writeBytes(f.scratch)
	case float64:
		f.write(formatFloat(v))
	case string:
		f.scratch = strconv.AppendQuote(f.scratch[:0], v)
		f.writeBytes(f.scratch)
	case []byte:
		f.write(formatBytes(v))
	case time.Time:
		f.write(v.Format(time.RFC3339Nano))
	case Ext:
		f.write(fmt.Sprintf("<ext %d, %s>", v.Type, strings.Trim(formatBytes(v.Data), "<>")))
	case Undecoded:
		f.write(formatUndecoded(v))
	case []any:
		f.write("[")
		for i, e := range v {
			if i > 0 {
				f.write(", ")
			}
			f.value(e)
			if f.full() {
				return
			}
		}
		f.write("]")
	case *Map:
		if v == nil {
			f.write("null")
			return
		}
		f.write("{")
		for i, e := range v.Entries {
			if i > 0 {
				f.write(", ")
			}
			if k, ok := e.Key.(string); ok && isIdentifier(k) {
				f.write(k)
			} else {
				f.value(e.Key)
			}
			f.write(": ")
			f.value(e.Value)
			if f.full() {
				return
			}
		}
		f.write("}")
	default:
		f.write(fmt.Sprintf("<%T>", v))
	}
}

// formatFloat writes f with a point or an exponent, as JSON would, or
// NaN, +Inf or -Inf.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.ContainsAny(s, ".eIN") {
		return s
	}
	return s + ".0"
}

// shownBytes is how many bytes of a []byte Format shows.
const shownBytes = 8

func formatBytes(b []byte) string {
	switch {
	case len(b) == 0:
		return "<0 bytes>"
	case len(b) <= shownBytes:
		return fmt.Sprintf("<%s: %x>", size(len(b)), b)
	}
	return fmt.Sprintf("<%s: %x…>", size(len(b)), b[:shownBytes])
}

// formatUndecoded labels bytes that are not msgpack with their size and
// the first clause of the reason: <58 bytes, not msgpack>.
func formatUndecoded(u Undecoded) string {
	label, _, _ := strings.Cut(u.Reason, ":")
	if label == "" {
		label = "undecoded"
	}
	return fmt.Sprintf("<%s, %s>", size(u.Size), label)
}

// size writes n bytes: "1 byte", "58 bytes".
func size(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.Itoa(n) + " bytes"
}

// isIdentifier reports whether s is written unquoted as a map key: a
// letter or underscore, then letters, digits and underscores.
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}

// JSON returns v in a form encoding/json writes faithfully: *Map as an
// ordered object (keys that are not strings as Format writes them),
// []byte as {"$bytes": base64, "size": n}, Undecoded as
// {"$undecoded": reason, "size": n} plus "bytes": base64 when raw is
// true, Ext as {"$ext": type, "data": base64}, time.Time as an RFC 3339
// string, int64 and uint64 as numbers (exact: encoding/json writes them
// in full), NaN and the infinities as the strings "NaN", "+Inf", "-Inf".
func JSON(v any, raw bool) any {
	switch v := v.(type) {
	case nil, bool, int64, uint64, string:
		return v
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return formatFloat(v)
		}
		return v
	case []byte:
		return map[string]any{"$bytes": base64.StdEncoding.EncodeToString(v), "size": len(v)}
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case Ext:
		return map[string]any{"$ext": v.Type, "data": base64.StdEncoding.EncodeToString(v.Data)}
	case Undecoded:
		o := map[string]any{"$undecoded": v.Reason, "size": v.Size}
		if raw {
			o["bytes"] = base64.StdEncoding.EncodeToString(v.Bytes)
		}
		return o
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = JSON(e, raw)
		}
		return out
	case *Map:
		if v == nil {
			return nil
		}
		return object{m: v, raw: raw}
	}
	return fmt.Sprintf("<%T>", v)
}

// object is a Map as encoding/json writes it: an object with the Map's
// keys in order.
type object struct {
	m   *Map
	raw bool
}

func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, e := range o.m.Entries {
		if i > 0 {
			b = append(b, ',')
		}
		k, ok := e.Key.(string)
		if !ok {
			k = Format(e.Key, 0)
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(JSON(e.Value, o.raw))
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, kb...), ':'), vb...)
	}
	return append(b, '}'), nil
}

// MarshalJSON writes m as a JSON object with its keys in stored order;
// keys that are not strings are written as Format writes them, values as
// JSON returns them.
func (m *Map) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	return object{m: m}.MarshalJSON()
}
