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

// EncodeMsgpack writes f in its msgpack form.
func (f *frame) EncodeMsgpack(enc *msgpack.Encoder) error {
	w := mpWriter{enc: enc}
	n := 1 // K has no omitempty: always written
	fields := [...]bool{
		f.From != "", f.To != "", f.ID != 0, f.Start, f.Stamp != nil, f.Msg != nil,
		len(f.IDs) > 0, len(f.Left) > 0, f.Rec != nil, len(f.Chans) > 0, f.Err != "",
		len(f.Recorded) > 0, f.After != 0, len(f.Drops) > 0, f.Token != 0, len(f.Tokens) > 0,
		f.Horizon != 0, len(f.Finished) > 0, f.Sources, f.Awaited != nil, f.Probe, f.Global != nil,
	}
	for _, set := range fields {
		if set {
			n++
		}
	}
	w.mapLen(n)
	w.key("k")
	w.uint(uint64(f.K))
	if f.From != "" {
		w.key("f")
		w.str(string(f.From))
	}
	if f.To != "" {
		w.key("t")
		w.str(string(f.To))
	}
	if f.ID != 0 {
		w.key("i")
		w.uint(uint64(f.ID))
	}
	if f.Start {
		w.key("b")
		w.bool(true)
	}
	if f.Stamp != nil {
		w.key("s")
		w.value(f.Stamp)
	}
	if f.Msg != nil {
		w.key("m")
		w.recorded(f.Msg)
	}
	if len(f.IDs) > 0 {
		w.key("p")
		w.processIDs(f.IDs)
	}
	if len(f.Left) > 0 {
		w.key("l")
		w.processIDs(f.Left)
	}
	if f.Rec != nil {
		w.key("r")
		w.record(f.Rec)
	}
	if len(f.Chans) > 0 {
		w.key("c")
		w.arrayLen(len(f.Chans))
		for i := range f.Chans {
			w.channel(&f.Chans[i])
		}
	}
	if f.Err != "" {
		w.key("e")
		w.str(f.Err)
	}
	if len(f.Recorded) > 0 {
		w.key("d")
		w.snapshotIDs(f.Recorded)
	}
	if f.After != 0 {
		w.key("a")
		w.uint(uint64(f.After))
	}
	if len(f.Drops) > 0 {
		w.key("x")
		w.value(f.Drops)
	}
	if f.Token != 0 {
		w.key("o")
		w.uint(f.Token)
	}
	if len(f.Tokens) > 0 {
		w.key("w")
		w.arrayLen(len(f.Tokens))
		for _, t := range f.Tokens {
			w.uint(t)
		}
	}
	if f.Horizon != 0 {
		w.key("h")
		w.uint(uint64(f.Horizon))
	}
	if len(f.Finished) > 0 {
		w.key("n")
		w.snapshotIDs(f.Finished)
	}
	if f.Sources {
		w.key("u")
		w.bool(true)
	}
	if f.Awaited != nil {
		w.key("q")
		w.value(f.Awaited)
	}
	if f.Probe {
		w.key("z")
		w.bool(true)
	}
	if f.Global != nil {
		w.key("g")
		w.value(f.Global)
	}
	return w.err
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

// mpWriter writes msgpack values, keeping the first error.
type mpWriter struct {
	enc *msgpack.Encoder
	err error
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

// mapLen returns a map's length, -1 for nil.
func (r *mpReader) mapLen(what string) int {
	if r.err != nil {
		return -1
	}
	n, err := r.dec.DecodeMapLen()
	r.fail(err, what)
	return n
}

// arrayLen returns an array's length, -1 for nil.
func (r *mpReader) arrayLen(what string) int {
	if r.err != nil {
		return -1
	}
	n, err := r.dec.DecodeArrayLen()
	r.fail(err, what)
	return n
}

func (r *mpReader) key() string {
	if r.err != nil {
		return ""
	}
	k, err := r.dec.DecodeString()
	r.fail(err, "key")
	return k
}

func (r *mpReader) str() string {
	if r.err != nil {
		return ""
	}
	s, err := r.dec.DecodeString()
	r.fail(err, "string")
	return s
}

func (r *mpReader) uint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	n, err := r.dec.DecodeUint64()
	r.fail(err, what)
	return n
}

func (r *mpReader) bool() bool {
	if r.err != nil {
		return false
	}
	v, err := r.dec.DecodeBool()
	r.fail(err, "bool")
	return v
}

func (r *mpReader) bytes() []byte {
	if r.err != nil {
		return nil
	}
	b, err := r.dec.DecodeBytes()
	r.fail(err, "bytes")
	return b
}

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
