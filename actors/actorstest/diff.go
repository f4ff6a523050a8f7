package actorstest

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/snapshot"
)

// maxDifferences bounds the lines a Mismatch lists: the first few say
// what broke, the rest follow from them.
const maxDifferences = 8

// stateDiff says how state a differs from b. States are msgpack (an
// actor's exported fields, or what its MarshalState wrote): decoded, the
// difference is named field by field; bytes that do not decode are
// compared as bytes.
func stateDiff(a, b []byte) []string {
	va, ea := decode(a)
	vb, eb := decode(b)
	if ea != nil || eb != nil {
		return []string{byteDiff("state", a, b)}
	}
	d := &differ{}
	d.walk("state", va, vb)
	if len(d.lines) == 0 { // equal values, different encodings
		return []string{byteDiff("state", a, b)}
	}
	return d.found()
}

// decode reads b as one msgpack value, all of it.
func decode(b []byte) (any, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	v, err := dec.DecodeInterface()
	if err != nil {
		return nil, err
	}
	if _, err := dec.DecodeInterface(); err == nil {
		return nil, fmt.Errorf("bytes after the value")
	}
	return v, nil
}

// byteDiff names the first byte where a and b differ.
func byteDiff(what string, a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("%s: %d bytes != %d bytes, first difference at byte %d", what, len(a), len(b), i)
}

// differ collects the paths at which two decoded values differ.
type differ struct {
	lines []string
	more  int // differences beyond maxDifferences
}

func (d *differ) add(format string, args ...any) {
	if len(d.lines) == maxDifferences {
		d.more++
		return
	}
	d.lines = append(d.lines, fmt.Sprintf(format, args...))
}

// found is what d collected.
func (d *differ) found() []string {
	if d.more > 0 {
		return append(d.lines, fmt.Sprintf("and %d more", d.more))
	}
	return d.lines
}

// walk compares a and b, decoded msgpack values, at path.
func (d *differ) walk(path string, a, b any) {
	switch va := a.(type) {
	case map[string]any:
		vb, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(va)+len(vb))
		for k := range va {
			keys = append(keys, k)
		}
		for k := range vb {
			if _, ok := va[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			x, xok := va[k]
			y, yok := vb[k]
			switch {
			case !xok:
				d.add("%s.%s: absent != %s", path, k, show(y))
			case !yok:
				d.add("%s.%s: %s != absent", path, k, show(x))
			default:
				d.walk(path+"."+k, x, y)
			}
		}
		return
	case []any:
		vb, ok := b.([]any)
		if !ok {
			break
		}
		if len(va) != len(vb) {
			d.add("%s: length %d != %d", path, len(va), len(vb))
		}
		for i := range min(len(va), len(vb)) {
			d.walk(fmt.Sprintf("%s[%d]", path, i), va[i], vb[i])
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		d.add("%s: %s != %s", path, show(a), show(b))
	}
}

// show prints a decoded value briefly.
func show(v any) string {
	s := fmt.Sprintf("%v", v)
	if b, ok := v.([]byte); ok {
		s = fmt.Sprintf("%d bytes %x", len(b), b)
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// inboxDiff says how the messages in flight to participant id differ
// between want and got.
func inboxDiff(want, got *snapshot.Global, id snapshot.ProcessID) []string {
	var chans []snapshot.Channel
	for _, g := range []*snapshot.Global{want, got} {
		for _, c := range g.Channels {
			if c.Channel.To == id && len(c.Messages) > 0 && !slices.Contains(chans, c.Channel) {
				chans = append(chans, c.Channel)
			}
		}
	}
	slices.SortFunc(chans, func(a, b snapshot.Channel) int { return strings.Compare(string(a.From), string(b.From)) })
	d := &differ{}
	for _, c := range chans {
		a, b := want.InFlight(c), got.InFlight(c)
		if len(a) != len(b) {
			d.add("in flight from %s: %d messages != %d", c.From, len(a), len(b))
			continue
		}
		for i := range a {
			ra, _ := a[i].Payload.(actors.RecordedMessage)
			rb, _ := b[i].Payload.(actors.RecordedMessage)
			path := fmt.Sprintf("in flight from %s [%d]", c.From, i)
			switch {
			case ra.Type != rb.Type:
				d.add("%s: type %s != %s", path, ra.Type, rb.Type)
			case !bytes.Equal(ra.Data, rb.Data):
				before := len(d.lines)
				va, ea := decode(ra.Data)
				vb, eb := decode(rb.Data)
				if ea == nil && eb == nil {
					d.walk(path, va, vb)
				}
				if len(d.lines) == before {
					d.add("%s", byteDiff(path, ra.Data, rb.Data))
				}
			}
		}
	}
	return d.found()
}
