package actors

import (
	"reflect"
	"testing"

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
		var fr frame
		if err := decodeChannel(b, &fr); err != nil {
			return
		}
		if fr.K == fMessage && fr.Msg != nil {
			// Decoding the payload may fail; it must not panic.
			_, _ = p.enc.types.decode(*fr.Msg)
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
	var fr frame
	if err := decodeChannel(b, &fr); err != nil {
		t.Fatal(err)
	}
	if fr.From != "acct-1" || fr.To != "acct-2" || fr.Stamp == nil || fr.Stamp.Horizon != 2 || len(fr.Stamp.Recorded) != 2 {
		t.Fatalf("decoded %+v", fr)
	}
	v, err := p.enc.types.decode(*fr.Msg)
	if err != nil || v.(*fuzzMsg).N != 7 {
		t.Fatalf("payload %v, %v", v, err)
	}
	for i := range b {
		if err := decodeChannel(b[:i], &frame{}); err == nil && i < len(b)-len(fr.Msg.Data) {
			t.Fatalf("a frame cut at %d bytes decodes", i)
		}
	}
}
