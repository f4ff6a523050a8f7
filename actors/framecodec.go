package actors

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/snapshot"
)

// A frame's msgpack form is what msgpack's reflection makes of the struct
// (a map of the fields that are not empty, keyed by their tags, in their
// order; a LocalRecord, a wireChannel and what they hold as maps keyed by
// field name), written and read field by field: reports cross to the
// coordinator thousands of times a snapshot, and reflection cost more
// CPU there than the coordinator's own work on them (docs/benchmarks.md,
// "Frames without reflection"). The rare fields (a Global, drops,
// awaited sets, a stamp) still go through reflection.

// EncodeMsgpack writes f in its msgpack form: the fields once to count
// those present, then the map.
func (f *frame) EncodeMsgpack(enc *msgpack.Encoder) error {
	count := mpWriter{counting: true}
	f.fields(&count)
	w := mpWriter{enc: enc}
	w.mapLen(count.n)
	f.fields(&w)
	return w.err
}

// fields writes f's fields that are not empty, each key and value, in
// the order of the struct; or, with w counting, counts them.
func (f *frame) fields(w *mpWriter) {
	if w.has("k", true) { // no omitempty: always written
		w.uint(uint64(f.K))
	}
	w.strField("f", string(f.From))
	w.strField("t", string(f.To))
	w.uintField("i", uint64(f.ID))
	w.trueField("b", f.Start)
	if w.has("s", f.Stamp != nil) {
		w.value(f.Stamp)
	}
	if w.has("m", f.Msg != nil) {
		w.recorded(f.Msg)
	}
	if w.has("p", len(f.IDs) > 0) {
		w.processIDs(f.IDs)
	}
	if w.has("l", len(f.Left) > 0) {
		w.processIDs(f.Left)
	}
	if w.has("r", f.Rec != nil) {
		w.record(f.Rec)
	}
	if w.has("c", len(f.Chans) > 0) {
		w.arrayLen(len(f.Chans))
		for i := range f.Chans {
			w.channel(&f.Chans[i])
		}
	}
	w.strField("e", f.Err)
	if w.has("d", len(f.Recorded) > 0) {
		w.snapshotIDs(f.Recorded)
	}
	w.uintField("a", uint64(f.After))
	if w.has("x", len(f.Drops) > 0) {
		w.value(f.Drops)
	}
	w.uintField("o", f.Token)
	if w.has("w", len(f.Tokens) > 0) {
		w.arrayLen(len(f.Tokens))
		for _, t := range f.Tokens {
			w.uint(t)
		}
	}
	w.uintField("h", uint64(f.Horizon))
	if w.has("n", len(f.Finished) > 0) {
		w.snapshotIDs(f.Finished)
	}
	w.trueField("u", f.Sources)
	if w.has("q", f.Awaited != nil) {
		w.value(f.Awaited)
	}
	w.trueField("z", f.Probe)
	if w.has("g", f.Global != nil) {
		w.value(f.Global)
	}
}

// DecodeMsgpack reads a frame in its msgpack form. Keys it does not know
// are skipped, as reflection skips them.
func (f *frame) DecodeMsgpack(dec *msgpack.Decoder) error {
	r := mpReader{dec: dec}
	n := r.mapLen("frame")
	for range max(n, 0) {
		switch k := r.key(); k {
		case "k":
			f.K = uint8(r.uint("kind"))
		case "f":
			f.From = snapshot.ProcessID(r.str())
		case "t":
			f.To = snapshot.ProcessID(r.str())
		case "i":
			f.ID = snapshot.SnapshotID(r.uint("snapshot id"))
		case "b":
			f.Start = r.bool()
		case "s":
			r.value(&f.Stamp)
		case "m":
			f.Msg = r.recordedPtr()
		case "p":
			f.IDs = r.processIDs()
		case "l":
			f.Left = r.processIDs()
		case "r":
			f.Rec = r.record()
		case "c":
			f.Chans = r.channels()
		case "e":
			f.Err = r.str()
		case "d":
			f.Recorded = r.snapshotIDs()
		case "a":
			f.After = snapshot.SnapshotID(r.uint("after"))
		case "x":
			r.value(&f.Drops)
		case "o":
			f.Token = r.uint("token")
		case "w":
			if m := r.arrayLen("tokens"); m >= 0 {
				f.Tokens = make([]uint64, m)
				for i := range f.Tokens {
					f.Tokens[i] = r.uint("token")
				}
			}
		case "h":
			f.Horizon = snapshot.SnapshotID(r.uint("horizon"))
		case "n":
			f.Finished = r.snapshotIDs()
		case "u":
			f.Sources = r.bool()
		case "q":
			r.value(&f.Awaited)
		case "z":
			f.Probe = r.bool()
		case "g":
			r.value(&f.Global)
		default:
			r.skip()
		}
		if r.err != nil {
			return r.err
		}
	}
	return r.err
}

// mpWriter writes msgpack values, keeping the first error; or, counting,
// only counts the fields of a map (has).
type mpWriter struct {
	enc      *msgpack.Encoder
	err      error
	counting bool
	n        int
}

// has reports whether a field present is to be written now, writing its
// key; counting, it counts the field and reports false.
func (w *mpWriter) has(key string, present bool) bool {
	switch {
	case !present:
		return false
	case w.counting:
		w.n++
		return false
	}
	w.key(key)
	return true
}

func (w *mpWriter) strField(key, v string) {
	if w.has(key, v != "") {
		w.str(v)
	}
}

func (w *mpWriter) uintField(key string, v uint64) {
	if w.has(key, v != 0) {
		w.uint(v)
	}
}

func (w *mpWriter) trueField(key string, v bool) {
	if w.has(key, v) {
		w.bool(true)
	}
}

func (w *mpWriter) mapLen(n int) {
	if w.err == nil {
		w.err = w.enc.EncodeMapLen(n)
	}
}

func (w *mpWriter) arrayLen(n int) {
	if w.err == nil {
		w.err = w.enc.EncodeArrayLen(n)
	}
}

func (w *mpWriter) key(k string) { w.str(k) }

func (w *mpWriter) str(s string) {
	if w.err == nil {
		w.err = w.enc.EncodeString(s)
	}
}

func (w *mpWriter) uint(n uint64) {
	if w.err == nil {
		w.err = w.enc.EncodeUint(n)
	}
}

func (w *mpWriter) bool(v bool) {
	if w.err == nil {
		w.err = w.enc.EncodeBool(v)
	}
}

// bytes writes b as binary, or nil as nil.
func (w *mpWriter) bytes(b []byte) {
	if w.err == nil {
		w.err = w.enc.EncodeBytes(b)
	}
}

func (w *mpWriter) nil() {
	if w.err == nil {
		w.err = w.enc.EncodeNil()
	}
}

func (w *mpWriter) value(v any) {
	if w.err == nil {
		w.err = w.enc.Encode(v)
	}
}

func (w *mpWriter) processIDs(ids []snapshot.ProcessID) {
	if ids == nil {
		w.nil()
		return
	}
	w.arrayLen(len(ids))
	for _, id := range ids {
		w.str(string(id))
	}
}

func (w *mpWriter) snapshotIDs(ids []snapshot.SnapshotID) {
	if ids == nil {
		w.nil()
		return
	}
	w.arrayLen(len(ids))
	for _, id := range ids {
		w.uint(uint64(id))
	}
}

// recorded writes a RecordedMessage as a map of Type and Data.
func (w *mpWriter) recorded(m *RecordedMessage) {
	w.mapLen(2)
	w.key("Type")
	w.str(m.Type)
	w.key("Data")
	w.bytes(m.Data)
}

// counts writes a record's counters: an array of maps of Peer and N.
func (w *mpWriter) counts(cs []snapshot.PeerCount) {
	if cs == nil {
		w.nil()
		return
	}
	w.arrayLen(len(cs))
	for _, c := range cs {
		w.mapLen(2)
		w.key("Peer")
		w.str(string(c.Peer))
		w.key("N")
		w.uint(c.N)
	}
}

// record writes a LocalRecord: a map of its eight fields.
func (w *mpWriter) record(r *snapshot.LocalRecord) {
	w.mapLen(8)
	w.key("Snapshot")
	w.uint(uint64(r.Snapshot))
	w.key("Process")
	w.str(string(r.Process))
	w.key("Kind")
	w.str(r.Kind)
	w.key("State")
	w.bytes(r.State)
	w.key("Sent")
	w.counts(r.Sent)
	w.key("Received")
	w.counts(r.Received)
	w.key("Waits")
	if r.Waits == nil {
		w.nil()
	} else {
		w.value(r.Waits)
	}
	w.key("Prev")
	w.uint(uint64(r.Prev))
}

// channel writes a wireChannel: a map of its four fields, Channel a map
// of From and To.
func (w *mpWriter) channel(c *wireChannel) {
	w.mapLen(4)
	w.key("Snapshot")
	w.uint(uint64(c.Snapshot))
	w.key("Channel")
	w.mapLen(2)
	w.key("From")
	w.str(string(c.Channel.From))
	w.key("To")
	w.str(string(c.Channel.To))
	w.key("Seqs")
	if c.Seqs == nil {
		w.nil()
	} else {
		w.arrayLen(len(c.Seqs))
		for _, s := range c.Seqs {
			w.uint(s)
		}
	}
	w.key("Msgs")
	if c.Msgs == nil {
		w.nil()
	} else {
		w.arrayLen(len(c.Msgs))
		for i := range c.Msgs {
			w.recorded(&c.Msgs[i])
		}
	}
}

// mpReader reads msgpack values, keeping the first error: after it every
// read returns a zero value.
type mpReader struct {
	dec *msgpack.Decoder
	err error
}

func (r *mpReader) fail(err error, what string) {
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("frame: %s: %w", what, err)
	}
}

// read returns what decode reads, or the zero value after an error.
func read[T any](r *mpReader, what string, decode func() (T, error)) T {
	var v T
	if r.err == nil {
		var err error
		v, err = decode()
		r.fail(err, what)
	}
	return v
}

// mapLen returns a map's length, -1 for nil.
func (r *mpReader) mapLen(what string) int { return read(r, what, r.dec.DecodeMapLen) }

// arrayLen returns an array's length, -1 for nil.
func (r *mpReader) arrayLen(what string) int { return read(r, what, r.dec.DecodeArrayLen) }

func (r *mpReader) key() string { return read(r, "key", r.dec.DecodeString) }

func (r *mpReader) str() string { return read(r, "string", r.dec.DecodeString) }

func (r *mpReader) uint(what string) uint64 { return read(r, what, r.dec.DecodeUint64) }

func (r *mpReader) bool() bool { return read(r, "bool", r.dec.DecodeBool) }

func (r *mpReader) bytes() []byte { return read(r, "bytes", r.dec.DecodeBytes) }

func (r *mpReader) value(v any) {
	if r.err == nil {
		r.fail(r.dec.Decode(v), "value")
	}
}

func (r *mpReader) skip() {
	if r.err == nil {
		r.fail(r.dec.Skip(), "unknown field")
	}
}

func (r *mpReader) processIDs() []snapshot.ProcessID {
	n := r.arrayLen("process ids")
	if n < 0 {
		return nil
	}
	ids := make([]snapshot.ProcessID, n)
	for i := range ids {
		ids[i] = snapshot.ProcessID(r.str())
	}
	return ids
}

func (r *mpReader) snapshotIDs() []snapshot.SnapshotID {
	n := r.arrayLen("snapshot ids")
	if n < 0 {
		return nil
	}
	ids := make([]snapshot.SnapshotID, n)
	for i := range ids {
		ids[i] = snapshot.SnapshotID(r.uint("snapshot id"))
	}
	return ids
}

// recordedInto reads a RecordedMessage's map into m.
func (r *mpReader) recordedInto(m *RecordedMessage) {
	for range max(r.mapLen("recorded message"), 0) {
		switch r.key() {
		case "Type":
			m.Type = r.str()
		case "Data":
			m.Data = r.bytes()
		default:
			r.skip()
		}
	}
}

// recordedPtr reads a RecordedMessage, or nil.
func (r *mpReader) recordedPtr() *RecordedMessage {
	if r.isNil() {
		return nil
	}
	m := &RecordedMessage{}
	r.recordedInto(m)
	return m
}

// isNil reads a nil if one comes next, and reports whether it did.
func (r *mpReader) isNil() bool {
	if r.err != nil {
		return true
	}
	c, err := r.dec.PeekCode()
	if err != nil {
		r.fail(err, "value")
		return true
	}
	if c != msgpackNil {
		return false
	}
	r.fail(r.dec.DecodeNil(), "nil")
	return true
}

// msgpackNil is msgpack's code for nil.
const msgpackNil = 0xc0

func (r *mpReader) counts() []snapshot.PeerCount {
	n := r.arrayLen("counters")
	if n < 0 {
		return nil
	}
	cs := make([]snapshot.PeerCount, n)
	for i := range cs {
		for range max(r.mapLen("counter"), 0) {
			switch r.key() {
			case "Peer":
				cs[i].Peer = snapshot.ProcessID(r.str())
			case "N":
				cs[i].N = r.uint("count")
			default:
				r.skip()
			}
		}
	}
	return cs
}

// record reads a LocalRecord, or nil.
func (r *mpReader) record() *snapshot.LocalRecord {
	if r.isNil() {
		return nil
	}
	rec := &snapshot.LocalRecord{}
	for range max(r.mapLen("record"), 0) {
		switch r.key() {
		case "Snapshot":
			rec.Snapshot = snapshot.SnapshotID(r.uint("snapshot id"))
		case "Process":
			rec.Process = snapshot.ProcessID(r.str())
		case "Kind":
			rec.Kind = r.str()
		case "State":
			rec.State = r.bytes()
		case "Sent":
			rec.Sent = r.counts()
		case "Received":
			rec.Received = r.counts()
		case "Waits":
			r.value(&rec.Waits)
		case "Prev":
			rec.Prev = snapshot.SnapshotID(r.uint("previous record"))
		default:
			r.skip()
		}
	}
	return rec
}

// channels reads the wireChannels of a report.
func (r *mpReader) channels() []wireChannel {
	n := r.arrayLen("channels")
	if n < 0 {
		return nil
	}
	cs := make([]wireChannel, n)
	for i := range cs {
		c := &cs[i]
		for range max(r.mapLen("channel"), 0) {
			switch r.key() {
			case "Snapshot":
				c.Snapshot = snapshot.SnapshotID(r.uint("snapshot id"))
			case "Channel":
				for range max(r.mapLen("channel name"), 0) {
					switch r.key() {
					case "From":
						c.Channel.From = snapshot.ProcessID(r.str())
					case "To":
						c.Channel.To = snapshot.ProcessID(r.str())
					default:
						r.skip()
					}
				}
			case "Seqs":
				if m := r.arrayLen("sequence numbers"); m >= 0 {
					c.Seqs = make([]uint64, m)
					for j := range c.Seqs {
						c.Seqs[j] = r.uint("sequence number")
					}
				}
			case "Msgs":
				if m := r.arrayLen("messages"); m >= 0 {
					c.Msgs = make([]RecordedMessage, m)
					for j := range c.Msgs {
						r.recordedInto(&c.Msgs[j])
					}
				}
			default:
				r.skip()
			}
		}
	}
	return cs
}
