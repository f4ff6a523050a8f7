package decoded

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// Change is one difference between two decoded values at Path, a
// dotted path with indexes: "Balance", "Owner.Name", "Items[3]" (see
// Lookup). From is nil with Added, To is nil with Removed.
type Change struct {
	Path           string
	From, To       any
	Added, Removed bool
}

// changeValue bounds the runes of each value Change.String shows.
const changeValue = 120

// String writes c on one line: "Balance 762 -> 801", "+ Items[3] 7",
// "- Owner.Name \"ann\"". Each value is truncated to 120 runes.
func (c Change) String() string {
	sep := " "
	if c.Path == "" {
		sep = ""
	}
	switch {
	case c.Added:
		return "+ " + c.Path + sep + Format(c.To, changeValue)
	case c.Removed:
		return "- " + c.Path + sep + Format(c.From, changeValue)
	}
	return c.Path + sep + Format(c.From, changeValue) + " -> " + Format(c.To, changeValue)
}

// Diff lists the changes from a to b, in field order, at most max (0:
// all). Maps are compared key by key: a's keys in a's order, then the
// keys only b has; arrays index by index, the longer one's extra
// elements added or removed. Values of different kinds are one change at
// their path; equal values none; two Undecoded compare by bytes: one
// change "<58 bytes, not msgpack> -> <60 bytes, not msgpack>" at "".
func Diff(a, b any, max int) []Change {
	d := differ{max: max}
	d.walk("", a, b)
	return d.changes
}

type differ struct {
	changes []Change
	max     int
}

func (d *differ) done() bool { return d.max > 0 && len(d.changes) >= d.max }

func (d *differ) add(c Change) {
	if !d.done() {
		d.changes = append(d.changes, c)
	}
}

func (d *differ) walk(path string, a, b any) {
	if d.done() {
		return
	}
	switch va := a.(type) {
	case *Map:
		if vb, ok := b.(*Map); ok && va != nil && vb != nil {
			d.maps(path, va, vb)
			return
		}
	case []any:
		if vb, ok := b.([]any); ok {
			n := min(len(va), len(vb))
			for i := range n {
				d.walk(joinIndex(path, i), va[i], vb[i])
			}
			for i := n; i < len(va); i++ {
				d.add(Change{Path: joinIndex(path, i), From: va[i], Removed: true})
			}
			for i := n; i < len(vb); i++ {
				d.add(Change{Path: joinIndex(path, i), To: vb[i], Added: true})
			}
			return
		}
	}
	if !equal(a, b) {
		d.add(Change{Path: path, From: a, To: b})
	}
}

// indexFrom is the size from which maps are compared through an index of
// b's keys rather than by scanning b for each of a's.
const indexFrom = 16

func (d *differ) maps(path string, a, b *Map) {
	matched := make([]bool, len(b.Entries))
	var index map[string][]int
	if len(a.Entries) >= indexFrom && len(b.Entries) >= indexFrom {
		index = make(map[string][]int, len(b.Entries))
		for j, e := range b.Entries {
			k := keyID(e.Key)
			index[k] = append(index[k], j)
		}
	}
	find := func(k any) int {
		if index != nil {
			for _, j := range index[keyID(k)] {
				if !matched[j] && equal(b.Entries[j].Key, k) {
					return j
				}
			}
			return -1
		}
		for j, e := range b.Entries {
			if !matched[j] && equal(e.Key, k) {
				return j
			}
		}
		return -1
	}
	for _, e := range a.Entries {
		if d.done() {
			return
		}
		p := joinKey(path, e.Key)
		j := find(e.Key)
		if j < 0 {
			d.add(Change{Path: p, From: e.Value, Removed: true})
			continue
		}
		matched[j] = true
		d.walk(p, e.Value, b.Entries[j].Value)
	}
	for j, e := range b.Entries {
		if !matched[j] {
			d.add(Change{Path: joinKey(path, e.Key), To: e.Value, Added: true})
		}
	}
}

// keyID is a map key as a string for an index: equal keys have equal
// IDs.
func keyID(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	return fmt.Sprintf("\x00%T:%s", k, Format(k, 0))
}

// equal reports whether two decoded values are the same: of one kind
// (an int64 never equals a float64) and equal within. NaN equals NaN,
// times are equal when they are the same instant, Undecoded values when
// their bytes are.
func equal(a, b any) bool {
	switch va := a.(type) {
	case nil:
		return b == nil
	case bool:
		vb, ok := b.(bool)
		return ok && va == vb
	case int64:
		vb, ok := b.(int64)
		return ok && va == vb
	case uint64:
		vb, ok := b.(uint64)
		return ok && va == vb
	case float64:
		vb, ok := b.(float64)
		return ok && (va == vb || math.IsNaN(va) && math.IsNaN(vb))
	case string:
		vb, ok := b.(string)
		return ok && va == vb
	case []byte:
		vb, ok := b.([]byte)
		return ok && bytes.Equal(va, vb)
	case time.Time:
		vb, ok := b.(time.Time)
		return ok && va.Equal(vb)
	case Ext:
		vb, ok := b.(Ext)
		return ok && va.Type == vb.Type && bytes.Equal(va.Data, vb.Data)
	case Undecoded:
		vb, ok := b.(Undecoded)
		return ok && va.Size == vb.Size && bytes.Equal(va.Bytes, vb.Bytes)
	case []any:
		vb, ok := b.([]any)
		if !ok || len(va) != len(vb) {
			return false
		}
		for i := range va {
			if !equal(va[i], vb[i]) {
				return false
			}
		}
		return true
	case *Map:
		vb, ok := b.(*Map)
		if !ok || va == nil || vb == nil {
			return ok && va == vb
		}
		return len(va.Entries) == len(vb.Entries) && len(Diff(va, vb, 1)) == 0
	}
	return false
}
