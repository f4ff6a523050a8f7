package actors

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Channel frames from another member are decoded without trust: any bytes
// give a frame or an error, never a panic, and what decodes is what was
// encoded.
func FuzzChannelFrame(f *testing.F) {
	p := &participant{id: "acct-1"}
	p.enc.types = newMessageTypes()
	if err := p.enc.types.register(reflect.TypeFor[*fuzzMsg](), "fuzz"); err != nil {
		f.Fatal(err)
	}
	to := &participant{id: "acct-2"}
	msg, err := p.encodeMessage(to, &snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{3}}, &fuzzMsg{N: 7})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg)
	f.Add(appendHead(nil, fMarker, "a", "b"))
	f.Add(appendHead(nil, fDeparted, "a", "b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		c, err := readChannel(b, nil)
		if err != nil {
			return
		}
		if c.k == fMessage && c.hasMsg {
			// Decoding the payload may fail; it must not panic.
			_, _ = p.enc.types.decode(c.msg)
		}
	})
}

type fuzzMsg struct{ N int }

func TestChannelFrameRoundTrip(t *testing.T) {
	p := &participant{id: "acct-1"}
	p.enc.types = newMessageTypes()
	if err := p.enc.types.register(reflect.TypeFor[*fuzzMsg](), "fuzz"); err != nil {
		t.Fatal(err)
	}
	st := &snapshot.Stamp{Seq: 1, Recorded: []snapshot.SnapshotID{3, 5}, Horizon: 2}
	b, err := p.encodeMessage(&participant{id: "acct-2"}, st, &fuzzMsg{N: 7})
	if err != nil {
		t.Fatal(err)
	}
	c, err := readChannel(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.from != "acct-1" || c.to != "acct-2" || c.stamp == nil || c.stamp.Horizon != 2 || len(c.stamp.Recorded) != 2 || !c.hasMsg {
		t.Fatalf("decoded %+v", c)
	}
	v, err := p.enc.types.decode(c.msg)
	if err != nil || v.(*fuzzMsg).N != 7 {
		t.Fatalf("payload %v, %v", v, err)
	}
	for i := range b {
		if _, err := readChannel(b[:i], nil); err == nil && i < len(b)-len(c.msg.Data) {
			t.Fatalf("a frame cut at %d bytes decodes", i)
		}
	}
}

// A batch of frames for the guardian is decoded without trust: any bytes
// give frames that are well formed for their kind, or an error, never a
// panic, and a frame handed on converts as the guardian converts it.
func FuzzGuardianBatch(f *testing.F) {
	rec := snapshot.LocalRecord{Snapshot: 3, Process: "acct-1"}
	seed := func(fs ...*frame) []byte {
		var b []byte
		for _, fr := range fs {
			e, err := appendFrame(nil, fr)
			if err != nil {
				f.Fatal(err)
			}
			b = append(b, e...)
		}
		return b
	}
	f.Add(seed(&frame{K: fReport, ID: 3, Rec: &rec, Chans: []wireChannel{{Snapshot: 3, Channel: snapshot.Channel{From: "a", To: "acct-1"}, Seqs: []uint64{4}, Msgs: []RecordedMessage{{Type: "fuzz", Data: []byte{1}}}}}}))
	f.Add(seed(&frame{K: fStopped, From: "acct-1", Rec: &rec, ID: 2}, &frame{K: fOver, ID: 3, Err: "late", Tokens: []uint64{1}}))
	f.Add(seed(&frame{K: fStart, ID: 3}))
	f.Add(seed(&frame{K: fReport, Chans: []wireChannel{{Seqs: []uint64{1}}}}))
	changes := snapshot.LocalRecord{Snapshot: 4, Process: "acct-1", Sent: []snapshot.PeerCount{{Peer: "acct-2", N: 9}}, Prev: 3, Prior: []uint64{7}, Changes: true, ReceivedTotal: 5}
	f.Add(seed(&frame{K: fReport, ID: 4, Rec: &changes}))
	f.Add(seed(&frame{K: fReport, ID: 4, Rec: &changes, Err: "actors: capture failed: state of acct-1"}, &frame{K: fReport, ID: 5, Err: "no record"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = decodeBatch(b, &interner{}, func(fr *frame) {
			if !forGuardian(fr.K) {
				t.Fatalf("frame of kind %d handed on", fr.K)
			}
			_ = fromWire(fr.Chans)
			if fr.K == fStopped {
				_ = *fr.Rec
			}
		})
	})
}

// The interner gives back the string it holds for the same bytes, so that
// a busy link's names allocate nothing, and holds at most maxNames: the
// names come from other members.
func TestInternerHoldsNamesUpToItsBound(t *testing.T) {
	var n interner
	a := n.get([]byte("acct-00001"))
	b := n.get([]byte("acct-00001"))
	if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatalf("the same bytes gave %q and %q, not one string", a, b)
	}
	if allocs := testing.AllocsPerRun(100, func() { n.get([]byte("acct-00001")) }); allocs != 0 {
		t.Fatalf("a name held allocates %v times", allocs)
	}
	for i := range maxNames + 10 {
		n.get(fmt.Appendf(nil, "name-%d", i))
	}
	if len(n.names) != maxNames {
		t.Fatalf("the interner holds %d names, want at most %d", len(n.names), maxNames)
	}
	if got := (*interner)(nil).get([]byte("x")); got != "x" {
		t.Fatalf("a nil interner gave %q", got)
	}
}
