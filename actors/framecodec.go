package actors

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/msgpackbound"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Every frame between members has a binary form. A channel frame (a
// participant's message, marker or departure: the traffic) has its own
// layout (transport.go, encodeMessage and readChannel). Every other frame
// is its kind byte; a uvarint whose bits (fieldBit) say which of its
// fields follow; then those fields in the order of the struct: names and
// strings uvarint-prefixed, numbers uvarints, lists a uvarint count and
// their items, a LocalRecord and a wireChannel their fields in order, and
// the rare values (a Global, drops, awaited sets, a stamp, waits) as
// uvarint-prefixed msgpack. A slice that may be nil and may be empty (a
// record's state and counters, a channel's messages and their data) has
// its length plus one, 0 for nil. Guardians' batches are such frames one
// after another: reports cross to the coordinator thousands of times a
// snapshot, and this form costs a fraction of msgpack's maps of keys
// (docs/benchmarks.md, "Frames in binary").

// The bits of a frame's fields, in the order of the struct: a frame's
// mask has the bit of each field it carries.
const (
	bitFrom uint64 = 1 << iota
	bitTo
	bitID
	bitStart
	bitStamp
	bitMsg
	bitIDs
	bitLeft
	bitRec
	bitChans
	bitErr
	bitRecorded
	bitAfter
	bitDrops
	bitToken
	bitTokens
	bitHorizon
	bitFinished
	bitSources
	bitAwaited
	bitProbe
	bitGlobal
	bitsAll = bitGlobal<<1 - 1
)

// isChannelKind reports whether k is the kind of a channel frame, whose
// form is its own.
func isChannelKind(k uint8) bool { return k == fMessage || k == fMarker || k == fDeparted }

// mask returns the bits of the fields f carries: those that are not
// empty.
func (f *frame) mask() uint64 {
	var m uint64
	set := func(bit uint64, present bool) {
		if present {
			m |= bit
		}
	}
	set(bitFrom, f.From != "")
	set(bitTo, f.To != "")
	set(bitID, f.ID != 0)
	set(bitStart, f.Start)
	set(bitStamp, f.Stamp != nil)
	set(bitMsg, f.Msg != nil)
	set(bitIDs, len(f.IDs) > 0)
	set(bitLeft, len(f.Left) > 0)
	set(bitRec, f.Rec != nil)
	set(bitChans, len(f.Chans) > 0)
	set(bitErr, f.Err != "")
	set(bitRecorded, len(f.Recorded) > 0)
	set(bitAfter, f.After != 0)
	set(bitDrops, len(f.Drops) > 0)
	set(bitToken, f.Token != 0)
	set(bitTokens, len(f.Tokens) > 0)
	set(bitHorizon, f.Horizon != 0)
	set(bitFinished, len(f.Finished) > 0)
	set(bitSources, f.Sources)
	set(bitAwaited, f.Awaited != nil)
	set(bitProbe, f.Probe)
	set(bitGlobal, f.Global != nil)
	return m
}

// appendFrame appends f's binary form to b. Channel frames have their
// own form, and fBatch is no frame's kind: both are refused.
func appendFrame(b []byte, f *frame) ([]byte, error) {
	if isChannelKind(f.K) || f.K == fBatch {
		return b, fmt.Errorf("actors: frame of kind %d has no frame form", f.K)
	}
	m := f.mask()
	w := frameWriter{b: append(b, f.K)}
	w.uvarint(m)
	if m&bitFrom != 0 {
		w.str(string(f.From))
	}
	if m&bitTo != 0 {
		w.str(string(f.To))
	}
	if m&bitID != 0 {
		w.uvarint(uint64(f.ID))
	}
	if m&bitStamp != 0 {
		w.blob(f.Stamp)
	}
	if m&bitMsg != 0 {
		w.recorded(f.Msg)
	}
	if m&bitIDs != 0 {
		w.processIDs(f.IDs)
	}
	if m&bitLeft != 0 {
		w.processIDs(f.Left)
	}
	if m&bitRec != 0 {
		w.record(f.Rec)
	}
	if m&bitChans != 0 {
		w.uvarint(uint64(len(f.Chans)))
		for i := range f.Chans {
			w.channel(&f.Chans[i])
		}
	}
	if m&bitErr != 0 {
		w.str(f.Err)
	}
	if m&bitRecorded != 0 {
		w.snapshotIDs(f.Recorded)
	}
	if m&bitAfter != 0 {
		w.uvarint(uint64(f.After))
	}
	if m&bitDrops != 0 {
		w.blob(f.Drops)
	}
	if m&bitToken != 0 {
		w.uvarint(f.Token)
	}
	if m&bitTokens != 0 {
		w.uvarint(uint64(len(f.Tokens)))
		for _, t := range f.Tokens {
			w.uvarint(t)
		}
	}
	if m&bitHorizon != 0 {
		w.uvarint(uint64(f.Horizon))
	}
	if m&bitFinished != 0 {
		w.snapshotIDs(f.Finished)
	}
	if m&bitAwaited != 0 {
		w.blob(f.Awaited)
	}
	if m&bitGlobal != 0 {
		w.blob(f.Global)
	}
	return w.b, w.err
}

// frameWriter appends a frame's fields, keeping the first error (of a
// rare value that msgpack cannot encode).
type frameWriter struct {
	b   []byte
	err error
}

func (w *frameWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *frameWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// nilable writes a slice's length plus one, or 0 for nil.
func (w *frameWriter) nilable(isNil bool, n int) {
	if isNil {
		w.uvarint(0)
		return
	}
	w.uvarint(uint64(n) + 1)
}

// bytes writes b, nil and empty apart.
func (w *frameWriter) bytes(b []byte) {
	w.nilable(b == nil, len(b))
	w.b = append(w.b, b...)
}

// blob writes v in msgpack, uvarint-prefixed.
func (w *frameWriter) blob(v any) {
	if w.err != nil {
		return
	}
	e, err := msgpack.Marshal(v)
	if err != nil {
		w.err = fmt.Errorf("actors: encoding a frame: %w", err)
		return
	}
	w.str(string(e))
}

func (w *frameWriter) processIDs(ids []snapshot.ProcessID) {
	w.uvarint(uint64(len(ids)))
	for _, id := range ids {
		w.str(string(id))
	}
}

func (w *frameWriter) snapshotIDs(ids []snapshot.SnapshotID) {
	w.uvarint(uint64(len(ids)))
	for _, id := range ids {
		w.uvarint(uint64(id))
	}
}

func (w *frameWriter) recorded(m *RecordedMessage) {
	w.str(m.Type)
	w.bytes(m.Data)
}

func (w *frameWriter) counts(cs []snapshot.PeerCount) {
	w.nilable(cs == nil, len(cs))
	for _, c := range cs {
		w.str(string(c.Peer))
		w.uvarint(c.N)
	}
}

// record writes a LocalRecord's fields in order; its waits, when it has
// them, in msgpack (0 for none).
func (w *frameWriter) record(r *snapshot.LocalRecord) {
	w.uvarint(uint64(r.Snapshot))
	w.str(string(r.Process))
	w.str(r.Kind)
	w.bytes(r.State)
	w.counts(r.Sent)
	w.counts(r.Received)
	if r.Waits == nil {
		w.uvarint(0)
	} else {
		w.blob(r.Waits)
	}
	w.uvarint(uint64(r.Prev))
	w.uvarint(r.ReceivedTotal)
	w.uvarint(uint64(r.Epoch))
	w.nilable(r.Prior == nil, len(r.Prior))
	for _, n := range r.Prior {
		w.uvarint(n)
	}
	if r.Changes {
		w.uvarint(1)
	} else {
		w.uvarint(0)
	}
}

func (w *frameWriter) channel(c *wireChannel) {
	w.uvarint(uint64(c.Snapshot))
	w.str(string(c.Channel.From))
	w.str(string(c.Channel.To))
	w.nilable(c.Seqs == nil, len(c.Seqs))
	for _, s := range c.Seqs {
		w.uvarint(s)
	}
	w.nilable(c.Msgs == nil, len(c.Msgs))
	for i := range c.Msgs {
		w.recorded(&c.Msgs[i])
	}
}

// frame decodes one frame from the front of r into f (zeroed first),
// its names taken from names (which may be nil). The frame comes from
// another member: every count is checked against the bytes left, so what
// decoding allocates stays proportional to the frame's size, and the
// bytes it keeps (states, message data) are copied out of r's.
func (r *frameReader) frame(f *frame, names *interner) {
	*f = frame{K: r.byte1()}
	if r.err == nil && (isChannelKind(f.K) || f.K == fBatch) {
		r.err = fmt.Errorf("actors: frame of kind %d in a frame's form", f.K)
	}
	m := r.uvarint()
	if m&^bitsAll != 0 && r.err == nil {
		r.err = fmt.Errorf("actors: frame with unknown fields %#x", m&^bitsAll)
	}
	if r.err != nil {
		return
	}
	if m&bitFrom != 0 {
		f.From = snapshot.ProcessID(r.name(names))
	}
	if m&bitTo != 0 {
		f.To = snapshot.ProcessID(r.name(names))
	}
	if m&bitID != 0 {
		f.ID = snapshot.SnapshotID(r.uvarint())
	}
	f.Start = m&bitStart != 0
	if m&bitStamp != 0 {
		f.Stamp = &snapshot.Stamp{}
		r.blob(f.Stamp)
	}
	if m&bitMsg != 0 {
		f.Msg = &RecordedMessage{}
		r.recorded(f.Msg, names)
	}
	if m&bitIDs != 0 {
		f.IDs = r.processIDs(names)
	}
	if m&bitLeft != 0 {
		f.Left = r.processIDs(names)
	}
	if m&bitRec != 0 {
		f.Rec = r.record(names)
	}
	if m&bitChans != 0 {
		f.Chans = r.channels(names)
	}
	if m&bitErr != 0 {
		f.Err = string(r.bytes())
	}
	if m&bitRecorded != 0 {
		f.Recorded = r.snapshotIDs()
	}
	if m&bitAfter != 0 {
		f.After = snapshot.SnapshotID(r.uvarint())
	}
	if m&bitDrops != 0 {
		r.blob(&f.Drops)
	}
	if m&bitToken != 0 {
		f.Token = r.uvarint()
	}
	if m&bitTokens != 0 {
		if n := r.count(1); n > 0 {
			f.Tokens = make([]uint64, n)
			for i := range f.Tokens {
				f.Tokens[i] = r.uvarint()
			}
		}
	}
	if m&bitHorizon != 0 {
		f.Horizon = snapshot.SnapshotID(r.uvarint())
	}
	if m&bitFinished != 0 {
		f.Finished = r.snapshotIDs()
	}
	f.Sources = m&bitSources != 0
	if m&bitAwaited != 0 {
		f.Awaited = &awaitedSets{}
		r.blob(f.Awaited)
	}
	f.Probe = m&bitProbe != 0
	if m&bitGlobal != 0 {
		f.Global = &snapshot.Global{}
		r.blob(f.Global)
	}
}

// decodeFrame decodes b, one whole frame in its binary form, into f.
func decodeFrame(b []byte, f *frame, names *interner) error {
	r := frameReader{b: b}
	r.frame(f, names)
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("actors: %d bytes after a frame", len(r.b))
	}
	return r.err
}

var errFrameCount = errors.New("actors: a frame from another member counts more items than its bytes hold")

// count reads a list's length, which must fit in the bytes left at least
// least bytes an item; 0 after an error.
func (r *frameReader) count(least int) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)/least) {
		r.err = errFrameCount
		return 0
	}
	return int(n)
}

// nilable reads what frameWriter.nilable wrote: the length (at least
// least bytes an item left), or -1 for nil.
func (r *frameReader) nilable(least int) int {
	n := r.uvarint()
	if r.err != nil || n == 0 {
		return -1
	}
	if n-1 > uint64(len(r.b)/least) {
		r.err = errFrameCount
		return -1
	}
	return int(n - 1)
}

// name reads a name, interned.
func (r *frameReader) name(names *interner) string {
	b := r.bytes()
	if r.err != nil {
		return ""
	}
	return names.get(b)
}

// ownBytes reads what frameWriter.bytes wrote, copied.
func (r *frameReader) ownBytes() []byte {
	n := r.nilable(1)
	if n < 0 || r.err != nil {
		return nil
	}
	b := make([]byte, n)
	copy(b, r.b)
	r.b = r.b[n:]
	return b
}

// blob decodes a msgpack value into v, bounded.
func (r *frameReader) blob(v any) {
	b := r.bytes()
	if r.err != nil {
		return
	}
	if err := msgpackbound.Unmarshal(b, v); err != nil {
		r.err = fmt.Errorf("actors: a frame from another member: %w", err)
	}
}

func (r *frameReader) processIDs(names *interner) []snapshot.ProcessID {
	n := r.count(1)
	if n == 0 {
		return nil
	}
	ids := make([]snapshot.ProcessID, n)
	for i := range ids {
		ids[i] = snapshot.ProcessID(r.name(names))
	}
	return ids
}

func (r *frameReader) snapshotIDs() []snapshot.SnapshotID {
	n := r.count(1)
	if n == 0 {
		return nil
	}
	ids := make([]snapshot.SnapshotID, n)
	for i := range ids {
		ids[i] = snapshot.SnapshotID(r.uvarint())
	}
	return ids
}

func (r *frameReader) recorded(m *RecordedMessage, names *interner) {
	m.Type = r.name(names)
	m.Data = r.ownBytes()
}

func (r *frameReader) counts(names *interner) []snapshot.PeerCount {
	n := r.nilable(2)
	if n < 0 {
		return nil
	}
	cs := make([]snapshot.PeerCount, n)
	for i := range cs {
		cs[i] = snapshot.PeerCount{Peer: snapshot.ProcessID(r.name(names)), N: r.uvarint()}
	}
	return cs
}

func (r *frameReader) record(names *interner) *snapshot.LocalRecord {
	rec := &snapshot.LocalRecord{Snapshot: snapshot.SnapshotID(r.uvarint())}
	rec.Process = snapshot.ProcessID(r.name(names))
	rec.Kind = r.name(names)
	rec.State = r.ownBytes()
	rec.Sent = r.counts(names)
	rec.Received = r.counts(names)
	if b := r.bytes(); len(b) > 0 && r.err == nil {
		rec.Waits = &snapshot.Waits{}
		if err := msgpackbound.Unmarshal(b, rec.Waits); err != nil {
			r.err = fmt.Errorf("actors: a record's waits from another member: %w", err)
		}
	}
	rec.Prev = snapshot.SnapshotID(r.uvarint())
	rec.ReceivedTotal = r.uvarint()
	rec.Epoch = snapshot.SnapshotID(r.uvarint())
	if n := r.nilable(1); n >= 0 {
		rec.Prior = make([]uint64, n)
		for i := range rec.Prior {
			rec.Prior[i] = r.uvarint()
		}
	}
	rec.Changes = r.uvarint() == 1
	return rec
}

func (r *frameReader) channels(names *interner) []wireChannel {
	n := r.count(5)
	if n == 0 {
		return nil
	}
	cs := make([]wireChannel, n)
	for i := range cs {
		c := &cs[i]
		c.Snapshot = snapshot.SnapshotID(r.uvarint())
		c.Channel.From = snapshot.ProcessID(r.name(names))
		c.Channel.To = snapshot.ProcessID(r.name(names))
		if m := r.nilable(1); m >= 0 {
			c.Seqs = make([]uint64, m)
			for j := range c.Seqs {
				c.Seqs[j] = r.uvarint()
			}
		}
		if m := r.nilable(2); m >= 0 {
			c.Msgs = make([]RecordedMessage, m)
			for j := range c.Msgs {
				r.recorded(&c.Msgs[j], names)
			}
		}
	}
	return cs
}
