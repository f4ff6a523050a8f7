package persistence

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/actorsnap/actorsnap/snapshot"
)

// FormatVersion is the version of the stored format this build writes. It
// is stored in every encoded snapshot and manifest. This build reads it and
// versions 1 to 4 (see the package documentation for each); bytes of
// another version are refused with ErrFormatVersion.
const FormatVersion = 5

// minFormatVersion is the oldest version this build reads.
const minFormatVersion = 1

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
	// MaxNameSize bounds a process id, a kind, a message type name, the
	// type of a wait and the name of an invariant, in bytes.
	MaxNameSize = 1 << 16
	// MaxStateSize bounds one participant's state, in bytes.
	MaxStateSize = 1 << 26
	// MaxMessageSize bounds one message's data, in bytes.
	MaxMessageSize = 1 << 26
	// MaxWaits bounds the wait-for edges of one participant.
	MaxWaits = 1 << 16
	// MaxWaitsTotal bounds the wait-for edges of one snapshot, over all
	// its participants.
	MaxWaitsTotal = 1 << 24
	// MaxViolations bounds the violations of one snapshot.
	MaxViolations = 1 << 16
	// MaxViolationSize bounds the error text of one violation, in bytes.
	MaxViolationSize = 1 << 20
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
	minWaitsSize       = 4 // fixarray, bool, bool, fixarray
	minWaitSize        = 6 // fixarray, fixint, fixint, fixstr, fixint, fixint
	minViolationSize   = 3 // fixarray, fixstr, fixstr
	participantMem     = int(unsafe.Sizeof(snapshot.Participant{}))
	channelMem         = int(unsafe.Sizeof(snapshot.ChannelState{}))
	messageMem         = int(unsafe.Sizeof(snapshot.Message{}))
	waitsMem           = int(unsafe.Sizeof(snapshot.Waits{}))
	waitMem            = int(unsafe.Sizeof(snapshot.Wait{}))
	violationMem       = int(unsafe.Sizeof(snapshot.Violation{}))
	targetMem          = int(unsafe.Sizeof(target{}))
	internMem          = 48 // a map entry of the decoder's shared names
	maxShared          = 1024
	arenaBlock         = 32 << 10
	// Message payloads are boxed in blocks of boxBlock (see
	// decoder.box), each of at most one payload per minBoxedSize bytes
	// left to read: twice the smallest message, so that the unused end of
	// the last block costs less than the payloads of the messages that
	// could fill it.
	boxMem       = int(unsafe.Sizeof(RecordedMessage{}))
	boxBlock     = 256
	minBoxedSize = 2 * minMessageSize
)

// EncodeGlobal returns the stored form of g: the envelope (magic
// "ASNAPGLB", FormatVersion, CRC-32C) around a msgpack body. g must have a
// non-zero ID, pass Verify, hold only RecordedMessage payloads
// (ErrPayloadType) and stay within the format limits (ErrTooLarge).
func EncodeGlobal(g *snapshot.Global) ([]byte, error) {
	if err := checkSave(g); err != nil {
		return nil, err
	}
	e, err := encodeSplit(g, [2][]byte{}, false)
	if err != nil {
		return nil, err
	}
	// Unsplit and with no state referenced, the segments are one buffer
	// with room for the trailer, and the trailer.
	return append(e.segs[0], e.segs[1]...), nil
}

// minSplit is the smallest encoding worth splitting over two goroutines.
const minSplit = 256 << 10

// minRef is the size from which the file store's encoding refers to a
// state rather than copying it: the state is written to the file from
// the participant's own bytes, and one copy of every large state less
// is made per snapshot (for a simulation of 32 MB of state saved every
// second, about 30 ms of CPU each time).
const minRef = 32 << 10

// encoding is a snapshot's stored form: segs, one after the other. Most
// are parts of bufs, the buffers it was encoded into (kept for reuse);
// the others are states it refers to.
type encoding struct {
	segs [][]byte
	bufs [2][]byte
}

// size returns the number of bytes of e.
func (e *encoding) size() int {
	n := 0
	for _, s := range e.segs {
		n += len(s)
	}
	return n
}

// writeTo writes e to w: the small segments between referred states go
// out together, through a buffer, rather than a write each.
func (e *encoding) writeTo(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, s := range e.segs {
		if _, err := bw.Write(s); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// trailer returns e's trailer, its last trailerSize bytes: the last
// segment ends with it.
func (e *encoding) trailer() []byte {
	last := e.segs[len(e.segs)-1]
	return last[len(last)-trailerSize:]
}

// gather appends an encoding to b, cutting a segment at each state of at
// least ref bytes (none when ref is 0) to refer to the state as it is:
// segs and then b[from:] are what it encoded, in order. Appending to b
// may move b, which leaves the segments cut from it where they were.
type gather struct {
	b    []byte
	from int
	segs [][]byte
	ref  int
}

// bytes appends v as a bin, or nil for a nil v, referring to it when it
// is large.
func (g *gather) bytes(v []byte) {
	if g.ref == 0 || len(v) < g.ref {
		g.b = appendBytes(g.b, v)
		return
	}
	g.b = appendHead(g.b, uint64(len(v)), msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32)
	g.segs = append(g.segs, g.b[g.from:len(g.b):len(g.b)], v)
	g.from = len(g.b)
}

// done returns the segments, the last one what b holds after the last
// reference.
func (g *gather) done() [][]byte { return append(g.segs, g.b[g.from:]) }

// referred returns how many bytes of ps's states the encoding refers to
// with ref.
func referred(ps []snapshot.Participant, ref int) int {
	n := 0
	for i := range ps {
		if ref > 0 && len(ps[i].State) >= ref {
			n += len(ps[i].State)
		}
	}
	return n
}

// encodeSplit encodes g, which passed checkSave or is being checked
// meanwhile: it does not fail on what checkSave refuses (a payload of
// another type is encoded as an empty RecordedMessage), so that Save can
// check and encode at once, and throw the encoding away if the check
// fails. With split (the file store), states of at least minRef bytes are
// referred to, not copied, and a large snapshot is encoded in two pieces
// at once on two goroutines: the first ends after about half the encoded
// size's worth of participants (all of them when the channels are the
// larger half); otherwise the second is the trailer alone. The trailer's
// checksum runs over all. bufs are reused when they have room.
func encodeSplit(g *snapshot.Global, bufs [2][]byte, split bool) (e encoding, err error) {
	size, err := encodedSizeBound(g)
	if err != nil {
		return e, err
	}
	ref := 0
	if split {
		ref = minRef
	}
	k, acc := 0, 0 // participants in the first piece, and their size bound
	if split && size >= minSplit {
		for ; k < len(g.Participants) && acc < size/2; k++ {
			acc += participantSizeBound(&g.Participants[k])
		}
	}
	// Each piece is sized once: its bound (the header's is in size's
	// slack) less the states it refers to, so no append reallocates.
	sized := func(b []byte, n int) []byte {
		if cap(b) < n {
			return make([]byte, 0, n)
		}
		return b[:0]
	}
	r0, r1 := referred(g.Participants[:k], ref), referred(g.Participants[k:], ref)
	n0, n1 := acc-r0+headerSize+64, size-acc-r1
	if k == 0 {
		n0, n1 = size-r1, trailerSize
	}
	p0, p1 := gather{b: sized(bufs[0], n0), ref: ref}, gather{b: sized(bufs[1], n1), ref: ref}
	rest := func(p *gather) {
		appendParticipants(p, g.Participants, k, len(g.Participants))
		p.b = appendGlobalTail(p.b, g)
	}
	var done chan struct{}
	if k > 0 {
		done = make(chan struct{})
		go func() {
			defer close(done)
			rest(&p1)
		}()
	}
	p0.b = appendGlobalHead(appendEnvelopeHeader(p0.b, globalMagic), g)
	appendParticipants(&p0, g.Participants, 0, k)
	if k > 0 {
		<-done
	} else {
		rest(&p0)
	}
	e.bufs = [2][]byte{p0.b, p1.b}
	e.segs = append(p0.done(), p1.done()...)
	if n := e.size() + trailerSize; n > MaxEncodedSize {
		return encoding{}, fmt.Errorf("%w: encoded size %d, more than %d", ErrTooLarge, n, MaxEncodedSize)
	}
	sum := uint32(0)
	for _, s := range e.segs {
		sum = crc32.Update(sum, castagnoli, s)
	}
	last := len(e.segs) - 1
	e.segs[last] = binary.BigEndian.AppendUint32(e.segs[last], sum)
	return e, nil
}

// participantSizeBound bounds the encoded size of p, as encodedSizeBound
// counts it.
func participantSizeBound(p *snapshot.Participant) int {
	const perItem = 16
	n := len(p.ID) + 5 + len(p.Kind) + 5 + len(p.State) + perItem
	if p.Waits != nil {
		n += waitsSizeBound(p.Waits)
	}
	return n
}

// waitsSizeBound bounds the encoded size of w: its array, two bools and
// the edges' array header, then per edge its array, the target (a name,
// or an index of at most 5 bytes), the request number (at most 9), the
// type and the instant (at most 9 and 5).
func waitsSizeBound(w *snapshot.Waits) int {
	n := 16
	for i := range w.Edges {
		e := &w.Edges[i]
		n += len(e.To) + 5 + 9 + len(e.Type) + 5 + 9 + 5 + 1
	}
	return n
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
	if g.ReceiverCounts {
		size += 2 * 9 * len(g.Participants) // two uint64s at most 9 bytes each
	}
	size += 1 + 2*9 // the sums: an array of two uint64s
	name := func(what, s string) error {
		if len(s) > MaxNameSize {
			return tooLarge(what+" size", len(s), MaxNameSize)
		}
		size += len(s) + 5
		return nil
	}
	waits := 0
	for i := range g.Participants {
		p := &g.Participants[i]
		if len(p.ID) > MaxNameSize {
			return 0, tooLarge("process id size", len(p.ID), MaxNameSize)
		}
		if len(p.Kind) > MaxNameSize {
			return 0, tooLarge("kind size", len(p.Kind), MaxNameSize)
		}
		if len(p.State) > MaxStateSize {
			return 0, tooLarge(fmt.Sprintf("state size of %s", p.ID), len(p.State), MaxStateSize)
		}
		if p.Waits != nil {
			if err := checkWaits(g.ID, p, &waits); err != nil {
				return 0, err
			}
		}
		size += participantSizeBound(p)
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
			rm, _ := m.Payload.(RecordedMessage) // see encodeSplit
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
	if len(g.Violations) > MaxViolations {
		return 0, tooLarge("violation count", len(g.Violations), MaxViolations)
	}
	for _, v := range g.Violations {
		if len(v.Invariant) > MaxNameSize {
			return 0, tooLarge("invariant name size", len(v.Invariant), MaxNameSize)
		}
		if len(v.Err) > MaxViolationSize {
			return 0, tooLarge(fmt.Sprintf("error size of violation %q", v.Invariant), len(v.Err), MaxViolationSize)
		}
		size += len(v.Invariant) + len(v.Err) + perItem
	}
	if size > MaxEncodedSize {
		return 0, tooLarge("encoded size", size, MaxEncodedSize)
	}
	return size, nil
}

// checkWaits checks p's waits against the format limits, adding their
// edges to total, the snapshot's count so far.
func checkWaits(id snapshot.SnapshotID, p *snapshot.Participant, total *int) error {
	edges := p.Waits.Edges
	if len(edges) > MaxWaits {
		return fmt.Errorf("%w: snapshot %d: wait-for edges of %s: %d, more than %d", ErrTooLarge, id, p.ID, len(edges), MaxWaits)
	}
	if *total += len(edges); *total > MaxWaitsTotal {
		return fmt.Errorf("%w: snapshot %d: wait-for edge count is %d, more than %d", ErrTooLarge, id, *total, MaxWaitsTotal)
	}
	for i := range edges {
		e := &edges[i]
		if len(e.To) > MaxNameSize || len(e.Type) > MaxNameSize {
			return fmt.Errorf("%w: snapshot %d: wait-for edge %d of %s: a name of %d bytes, more than %d", ErrTooLarge, id, i, p.ID, max(len(e.To), len(e.Type)), MaxNameSize)
		}
	}
	return nil
}

// appendGlobalHead appends what comes before the participants: the body's
// array header, the id, the mode, the instants and the participants'
// array header.
func appendGlobalHead(b []byte, g *snapshot.Global) []byte {
	b = appendArray(b, 12)
	b = appendUint(b, uint64(g.ID))
	b = appendUint(b, uint64(g.Mode))
	b = appendTime(b, g.Start)
	b = appendTime(b, g.End)
	return appendArray(b, len(g.Participants))
}

// appendParticipants appends ps[lo:hi], elements of the participants'
// array. A participant with waits has them as a fifth field; one without
// has four, so that waits cost nothing to a snapshot that has none. ps is
// whole, for the indices of the participants that waits name.
func appendParticipants(g *gather, ps []snapshot.Participant, lo, hi int) {
	for i := lo; i < hi; i++ {
		p := &ps[i]
		if p.Waits != nil {
			g.b = appendArray(g.b, 5)
		} else {
			g.b = appendArray(g.b, 4)
		}
		g.b = appendString(g.b, string(p.ID))
		g.b = appendString(g.b, p.Kind)
		g.bytes(p.State)
		g.b = appendBool(g.b, p.Departed)
		if p.Waits != nil {
			g.b = appendWaits(g.b, p.Waits, ps)
		}
	}
}

// appendWaits appends w as [any, timer, [[to, request, type, since
// seconds, since nanoseconds], ...]]. An edge's target is the index of
// its participant in ps when it is one (if ps is not sorted, checkSave is
// refusing it meanwhile and the encoding is thrown away), else its name.
func appendWaits(b []byte, w *snapshot.Waits, ps []snapshot.Participant) []byte {
	b = appendArray(b, 3)
	b = appendBool(b, w.Any)
	b = appendBool(b, w.Timer)
	b = appendArray(b, len(w.Edges))
	for i := range w.Edges {
		e := &w.Edges[i]
		b = appendArray(b, 5)
		if to := participantIndex(ps, e.To); to >= 0 {
			b = appendUint(b, uint64(to))
		} else {
			b = appendString(b, string(e.To))
		}
		b = appendUint(b, e.Request)
		b = appendString(b, e.Type)
		b = appendTime(b, e.Since)
	}
	return b
}

// appendGlobalTail appends what follows the participants: the in-flight
// count, the channels, the violations, the receiver counts and the sums. A channel's ends are written as indices into the
// participants when they are participants, found by a cursor (channels are
// sorted by sender) and a binary search; if g is not sorted (checkSave is
// refusing it meanwhile) the indices are wrong, and the encoding is thrown
// away.
func appendGlobalTail(b []byte, g *snapshot.Global) []byte {
	b = appendUint(b, uint64(g.TotalInFlight()))
	b = appendArray(b, len(g.Channels))
	ps := g.Participants
	from := 0 // a cursor into ps
	for i := range g.Channels {
		c := &g.Channels[i]
		b = appendArray(b, 5)
		for from < len(ps) && ps[from].ID < c.Channel.From {
			from++
		}
		if from < len(ps) && ps[from].ID == c.Channel.From {
			b = appendUint(b, uint64(from))
		} else {
			b = appendString(b, string(c.Channel.From))
		}
		if to := participantIndex(ps, c.Channel.To); to >= 0 {
			b = appendUint(b, uint64(to))
		} else {
			b = appendString(b, string(c.Channel.To))
		}
		b = appendUint(b, c.Sent)
		b = appendUint(b, c.Received)
		// Sequence numbers are not stored: Verify holds them to
		// Received+1 onwards.
		b = appendArray(b, len(c.Messages))
		for _, m := range c.Messages {
			rm, _ := m.Payload.(RecordedMessage)
			b = appendArray(b, 2)
			b = appendString(b, rm.Type)
			b = appendBytes(b, rm.Data)
		}
	}
	b = appendArray(b, len(g.Violations))
	for _, v := range g.Violations {
		b = appendArray(b, 2)
		b = appendString(b, v.Invariant)
		b = appendString(b, v.Err)
	}
	if !g.ReceiverCounts {
		b = append(b, msgpcode.Nil)
	} else {
		b = appendArray(b, 2*len(ps))
		for i := range ps {
			b = appendUint(appendUint(b, ps[i].SentTo), ps[i].Received)
		}
	}
	if g.Sums == nil {
		return append(b, msgpcode.Nil)
	}
	return appendUint(appendUint(appendArray(b, 2), g.Sums.Sent), g.Sums.Received)
}

// The encoder appends msgpack by hand to a buffer that the caller keeps in
// a local variable (no store to the heap, so no write barrier, per value):
// the same bytes as the msgpack package writes (the smallest form of each
// integer, length and string), without its per-call interface and
// reflection.

// appendEnvelopeHeader appends the header of an envelope: its magic and
// the format version.
func appendEnvelopeHeader(b []byte, magic [8]byte) []byte {
	return binary.BigEndian.AppendUint16(append(b, magic[:]...), FormatVersion)
}

// appendHead appends a header: the code and n in 1, 2 or 4 bytes, as n
// needs.
func appendHead(b []byte, n uint64, c8, c16, c32 byte) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(b, c8, byte(n))
	case n <= math.MaxUint16:
		return append(b, c16, byte(n>>8), byte(n))
	default:
		return append(b, c32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendArray(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, msgpcode.FixedArrayLow|byte(n))
	case n <= math.MaxUint16:
		return append(b, msgpcode.Array16, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Array32), uint32(n))
	}
}

func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint32:
		return appendHead(b, n, msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32)
	default:
		return binary.BigEndian.AppendUint64(append(b, msgpcode.Uint64), n)
	}
}

func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= -32: // a negative fixnum
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, msgpcode.Int8, byte(n))
	case n >= math.MinInt16:
		return append(b, msgpcode.Int16, byte(n>>8), byte(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Int32), uint32(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, msgpcode.Int64), uint64(n))
	}
}

func appendString(b []byte, s string) []byte {
	if len(s) < 32 {
		b = append(b, msgpcode.FixedStrLow|byte(len(s)))
	} else {
		b = appendHead(b, uint64(len(s)), msgpcode.Str8, msgpcode.Str16, msgpcode.Str32)
	}
	return append(b, s...)
}

// appendBytes appends v as a bin, or nil for a nil v.
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, msgpcode.Nil)
	}
	return append(appendHead(b, uint64(len(v)), msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32), v...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, msgpcode.True)
	}
	return append(b, msgpcode.False)
}

// appendTime appends t as Unix seconds and nanoseconds; the location and
// the monotonic reading are not kept.
func appendTime(b []byte, t time.Time) []byte {
	return appendUint(appendInt(b, t.Unix()), uint64(t.Nanosecond()))
}

// sealEnvelope appends the trailer to an envelope.
func sealEnvelope(b []byte) ([]byte, error) {
	if len(b)+trailerSize > MaxEncodedSize {
		return nil, fmt.Errorf("%w: encoded size %d, more than %d", ErrTooLarge, len(b)+trailerSize, MaxEncodedSize)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}
