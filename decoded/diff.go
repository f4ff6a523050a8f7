package decoded

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
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

// Diff lists the changes from a to b, at most max (0: all). Maps
// (structs among them) are compared key by key in key order, the same
// whatever order the maps were written in; arrays index by index, the
// longer one's extra elements added or removed. Values of different
// kinds are one change at their path; equal values none; two Undecoded
// compare by bytes: one change "<58 bytes, not msgpack> -> <60 bytes, not
// msgpack>" at "".
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

// maps compares two maps key by key, in key order (compareKeys):
// msgpack writes a Go map in no fixed order, so the order written says
// nothing, and a diff that followed it would list the same changes in
// another order from one run to the next.
func (d *differ) maps(path string, a, b *Map) {
	as, bs := sortedEntries(a), sortedEntries(b)
	i, j := 0, 0
	for (i < len(as) || j < len(bs)) && !d.done() {
		var c int
		switch {
		case i == len(as):
			c = 1
		case j == len(bs):
			c = -1
		default:
			c = compareKeys(as[i].Key, bs[j].Key)
		}
		switch {
		case c < 0:
			d.add(Change{Path: joinKey(path, as[i].Key), From: as[i].Value, Removed: true})
			i++
		case c > 0:
			d.add(Change{Path: joinKey(path, bs[j].Key), To: bs[j].Value, Added: true})
			j++
		default:
			d.walk(joinKey(path, as[i].Key), as[i].Value, bs[j].Value)
			i++
			j++
		}
	}
}

// sortedEntries returns m's entries in key order; entries with equal keys
// (msgpack allows them) keep the order they were written in.
func sortedEntries(m *Map) []Entry {
	es := slices.Clone(m.Entries)
	slices.SortStableFunc(es, func(x, y Entry) int { return compareKeys(x.Key, y.Key) })
	return es
}

// compareKeys orders map keys: by kind (nil, false and true, signed
// integers, unsigned integers, floats, strings, then any other kind by its
// formatted value), then by value. Keys that equal calls the same
// compare as 0.
func compareKeys(a, b any) int {
	if c := cmp.Compare(keyRank(a), keyRank(b)); c != 0 {
		return c
	}
	switch va := a.(type) {
	case nil:
		return 0
	case bool:
		vb := b.(bool)
		switch {
		case va == vb:
			return 0
		case vb:
			return -1
		}
		return 1
	case int64:
		return cmp.Compare(va, b.(int64))
	case uint64:
		return cmp.Compare(va, b.(uint64))
	case float64:
		return cmp.Compare(va, b.(float64)) // NaN first, equal to NaN
	case string:
		return strings.Compare(va, b.(string))
	}
	if equal(a, b) {
		return 0
	}
	if c := strings.Compare(fmt.Sprintf("%T", a), fmt.Sprintf("%T", b)); c != 0 {
		return c
	}
	if c := strings.Compare(Format(a, 0), Format(b, 0)); c != 0 {
		return c
	}
	return strings.Compare(fmt.Sprintf("%#v", a), fmt.Sprintf("%#v", b))
}

// keyRank is the rank of a key's kind in compareKeys' order.
func keyRank(k any) int {
	switch k.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case int64:
		return 2
	case uint64:
		return 3
	case float64:
		return 4
	case string:
		return 5
	}
	return 6
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
