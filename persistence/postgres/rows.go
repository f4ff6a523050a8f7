package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// rowFormat is the version of the row layout and checksums this build
// writes, stored in each header row. It reads it and formats 1 to 3:
// none of them keeps sums, formats 1 and 2 keep no receiver counts, and
// format 1 has no waits and no violations. A snapshot of another format
// is listed but refused by Load with persistence.ErrFormatVersion.
const rowFormat = 4

// formatSchema is, for each row format, the schema version whose tables
// first hold it.
var formatSchema = [rowFormat + 1]int{1: 1, 2: 3, 3: 5, 4: 6}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Row kinds, the first byte of each row's checksummed encoding, so that a
// row of one table cannot pass for a row of another.
const (
	tagHeader      = 'h'
	tagParticipant = 'p'
	tagChannel     = 'c'
	tagMessage     = 'm'
	tagWait        = 'w'
	tagViolation   = 'v'
)

// hasher computes the CRC-32C of a row's canonical encoding (see the
// package documentation): fixed-size big-endian numbers, byte strings as
// a uint32 length and the bytes, a NULL as the length 0xffffffff. Small
// fields are gathered in buf; large byte strings are summed in place, not
// copied.
type hasher struct {
	crc uint32
	buf []byte
	// mac, if set, is written every byte the checksum covers: a row
	// hasher's MAC is the snapshot's, over all its rows in order.
	mac *persistence.MAC
}

const hashInPlace = 256

func (h *hasher) reset() { h.crc, h.buf = 0, h.buf[:0] }

func (h *hasher) u8(v byte)    { h.buf = append(h.buf, v) }
func (h *hasher) u32(v uint32) { h.buf = binary.BigEndian.AppendUint32(h.buf, v) }
func (h *hasher) u64(v uint64) { h.buf = binary.BigEndian.AppendUint64(h.buf, v) }

func (h *hasher) flush() {
	h.crc = crc32.Update(h.crc, castagnoli, h.buf)
	if h.mac != nil {
		h.mac.Write(h.buf)
	}
	h.buf = h.buf[:0]
}

// bytes adds b as a byte string; nil is NULL, distinct from empty.
func (h *hasher) bytes(b []byte) {
	if b == nil {
		h.u32(math.MaxUint32)
		return
	}
	h.u32(uint32(len(b)))
	if len(b) < hashInPlace {
		h.buf = append(h.buf, b...)
		return
	}
	h.flush()
	h.crc = crc32.Update(h.crc, castagnoli, b)
	if h.mac != nil {
		h.mac.Write(b)
	}
}

func (h *hasher) sum() uint32 {
	h.flush()
	return h.crc
}

// header is a snapshot's row of the snapshots table.
type header struct {
	id                     int64
	format, mode           int16
	startSec, endSec       int64
	startNsec, endNsec     int32
	participants, channels int32
	messages               int32
	waits, violations      int32               // 0 in format 1
	receiverCounts         bool                // false before format 3
	sums                   *snapshot.SumCounts // Global.Sums; nil before format 4
	checksum               int64
	complete               bool
	// Whether the waits and violations tables hold rows of the snapshot,
	// read with the header so that a snapshot without any costs no
	// query of its own to check that none are astray.
	strayWaits, strayViolations bool
}

func newHeader(g *snapshot.Global) header {
	return header{
		id:             int64(g.ID),
		format:         rowFormat,
		mode:           int16(g.Mode),
		startSec:       g.Start.Unix(),
		startNsec:      int32(g.Start.Nanosecond()),
		endSec:         g.End.Unix(),
		endNsec:        int32(g.End.Nanosecond()),
		participants:   int32(len(g.Participants)),
		channels:       int32(len(g.Channels)),
		messages:       int32(g.TotalInFlight()),
		waits:          int32(totalWaits(g)),
		violations:     int32(len(g.Violations)),
		receiverCounts: g.ReceiverCounts,
		sums:           g.Sums,
	}
}

// totalWaits returns the number of wait-for edges of g's participants.
func totalWaits(g *snapshot.Global) int {
	n := 0
	for i := range g.Participants {
		if w := g.Participants[i].Waits; w != nil {
			n += len(w.Edges)
		}
	}
	return n
}

// newHeaderSum starts the header's checksum: its own columns, to which
// the checksum of every row is added in order (participants, channels,
// messages and, from format 2, waits and violations).
func newHeaderSum(h header) *hasher {
	return &hasher{buf: h.appendColumns(make([]byte, 0, 128))}
}

// appendColumns appends the header's canonical encoding, which its
// checksum and the snapshot's MAC start with: the tag, the id, format,
// mode, instants and counts (from format 2 the counts of waits and
// violations too), from format 3 the receiver_counts flag, and in format
// 4 the sums: a byte, 0 for none, else 1 followed by sum_sent and
// sum_received.
func (h *header) appendColumns(b []byte) []byte {
	b = append(b, tagHeader)
	b = binary.BigEndian.AppendUint64(b, uint64(h.id))
	b = binary.BigEndian.AppendUint16(b, uint16(h.format))
	b = binary.BigEndian.AppendUint16(b, uint16(h.mode))
	b = binary.BigEndian.AppendUint64(b, uint64(h.startSec))
	b = binary.BigEndian.AppendUint32(b, uint32(h.startNsec))
	b = binary.BigEndian.AppendUint64(b, uint64(h.endSec))
	b = binary.BigEndian.AppendUint32(b, uint32(h.endNsec))
	b = binary.BigEndian.AppendUint32(b, uint32(h.participants))
	b = binary.BigEndian.AppendUint32(b, uint32(h.channels))
	b = binary.BigEndian.AppendUint32(b, uint32(h.messages))
	if h.format >= 2 {
		b = binary.BigEndian.AppendUint32(b, uint32(h.waits))
		b = binary.BigEndian.AppendUint32(b, uint32(h.violations))
	}
	if h.format >= 3 {
		b = append(b, b2u(h.receiverCounts))
	}
	if h.format >= 4 {
		if h.sums == nil {
			return append(b, 0)
		}
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, h.sums.Sent)
		b = binary.BigEndian.AppendUint64(b, h.sums.Received)
	}
	return b
}

// sumColumns returns the values of sum_sent and sum_received: the bits of
// the sums (bigint has no unsigned form), both nil (NULL) without them.
func (h *header) sumColumns() (sent, received *int64) {
	if h.sums == nil {
		return nil, nil
	}
	s, r := int64(h.sums.Sent), int64(h.sums.Received)
	return &s, &r
}

// pgLayout names the rows' form in MACs (see persistence.Keyring.Sign).
const pgLayout = "postgres"

// add adds a row's checksum to the header's, flushing now and then so
// that buf stays small.
func (h *hasher) add(crc uint32) {
	h.u32(crc)
	if len(h.buf) >= 1024 {
		h.flush()
	}
}

// participantSum is the checksum of a participant's row. From format 2
// it covers the row's waits too, as waitFlags gives them, and in format 3
// its receiver counts.
func participantSum(h *hasher, format int16, id int64, ord int32, process, kind, state []byte, departed bool, waits byte, sentTo, received uint64) uint32 {
	h.reset()
	h.u8(tagParticipant)
	h.u64(uint64(id))
	h.u32(uint32(ord))
	h.bytes(process)
	h.bytes(kind)
	h.bytes(state)
	h.u8(b2u(departed))
	if format >= 2 {
		h.u8(waits)
	}
	if format >= 3 {
		h.u64(sentTo)
		h.u64(received)
	}
	return h.sum()
}

// waitFlags encodes a participant's wait_any and wait_timer for its
// checksum: 0 for none (both NULL), else 1, plus 2 for any and 4 for
// timer.
func waitFlags(w *snapshot.Waits) byte {
	if w == nil {
		return 0
	}
	return 1 | b2u(w.Any)<<1 | b2u(w.Timer)<<2
}

func waitSum(h *hasher, id int64, participant, ord int32, target []byte, request uint64, typ []byte, sinceSec int64, sinceNsec int32) uint32 {
	h.reset()
	h.u8(tagWait)
	h.u64(uint64(id))
	h.u32(uint32(participant))
	h.u32(uint32(ord))
	h.bytes(target)
	h.u64(request)
	h.bytes(typ)
	h.u64(uint64(sinceSec))
	h.u32(uint32(sinceNsec))
	return h.sum()
}

func violationSum(h *hasher, id int64, ord int32, invariant, err []byte) uint32 {
	h.reset()
	h.u8(tagViolation)
	h.u64(uint64(id))
	h.u32(uint32(ord))
	h.bytes(invariant)
	h.bytes(err)
	return h.sum()
}

func channelSum(h *hasher, id int64, ord int32, sender, receiver []byte, sent, received uint64) uint32 {
	h.reset()
	h.u8(tagChannel)
	h.u64(uint64(id))
	h.u32(uint32(ord))
	h.bytes(sender)
	h.bytes(receiver)
	h.u64(sent)
	h.u64(received)
	return h.sum()
}

func messageSum(h *hasher, id int64, channel, ord int32, typ, data []byte) uint32 {
	h.reset()
	h.u8(tagMessage)
	h.u64(uint64(id))
	h.u32(uint32(channel))
	h.u32(uint32(ord))
	h.bytes(typ)
	h.bytes(data)
	return h.sum()
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// empty is the non-nil empty byte string: a NOT NULL bytea column's
// value for an empty string.
var empty = []byte{}

// strBytes returns the bytes of s without copying them. pgx and the
// hasher only read them.
func strBytes(s string) []byte {
	if s == "" {
		return empty
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// The columns each COPY writes, in the order of the rows' values.
var (
	participantColumns = []string{"snapshot_id", "ord", "process", "kind", "state", "departed", "wait_any", "wait_timer", "sent_to", "received", "crc"}
	channelColumns     = []string{"snapshot_id", "ord", "sender", "receiver", "sent", "received", "crc"}
	messageColumns     = []string{"snapshot_id", "channel_ord", "ord", "type", "data", "crc"}
	waitColumns        = []string{"snapshot_id", "participant_ord", "ord", "target", "request", "type", "since_sec", "since_nsec", "crc"}
	violationColumns   = []string{"snapshot_id", "ord", "invariant", "err", "crc"}
)

// Cells of a row being copied. pgx encodes a value through the interface
// it implements; a pointer to a cell implements it without boxing, so a
// row costs no allocation (a pointer to a plain int64 would: pgx
// dereferences it by reflection).
type (
	intCell      struct{ v int64 }
	boolCell     struct{ v bool }
	nullBoolCell struct{ v, valid bool } // NULL unless valid
	bytesCell    struct{ v []byte }      // nil is NULL
)

func (c *intCell) Int64Value() (pgtype.Int8, error) { return pgtype.Int8{Int64: c.v, Valid: true}, nil }
func (c *boolCell) BoolValue() (pgtype.Bool, error) { return pgtype.Bool{Bool: c.v, Valid: true}, nil }
func (c *nullBoolCell) BoolValue() (pgtype.Bool, error) {
	return pgtype.Bool{Bool: c.v, Valid: c.valid}, nil
}
func (c *bytesCell) BytesValue() ([]byte, error) { return c.v, nil }

// participantRows is the pgx.CopyFromSource of a snapshot's participants.
// It reads them from the Global one at a time, computing each row's
// checksum as it goes; pgx encodes each row into its send buffer before
// asking for the next, so nothing holds a second copy of all the states.
// The values are the row's cells, set up once.
type participantRows struct {
	g    *snapshot.Global
	sum  *hasher
	h    hasher
	i    int
	vals []any
	row  struct {
		id, ord, sentTo, received, crc intCell
		process, kind, state           bytesCell
		departed                       boolCell
		waitAny, waitTimer             nullBoolCell
	}
}

func (r *participantRows) Next() bool {
	if r.i >= len(r.g.Participants) {
		return false
	}
	if r.vals == nil {
		w := &r.row
		r.vals = []any{&w.id, &w.ord, &w.process, &w.kind, &w.state, &w.departed, &w.waitAny, &w.waitTimer, &w.sentTo, &w.received, &w.crc}
	}
	p, w := &r.g.Participants[r.i], &r.row
	w.id.v, w.ord.v = int64(r.g.ID), int64(r.i)
	w.process.v, w.kind.v, w.state.v, w.departed.v = strBytes(string(p.ID)), strBytes(p.Kind), p.State, p.Departed
	w.waitAny, w.waitTimer = nullBoolCell{}, nullBoolCell{}
	if p.Waits != nil {
		w.waitAny = nullBoolCell{v: p.Waits.Any, valid: true}
		w.waitTimer = nullBoolCell{v: p.Waits.Timer, valid: true}
	}
	// A participant's counts are kept only when the snapshot keeps
	// receiver counts (see snapshot.Participant); otherwise the row holds
	// 0, as Load requires. They are stored as their bits: bigint has no
	// unsigned form.
	var sentTo, received uint64
	if r.g.ReceiverCounts {
		sentTo, received = p.SentTo, p.Received
	}
	w.sentTo.v, w.received.v = int64(sentTo), int64(received)
	crc := participantSum(&r.h, rowFormat, w.id.v, int32(r.i), w.process.v, w.kind.v, p.State, p.Departed, waitFlags(p.Waits), sentTo, received)
	r.sum.add(crc)
	w.crc.v = int64(crc)
	r.i++
	return true
}

func (r *participantRows) Values() ([]any, error) { return r.vals, nil }
func (r *participantRows) Err() error             { return nil }

// channelRows is the pgx.CopyFromSource of a snapshot's channels.
type channelRows struct {
	g    *snapshot.Global
	sum  *hasher
	h    hasher
	i    int
	vals []any
	row  struct {
		id, ord, sent, received, crc intCell
		sender, receiver             bytesCell
	}
}

func (r *channelRows) Next() bool {
	if r.i >= len(r.g.Channels) {
		return false
	}
	if r.vals == nil {
		w := &r.row
		r.vals = []any{&w.id, &w.ord, &w.sender, &w.receiver, &w.sent, &w.received, &w.crc}
	}
	c, w := &r.g.Channels[r.i], &r.row
	w.id.v, w.ord.v = int64(r.g.ID), int64(r.i)
	w.sender.v, w.receiver.v = strBytes(string(c.Channel.From)), strBytes(string(c.Channel.To))
	// The counters are stored as their bits: bigint has no unsigned form.
	w.sent.v, w.received.v = int64(c.Sent), int64(c.Received)
	crc := channelSum(&r.h, w.id.v, int32(r.i), w.sender.v, w.receiver.v, c.Sent, c.Received)
	r.sum.add(crc)
	w.crc.v = int64(crc)
	r.i++
	return true
}

func (r *channelRows) Values() ([]any, error) { return r.vals, nil }
func (r *channelRows) Err() error             { return nil }

// messageRows is the pgx.CopyFromSource of a snapshot's messages in
// flight, channel by channel in FIFO order. A message's sequence number
// is not stored: Verify holds it to the channel's received count + 1 +
// its position.
type messageRows struct {
	g    *snapshot.Global
	sum  *hasher
	h    hasher
	c, j int
	vals []any
	row  struct {
		id, channel, ord, crc intCell
		typ, data             bytesCell
	}
}

func (r *messageRows) Next() bool {
	for r.c < len(r.g.Channels) && r.j >= len(r.g.Channels[r.c].Messages) {
		r.c, r.j = r.c+1, 0
	}
	if r.c >= len(r.g.Channels) {
		return false
	}
	if r.vals == nil {
		w := &r.row
		r.vals = []any{&w.id, &w.channel, &w.ord, &w.typ, &w.data, &w.crc}
	}
	rm := r.g.Channels[r.c].Messages[r.j].Payload.(persistence.RecordedMessage) // checked by checkSave
	w := &r.row
	w.id.v, w.channel.v, w.ord.v = int64(r.g.ID), int64(r.c), int64(r.j)
	w.typ.v, w.data.v = strBytes(rm.Type), rm.Data
	crc := messageSum(&r.h, w.id.v, int32(r.c), int32(r.j), w.typ.v, rm.Data)
	r.sum.add(crc)
	w.crc.v = int64(crc)
	r.j++
	return true
}

func (r *messageRows) Values() ([]any, error) { return r.vals, nil }
func (r *messageRows) Err() error             { return nil }

// waitRows is the pgx.CopyFromSource of a snapshot's wait-for edges,
// participant by participant, each's in order. A target is stored by
// name, whether it is a participant or not.
type waitRows struct {
	g    *snapshot.Global
	sum  *hasher
	h    hasher
	p, j int
	vals []any
	row  struct {
		id, participant, ord, request, sinceSec, sinceNsec, crc intCell
		target, typ                                             bytesCell
	}
}

func (r *waitRows) Next() bool {
	ps := r.g.Participants
	for r.p < len(ps) && (ps[r.p].Waits == nil || r.j >= len(ps[r.p].Waits.Edges)) {
		r.p, r.j = r.p+1, 0
	}
	if r.p >= len(ps) {
		return false
	}
	if r.vals == nil {
		w := &r.row
		r.vals = []any{&w.id, &w.participant, &w.ord, &w.target, &w.request, &w.typ, &w.sinceSec, &w.sinceNsec, &w.crc}
	}
	e, w := &ps[r.p].Waits.Edges[r.j], &r.row
	w.id.v, w.participant.v, w.ord.v = int64(r.g.ID), int64(r.p), int64(r.j)
	w.target.v, w.typ.v = strBytes(string(e.To)), strBytes(e.Type)
	// The request number is stored as its bits: bigint has no unsigned
	// form.
	w.request.v, w.sinceSec.v, w.sinceNsec.v = int64(e.Request), e.Since.Unix(), int64(e.Since.Nanosecond())
	crc := waitSum(&r.h, w.id.v, int32(r.p), int32(r.j), w.target.v, e.Request, w.typ.v, w.sinceSec.v, int32(w.sinceNsec.v))
	r.sum.add(crc)
	w.crc.v = int64(crc)
	r.j++
	return true
}

func (r *waitRows) Values() ([]any, error) { return r.vals, nil }
func (r *waitRows) Err() error             { return nil }

// violationRows is the pgx.CopyFromSource of a snapshot's violations.
type violationRows struct {
	g    *snapshot.Global
	sum  *hasher
	h    hasher
	i    int
	vals []any
	row  struct {
		id, ord, crc   intCell
		invariant, err bytesCell
	}
}

func (r *violationRows) Next() bool {
	if r.i >= len(r.g.Violations) {
		return false
	}
	if r.vals == nil {
		w := &r.row
		r.vals = []any{&w.id, &w.ord, &w.invariant, &w.err, &w.crc}
	}
	v, w := &r.g.Violations[r.i], &r.row
	w.id.v, w.ord.v = int64(r.g.ID), int64(r.i)
	w.invariant.v, w.err.v = strBytes(v.Invariant), strBytes(v.Err)
	crc := violationSum(&r.h, w.id.v, int32(r.i), w.invariant.v, w.err.v)
	r.sum.add(crc)
	w.crc.v = int64(crc)
	r.i++
	return true
}

func (r *violationRows) Values() ([]any, error) { return r.vals, nil }
func (r *violationRows) Err() error             { return nil }

// The loader never allocates for more elements than a header claims up
// front, beyond this: a damaged count cannot make it allocate much before
// the rows disprove it.
const maxPrealloc = 1 << 16

// loader reads one snapshot's rows, checking every checksum, and builds
// the Global. Names and byte strings are copied into shared blocks (an
// arena), so a snapshot costs a few allocations rather than several per
// participant.
type loader struct {
	s     *Store
	c     *call // bounds each query
	id    snapshot.SnapshotID
	h     hasher
	sum   *hasher
	arena []byte
	names map[string]string
}

const (
	arenaBlock = 64 << 10
	maxShared  = 1024
)

// corrupt returns the error for a damaged row of table (unquoted,
// schema-qualified), at position ord among the snapshot's rows of that
// table.
func (l *loader) corrupt(table pgx.Identifier, ord int64, format string, args ...any) error {
	return &persistence.CorruptError{
		File:   table[0] + "." + table[1],
		Offset: ord,
		Reason: fmt.Sprintf("snapshot %d: ", l.id) + fmt.Sprintf(format, args...),
	}
}

// bytes copies b into the arena and returns the copy, nil for nil. The
// copy's capacity is its length, so appending to it cannot reach its
// neighbours.
func (l *loader) bytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	if len(b) == 0 {
		return empty
	}
	if len(b) > arenaBlock/4 {
		return append([]byte(nil), b...)
	}
	if len(l.arena)+len(b) > cap(l.arena) {
		l.arena = make([]byte, 0, arenaBlock)
	}
	start := len(l.arena)
	l.arena = append(l.arena, b...)
	return l.arena[start:len(l.arena):len(l.arena)]
}

// string copies b into the arena as a string. Arena bytes are never
// changed once written, and those of strings are never handed out as
// slices.
func (l *loader) string(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	c := l.bytes(b)
	return unsafe.String(&c[0], len(c))
}

// shared returns b as a string, one copy per distinct value (kinds and
// message types repeat).
func (l *loader) shared(b []byte) string {
	if s, ok := l.names[string(b)]; ok {
		return s
	}
	s := l.string(b)
	if len(l.names) < maxShared {
		l.names[s] = s
	}
	return s
}

// load reads snapshot id in tx. It returns persistence.ErrNotFound if the
// snapshot has no header row, persistence.ErrFormatVersion if it was
// written in another row format, and a *persistence.CorruptError for any
// damage.
func (s *Store) load(c *call, tx pgx.Tx, id snapshot.SnapshotID) (*snapshot.Global, error) {
	l := &loader{s: s, c: c, id: id, h: hasher{buf: make([]byte, 0, 256)}, names: map[string]string{}}
	var h header
	ctx, cancel := c.stmt()
	defer cancel()
	// A schema not yet migrated to version 3 (opened with MustExist) has
	// neither the counts nor the tables of waits and violations.
	extra := `0, 0, false, false`
	if s.version >= 3 {
		extra = `waits, violations,
			EXISTS (SELECT FROM ` + s.t.qWaits + ` WHERE snapshot_id = $1),
			EXISTS (SELECT FROM ` + s.t.qViolations + ` WHERE snapshot_id = $1)`
	}
	// Nor has one before version 4 the MAC's columns, nor one before
	// version 5 the receiver counts, nor one before version 6 the sums.
	macCols := `NULL::text, NULL::bytea`
	if s.version >= 4 {
		macCols = `mac_key, mac`
	}
	countsCol := `false`
	if s.version >= 5 {
		countsCol = `receiver_counts`
	}
	sumCols := `NULL::bigint, NULL::bigint`
	if s.version >= 6 {
		sumCols = `sum_sent, sum_received`
	}
	var (
		macKey               *string
		macSum               []byte
		sumSent, sumReceived *int64
	)
	err := tx.QueryRow(ctx, `SELECT format, mode, start_sec, start_nsec, end_sec, end_nsec,
			participants, channels, messages, checksum, complete, `+extra+`, `+macCols+`, `+countsCol+`, `+sumCols+`
		FROM `+s.t.qSnapshots+` WHERE id = $1`, int64(id)).Scan(
		&h.format, &h.mode, &h.startSec, &h.startNsec, &h.endSec, &h.endNsec,
		&h.participants, &h.channels, &h.messages, &h.checksum, &h.complete,
		&h.waits, &h.violations, &h.strayWaits, &h.strayViolations, &macKey, &macSum, &h.receiverCounts,
		&sumSent, &sumReceived)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %d", persistence.ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	h.id = int64(id)
	if h.format < 1 || h.format > rowFormat {
		return nil, fmt.Errorf("%w: snapshot %d has row format %d, this build reads 1 to %d", persistence.ErrFormatVersion, id, h.format, rowFormat)
	}
	if s.version < formatSchema[h.format] {
		// Saved after the schema was migrated, by another Store.
		return nil, fmt.Errorf("%w: snapshot %d has row format %d, which schema %s at version %d, as this Store opened it, does not hold; open the store again", persistence.ErrFormatVersion, id, h.format, s.schema, s.version)
	}
	t := s.t.snapshots
	switch {
	case !h.complete:
		return nil, l.corrupt(t, 0, "header not marked complete")
	case h.mode < 0 || h.mode > math.MaxUint8:
		return nil, l.corrupt(t, 0, "mode %d out of range", h.mode)
	case h.startNsec < 0 || h.startNsec >= int32(time.Second) || h.endNsec < 0 || h.endNsec >= int32(time.Second):
		return nil, l.corrupt(t, 0, "nanoseconds out of range")
	case h.participants < 0 || h.participants > persistence.MaxParticipants:
		return nil, l.corrupt(t, 0, "participant count %d out of range", h.participants)
	case h.channels < 0 || h.channels > persistence.MaxChannels:
		return nil, l.corrupt(t, 0, "channel count %d out of range", h.channels)
	case h.messages < 0 || h.messages > persistence.MaxMessages:
		return nil, l.corrupt(t, 0, "message count %d out of range", h.messages)
	case h.waits < 0 || h.waits > persistence.MaxWaitsTotal:
		return nil, l.corrupt(t, 0, "wait count %d out of range", h.waits)
	case h.violations < 0 || h.violations > persistence.MaxViolations:
		return nil, l.corrupt(t, 0, "violation count %d out of range", h.violations)
	case h.format < 2 && (h.waits != 0 || h.violations != 0):
		return nil, l.corrupt(t, 0, "row format %d has no waits or violations, but the header counts %d and %d", h.format, h.waits, h.violations)
	case h.format < 3 && h.receiverCounts:
		return nil, l.corrupt(t, 0, "row format %d keeps no receiver counts, but the header's receiver_counts is set", h.format)
	case h.format < 4 && (sumSent != nil || sumReceived != nil):
		return nil, l.corrupt(t, 0, "row format %d keeps no sums, but the header's sum_sent or sum_received is set", h.format)
	case (sumSent == nil) != (sumReceived == nil):
		return nil, l.corrupt(t, 0, "sum_sent and sum_received must both be NULL, or neither")
	case h.waits == 0 && h.strayWaits:
		return nil, l.corrupt(s.t.waits, 0, "wait rows, but the header counts none")
	case h.violations == 0 && h.strayViolations:
		return nil, l.corrupt(s.t.violations, 0, "violation rows, but the header counts none")
	}
	if sumSent != nil {
		h.sums = &snapshot.SumCounts{Sent: uint64(*sumSent), Received: uint64(*sumReceived)}
	}
	keyID := ""
	if macKey != nil {
		keyID = *macKey
	}
	mac, err := s.keys.Check(pgLayout, id, keyID)
	if err != nil {
		return nil, err
	}
	if mac != nil {
		// The rows' canonical encodings follow the header's in the MAC,
		// as their checksums follow in the header's checksum.
		mac.Write(h.appendColumns(nil))
		l.h.mac = mac
	}
	g := &snapshot.Global{
		ID:             id,
		Mode:           snapshot.Mode(h.mode),
		Start:          time.Unix(h.startSec, int64(h.startNsec)).UTC(),
		End:            time.Unix(h.endSec, int64(h.endNsec)).UTC(),
		ReceiverCounts: h.receiverCounts,
		Sums:           h.sums,
	}
	l.sum = newHeaderSum(h)
	waiting, err := l.participants(tx, g, h.format, int(h.participants))
	if err != nil {
		return nil, err
	}
	if err := l.channels(tx, g, int(h.channels), int(h.messages)); err != nil {
		return nil, err
	}
	if err := l.messages(tx, g, int(h.messages)); err != nil {
		return nil, err
	}
	if h.waits > 0 {
		if err := l.waits(tx, g, waiting, int(h.waits)); err != nil {
			return nil, err
		}
	}
	if h.violations > 0 {
		if err := l.violations(tx, g, int(h.violations)); err != nil {
			return nil, err
		}
	}
	if got := l.sum.sum(); int64(got) != h.checksum {
		return nil, l.corrupt(t, 0, "header checksum mismatch: stored %08x, computed %08x", uint32(h.checksum), got)
	}
	if mac != nil {
		if err := mac.Verify(macSum); err != nil {
			return nil, err
		}
	}
	if err := g.Verify(); err != nil {
		return nil, l.corrupt(t, 0, "loaded snapshot fails Verify: %v", err)
	}
	return g, nil
}

// checkCRC compares a row's stored checksum with the computed one.
func (l *loader) checkCRC(table pgx.Identifier, ord int64, key func() string, stored int64, computed uint32) error {
	if stored != int64(computed) {
		return l.corrupt(table, ord, "%s: checksum mismatch: stored %08x, computed %08x", key(), uint32(stored), computed)
	}
	return nil
}

// participants reads the participants of a snapshot of the given row
// format, n of them, and returns the ords of those with waits, whose
// edges l.waits reads. Their receiver counts must be 0 unless
// g.ReceiverCounts.
func (l *loader) participants(tx pgx.Tx, g *snapshot.Global, format int16, n int) ([]int32, error) {
	t := l.s.t.participants
	ctx, cancel := l.c.stmt()
	defer cancel()
	// A schema not yet migrated to version 3 has no wait columns, nor one
	// before version 5 the receiver counts.
	waitCols := `NULL::boolean, NULL::boolean`
	if l.s.version >= 3 {
		waitCols = `wait_any, wait_timer`
	}
	countCols := `0::bigint, 0::bigint`
	if l.s.version >= 5 {
		countCols = `sent_to, received`
	}
	rows, err := tx.Query(ctx, `SELECT ord, process, kind, state, departed, `+waitCols+`, `+countCols+`, crc
		FROM `+l.s.t.qParticipants+` WHERE snapshot_id = $1 ORDER BY ord`, int64(l.id))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if n > 0 {
		g.Participants = make([]snapshot.Participant, 0, min(n, maxPrealloc))
	}
	var (
		ord                  int32
		process, kind, state pgtype.DriverBytes
		departed             bool
		waitAny, waitTimer   pgtype.Bool
		sentTo, received     int64
		crc                  int64
		i                    int
		waiting              []int32
		flags                []byte // of each participant in waiting
	)
	// One slice for every row: a variadic call would allocate one each.
	dest := []any{&ord, &process, &kind, &state, &departed, &waitAny, &waitTimer, &sentTo, &received, &crc}
	for ; rows.Next(); i++ {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if i >= n || int(ord) != i {
			return nil, l.corrupt(t, int64(ord), "participant row %d out of place (the header counts %d, the next expected is %d)", ord, n, i)
		}
		key := func() string { return fmt.Sprintf("participant %d", ord) }
		var f byte
		if waitAny.Valid || waitTimer.Valid {
			if !waitAny.Valid || !waitTimer.Valid || format < 2 {
				return nil, l.corrupt(t, int64(ord), "%s: wait_any and wait_timer must both be NULL, or neither (and only from row format 2)", key())
			}
			f = waitFlags(&snapshot.Waits{Any: waitAny.Bool, Timer: waitTimer.Bool})
		}
		if err := l.checkCRC(t, int64(ord), key, crc, participantSum(&l.h, format, int64(l.id), ord, process, kind, state, departed, f, uint64(sentTo), uint64(received))); err != nil {
			return nil, err
		}
		if !g.ReceiverCounts && (sentTo != 0 || received != 0) {
			return nil, l.corrupt(t, int64(ord), "%s: sent_to %d and received %d, but the snapshot keeps no receiver counts (row format %d)", key(), uint64(sentTo), uint64(received), format)
		}
		if len(process) > persistence.MaxNameSize || len(kind) > persistence.MaxNameSize || len(state) > persistence.MaxStateSize {
			return nil, l.corrupt(t, int64(ord), "%s exceeds a format limit", key())
		}
		l.sum.add(uint32(crc))
		g.Participants = append(g.Participants, snapshot.Participant{
			ID:       snapshot.ProcessID(l.string(process)),
			Kind:     l.shared(kind),
			State:    l.bytes(state),
			Departed: departed,
			SentTo:   uint64(sentTo),
			Received: uint64(received),
		})
		if f != 0 {
			waiting, flags = append(waiting, ord), append(flags, f)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if i != n {
		return nil, l.corrupt(t, int64(i), "%d participant rows, the header counts %d", i, n)
	}
	// The waits, made in one block once their number is known.
	ws := make([]snapshot.Waits, len(waiting))
	for k, p := range waiting {
		ws[k] = snapshot.Waits{Any: flags[k]&2 != 0, Timer: flags[k]&4 != 0}
		g.Participants[p].Waits = &ws[k]
	}
	return waiting, nil
}

func (l *loader) channels(tx pgx.Tx, g *snapshot.Global, n, messages int) error {
	t := l.s.t.channels
	ctx, cancel := l.c.stmt()
	defer cancel()
	rows, err := tx.Query(ctx, `SELECT ord, sender, receiver, sent, received, crc
		FROM `+l.s.t.qChannels+` WHERE snapshot_id = $1 ORDER BY ord`, int64(l.id))
	if err != nil {
		return err
	}
	defer rows.Close()
	if n > 0 {
		g.Channels = make([]snapshot.ChannelState, 0, min(n, maxPrealloc))
	}
	var (
		ord              int32
		sender, receiver pgtype.DriverBytes
		sent, received   int64
		crc              int64
		i, total         int
	)
	// One slice for every row: a variadic call would allocate one each.
	dest := []any{&ord, &sender, &receiver, &sent, &received, &crc}
	for ; rows.Next(); i++ {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if i >= n || int(ord) != i {
			return l.corrupt(t, int64(ord), "channel row %d out of place (the header counts %d, the next expected is %d)", ord, n, i)
		}
		key := func() string { return fmt.Sprintf("channel %d", ord) }
		if err := l.checkCRC(t, int64(ord), key, crc, channelSum(&l.h, int64(l.id), ord, sender, receiver, uint64(sent), uint64(received))); err != nil {
			return err
		}
		if len(sender) > persistence.MaxNameSize || len(receiver) > persistence.MaxNameSize {
			return l.corrupt(t, int64(ord), "%s exceeds a format limit", key())
		}
		// Sent - Received is the channel's message count (Verify checks
		// it again); it must fit what the header counts.
		if uint64(received) > uint64(sent) || uint64(sent)-uint64(received) > uint64(messages-total) {
			return l.corrupt(t, int64(ord), "%s: sent %d, received %d: more messages than the header counts (%d)", key(), uint64(sent), uint64(received), messages)
		}
		total += int(uint64(sent) - uint64(received))
		l.sum.add(uint32(crc))
		g.Channels = append(g.Channels, snapshot.ChannelState{
			Channel:  snapshot.Channel{From: snapshot.ProcessID(l.string(sender)), To: snapshot.ProcessID(l.string(receiver))},
			Sent:     uint64(sent),
			Received: uint64(received),
		})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != n {
		return l.corrupt(t, int64(i), "%d channel rows, the header counts %d", i, n)
	}
	if total != messages {
		return l.corrupt(l.s.t.snapshots, 0, "the channels hold %d messages, the header counts %d", total, messages)
	}
	return nil
}

func (l *loader) messages(tx pgx.Tx, g *snapshot.Global, n int) error {
	ctx, cancel := l.c.stmt()
	defer cancel()
	if n == 0 {
		// Still look: a stray message row is damage too.
		var stray bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+l.s.t.qMessages+` WHERE snapshot_id = $1)`, int64(l.id)).Scan(&stray); err != nil {
			return err
		}
		if stray {
			return l.corrupt(l.s.t.messages, 0, "message rows, but the header counts none")
		}
		return nil
	}
	t := l.s.t.messages
	rows, err := tx.Query(ctx, `SELECT channel_ord, ord, type, data, crc
		FROM `+l.s.t.qMessages+` WHERE snapshot_id = $1 ORDER BY channel_ord, ord`, int64(l.id))
	if err != nil {
		return err
	}
	defer rows.Close()
	msgs := make([]snapshot.Message, 0, min(n, maxPrealloc))
	var (
		ch, ord   int32
		typ, data pgtype.DriverBytes
		crc       int64
		c, j      int // the channel and position the next row must have
		i         int
	)
	next := func() {
		for c < len(g.Channels) && uint64(j) >= g.Channels[c].Sent-g.Channels[c].Received {
			c, j = c+1, 0
		}
	}
	next()
	// One slice for every row: a variadic call would allocate one each.
	dest := []any{&ch, &ord, &typ, &data, &crc}
	for ; rows.Next(); i++ {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if i >= n || int(ch) != c || int(ord) != j {
			return l.corrupt(t, int64(i), "message row (channel %d, %d) out of place (the next expected is (channel %d, %d))", ch, ord, c, j)
		}
		key := func() string { return fmt.Sprintf("message (channel %d, %d)", ch, ord) }
		if err := l.checkCRC(t, int64(i), key, crc, messageSum(&l.h, int64(l.id), ch, ord, typ, data)); err != nil {
			return err
		}
		if len(typ) > persistence.MaxNameSize || len(data) > persistence.MaxMessageSize {
			return l.corrupt(t, int64(i), "%s exceeds a format limit", key())
		}
		l.sum.add(uint32(crc))
		msgs = append(msgs, snapshot.Message{
			Seq:     g.Channels[c].Received + 1 + uint64(j),
			Payload: persistence.RecordedMessage{Type: l.shared(typ), Data: l.bytes(data)},
		})
		j++
		next()
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != n {
		return l.corrupt(t, int64(i), "%d message rows, the header counts %d", i, n)
	}
	// Each channel's messages are a window of one array, capped so that
	// appending to one cannot overwrite the next.
	at := 0
	for k := range g.Channels {
		c := &g.Channels[k]
		if k := int(c.Sent - c.Received); k > 0 {
			c.Messages = msgs[at : at+k : at+k]
			at += k
		}
	}
	return nil
}

// waits reads the n wait-for edges of a snapshot, ordered by participant
// and then by their order, into the waits of the participants waiting
// lists (the ords of those with waits, in order; one may have no edges).
// Each participant's edges are a window of one array.
func (l *loader) waits(tx pgx.Tx, g *snapshot.Global, waiting []int32, n int) error {
	t := l.s.t.waits
	ctx, cancel := l.c.stmt()
	defer cancel()
	rows, err := tx.Query(ctx, `SELECT participant_ord, ord, target, request, type, since_sec, since_nsec, crc
		FROM `+l.s.t.qWaits+` WHERE snapshot_id = $1 ORDER BY participant_ord, ord`, int64(l.id))
	if err != nil {
		return err
	}
	defer rows.Close()
	edges := make([]snapshot.Wait, 0, min(n, maxPrealloc))
	spans := make([][2]int, len(waiting)) // each's edges, [start, end)
	var (
		p, ord       int32
		target, typ  pgtype.DriverBytes
		request, sec int64
		nsec         int32
		crc          int64
		k            = -1 // the index in waiting of the last row's participant
		i            int
	)
	// One slice for every row: a variadic call would allocate one each.
	dest := []any{&p, &ord, &target, &request, &typ, &sec, &nsec, &crc}
	for ; rows.Next(); i++ {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		// A row is the next of the last row's participant, or the first
		// of a later participant with waits.
		ok := k >= 0 && p == waiting[k] && int(ord) == i-spans[k][0]
		if !ok && ord == 0 {
			next, found := slices.BinarySearch(waiting[k+1:], p)
			if ok = found; ok {
				k += 1 + next
				spans[k][0] = i
			}
		}
		if i >= n || !ok {
			return l.corrupt(t, int64(i), "wait row (participant %d, %d) out of place (the header counts %d; each participant's rows are numbered from 0, and only one with wait flags has any)", p, ord, n)
		}
		spans[k][1] = i + 1
		key := func() string { return fmt.Sprintf("wait (participant %d, %d)", p, ord) }
		if err := l.checkCRC(t, int64(i), key, crc, waitSum(&l.h, int64(l.id), p, ord, target, uint64(request), typ, sec, nsec)); err != nil {
			return err
		}
		switch {
		case len(target) > persistence.MaxNameSize || len(typ) > persistence.MaxNameSize || ord >= persistence.MaxWaits:
			return l.corrupt(t, int64(i), "%s exceeds a format limit", key())
		case nsec < 0 || nsec >= int32(time.Second):
			return l.corrupt(t, int64(i), "%s: nanoseconds out of range", key())
		}
		l.sum.add(uint32(crc))
		edges = append(edges, snapshot.Wait{
			To:      snapshot.ProcessID(l.string(target)),
			Request: uint64(request),
			Type:    l.shared(typ),
			Since:   time.Unix(sec, int64(nsec)).UTC(),
		})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != n {
		return l.corrupt(t, int64(i), "%d wait rows, the header counts %d", i, n)
	}
	for k, p := range waiting {
		if a, b := spans[k][0], spans[k][1]; b > a {
			g.Participants[p].Waits.Edges = edges[a:b:b]
		}
	}
	return nil
}

// violations reads the n violations of a snapshot.
func (l *loader) violations(tx pgx.Tx, g *snapshot.Global, n int) error {
	t := l.s.t.violations
	ctx, cancel := l.c.stmt()
	defer cancel()
	rows, err := tx.Query(ctx, `SELECT ord, invariant, err, crc
		FROM `+l.s.t.qViolations+` WHERE snapshot_id = $1 ORDER BY ord`, int64(l.id))
	if err != nil {
		return err
	}
	defer rows.Close()
	g.Violations = make([]snapshot.Violation, 0, min(n, maxPrealloc))
	var (
		ord            int32
		invariant, msg pgtype.DriverBytes
		crc            int64
		i              int
	)
	dest := []any{&ord, &invariant, &msg, &crc}
	for ; rows.Next(); i++ {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if i >= n || int(ord) != i {
			return l.corrupt(t, int64(ord), "violation row %d out of place (the header counts %d, the next expected is %d)", ord, n, i)
		}
		key := func() string { return fmt.Sprintf("violation %d", ord) }
		if err := l.checkCRC(t, int64(ord), key, crc, violationSum(&l.h, int64(l.id), ord, invariant, msg)); err != nil {
			return err
		}
		if len(invariant) > persistence.MaxNameSize || len(msg) > persistence.MaxViolationSize {
			return l.corrupt(t, int64(ord), "%s exceeds a format limit", key())
		}
		l.sum.add(uint32(crc))
		g.Violations = append(g.Violations, snapshot.Violation{Invariant: l.string(invariant), Err: l.string(msg)})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != n {
		return l.corrupt(t, int64(i), "%d violation rows, the header counts %d", i, n)
	}
	return nil
}
