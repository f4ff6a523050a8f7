package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/actorsnap/actorsnap/internal/boxed"
	"github.com/actorsnap/actorsnap/snapshot"
)

// DecodeGlobal decodes the stored form written by EncodeGlobal. It trusts
// nothing: the checksum, every length (against the format limits and the
// bytes remaining) and the snapshot's consistency (what Verify checks) are
// checked before the Global is returned, and any fault is reported as a
// *CorruptError (which wraps ErrCorrupt) with the offset at which it was
// found. Bytes of another format version are refused with
// ErrFormatVersion.
//
// The byte slices of the result (states, message data) share data's
// memory, so data must not be changed afterwards. Its strings do not.
func DecodeGlobal(data []byte) (*snapshot.Global, error) {
	g, _, err := decodeGlobal(data, true, false)
	return g, err
}

// decodeGlobal is DecodeGlobal that also returns an upper estimate of the
// bytes it allocated for the result, which the fuzz tests bound. Without
// checkSum the envelope's checksum is not checked: the FileStore checks
// the whole file against its manifest. With alias the result's strings
// share data's memory too, which is safe only if nobody can change data:
// the FileStore's own read buffer, whose other parts it hands out only as
// slices capped at their length.
func decodeGlobal(data []byte, checkSum, alias bool) (*snapshot.Global, int, error) {
	d, err := openEnvelope(data, globalMagic, "snapshot", checkSum)
	if err != nil {
		return nil, 0, err
	}
	d.alias = alias
	g, vouched, err := d.global()
	if err != nil {
		return nil, d.alloc, err
	}
	if err := d.done(); err != nil {
		return nil, d.alloc, err
	}
	if !vouched || checkVouched {
		if err := g.Verify(); err != nil {
			if vouched {
				panic(fmt.Sprintf("persistence: the decoder vouched for a snapshot that fails Verify: %v", err))
			}
			return nil, d.alloc, failsVerify(err)
		}
	}
	return g, d.alloc, nil
}

// failsVerify is the error of bytes that decode to a snapshot failing
// Verify with err: corrupt, at the body as a whole.
func failsVerify(err error) error {
	return &CorruptError{Offset: headerSize, Reason: "decoded snapshot fails Verify: " + err.Error()}
}

// decoder reads the msgpack body of an envelope from memory. It is written
// by hand: the common forms (a small array, a short string, a small
// integer) cost a byte test and no call, and every length is checked
// against the limits and the bytes remaining before anything is allocated
// for it.
type decoder struct {
	data    []byte // the envelope without its trailer
	pos     int    // offset in data of the next value
	alloc   int    // bytes allocated for the result, an upper estimate
	alias   bool   // strings may share data's memory (see decodeGlobal)
	version uint16 // the envelope's format version

	names  map[string]string // shared names decoded so far
	recent [4]string         // the shared names met last, looked at first
	next   int               // where in recent the next name goes
	arena  []byte            // the block strings are copied into
	boxes  []RecordedMessage // the block message payloads are boxed in

	waits   []snapshot.Waits // the block participants' waits are made in
	edges   []snapshot.Wait  // the block their edges are made in
	targets []target         // edges whose target is a participant's index
	nedges  int              // edges decoded so far
}

// target is a wait-for edge whose target is given as the index of a
// participant: it is named once all the participants are decoded.
type target struct {
	edge *snapshot.Wait
	to   int
}

// openEnvelope checks data's envelope and returns a decoder at the start
// of its body. The checksum is checked before the version, so that a
// damaged version reads as damage.
func openEnvelope(data []byte, magic [8]byte, what string, checkSum bool) (*decoder, error) {
	if len(data) < headerSize+trailerSize {
		return nil, &CorruptError{Offset: int64(len(data)), Reason: fmt.Sprintf("truncated: %d bytes, a %s needs at least %d", len(data), what, headerSize+trailerSize)}
	}
	if !bytes.Equal(data[:len(magic)], magic[:]) {
		return nil, &CorruptError{Offset: 0, Reason: fmt.Sprintf("not a %s: magic %q, want %q", what, data[:len(magic)], magic[:])}
	}
	body := data[:len(data)-trailerSize]
	if checkSum {
		stored := binary.BigEndian.Uint32(data[len(body):])
		if sum := crc32.Checksum(body, castagnoli); sum != stored {
			return nil, &CorruptError{Offset: int64(len(body)), Reason: fmt.Sprintf("checksum mismatch: stored %08x, computed %08x", stored, sum)}
		}
	}
	v := binary.BigEndian.Uint16(data[len(magic):])
	if v < minFormatVersion || v > FormatVersion {
		return nil, fmt.Errorf("%w: %s has version %d, this build reads %d to %d", ErrFormatVersion, what, v, minFormatVersion, FormatVersion)
	}
	return &decoder{data: body, pos: headerSize, version: v}, nil
}

// left returns the number of bytes not yet read.
func (d *decoder) left() int { return len(d.data) - d.pos }

func (d *decoder) corrupt(off int, format string, args ...any) error {
	return &CorruptError{Offset: int64(off), Reason: fmt.Sprintf(format, args...)}
}

func (d *decoder) truncated(off int, what string) error {
	return d.corrupt(off, "truncated in %s", what)
}

// peek returns the msgpack code of the next value.
func (d *decoder) peek(what string) (byte, error) {
	if d.pos >= len(d.data) {
		return 0, d.truncated(d.pos, what)
	}
	return d.data[d.pos], nil
}

// size reads the k-byte big-endian length or number after a code, for k
// of 1, 2, 4 or 8, and moves past both.
func (d *decoder) size(k int, what string) (uint64, error) {
	if d.left() < 1+k {
		return 0, d.truncated(d.pos, what)
	}
	b := d.data[d.pos+1 : d.pos+1+k]
	var n uint64
	switch k {
	case 1:
		n = uint64(b[0])
	case 2:
		n = uint64(binary.BigEndian.Uint16(b))
	case 4:
		n = uint64(binary.BigEndian.Uint32(b))
	default:
		n = binary.BigEndian.Uint64(b)
	}
	d.pos += 1 + k
	return n, nil
}

// done checks that the body has been read to its last byte.
func (d *decoder) done() error {
	if n := d.left(); n > 0 {
		return d.corrupt(d.pos, "%d bytes after the end of the body", n)
	}
	return nil
}

// arrayLen reads the header of an array.
func (d *decoder) arrayLen(what string) (int, error) {
	c, err := d.peek(what)
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case msgpcode.IsFixedArray(c):
		d.pos++
		return int(c & 0x0f), nil
	case c == msgpcode.Array16:
		n, err = d.size(2, what)
	case c == msgpcode.Array32:
		n, err = d.size(4, what)
	default:
		return 0, d.corrupt(d.pos, "%s: want an array, got msgpack code %#02x", what, c)
	}
	return int(n), err
}

// tuple reads the header of an array that must have n elements, n < 16.
func (d *decoder) tuple(n int, what string) error {
	if d.pos < len(d.data) && d.data[d.pos] == msgpcode.FixedArrayLow|byte(n) && n < 16 {
		d.pos++
		return nil
	}
	off := d.pos
	k, err := d.arrayLen(what)
	if err != nil {
		return err
	}
	if k != n {
		return d.corrupt(off, "%s: want %d fields, got %d", what, n, k)
	}
	return nil
}

// array reads the length of an array of at most limit elements, each
// encoded in at least minSize bytes, and charges mem bytes per element.
func (d *decoder) array(what string, limit, minSize, mem int) (int, error) {
	off := d.pos
	n, err := d.arrayLen(what)
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, d.corrupt(off, "%s: %d elements, more than the limit of %d", what, n, limit)
	}
	if rest := d.left(); n > rest/minSize {
		return 0, d.corrupt(off, "%s: %d elements cannot fit in the %d bytes left", what, n, rest)
	}
	d.alloc += n * mem
	return n, nil
}

func (d *decoder) uint(what string) (uint64, error) {
	if d.pos < len(d.data) && d.data[d.pos] <= msgpcode.PosFixedNumHigh {
		d.pos++
		return uint64(d.data[d.pos-1]), nil
	}
	c, err := d.peek(what)
	if err != nil {
		return 0, err
	}
	switch c {
	case msgpcode.Uint8:
		return d.size(1, what)
	case msgpcode.Uint16:
		return d.size(2, what)
	case msgpcode.Uint32:
		return d.size(4, what)
	case msgpcode.Uint64:
		return d.size(8, what)
	}
	return 0, d.corrupt(d.pos, "%s: want an unsigned integer, got msgpack code %#02x", what, c)
}

func (d *decoder) int(what string) (int64, error) {
	off := d.pos
	c, err := d.peek(what)
	if err != nil {
		return 0, err
	}
	if msgpcode.IsFixedNum(c) {
		d.pos++
		return int64(int8(c)), nil
	}
	var n uint64
	switch c {
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64:
		if n, err = d.uint(what); err != nil {
			return 0, err
		}
		if n > math.MaxInt64 {
			return 0, d.corrupt(off, "%s: %d overflows int64", what, n)
		}
		return int64(n), nil
	case msgpcode.Int8:
		n, err = d.size(1, what)
		return int64(int8(n)), err
	case msgpcode.Int16:
		n, err = d.size(2, what)
		return int64(int16(n)), err
	case msgpcode.Int32:
		n, err = d.size(4, what)
		return int64(int32(n)), err
	case msgpcode.Int64:
		n, err = d.size(8, what)
		return int64(n), err
	}
	return 0, d.corrupt(off, "%s: want an integer, got msgpack code %#02x", what, c)
}

func (d *decoder) bool(what string) (bool, error) {
	c, err := d.peek(what)
	if err != nil {
		return false, err
	}
	if c != msgpcode.True && c != msgpcode.False {
		return false, d.corrupt(d.pos, "%s: want a bool, got msgpack code %#02x", what, c)
	}
	d.pos++
	return c == msgpcode.True, nil
}

// raw reads a msgpack string (str) or byte string (bin, or nil, read as a
// nil slice) of at most limit bytes and returns it without copying, capped
// at its length.
func (d *decoder) raw(what string, str bool, limit int) ([]byte, error) {
	off := d.pos
	c, err := d.peek(what)
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case str && msgpcode.IsFixedString(c):
		n = uint64(c & 0x1f)
		d.pos++
	case str && c == msgpcode.Str8, !str && c == msgpcode.Bin8:
		n, err = d.size(1, what)
	case str && c == msgpcode.Str16, !str && c == msgpcode.Bin16:
		n, err = d.size(2, what)
	case str && c == msgpcode.Str32, !str && c == msgpcode.Bin32:
		n, err = d.size(4, what)
	case !str && c == msgpcode.Nil:
		d.pos++
		return nil, nil
	default:
		kind := "a byte string"
		if str {
			kind = "a string"
		}
		return nil, d.corrupt(off, "%s: want %s, got msgpack code %#02x", what, kind, c)
	}
	if err != nil {
		return nil, err
	}
	if n > uint64(limit) {
		return nil, d.corrupt(off, "%s: %d bytes, more than the limit of %d", what, n, limit)
	}
	if n > uint64(d.left()) {
		return nil, d.corrupt(off, "%s: %d bytes, but only %d left", what, n, d.left())
	}
	start := d.pos
	d.pos += int(n)
	return d.data[start:d.pos:d.pos], nil
}

// name reads a string of at most MaxNameSize bytes. A shared name (a kind
// or a message type, which repeat) is looked up among those decoded before.
func (d *decoder) name(what string, shared bool) (string, error) {
	b, err := d.raw(what, true, MaxNameSize)
	if err != nil {
		return "", err
	}
	return d.str(b, shared), nil
}

// str returns b, a name just read, as a string.
func (d *decoder) str(b []byte, shared bool) string {
	if len(b) == 0 {
		return ""
	}
	if d.alias {
		return unsafe.String(&b[0], len(b))
	}
	if !shared {
		return d.string(b)
	}
	for _, s := range d.recent {
		if s == string(b) {
			return s
		}
	}
	s, ok := d.names[string(b)]
	if !ok {
		s = d.string(b)
		if len(d.names) < maxShared {
			if d.names == nil {
				d.names = make(map[string]string)
			}
			d.names[s] = s
			d.alloc += internMem
		}
	}
	d.recent[d.next] = s
	d.next = (d.next + 1) % len(d.recent)
	return s
}

// string copies b, just read, into the decoder's arena: blocks holding
// many names, so that a snapshot's names cost a few allocations rather
// than one each. A block is only appended to, so the strings made from it
// never change.
func (d *decoder) string(b []byte) string {
	if len(d.arena)+len(b) > cap(d.arena) {
		// No block is larger than what is left to read could fill.
		size := max(len(b), min(arenaBlock, d.left()+len(b)))
		d.arena = make([]byte, 0, size)
		d.alloc += size
	}
	start := len(d.arena)
	d.arena = append(d.arena, b...)
	return unsafe.String(&d.arena[start], len(b))
}

func (d *decoder) time(what string) (time.Time, error) {
	return d.instant(what+" seconds", what+" nanoseconds")
}

// instant reads an instant as Unix seconds and nanoseconds, named by
// secWhat and nsecWhat (constants, so that an edge's instant costs no
// allocation for its names).
func (d *decoder) instant(secWhat, nsecWhat string) (time.Time, error) {
	sec, err := d.int(secWhat)
	if err != nil {
		return time.Time{}, err
	}
	off := d.pos
	nsec, err := d.uint(nsecWhat)
	if err != nil {
		return time.Time{}, err
	}
	if nsec >= uint64(time.Second) {
		return time.Time{}, d.corrupt(off, "%s: %d, want less than 1e9", nsecWhat, nsec)
	}
	return time.Unix(sec, int64(nsec)).UTC(), nil
}

// box returns rm as a message payload. Boxing a RecordedMessage in an
// interface the ordinary way allocates a copy of it, one per message; box
// copies it into a block of payloads instead (in version 2 one block, made
// for the message count) and makes the interface point there (package
// boxed): m.Payload.(RecordedMessage) copies the value out as from any
// other payload.
func (d *decoder) box(rm RecordedMessage) any {
	if len(d.boxes) == cap(d.boxes) {
		// No block holds more payloads than what is left to read could.
		n := max(1, min(boxBlock, d.left()/minBoxedSize))
		d.boxes = make([]RecordedMessage, 0, n)
		d.alloc += n * boxMem
	}
	d.boxes = append(d.boxes, rm)
	return recordedBoxer.Box(&d.boxes[len(d.boxes)-1])
}

// recordedBoxer boxes recorded messages where they lie.
var recordedBoxer = boxed.New[RecordedMessage]()

// global decodes a snapshot's body. It also checks, as it goes, what
// Verify would check, and reports whether that check vouches for the
// result; when it does not, the caller runs Verify, which decides. The
// check is written so as to vouch only for snapshots that pass Verify (the
// fuzz tests and, under the race detector or the invariants tag, every
// decoding check that it does), and to vouch at the cost of a comparison
// per participant and channel: the data is still in the cache, and in
// version 2 a channel's ends are indices of participants, which are
// participants by construction and compare as integers. A rule added to
// Verify must be added here too (the race detector's runs catch one that
// is not, where a test meets it).
func (d *decoder) global() (g *snapshot.Global, vouched bool, err error) {
	fields := 12
	switch d.version {
	case 1:
		fields = 8
	case 2:
		fields = 9
	case 3:
		fields = 10
	case 4:
		fields = 11
	}
	if err := d.tuple(fields, "snapshot"); err != nil {
		return nil, false, err
	}
	g = &snapshot.Global{}
	off := d.pos
	id, err := d.uint("snapshot id")
	if err != nil {
		return nil, false, err
	}
	if id == 0 {
		return nil, false, d.corrupt(off, "snapshot id is 0")
	}
	g.ID = snapshot.SnapshotID(id)
	off = d.pos
	mode, err := d.uint("mode")
	if err != nil {
		return nil, false, err
	}
	if mode > math.MaxUint8 {
		return nil, false, d.corrupt(off, "mode %d out of range", mode)
	}
	g.Mode = snapshot.Mode(mode)
	if g.Start, err = d.time("start"); err != nil {
		return nil, false, err
	}
	if g.End, err = d.time("end"); err != nil {
		return nil, false, err
	}
	n, err := d.array("participants", MaxParticipants, minParticipantSize, participantMem)
	if err != nil {
		return nil, false, err
	}
	if n > 0 {
		g.Participants = make([]snapshot.Participant, n)
	}
	ps := g.Participants
	if vouched, err = d.participants(ps); err != nil {
		return nil, false, err
	}
	for _, t := range d.targets {
		t.edge.To = ps[t.to].ID
	}
	// In version 2 the count of messages comes first: they are allocated
	// at once, each channel's a part, once the count and the channels
	// have been found to fit in what is left.
	var (
		msgs  []snapshot.Message
		count int
	)
	if d.version >= 2 {
		off := d.pos
		c, err := d.uint("message count")
		if err != nil {
			return nil, false, err
		}
		if c > MaxMessages {
			return nil, false, d.corrupt(off, "message count: %d, more than the limit of %d", c, MaxMessages)
		}
		if rest := d.left(); c > uint64(rest/minMessageSize) {
			return nil, false, d.corrupt(off, "message count: %d messages cannot fit in the %d bytes left", c, rest)
		}
		count = int(c)
	}
	off = d.pos
	if n, err = d.array("channels", MaxChannels, minChannelSize, channelMem); err != nil {
		return nil, false, err
	}
	if rest := d.left() - count*minMessageSize; n > rest/minChannelSize {
		return nil, false, d.corrupt(off, "channels: %d elements and %d messages cannot fit in the %d bytes left", n, count, d.left())
	}
	if count > 0 {
		msgs = make([]snapshot.Message, count)
		d.boxes = make([]RecordedMessage, 0, count)
		d.alloc += count * (messageMem + boxMem)
	}
	if n > 0 {
		g.Channels = make([]snapshot.ChannelState, n)
	}
	total := 0
	from := 0 // version 1: a cursor into ps, channels being sorted by sender
	var prevFrom, prevTo int
	for i := range g.Channels {
		c := &g.Channels[i]
		if err := d.tuple(5, "channel"); err != nil {
			return nil, false, err
		}
		sender, fromIdx, err := d.end("channel sender", ps)
		if err != nil {
			return nil, false, err
		}
		receiver, toIdx, err := d.end("channel receiver", ps)
		if err != nil {
			return nil, false, err
		}
		c.Channel = snapshot.Channel{From: sender, To: receiver}
		if i > 0 {
			if fromIdx >= 0 && toIdx >= 0 && prevFrom >= 0 && prevTo >= 0 {
				// Indices compare as the names do, ps being sorted.
				if prevFrom > fromIdx || prevFrom == fromIdx && prevTo >= toIdx {
					vouched = false
				}
			} else if prev := g.Channels[i-1].Channel; prev.From > sender || prev.From == sender && prev.To >= receiver {
				vouched = false // not sorted, or a duplicate
			}
		}
		prevFrom, prevTo = fromIdx, toIdx
		if c.Sent, err = d.uint("sent count"); err != nil {
			return nil, false, err
		}
		if c.Received, err = d.uint("received count"); err != nil {
			return nil, false, err
		}
		off := d.pos
		k, err := d.array("messages", MaxMessages-total, minMessageSize, 0)
		if err != nil {
			return nil, false, err
		}
		if c.Received+uint64(k) != c.Sent || c.Received > c.Sent {
			vouched = false // does not balance
		}
		if vouched && c.Sent != 0 {
			// Both ends must be participants. In version 1 the sender is
			// found by the cursor, which relies on everything so far
			// being sorted.
			if fromIdx < 0 && d.version == 1 {
				for from < len(ps) && ps[from].ID < sender {
					from++
				}
				if from < len(ps) && ps[from].ID == sender {
					fromIdx = from
				}
			} else if fromIdx < 0 {
				fromIdx = participantIndex(ps, sender)
			}
			if toIdx < 0 {
				toIdx = participantIndex(ps, receiver)
			}
			if fromIdx < 0 || toIdx < 0 {
				vouched = false
			}
		}
		if k > 0 {
			if d.version >= 2 {
				if total+k > len(msgs) {
					return nil, false, d.corrupt(off, "messages: %d more, beyond the message count of %d", k, len(msgs))
				}
				c.Messages = msgs[total : total+k : total+k]
			} else {
				c.Messages = make([]snapshot.Message, k)
				d.alloc += k * messageMem
			}
		}
		total += k
		for j := range c.Messages {
			if err := d.tuple(2, "message"); err != nil {
				return nil, false, err
			}
			var rm RecordedMessage
			if rm.Type, err = d.name("message type", true); err != nil {
				return nil, false, err
			}
			if rm.Data, err = d.raw("message data", false, MaxMessageSize); err != nil {
				return nil, false, err
			}
			// Sequence numbers are not stored: they are Received+1
			// onwards, as Verify requires.
			c.Messages[j] = snapshot.Message{Seq: c.Received + 1 + uint64(j), Payload: d.box(rm)}
		}
	}
	if total != len(msgs) && d.version >= 2 {
		return nil, false, d.corrupt(d.pos, "message count is %d, but the channels hold %d", len(msgs), total)
	}
	if d.version >= 3 {
		if g.Violations, err = d.violations(); err != nil {
			return nil, false, err
		}
	}
	if d.version >= 4 {
		if g.ReceiverCounts, err = d.receiverCounts(ps); err != nil {
			return nil, false, err
		}
		if vouched {
			// The rest of Verify was checked as it was read.
			if err := g.VerifyReceivers(); err != nil {
				return nil, false, failsVerify(err)
			}
		}
	}
	if d.version >= 5 {
		if g.Sums, err = d.sums(); err != nil {
			return nil, false, err
		}
		if vouched {
			if err := g.VerifySums(); err != nil {
				return nil, false, failsVerify(err)
			}
		}
	}
	return g, vouched, nil
}

// sums reads a version-5 body's last field: nil when the snapshot was
// not counted in sums, else its sums, sent then received.
func (d *decoder) sums() (*snapshot.SumCounts, error) {
	if c, err := d.peek("sums"); err != nil {
		return nil, err
	} else if c == msgpcode.Nil {
		d.pos++
		return nil, nil
	}
	if err := d.tuple(2, "sums"); err != nil {
		return nil, err
	}
	var s snapshot.SumCounts
	var err error
	if s.Sent, err = d.uint("messages sent before the records"); err != nil {
		return nil, err
	}
	if s.Received, err = d.uint("messages received before the records"); err != nil {
		return nil, err
	}
	return &s, nil
}

// receiverCounts reads a version-4 body's eleventh field into ps: nil when
// the snapshot keeps no receiver counts, else SentTo and Received of each
// participant in turn. It reports whether they were kept.
func (d *decoder) receiverCounts(ps []snapshot.Participant) (bool, error) {
	if c, err := d.peek("receiver counts"); err != nil {
		return false, err
	} else if c == msgpcode.Nil {
		d.pos++
		return false, nil
	}
	off := d.pos
	n, err := d.arrayLen("receiver counts")
	if err != nil {
		return false, err
	}
	if n != 2*len(ps) {
		return false, d.corrupt(off, "receiver counts: %d numbers for %d participants, want %d", n, len(ps), 2*len(ps))
	}
	for i := range ps {
		if ps[i].SentTo, err = d.uint("sent to a participant"); err != nil {
			return false, err
		}
		if ps[i].Received, err = d.uint("received by a participant"); err != nil {
			return false, err
		}
	}
	return true, nil
}

// violations reads the violations of a version-3 body; nil when none.
func (d *decoder) violations() ([]snapshot.Violation, error) {
	n, err := d.array("violations", MaxViolations, minViolationSize, violationMem)
	if err != nil || n == 0 {
		return nil, err
	}
	vs := make([]snapshot.Violation, n)
	for i := range vs {
		v := &vs[i]
		if err := d.tuple(2, "violation"); err != nil {
			return nil, err
		}
		if v.Invariant, err = d.name("invariant", false); err != nil {
			return nil, err
		}
		b, err := d.raw("violation error", true, MaxViolationSize)
		if err != nil {
			return nil, err
		}
		v.Err = d.str(b, false)
	}
	return vs, nil
}

// end reads one end of a channel: in version 2 the index of a participant
// or, for a process that is not one, its name; in version 1 always the
// name. The index is -1 for a name.
func (d *decoder) end(what string, ps []snapshot.Participant) (snapshot.ProcessID, int, error) {
	if d.version >= 2 && d.pos < len(d.data) && (d.data[d.pos] <= msgpcode.PosFixedNumHigh || d.data[d.pos] >= msgpcode.Uint8 && d.data[d.pos] <= msgpcode.Uint64) {
		off := d.pos
		i, err := d.uint(what)
		if err != nil {
			return "", 0, err
		}
		if i >= uint64(len(ps)) {
			return "", 0, d.corrupt(off, "%s: participant %d, but there are %d", what, i, len(ps))
		}
		return ps[i].ID, int(i), nil
	}
	name, err := d.name(what, false)
	return snapshot.ProcessID(name), -1, err
}

// participants decodes ps, and reports whether they are sorted by ID
// without duplicates.
func (d *decoder) participants(ps []snapshot.Participant) (sorted bool, err error) {
	sorted = true
	for i := range ps {
		p := &ps[i]
		if !d.participantFast(p) {
			if err := d.participant(p, len(ps)); err != nil {
				return false, err
			}
		}
		if i > 0 && ps[i-1].ID >= p.ID {
			sorted = false
		}
	}
	return sorted, nil
}

// participant decodes a participant of the general form: an array of 4
// or, in version 3, of 5 when it has waits. n is the number of
// participants, which the waits' indices must be below.
func (d *decoder) participant(p *snapshot.Participant, n int) error {
	off := d.pos
	fields, err := d.arrayLen("participant")
	if err != nil {
		return err
	}
	if fields != 4 && (fields != 5 || d.version < 3) {
		want := "4"
		if d.version >= 3 {
			want = "4 or 5"
		}
		return d.corrupt(off, "participant: want %s fields, got %d", want, fields)
	}
	id, err := d.name("process id", false)
	if err != nil {
		return err
	}
	p.ID = snapshot.ProcessID(id)
	if p.Kind, err = d.name("kind", true); err != nil {
		return err
	}
	if p.State, err = d.raw("state", false, MaxStateSize); err != nil {
		return err
	}
	if p.Departed, err = d.bool("departed"); err != nil {
		return err
	}
	if fields == 5 {
		p.Waits, err = d.waitsOf(n)
	}
	return err
}

// waitsOf reads a participant's waits, [any, timer, edges]. An edge's
// target is the index of a participant, below n and named once all are
// decoded, or a name. The waits and their edges are made in blocks, as
// the payloads are (see box): a few allocations for a snapshot's waits,
// never more than what is left to read could hold.
func (d *decoder) waitsOf(n int) (*snapshot.Waits, error) {
	if err := d.tuple(3, "waits"); err != nil {
		return nil, err
	}
	if len(d.waits) == cap(d.waits) {
		// Each of the rest is at least a participant with waits.
		k := max(1, min(boxBlock, d.left()/(minParticipantSize+minWaitsSize)))
		d.waits = make([]snapshot.Waits, 0, k)
		d.alloc += k * waitsMem
	}
	d.waits = d.waits[:len(d.waits)+1]
	w := &d.waits[len(d.waits)-1]
	var err error
	if w.Any, err = d.bool("waits any"); err != nil {
		return nil, err
	}
	if w.Timer, err = d.bool("waits timer"); err != nil {
		return nil, err
	}
	off := d.pos
	k, err := d.array("wait-for edges", MaxWaits, minWaitSize, 0)
	if err != nil || k == 0 {
		return w, err
	}
	if d.nedges += k; d.nedges > MaxWaitsTotal {
		return nil, d.corrupt(off, "wait-for edges: %d in all, more than the limit of %d", d.nedges, MaxWaitsTotal)
	}
	if cap(d.edges)-len(d.edges) < k {
		size := max(k, min(arenaBlock/waitMem, d.left()/minWaitSize))
		d.edges = make([]snapshot.Wait, 0, size)
		d.alloc += size * waitMem
	}
	start := len(d.edges)
	d.edges = d.edges[:start+k]
	w.Edges = d.edges[start : start+k : start+k]
	for i := range w.Edges {
		e := &w.Edges[i]
		if err := d.tuple(5, "wait-for edge"); err != nil {
			return nil, err
		}
		if d.pos < len(d.data) && (d.data[d.pos] <= msgpcode.PosFixedNumHigh || d.data[d.pos] >= msgpcode.Uint8 && d.data[d.pos] <= msgpcode.Uint64) {
			off := d.pos
			to, err := d.uint("wait target")
			if err != nil {
				return nil, err
			}
			if to >= uint64(n) {
				return nil, d.corrupt(off, "wait target: participant %d, but there are %d", to, n)
			}
			d.noteTarget(e, int(to))
		} else {
			name, err := d.name("wait target", false)
			if err != nil {
				return nil, err
			}
			e.To = snapshot.ProcessID(name)
		}
		if e.Request, err = d.uint("wait request"); err != nil {
			return nil, err
		}
		if e.Type, err = d.name("wait type", true); err != nil {
			return nil, err
		}
		if e.Since, err = d.instant("wait since seconds", "wait since nanoseconds"); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// noteTarget notes that e's target is participant i. The list grows by
// doubling, bounded by the edges what is left to read could hold, and
// every array it has is charged.
func (d *decoder) noteTarget(e *snapshot.Wait, i int) {
	if len(d.targets) == cap(d.targets) {
		size := max(256, 2*cap(d.targets))
		size = min(size, len(d.targets)+1+d.left()/minWaitSize)
		t := make([]target, len(d.targets), size)
		copy(t, d.targets)
		d.targets = t
		d.alloc += size * targetMem
	}
	d.targets = append(d.targets, target{edge: e, to: i})
}

// participantFast decodes a participant in the form the encoder gives
// nearly all of them, with the checks that form needs: an array of 4, an
// id and a kind of fewer than 32 bytes, a state of fewer than 64 KiB (or
// nil) and a bool, all within the input. It reports whether it could;
// if not, it has read nothing, and participant decodes the general form
// or reports the fault.
func (d *decoder) participantFast(p *snapshot.Participant) bool {
	b := d.data[d.pos:]
	if len(b) < minParticipantSize || b[0] != msgpcode.FixedArrayLow|4 || !msgpcode.IsFixedString(b[1]) {
		return false
	}
	i := 2 + int(b[1]&0x1f) // the kind
	if i >= len(b) || !msgpcode.IsFixedString(b[i]) {
		return false
	}
	id := b[2:i]
	k := i + 1 + int(b[i]&0x1f) // the state
	if k >= len(b) {
		return false
	}
	kind := b[i+1 : k]
	i = k
	var state []byte
	switch {
	case i+1 < len(b) && b[i] == msgpcode.Nil:
		i++
	case i+2 < len(b) && b[i] == msgpcode.Bin8:
		n := int(b[i+1])
		i += 2
		if n >= len(b)-i {
			return false
		}
		state, i = b[i:i+n:i+n], i+n
	case i+3 < len(b) && b[i] == msgpcode.Bin16:
		n := int(binary.BigEndian.Uint16(b[i+1:]))
		i += 3
		if n >= len(b)-i {
			return false
		}
		state, i = b[i:i+n:i+n], i+n
	default:
		return false
	}
	if c := b[i]; c != msgpcode.True && c != msgpcode.False {
		return false
	}
	p.ID = snapshot.ProcessID(d.str(id, false))
	p.Kind = d.str(kind, true)
	p.State = state
	p.Departed = b[i] == msgpcode.True
	d.pos += i + 1
	return true
}

// participantIndex returns the index of id in ps, sorted by ID, or -1.
func participantIndex(ps []snapshot.Participant, id snapshot.ProcessID) int {
	lo, hi := 0, len(ps)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ps[m].ID < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(ps) && ps[lo].ID == id {
		return lo
	}
	return -1
}
