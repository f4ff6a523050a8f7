package actors

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/snapshot"
)

// plainFrame is a frame without its codec: msgpack's reflection encodes
// and decodes it, the form the codec must read and write.
type plainFrame frame

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
	f := &frame{K: uint8(rng.IntN(int(fOutside) + 1))}
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
		f.Rec = &snapshot.LocalRecord{Snapshot: snapshot.SnapshotID(rng.Uint64()), Process: id(), Kind: "bank", State: bytes(), Sent: counts(), Received: counts(), Prev: snapshot.SnapshotID(rng.IntN(3))}
		if maybe() {
			f.Rec.Waits = &snapshot.Waits{Any: maybe(), Edges: []snapshot.Wait{{To: id(), Request: 3, Type: "q"}}}
		}
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

// The frame codec reads what reflection writes and writes what reflection
// reads, for frames with every combination of fields.
func TestFrameCodecMatchesReflection(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := range 2000 {
		f := randomFrame(rng)
		ours, err := msgpack.Marshal(f)
		if err != nil {
			t.Fatalf("seed %d, frame %d: encode: %v", seed, i, err)
		}
		var plain plainFrame
		if err := msgpack.Unmarshal(ours, &plain); err != nil {
			t.Fatalf("seed %d, frame %d: reflection cannot read the codec's form: %v", seed, i, err)
		}
		if got := frame(plain); !reflect.DeepEqual(&got, f) {
			t.Fatalf("seed %d, frame %d: reflection read\n%+v\nfrom the codec's form of\n%+v", seed, i, got, *f)
		}
		theirs, err := msgpack.Marshal((*plainFrame)(f))
		if err != nil {
			t.Fatal(err)
		}
		var got frame
		if err := msgpack.Unmarshal(theirs, &got); err != nil {
			t.Fatalf("seed %d, frame %d: the codec cannot read reflection's form: %v", seed, i, err)
		}
		if !reflect.DeepEqual(&got, f) {
			t.Fatalf("seed %d, frame %d: the codec read\n%+v\nfrom reflection's form of\n%+v", seed, i, got, *f)
		}
		for cut := range len(ours) {
			if err := decodeBatch(ours[:cut], func(*frame) {}); err == nil && cut > 0 {
				t.Fatalf("seed %d, frame %d: cut at %d of %d bytes decodes", seed, i, cut, len(ours))
			}
		}
	}
}
