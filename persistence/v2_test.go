package persistence_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// encodeV2 is an encoder of format version 2 written with the msgpack
// package, apart from the hand-written encoder that wrote it: stored data
// of that version is in users' stores, and must keep loading now that
// this build writes a later one. g must be valid (sorted participants and
// channels); its waits and violations are left out.
func encodeV2(t testing.TB, g *snapshot.Global) []byte { return encodeIndexed(t, g, 2) }

// encodeV3 is encodeV2 for format version 3, which keeps the waits and the
// violations.
func encodeV3(t testing.TB, g *snapshot.Global) []byte { return encodeIndexed(t, g, 3) }

// encodeV4 is encodeV3 for format version 4, which keeps the receiver
// counts too.
func encodeV4(t testing.TB, g *snapshot.Global) []byte { return encodeIndexed(t, g, 4) }

// encodeV5 is encodeV4 for format version 5, which keeps the sums too:
// what the package documentation describes, written apart from the
// encoder under test.
func encodeV5(t testing.TB, g *snapshot.Global) []byte { return encodeIndexed(t, g, 5) }

// encodeIndexed writes g in format version 2 to 5, whose channel ends
// (and, from version 3, wait targets) are indices of participants.
func encodeIndexed(t testing.TB, g *snapshot.Global, version uint16) []byte {
	var buf bytes.Buffer
	buf.WriteString("ASNAPGLB\x00")
	buf.WriteByte(byte(version))
	e := msgpack.NewEncoder(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	tm := func(x time.Time) {
		must(e.EncodeInt(x.Unix()))
		must(e.EncodeUint(uint64(x.Nanosecond())))
	}
	// A channel's end, or a wait's target, is the index of its
	// participant, or its name.
	end := func(id snapshot.ProcessID) {
		for i, p := range g.Participants {
			if p.ID == id {
				must(e.EncodeUint(uint64(i)))
				return
			}
		}
		must(e.EncodeString(string(id)))
	}
	must(e.EncodeArrayLen(7 + int(version)))
	must(e.EncodeUint(uint64(g.ID)))
	must(e.EncodeUint(uint64(g.Mode)))
	tm(g.Start)
	tm(g.End)
	must(e.EncodeArrayLen(len(g.Participants)))
	for _, p := range g.Participants {
		if version < 3 || p.Waits == nil {
			must(e.EncodeArrayLen(4))
		} else {
			must(e.EncodeArrayLen(5))
		}
		must(e.EncodeString(string(p.ID)))
		must(e.EncodeString(p.Kind))
		must(e.EncodeBytes(p.State))
		must(e.EncodeBool(p.Departed))
		if version < 3 || p.Waits == nil {
			continue
		}
		must(e.EncodeArrayLen(3))
		must(e.EncodeBool(p.Waits.Any))
		must(e.EncodeBool(p.Waits.Timer))
		must(e.EncodeArrayLen(len(p.Waits.Edges)))
		for _, w := range p.Waits.Edges {
			must(e.EncodeArrayLen(5))
			end(w.To)
			must(e.EncodeUint(w.Request))
			must(e.EncodeString(w.Type))
			tm(w.Since)
		}
	}
	must(e.EncodeUint(uint64(g.TotalInFlight())))
	must(e.EncodeArrayLen(len(g.Channels)))
	for _, c := range g.Channels {
		must(e.EncodeArrayLen(5))
		end(c.Channel.From)
		end(c.Channel.To)
		must(e.EncodeUint(c.Sent))
		must(e.EncodeUint(c.Received))
		must(e.EncodeArrayLen(len(c.Messages)))
		for _, m := range c.Messages {
			rm := m.Payload.(persistence.RecordedMessage)
			must(e.EncodeArrayLen(2))
			must(e.EncodeString(rm.Type))
			must(e.EncodeBytes(rm.Data))
		}
	}
	if version >= 3 {
		must(e.EncodeArrayLen(len(g.Violations)))
		for _, v := range g.Violations {
			must(e.EncodeArrayLen(2))
			must(e.EncodeString(v.Invariant))
			must(e.EncodeString(v.Err))
		}
	}
	if version >= 4 {
		if g.ReceiverCounts {
			must(e.EncodeArrayLen(2 * len(g.Participants)))
			for _, p := range g.Participants {
				must(e.EncodeUint(p.SentTo))
				must(e.EncodeUint(p.Received))
			}
		} else {
			must(e.EncodeNil())
		}
	}
	if version >= 5 {
		if g.Sums != nil {
			must(e.EncodeArrayLen(2))
			must(e.EncodeUint(g.Sums.Sent))
			must(e.EncodeUint(g.Sums.Received))
		} else {
			must(e.EncodeNil())
		}
	}
	buf.Write(make([]byte, 4))
	return persistence.FixChecksum(buf.Bytes())
}

// TestDecodeVersion2 decodes bytes written by the version-2 encoder of an
// earlier build (testdata/v2, kept as written) and by encodeV2.
func TestDecodeVersion2(t *testing.T) {
	readFixture(t, "testdata/v2/edge.dat", 2, encodeV2(t, edgeGlobal()))
	for _, g := range []*snapshot.Global{
		edgeGlobal(),
		{ID: 1},
		storetest.NewGlobal(2, storetest.Small),
		storetest.NewGlobal(3, storetest.Shape{Participants: 1000, StateSize: 300, Channels: 3000, InFlight: 2, MessageSize: 300}),
	} {
		requireDecodes(t, encodeV2(t, g), g)
	}
}
