package actors

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/snapshot"
)

// randomFrame makes a frame with each field set or not, as rng says.
func randomFrame(rng *rand.Rand) *frame {
	maybe := func() bool { return rng.IntN(2) == 0 }
	id := func() snapshot.ProcessID { return snapshot.ProcessID(fmt.Sprintf("acct-%d", rng.IntN(1000))) }
	ids := func() []snapshot.ProcessID {
		if maybe() {
			return nil
		}
		out := make([]snapshot.ProcessID, 1+rng.IntN(3))
		for i := range out {
			out[i] = id()
		}
		return out
	}
	snaps := func() []snapshot.SnapshotID {
		if maybe() {
			return nil
		}
		out := make([]snapshot.SnapshotID, 1+rng.IntN(3))
		for i := range out {
			out[i] = snapshot.SnapshotID(rng.Uint64())
		}
		return out
	}
	bytes := func() []byte {
		if maybe() {
			return nil
		}
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	msg := func() RecordedMessage { return RecordedMessage{Type: fmt.Sprintf("t%d", rng.IntN(9)), Data: bytes()} }
	counts := func() []snapshot.PeerCount {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []snapshot.PeerCount{}
		}
		out := make([]snapshot.PeerCount, 1+rng.IntN(4))
		for i := range out {
			out[i] = snapshot.PeerCount{Peer: id(), N: rng.Uint64()}
		}
		return out
	}
	f := &frame{K: uint8(rng.IntN(int(fDropped) + 1))}
	if isChannelKind(f.K) {
		f.K = fReport // channel frames have their own form
	}
	if maybe() {
		f.From = id()
	}
	if maybe() {
		f.To = id()
	}
	if maybe() {
		f.ID = snapshot.SnapshotID(rng.Uint64())
	}
	f.Start, f.Sources, f.Probe = maybe(), maybe(), maybe()
	if maybe() {
		f.Stamp = &snapshot.Stamp{Seq: rng.Uint64(), Recorded: snaps(), Horizon: 3, Epoch: 4}
	}
	if maybe() {
		m := msg()
		f.Msg = &m
	}
	f.IDs, f.Left = ids(), ids()
	if maybe() {
		f.Rec = &snapshot.LocalRecord{Snapshot: snapshot.SnapshotID(rng.Uint64()), Process: id(), Kind: "bank", State: bytes(), Sent: counts(), Received: counts(), Prev: snapshot.SnapshotID(rng.IntN(3)), ReceivedTotal: rng.Uint64N(1 << uint(rng.IntN(64))), Epoch: snapshot.SnapshotID(rng.IntN(5))}
		if maybe() {
			f.Rec.Waits = &snapshot.Waits{Any: maybe(), Edges: []snapshot.Wait{{To: id(), Request: 3, Type: "q"}}}
		}
		if maybe() {
			f.Rec.Prior = make([]uint64, len(f.Rec.Sent))
			for i := range f.Rec.Prior {
				f.Rec.Prior[i] = rng.Uint64N(1 << uint(rng.IntN(64)))
			}
		}
		f.Rec.Changes = maybe()
	}
	if maybe() {
		f.Chans = make([]wireChannel, 1+rng.IntN(3))
		for i := range f.Chans {
			c := &f.Chans[i]
			c.Snapshot, c.Channel = snapshot.SnapshotID(rng.Uint64()), snapshot.Channel{From: id(), To: id()}
			for range rng.IntN(3) {
				c.Seqs, c.Msgs = append(c.Seqs, rng.Uint64()), append(c.Msgs, msg())
			}
		}
	}
	if maybe() {
		f.Err = "aborted: " + string(id())
	}
	f.Recorded, f.Finished = snaps(), snaps()
	if maybe() {
		f.After = snapshot.SnapshotID(rng.IntN(100))
	}
	if maybe() {
		f.Drops = []snapshot.Drop{{Process: id(), Peers: ids(), After: 7}}
	}
	if maybe() {
		f.Token = rng.Uint64()
	}
	if maybe() {
		f.Tokens = []uint64{rng.Uint64(), 1}
	}
	if maybe() {
		f.Horizon = snapshot.SnapshotID(rng.IntN(100))
	}
	if maybe() {
		f.Awaited = &awaitedSets{Sets: map[snapshot.ProcessID][]snapshot.ProcessID{id(): {id()}}}
	}
	return f
}

// A frame's binary form decodes to the frame encoded, for frames with
// every combination of fields, names interned or not; cut short anywhere
// it is an error; and frames one after another decode as a batch, in
// order.
func TestFrameRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	var batch []byte
	var sent []*frame
	names := &interner{}
	for i := range 2000 {
		f := randomFrame(rng)
		b, err := appendFrame(nil, f)
		if err != nil {
			t.Fatalf("seed %d, frame %d: encode: %v", seed, i, err)
		}
		for _, in := range []*interner{nil, names} {
			var got frame
			if err := decodeFrame(b, &got, in); err != nil {
				t.Fatalf("seed %d, frame %d: decode: %v", seed, i, err)
			}
			if !reflect.DeepEqual(&got, f) {
				t.Fatalf("seed %d, frame %d: decoded\n%+v\nfrom the form of\n%+v", seed, i, got, *f)
			}
		}
		for cut := range len(b) {
			if err := decodeFrame(b[:cut], &frame{}, nil); err == nil {
				t.Fatalf("seed %d, frame %d: cut at %d of %d bytes decodes", seed, i, cut, len(b))
			}
		}
		if forGuardian(f.K) && f.check() == nil {
			batch, sent = append(batch, b...), append(sent, f)
		}
	}
	var got []*frame
	if err := decodeBatch(batch, names, func(f *frame) { c := *f; got = append(got, &c) }); err != nil {
		t.Fatalf("seed %d: batch: %v", seed, err)
	}
	if !reflect.DeepEqual(got, sent) {
		t.Fatalf("seed %d: a batch of %d frames decoded as %d, or changed", seed, len(sent), len(got))
	}
}

// Channel frames have their own form: the frame form refuses their kinds,
// and fBatch's, both ways.
func TestFrameFormRefusesChannelKinds(t *testing.T) {
	for _, k := range []uint8{fMessage, fMarker, fDeparted, fBatch} {
		if _, err := appendFrame(nil, &frame{K: k}); err == nil {
			t.Errorf("kind %d encoded", k)
		}
		if err := decodeFrame([]byte{k, 0}, &frame{}, nil); err == nil {
			t.Errorf("kind %d decoded", k)
		}
	}
	if err := decodeFrame([]byte{fReport, 0x80, 0x80, 0x80, 0x40}, &frame{}, nil); err == nil {
		t.Error("a frame with a field this version does not know decoded")
	}
}

// bankBatch is a batch of the frames a member's guardian sends the
// coordinator in a snapshot of the bank: records of accounts (a state and
// three counters each way) and reports of one message in flight each,
// four of those a record, as with four transfers in flight an account.
func bankBatch(records int) []*frame {
	counts := func(i int) []snapshot.PeerCount {
		return []snapshot.PeerCount{{Peer: snapshot.ProcessID(fmt.Sprintf("acct-%05d", (i+1)%records)), N: 1234},
			{Peer: snapshot.ProcessID(fmt.Sprintf("acct-%05d", (i+7)%records)), N: 99}, {Peer: snapshot.ProcessID(fmt.Sprintf("acct-%05d", (i+31)%records)), N: 7}}
	}
	var fs []*frame
	for i := range records {
		name := snapshot.ProcessID(fmt.Sprintf("acct-%05d", i))
		rec := &snapshot.LocalRecord{Snapshot: 42, Process: name, Kind: "account", State: make([]byte, 40), Sent: counts(i), Received: counts(i + 3), Prev: 41}
		fs = append(fs, &frame{K: fReport, From: name, ID: 42, Rec: rec})
		for j := range 4 {
			from := snapshot.ProcessID(fmt.Sprintf("acct-%05d", (i+j+1)%records))
			fs = append(fs, &frame{K: fReport, From: name, ID: 42, Chans: []wireChannel{{Snapshot: 42, Channel: snapshot.Channel{From: from, To: name},
				Seqs: []uint64{uint64(1000 + j)}, Msgs: []RecordedMessage{{Type: "bank.transfer", Data: []byte{0x81, 0xa6, 'A', 'm', 'o', 'u', 'n', 't', 0xcd, 0x12, 0x34}}}}}})
		}
	}
	return fs
}

// plainFrame is a frame as msgpack's reflection encodes it (a map of its
// fields by their tags): the naive alternative to the binary form.
type plainFrame frame

// A member's batch of 1,000 records and 4,000 messages in flight,
// encoded and decoded in the binary form (names interned, as the
// guardian does) and, as the baseline in the same run, by msgpack's
// reflection. The figure is the time for the whole batch.
func BenchmarkGuardianBatch(b *testing.B) {
	fs := bankBatch(1000)
	var bin []byte
	for _, f := range fs {
		var err error
		if bin, err = appendFrame(bin, f); err != nil {
			b.Fatal(err)
		}
	}
	var mp []byte
	for _, f := range fs {
		e, err := msgpack.Marshal((*plainFrame)(f))
		if err != nil {
			b.Fatal(err)
		}
		mp = append(mp, e...)
	}
	b.Run("encode/binary", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(bin)))
		var buf []byte
		for b.Loop() {
			buf = buf[:0]
			for _, f := range fs {
				buf, _ = appendFrame(buf, f)
			}
		}
	})
	b.Run("encode/msgpack-reflection", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(mp)))
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		for b.Loop() {
			buf.Reset()
			for _, f := range fs {
				if err := enc.Encode((*plainFrame)(f)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("decode/binary", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(bin)))
		names := &interner{}
		for b.Loop() {
			n := 0
			if err := decodeBatch(bin, names, func(*frame) { n++ }); err != nil || n != len(fs) {
				b.Fatal(n, err)
			}
		}
	})
	b.Run("decode/msgpack-reflection", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(mp)))
		for b.Loop() {
			dec := msgpack.NewDecoder(bytes.NewReader(mp))
			for range fs {
				var f plainFrame
				if err := dec.Decode(&f); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
