package actorstest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/decoded"
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
	d := &differ{}
	d.values("state", a, b)
	return d.found()
}

// byteDiff names the first byte where a and b differ.
func byteDiff(what string, a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("%s: %d bytes != %d bytes, first difference at byte %d", what, len(a), len(b), i)
}

// differ collects the lines that say how two runs differ.
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

// values adds how the msgpack encodings a and b differ, under the name
// what: a line per field that differs, "path: uninterrupted !=
// interrupted", a value present on one side only being "absent" on the
// other; a line naming the first differing byte when either is not
// msgpack, or when both decode to equal values.
func (d *differ) values(what string, a, b []byte) {
	va, vb := decoded.Decode(a), decoded.Decode(b)
	_, ua := va.(decoded.Undecoded)
	_, ub := vb.(decoded.Undecoded)
	var changes []decoded.Change
	if !ua && !ub {
		changes = decoded.Diff(va, vb, 0)
	}
	if len(changes) == 0 {
		d.add("%s", byteDiff(what, a, b))
		return
	}
	for _, c := range changes {
		path := what
		switch {
		case c.Path == "":
		case strings.HasPrefix(c.Path, "["):
			path += c.Path
		default:
			path += "." + c.Path
		}
		from, to := "absent", "absent"
		if !c.Added {
			from = show(c.From)
		}
		if !c.Removed {
			to = show(c.To)
		}
		d.add("%s: %s != %s", path, from, to)
	}
}

// show prints a decoded value briefly.
func show(v any) string { return decoded.Format(v, 60) }

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
				d.values(path, ra.Data, rb.Data)
			}
		}
	}
	return d.found()
}
