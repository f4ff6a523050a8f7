package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/actorsnap/actorsnap/snapshot"
)

// FormatVersion is the version of the stored format this build writes and
// reads. It is stored in every encoded snapshot and manifest; bytes of
// another version are refused with ErrFormatVersion.
const FormatVersion = 1

// Limits of the format. The encoder refuses a snapshot beyond them with
// ErrTooLarge, and the decoder reports bytes claiming more as corrupt, so a
// damaged length can never make it allocate more than these allow. The
// decoder also never allocates for more elements than the remaining input
// could hold, so what it allocates stays proportional to its input.
const (
	// MaxEncodedSize bounds one encoded snapshot, in bytes.
	MaxEncodedSize = 1 << 30
	// MaxParticipants bounds the participants of one snapshot.
	MaxParticipants = 1 << 22
	// MaxChannels bounds the channels of one snapshot.
	MaxChannels = 1 << 22
	// MaxMessages bounds the in-flight messages of one snapshot, over all
	// its channels.
	MaxMessages = 1 << 24
	// MaxNameSize bounds a process id, a kind and a message type name, in
	// bytes.
	MaxNameSize = 1 << 16
	// MaxStateSize bounds one participant's state, in bytes.
	MaxStateSize = 1 << 26
	// MaxMessageSize bounds one message's data, in bytes.
	MaxMessageSize = 1 << 26
)

// The envelope shared by encoded snapshots and manifests, the same in
// every format version: an 8-byte magic, the format version as a
// big-endian uint16, a msgpack body, and the CRC-32C (Castagnoli) of all
// that as a big-endian uint32.
const (
	headerSize  = 10
	trailerSize = 4
)

var (
	globalMagic   = [8]byte{'A', 'S', 'N', 'A', 'P', 'G', 'L', 'B'}
	manifestMagic = [8]byte{'A', 'S', 'N', 'A', 'P', 'M', 'A', 'N'}
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
)

// Sizes used to bound what the decoder allocates: the fewest bytes an
// element can be encoded in, and what it costs in memory.
const (
	minParticipantSize = 5 // fixarray, fixstr, fixstr, nil, bool
	minChannelSize     = 6 // fixarray, fixstr, fixstr, fixint, fixint, fixarray
	minMessageSize     = 3 // fixarray, fixstr, nil
	participantMem     = int(unsafe.Sizeof(snapshot.Participant{}))
	channelMem         = int(unsafe.Sizeof(snapshot.ChannelState{}))
	messageMem         = int(unsafe.Sizeof(snapshot.Message{})) + int(unsafe.Sizeof(RecordedMessage{}))
	internMem          = 48 // a map entry of the decoder's shared names
	maxShared          = 1024
	arenaBlock         = 32 << 10
)

// EncodeGlobal returns the stored form of g: the envelope (magic
// "ASNAPGLB", FormatVersion, CRC-32C) around a msgpack body. g must have a
// non-zero ID, pass Verify, hold only RecordedMessage payloads
// (ErrPayloadType) and stay within the format limits (ErrTooLarge).
func EncodeGlobal(g *snapshot.Global) ([]byte, error) {
	if err := checkSave(g); err != nil {
		return nil, err
	}
	return encodeChecked(g)
}

// encodeChecked is EncodeGlobal for a g that passed checkSave.
func encodeChecked(g *snapshot.Global) ([]byte, error) {
	size, err := encodedSizeBound(g)
	if err != nil {
		return nil, err
	}
	e := newEncoder(globalMagic, size)
	encodeGlobalBody(e, g)
	return e.finish()
}

// encodedSizeBound checks g against the format limits and returns an
// upper bound of its encoded size.
func encodedSizeBound(g *snapshot.Global) (int, error) {
	tooLarge := func(what string, n, limit int) error {
		return fmt.Errorf("%w: snapshot %d: %s is %d, more than %d", ErrTooLarge, g.ID, what, n, limit)
	}
	const perItem = 16 // array, length and number headers
	if len(g.Participants) > MaxParticipants {
		return 0, tooLarge("participant count", len(g.Participants), MaxParticipants)
	}
	if len(g.Channels) > MaxChannels {
		return 0, tooLarge("channel count", len(g.Channels), MaxChannels)
	}
	size := headerSize + trailerSize + 64
	name := func(what, s string) error {
		if len(s) > MaxNameSize {
			return tooLarge(what+" size", len(s), MaxNameSize)
		}
		size += len(s) + 5
		return nil
	}
	for _, p := range g.Participants {
		if err := name("process id", string(p.ID)); err != nil {
			return 0, err
		}
		if err := name("kind", p.Kind); err != nil {
			return 0, err
		}
		if len(p.State) > MaxStateSize {
			return 0, tooLarge(fmt.Sprintf("state size of %s", p.ID), len(p.State), MaxStateSize)
		}
		size += len(p.State) + perItem
		if size > MaxEncodedSize {
			return 0, tooLarge("encoded size", size, MaxEncodedSize)
		}
	}
	messages := 0
	for _, c := range g.Channels {
		if err := name("process id", string(c.Channel.From)); err != nil {
			return 0, err
		}
		if err := name("process id", string(c.Channel.To)); err != nil {
			return 0, err
		}
		size += 2*9 + perItem
		messages += len(c.Messages)
		if messages > MaxMessages {
			return 0, tooLarge("in-flight message count", messages, MaxMessages)
		}
		for _, m := range c.Messages {
			rm := m.Payload.(RecordedMessage) // checked by checkSave
			if err := name("message type", rm.Type); err != nil {
				return 0, err
			}
			if len(rm.Data) > MaxMessageSize {
				return 0, tooLarge("message size", len(rm.Data), MaxMessageSize)
			}
			size += len(rm.Data) + perItem
		}
		if size > MaxEncodedSize {
			return 0, tooLarge("encoded size", size, MaxEncodedSize)
		}
	}
	return size, nil
}

func encodeGlobalBody(e *encoder, g *snapshot.Global) {
	e.array(8)
	e.uint(uint64(g.ID))
	e.uint(uint64(g.Mode))
	e.time(g.Start)
	e.time(g.End)
	e.array(len(g.Participants))
	for _, p := range g.Participants {
		e.array(4)
		e.string(string(p.ID))
		e.string(p.Kind)
		e.bytes(p.State)
		e.bool(p.Departed)
	}
	e.array(len(g.Channels))
	for _, c := range g.Channels {
		e.array(5)
		e.string(string(c.Channel.From))
		e.string(string(c.Channel.To))
		e.uint(c.Sent)
		e.uint(c.Received)
		// Sequence numbers are not stored: Verify holds them to
		// Received+1 onwards.
		e.array(len(c.Messages))
		for _, m := range c.Messages {
			rm := m.Payload.(RecordedMessage)
			e.array(2)
			e.string(rm.Type)
			e.bytes(rm.Data)
		}
	}
}

// encoder writes an envelope. It keeps the first error, so that a body is
// written without checking each call.
type encoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
	err error
}

func newEncoder(magic [8]byte, size int) *encoder {
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.Write(magic[:])
	_ = binary.Write(buf, binary.BigEndian, uint16(FormatVersion))
	return &encoder{buf: buf, enc: msgpack.NewEncoder(buf)}
}

func (e *encoder) do(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *encoder) array(n int)     { e.do(e.enc.EncodeArrayLen(n)) }
func (e *encoder) uint(n uint64)   { e.do(e.enc.EncodeUint(n)) }
func (e *encoder) int(n int64)     { e.do(e.enc.EncodeInt(n)) }
func (e *encoder) string(s string) { e.do(e.enc.EncodeString(s)) }
func (e *encoder) bytes(b []byte)  { e.do(e.enc.EncodeBytes(b)) }
func (e *encoder) bool(b bool)     { e.do(e.enc.EncodeBool(b)) }

// time writes t as Unix seconds and nanoseconds; the location and the
// monotonic reading are not kept.
func (e *encoder) time(t time.Time) {
	e.int(t.Unix())
	e.uint(uint64(t.Nanosecond()))
}

func (e *encoder) finish() ([]byte, error) {
	if e.err != nil {
		return nil, fmt.Errorf("persistence: encoding: %w", e.err)
	}
	if e.buf.Len()+trailerSize > MaxEncodedSize {
		return nil, fmt.Errorf("%w: encoded size %d, more than %d", ErrTooLarge, e.buf.Len()+trailerSize, MaxEncodedSize)
	}
	b := e.buf.Bytes()
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// DecodeGlobal decodes the stored form written by EncodeGlobal. It trusts
// nothing: the checksum, every length (against the format limits and the
// bytes remaining) and the snapshot's Verify are checked before the
// Global is returned, and any fault is reported as a *CorruptError (which
// wraps ErrCorrupt) with the offset at which it was found. Bytes of
// another format version are refused with ErrFormatVersion.
//
// The byte slices of the result (states, message data) share data's
// memory, so data must not be changed afterwards.
func DecodeGlobal(data []byte) (*snapshot.Global, error) {
	g, _, err := decodeGlobal(data, true)
	return g, err
}

// decodeGlobal is DecodeGlobal that also returns an upper estimate of the
// bytes it allocated for the result, which the fuzz tests bound. Without
// checkSum the envelope's checksum is not checked: the FileStore has
// checked the whole file against its manifest already.
func decodeGlobal(data []byte, checkSum bool) (*snapshot.Global, int, error) {
	d, err := openEnvelope(data, globalMagic, "snapshot", checkSum)
	if err != nil {
		return nil, 0, err
	}
	g, err := d.global()
	if err != nil {
		return nil, d.alloc, err
	}
	if err := d.end(); err != nil {
		return nil, d.alloc, err
	}
	if err := g.Verify(); err != nil {
		return nil, d.alloc, &CorruptError{Offset: headerSize, Reason: "decoded snapshot fails Verify: " + err.Error()}
	}
	return g, d.alloc, nil
}

// decoder reads the body of an envelope with msgpack's streaming calls,
// checking every length before it allocates.
type decoder struct {
	data  []byte // the envelope without its trailer
	r     bytes.Reader
	dec   *msgpack.Decoder
	alloc int               // bytes allocated for the result, an upper estimate
	names map[string]string // shared names decoded so far
	arena []byte            // the block strings are copied into
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
	if v := binary.BigEndian.Uint16(data[len(magic):]); v != FormatVersion {
		return nil, fmt.Errorf("%w: %s has version %d, this build reads %d", ErrFormatVersion, what, v, FormatVersion)
	}
	d := &decoder{data: body}
	d.r.Reset(body)
	if _, err := d.r.Seek(headerSize, io.SeekStart); err != nil {
		return nil, err
	}
	// bytes.Reader is an io.ByteScanner, so the msgpack decoder reads it
	// directly, without buffering ahead: d.off stays exact.
	d.dec = msgpack.NewDecoder(&d.r)
	return d, nil
}

func (d *decoder) off() int64 { return int64(len(d.data) - d.r.Len()) }

func (d *decoder) corrupt(off int64, format string, args ...any) error {
	return &CorruptError{Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// failed turns an error of the msgpack decoder into a CorruptError.
func (d *decoder) failed(off int64, what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return d.corrupt(off, "truncated in %s", what)
	}
	return d.corrupt(off, "%s: %v", what, err)
}

// peek returns the msgpack code of the next value. It reads the input
// directly: the msgpack decoder reads the same bytes.Reader without
// buffering, so the next byte is the next value's.
func (d *decoder) peek(what string) (byte, error) {
	off := d.off()
	if off >= int64(len(d.data)) {
		return 0, d.corrupt(off, "truncated in %s", what)
	}
	return d.data[off], nil
}

// end checks that the body has been read to its last byte.
func (d *decoder) end() error {
	if n := d.r.Len(); n > 0 {
		return d.corrupt(d.off(), "%d bytes after the end of the body", n)
	}
	return nil
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

// tuple reads the header of an array that must have n elements.
func (d *decoder) tuple(n int, what string) error {
	off := d.off()
	c, err := d.peek(what)
	if err != nil {
		return err
	}
	if !isArray(c) {
		return d.corrupt(off, "%s: want an array, got msgpack code %#02x", what, c)
	}
	k, err := d.dec.DecodeArrayLen()
	if err != nil {
		return d.failed(off, what, err)
	}
	if k != n {
		return d.corrupt(off, "%s: want %d fields, got %d", what, n, k)
	}
	return nil
}

// array reads the length of an array of at most limit elements, each
// encoded in at least minSize bytes, and charges mem bytes per element.
func (d *decoder) array(what string, limit, minSize, mem int) (int, error) {
	off := d.off()
	c, err := d.peek(what)
	if err != nil {
		return 0, err
	}
	if !isArray(c) {
		return 0, d.corrupt(off, "%s: want an array, got msgpack code %#02x", what, c)
	}
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return 0, d.failed(off, what, err)
	}
	if n > limit {
		return 0, d.corrupt(off, "%s: %d elements, more than the limit of %d", what, n, limit)
	}
	if rest := d.r.Len(); n > rest/minSize {
		return 0, d.corrupt(off, "%s: %d elements cannot fit in the %d bytes left", what, n, rest)
	}
	d.alloc += n * mem
	return n, nil
}

func (d *decoder) uint(what string) (uint64, error) {
	off := d.off()
	c, err := d.peek(what)
	if err != nil {
		return 0, err
	}
	if !msgpcode.IsFixedNum(c) || c >= msgpcode.NegFixedNumLow {
		switch c {
		case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64:
		default:
			return 0, d.corrupt(off, "%s: want an unsigned integer, got msgpack code %#02x", what, c)
		}
	}
	n, err := d.dec.DecodeUint64()
	if err != nil {
		return 0, d.failed(off, what, err)
	}
	return n, nil
}

func (d *decoder) int(what string) (int64, error) {
	off := d.off()
	c, err := d.peek(what)
	if err != nil {
		return 0, err
	}
	if !msgpcode.IsFixedNum(c) {
		switch c {
		case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		case msgpcode.Uint64:
			n, err := d.dec.DecodeUint64()
			if err != nil {
				return 0, d.failed(off, what, err)
			}
			if n > math.MaxInt64 {
				return 0, d.corrupt(off, "%s: %d overflows int64", what, n)
			}
			return int64(n), nil
		default:
			return 0, d.corrupt(off, "%s: want an integer, got msgpack code %#02x", what, c)
		}
	}
	n, err := d.dec.DecodeInt64()
	if err != nil {
		return 0, d.failed(off, what, err)
	}
	return n, nil
}

func (d *decoder) bool(what string) (bool, error) {
	off := d.off()
	c, err := d.peek(what)
	if err != nil {
		return false, err
	}
	if c != msgpcode.True && c != msgpcode.False {
		return false, d.corrupt(off, "%s: want a bool, got msgpack code %#02x", what, c)
	}
	if _, err := d.dec.DecodeBool(); err != nil {
		return false, d.failed(off, what, err)
	}
	return c == msgpcode.True, nil
}

// raw reads a msgpack string (str) or byte string (bin, or nil, read as a
// nil slice) of at most limit bytes and returns it without copying.
func (d *decoder) raw(what string, str bool, limit int) ([]byte, error) {
	off := d.off()
	c, err := d.peek(what)
	if err != nil {
		return nil, err
	}
	switch {
	case str && msgpcode.IsString(c):
	case !str && msgpcode.IsBin(c):
	case !str && c == msgpcode.Nil:
		if _, err := d.dec.DecodeBytesLen(); err != nil {
			return nil, d.failed(off, what, err)
		}
		return nil, nil
	default:
		kind := "a byte string"
		if str {
			kind = "a string"
		}
		return nil, d.corrupt(off, "%s: want %s, got msgpack code %#02x", what, kind, c)
	}
	n, err := d.dec.DecodeBytesLen()
	if err != nil {
		return nil, d.failed(off, what, err)
	}
	if n > limit {
		return nil, d.corrupt(off, "%s: %d bytes, more than the limit of %d", what, n, limit)
	}
	if n > d.r.Len() {
		return nil, d.corrupt(off, "%s: %d bytes, but only %d left", what, n, d.r.Len())
	}
	start := d.off()
	if _, err := d.r.Seek(int64(n), io.SeekCurrent); err != nil {
		return nil, d.failed(off, what, err)
	}
	return d.data[start : start+int64(n) : start+int64(n)], nil
}

// name reads a string of at most MaxNameSize bytes. A shared name (a kind
// or a message type, which repeat) is looked up among those decoded before.
func (d *decoder) name(what string, shared bool) (string, error) {
	b, err := d.raw(what, true, MaxNameSize)
	if err != nil {
		return "", err
	}
	if !shared {
		return d.string(b), nil
	}
	if s, ok := d.names[string(b)]; ok {
		return s, nil
	}
	s := d.string(b)
	if len(d.names) < maxShared {
		if d.names == nil {
			d.names = make(map[string]string)
		}
		d.names[s] = s
		d.alloc += internMem
	}
	return s, nil
}

// string copies b, just read, into the decoder's arena: blocks holding
// many names, so that a snapshot's names cost a few allocations rather
// than one each. A block is only appended to, so the strings made from it
// never change.
func (d *decoder) string(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(d.arena)+len(b) > cap(d.arena) {
		// No block is larger than what is left to read could fill.
		size := max(len(b), min(arenaBlock, d.r.Len()+len(b)))
		d.arena = make([]byte, 0, size)
		d.alloc += size
	}
	start := len(d.arena)
	d.arena = append(d.arena, b...)
	return unsafe.String(&d.arena[start], len(b))
}

func (d *decoder) time(what string) (time.Time, error) {
	sec, err := d.int(what + " seconds")
	if err != nil {
		return time.Time{}, err
	}
	off := d.off()
	nsec, err := d.uint(what + " nanoseconds")
	if err != nil {
		return time.Time{}, err
	}
	if nsec >= uint64(time.Second) {
		return time.Time{}, d.corrupt(off, "%s nanoseconds: %d, want less than 1e9", what, nsec)
	}
	return time.Unix(sec, int64(nsec)).UTC(), nil
}

func (d *decoder) global() (*snapshot.Global, error) {
	if err := d.tuple(8, "snapshot"); err != nil {
		return nil, err
	}
	g := &snapshot.Global{}
	off := d.off()
	id, err := d.uint("snapshot id")
	if err != nil {
		return nil, err
	}
	if id == 0 {
		return nil, d.corrupt(off, "snapshot id is 0")
	}
	g.ID = snapshot.SnapshotID(id)
	off = d.off()
	mode, err := d.uint("mode")
	if err != nil {
		return nil, err
	}
	if mode > math.MaxUint8 {
		return nil, d.corrupt(off, "mode %d out of range", mode)
	}
	g.Mode = snapshot.Mode(mode)
	if g.Start, err = d.time("start"); err != nil {
		return nil, err
	}
	if g.End, err = d.time("end"); err != nil {
		return nil, err
	}
	n, err := d.array("participants", MaxParticipants, minParticipantSize, participantMem)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		g.Participants = make([]snapshot.Participant, n)
	}
	for i := range g.Participants {
		p := &g.Participants[i]
		if err := d.tuple(4, "participant"); err != nil {
			return nil, err
		}
		id, err := d.name("process id", false)
		if err != nil {
			return nil, err
		}
		p.ID = snapshot.ProcessID(id)
		if p.Kind, err = d.name("kind", true); err != nil {
			return nil, err
		}
		if p.State, err = d.raw("state", false, MaxStateSize); err != nil {
			return nil, err
		}
		if p.Departed, err = d.bool("departed"); err != nil {
			return nil, err
		}
	}
	if n, err = d.array("channels", MaxChannels, minChannelSize, channelMem); err != nil {
		return nil, err
	}
	if n > 0 {
		g.Channels = make([]snapshot.ChannelState, n)
	}
	total := 0
	for i := range g.Channels {
		c := &g.Channels[i]
		if err := d.tuple(5, "channel"); err != nil {
			return nil, err
		}
		from, err := d.name("channel sender", false)
		if err != nil {
			return nil, err
		}
		to, err := d.name("channel receiver", false)
		if err != nil {
			return nil, err
		}
		c.Channel = snapshot.Channel{From: snapshot.ProcessID(from), To: snapshot.ProcessID(to)}
		if c.Sent, err = d.uint("sent count"); err != nil {
			return nil, err
		}
		if c.Received, err = d.uint("received count"); err != nil {
			return nil, err
		}
		k, err := d.array("messages", MaxMessages-total, minMessageSize, messageMem)
		if err != nil {
			return nil, err
		}
		total += k
		if k > 0 {
			c.Messages = make([]snapshot.Message, k)
		}
		for j := range c.Messages {
			if err := d.tuple(2, "message"); err != nil {
				return nil, err
			}
			var rm RecordedMessage
			if rm.Type, err = d.name("message type", true); err != nil {
				return nil, err
			}
			if rm.Data, err = d.raw("message data", false, MaxMessageSize); err != nil {
				return nil, err
			}
			c.Messages[j] = snapshot.Message{Seq: c.Received + 1 + uint64(j), Payload: rm}
		}
	}
	return g, nil
}
