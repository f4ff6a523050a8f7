package snapshot

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// AssemblerConfig configures an Assembler.
type AssemblerConfig struct {
	// Snapshot is the id being assembled; required.
	Snapshot SnapshotID
	// Mode is recorded in the Global.
	Mode Mode
	// Participants must all record before the snapshot can complete. More
	// are discovered from the records: the sender of any message received or
	// recorded, and the receiver of any message sent before a record.
	// Given sorted, they spare Global a sort.
	Participants []ProcessID
	// Start is when the snapshot began; it is copied into the Global.
	Start time.Time
	// Deadline, if not zero, aborts the snapshot with ErrTimeout when
	// Status is called at or after it and the snapshot is not complete.
	Deadline time.Time
	// Numbering, if not nil, is the Numbering of a complete Assembler of
	// an earlier snapshot of the same processes: this one numbers them as
	// it did, and a record that names the same peers as that process's
	// record there costs no lookup by name. Only an optimisation: the
	// result is the same without it.
	Numbering *Numbering
	// Departed, if not nil, looks up processes that stopped before this
	// snapshot began. When a record or a channel recording names a process
	// that is neither a participant nor recorded here, the Assembler asks,
	// once: the final record returned stands in for the process's record,
	// as if given to AddDeparted. A caller that keeps every process that
	// ever stopped adds only those this snapshot's records name, instead
	// of all of them (and every one of them in the Global).
	Departed func(ProcessID) (LocalRecord, bool)
	// Ledger, in the Epochs mode, holds the sums of the sent counts, which
	// records of what changed (LocalRecord.Changes) add to: every
	// record goes through Ledger.Apply before it is given here. With a
	// Ledger, completion is judged per receiver rather than per channel,
	// once every participant recorded: what was sent to it before its
	// senders' records (the Ledger's sum, less what records after this
	// cut added) = what it received before its record
	// (LocalRecord.ReceivedTotal) + what it reported in flight. The
	// Global lists only the channels with messages in flight.
	Ledger *Ledger
	// Sums, in the Epochs mode, judges completion by sums (Config.Sums):
	// once every participant recorded, the messages sent before the
	// records (LocalRecord.SentTotal) must equal those received before
	// them (ReceivedTotal) plus those reported in flight, with Base
	// added, and a departed participant's lost messages counted as
	// received. Records name no channel; the Global lists only the
	// channels with messages in flight.
	Sums bool
	// Base, with Sums, is what the processes dropped before this
	// snapshot began add to its sums: their final totals, and the
	// messages lost with them.
	Base Totals
}

// Totals are the sums counted over processes that stopped and were
// dropped (AssemblerConfig.Base): what they sent, what they received,
// and, by epoch, the messages lost with them.
type Totals struct {
	Sent, Received uint64
	Lost           EpochCounts
}

// add adds the final record r's totals to t.
func (t *Totals) add(r *LocalRecord) {
	t.Sent += r.SentTotal
	t.Received += r.ReceivedTotal
	for _, l := range r.lost() {
		t.Lost = t.Lost.add(l.Epoch, l.N)
	}
}

// State is where an assembly stands.
type State uint8

const (
	// Pending: records are still missing.
	Pending State = iota
	// Complete: every participant recorded and every channel balances.
	Complete
	// Aborted: the snapshot will never complete; Status.Err says why.
	Aborted
)

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Complete:
		return "complete"
	case Aborted:
		return "aborted"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Status is the answer of Assembler.Status.
type Status struct {
	State State
	// Err is an *AbortError when State is Aborted.
	Err error
}

// Missing is what keeps a snapshot from completing.
type Missing struct {
	// Participants that have not recorded, sorted.
	Participants []ProcessID
	// Channels that do not balance yet, sorted. Recorded counts the messages
	// of a closed recording; a channel whose receiver still records it shows
	// Recorded 0 and Open true.
	Channels []ChannelGap
	// Receivers that do not balance yet, sorted: in the Epochs mode with
	// a Ledger, which judges a receiver's incoming channels together.
	Receivers []ReceiverGap
	// Sums, when counting in sums, says that they do not balance yet.
	Sums *SumGap
}

// SumGap is a snapshot's sums that do not balance yet: Sent before the
// records, Received before them (lost messages included), Recorded in
// flight since.
type SumGap struct {
	Sent, Received, Recorded uint64
}

// ReceiverGap is one receiver whose counts do not balance yet: Sent to
// it before its senders' records, Received before its own, Recorded in
// flight to it since.
type ReceiverGap struct {
	Receiver ProcessID
	Sent     uint64
	Received uint64
	Recorded uint64
}

// ChannelGap is one channel whose counters do not balance yet.
type ChannelGap struct {
	Channel  Channel
	Sent     uint64
	Received uint64
	Recorded uint64
	Open     bool // no closed recording has arrived for it
}

// Empty reports whether nothing is missing.
func (m Missing) Empty() bool {
	return len(m.Participants) == 0 && len(m.Channels) == 0 && len(m.Receivers) == 0 && m.Sums == nil
}

// missingShown is how many participants and channels Missing.String
// names; the full lists stay in Missing (AbortError.Missing).
const missingShown = 10

// String names what is missing: at most missingShown participants and
// channels, then how many more, so that an abort of a snapshot of
// thousands of actors reads as one line of a log.
func (m Missing) String() string {
	var parts []string
	if n := len(m.Participants); n > 0 {
		names := make([]string, 0, min(n, missingShown))
		for _, p := range m.Participants[:min(n, missingShown)] {
			names = append(names, string(p))
		}
		parts = append(parts, "not recorded: "+strings.Join(names, ", ")+more(n, ""))
	}
	for _, g := range m.Channels[:min(len(m.Channels), missingShown)] {
		state := "closed"
		if g.Open {
			state = "open"
		}
		parts = append(parts, fmt.Sprintf("channel %s %s: sent %d, received %d, recorded %d", g.Channel, state, g.Sent, g.Received, g.Recorded))
	}
	for _, g := range m.Receivers[:min(len(m.Receivers), missingShown)] {
		parts = append(parts, fmt.Sprintf("receiver %s: sent to it %d, received %d, recorded %d", g.Receiver, g.Sent, g.Received, g.Recorded))
	}
	if g := m.Sums; g != nil {
		parts = append(parts, fmt.Sprintf("sums: sent %d before the records, received %d, recorded %d in flight", g.Sent, g.Received, g.Recorded))
	}
	if len(parts) == 0 {
		return "nothing missing"
	}
	return strings.Join(parts, "; ") + more(len(m.Channels), " channels") + more(len(m.Receivers), " receivers")
}

// more says how many of n items Missing.String leaves out.
func more(n int, what string) string {
	if n <= missingShown {
		return ""
	}
	return fmt.Sprintf(" and %d more%s", n-missingShown, what)
}

// AbortError says why a snapshot was aborted, and what was missing then.
type AbortError struct {
	Snapshot SnapshotID
	Reason   error
	Missing  Missing
}

func (e *AbortError) Error() string {
	msg := fmt.Sprintf("snapshot %d aborted: %v", e.Snapshot, e.Reason)
	if !e.Missing.Empty() {
		msg += " (" + e.Missing.String() + ")"
	}
	return msg
}

// Unwrap returns ErrAborted and the reason.
func (e *AbortError) Unwrap() []error { return []error{ErrAborted, e.Reason} }

// procAcc is what the assembler knows of one process. Processes and
// channels are numbered as they appear, so that the work per record is
// index arithmetic rather than lookups by name.
type procAcc struct {
	id       ProcessID
	record   *LocalRecord // nil until it records
	required bool
	departed bool
	asked    bool    // AssemblerConfig.Departed was asked about it
	stopped  bool    // Stopped: it will report nothing more
	chans    []int32 // channels with this process at either end
	// With a Ledger, as a receiver: received before its record, reported
	// in flight to it, sent to it by records after this cut (Ledger.set),
	// and whether it does not balance yet (counted in unsettled).
	total, reported, late uint64
	pending               bool
	named                 bool        // judge looked its record's senders up
	lp                    *ledgerProc // its entry in the Ledger, once found
}

// chanAcc accumulates what the records say of one channel.
type chanAcc struct {
	from, to int32  // process numbers
	sent     uint64 // from the sender's record
	received uint64 // from the receiver's record
	record   *ChannelRecord
	pending  bool // both ends recorded and not balanced: counted in unsettled
	seen     bool // named in this snapshot (not only numbered by an earlier one)
}

// Numbering is how an Assembler numbered processes and channels, and which
// channels each process's record named, handed to the Assembler of a later
// snapshot (AssemblerConfig.Numbering). Under load a snapshot's assembly is
// mostly lookups by name in tables too big for the cache (about thirteen a
// record); with a Numbering, a record that names the peers its process's
// record named last time needs one. It is immutable, and may be shared by
// Assemblers running at once.
//
// Its tables of numbers by name come in two layers: base, shared with
// the Numbering it grew from, and extra, what was numbered since. Under
// load most snapshots number a few new channels among hundreds of
// thousands, and a Numbering that copied every entry into new tables for
// them cost the snapshot's completion as much as a tenth of its records.
// The extra layer is copied instead, and folded into a new base once it
// holds an eighth as many entries as the base.
type Numbering struct {
	ids         []ProcessID
	chans       []chanKey
	procChans   [][]int32 // by process: its channels
	shapes      [][]int32 // by process: the channels its last record named, sent then received
	base, extra numberIndex
}

// numberIndex finds numbers by name: processes by id, channels by
// chanKeyOf. Read only once made.
type numberIndex struct {
	procs map[ProcessID]int32
	chans map[uint64]int32
}

func (x *numberIndex) len() int { return len(x.procs) + len(x.chans) }

// proc returns the number of process id, if n has one.
func (n *Numbering) proc(id ProcessID) (int32, bool) {
	if i, ok := n.base.procs[id]; ok {
		return i, true
	}
	i, ok := n.extra.procs[id]
	return i, ok
}

// channel returns the number of the channel key (chanKeyOf), if n has
// one.
func (n *Numbering) channel(key uint64) (int32, bool) {
	if i, ok := n.base.chans[key]; ok {
		return i, true
	}
	i, ok := n.extra.chans[key]
	return i, ok
}

type chanKey struct{ from, to int32 }

// noNumbering is the Numbering of an Assembler given none.
var noNumbering = &Numbering{}

func chanKeyOf(from, to int32) uint64 { return uint64(uint32(from))<<32 | uint64(uint32(to)) }

// Assembler collects the records of one snapshot and decides, by counters,
// when it is complete (docs/design.md, decision 3): every participant has recorded
// and every channel balances, sent-before = received-before + recorded. It
// is pure and not safe for concurrent use. Records may arrive in any order.
type Assembler struct {
	cfg       AssemblerConfig
	num       *Numbering          // numbers given, never nil
	index     map[ProcessID]int32 // processes numbered here, beyond num's
	procs     []procAcc
	chanIndex map[uint64]int32 // channels numbered here, beyond num's: from<<32 | to
	chans     []chanAcc
	shapes    [][]int32 // by process, as Numbering.shapes, for the next
	reshaped  bool      // a shape differs from num's
	recorded  int       // processes that recorded
	unrecord  int       // required processes not recorded
	unsettled int
	abort     *AbortError
	global    *Global
	numbering *Numbering // this one's, once asked for
	ledger    *Ledger    // AssemblerConfig.Ledger
	swept     bool       // with a Ledger: every participant recorded, and its receivers were judged
	gen       uint64     // tells this Assembler in the Ledger's caches
	recs      slab[LocalRecord]
	chanRecs  slab[ChannelRecord]
	// The channels with a recording (chanAcc.record), in the order the
	// first of each came: with a Ledger, the only ones build lists.
	withRecs []int32
	// With Sums: sent before the records, received before them (lost
	// messages included), reported in flight; whether they do not
	// balance (counted in unsettled).
	sumSent, sumReceived, sumReported uint64
	sumPending                        bool
}

// slab holds values an Assembler keeps and points to, in blocks that
// double up to slabMax values: one allocation per block rather than one
// per record, of which a snapshot of many participants keeps thousands.
type slab[T any] struct{ block []T }

const slabMax = 256

// put keeps a copy of v and returns it.
func (s *slab[T]) put(v T) *T {
	if len(s.block) == cap(s.block) {
		s.block = make([]T, 0, min(max(8, 2*cap(s.block)), slabMax))
	}
	s.block = append(s.block, v)
	return &s.block[len(s.block)-1]
}

// generations numbers Assemblers for the Ledger's caches.
var generations atomic.Uint64

// NewAssembler returns an Assembler for cfg.Snapshot.
func NewAssembler(cfg AssemblerConfig) (*Assembler, error) {
	return newAssembler(cfg, assemblerSpare{})
}

// assemblerSpare is the accumulators of an Assembler done with, emptied,
// for the next (Coordinator): a snapshot of many participants numbers
// them all, and the next would allocate as much again.
type assemblerSpare struct {
	procs    []procAcc
	chans    []chanAcc
	withRecs []int32
}

// release empties a's accumulators for another Assembler; a is not used
// after. The Numbering a made shares no accumulator: it copies them, and
// keeps only the slices they point to.
func (a *Assembler) release() assemblerSpare {
	clear(a.procs[:cap(a.procs)])
	clear(a.chans[:cap(a.chans)])
	sp := assemblerSpare{procs: a.procs[:0], chans: a.chans[:0], withRecs: a.withRecs[:0]}
	a.procs, a.chans, a.withRecs = nil, nil, nil
	return sp
}

// reuse returns s with length n if it has room for c elements (zero past
// its length), else a new slice.
func reuse[T any](s []T, n, c int) []T {
	if cap(s) >= c {
		return s[:n]
	}
	return make([]T, n, c)
}

func newAssembler(cfg AssemblerConfig, spare assemblerSpare) (*Assembler, error) {
	if cfg.Snapshot == 0 {
		return nil, fmt.Errorf("%w: %w", ErrConfig, ErrInvalidID)
	}
	num := cfg.Numbering
	if num == nil {
		num = noNumbering
	}
	// Room for the participants and about two channels each, beyond what
	// the Numbering brings. With a Ledger only channels with a recording
	// are numbered, and the table of new ones grows as they come: made at
	// that size, it would cost an idle snapshot of many participants more
	// than its records.
	np, nc := len(num.ids), len(num.chans)
	procs, chans := max(np, len(cfg.Participants)), max(nc, 2*len(cfg.Participants))
	newChans := chans - nc
	if cfg.Ledger != nil || cfg.Sums {
		newChans = 0
	}
	a := &Assembler{
		cfg:       cfg,
		num:       num,
		index:     make(map[ProcessID]int32, procs-np),
		procs:     reuse(spare.procs, np, procs),
		chanIndex: make(map[uint64]int32, newChans),
		chans:     reuse(spare.chans, nc, chans),
		shapes:    make([][]int32, np, procs),
		withRecs:  spare.withRecs[:0],
		ledger:    cfg.Ledger,
		gen:       generations.Add(1),
	}
	if cfg.Sums {
		a.sumSent = cfg.Base.Sent
		a.sumReceived = cfg.Base.Received + cfg.Base.Lost.before(cfg.Snapshot)
	}
	for i, id := range num.ids {
		a.procs[i] = procAcc{id: id, chans: slices.Clip(num.procChans[i])} // appending copies
		a.shapes[i] = num.shapes[i]
	}
	for i, k := range num.chans {
		a.chans[i] = chanAcc{from: k.from, to: k.to}
	}
	for _, p := range cfg.Participants {
		a.require(a.proc(p))
	}
	if cfg.Sums {
		a.weigh()
	}
	return a, nil
}

// Numbering returns how this Assembler numbered processes and channels,
// for the next snapshot's (AssemblerConfig.Numbering); nil until the
// snapshot is complete, or if what it numbered is mostly what earlier
// snapshots saw and this one did not (processes gone: the next starts
// afresh rather than carry them).
func (a *Assembler) Numbering() *Numbering {
	if a.global == nil {
		return nil
	}
	if a.numbering == nil {
		a.numbering = a.number()
	}
	return a.numbering
}

func (a *Assembler) number() *Numbering {
	seen := 0
	for i := range a.chans {
		if a.chans[i].seen {
			seen++
		}
	}
	if seen < len(a.chans)/2 {
		return nil
	}
	if len(a.index) == 0 && len(a.chanIndex) == 0 {
		if !a.reshaped {
			return a.num
		}
		n := *a.num
		n.shapes = a.shapes
		return &n
	}
	// The processes and channels numbered before keep their numbers, so
	// the lists given are copied whole and the new appended.
	n := &Numbering{
		ids:       slices.Grow(slices.Clip(a.num.ids), len(a.procs)-len(a.num.ids)),
		chans:     slices.Grow(slices.Clip(a.num.chans), len(a.chans)-len(a.num.chans)),
		procChans: make([][]int32, len(a.procs)),
		shapes:    a.shapes,
	}
	for i := len(a.num.ids); i < len(a.procs); i++ {
		n.ids = append(n.ids, a.procs[i].id)
	}
	for i := len(a.num.chans); i < len(a.chans); i++ {
		c := &a.chans[i]
		n.chans = append(n.chans, chanKey{c.from, c.to})
	}
	for i := range a.procs {
		n.procChans[i] = a.procs[i].chans
	}
	// What this snapshot numbered goes on top of the Numbering given: the
	// numbers it gave follow that one's, so the base stays true.
	old := &a.num.extra
	if added := old.len() + len(a.index) + len(a.chanIndex); a.num.base.len() > 0 && 8*added <= a.num.base.len() {
		n.base = a.num.base
		n.extra = numberIndex{
			procs: make(map[ProcessID]int32, len(old.procs)+len(a.index)),
			chans: make(map[uint64]int32, len(old.chans)+len(a.chanIndex)),
		}
		for _, m := range []map[ProcessID]int32{old.procs, a.index} {
			for id, i := range m {
				n.extra.procs[id] = i
			}
		}
		for _, m := range []map[uint64]int32{old.chans, a.chanIndex} {
			for k, i := range m {
				n.extra.chans[k] = i
			}
		}
		return n
	}
	n.base = numberIndex{
		procs: make(map[ProcessID]int32, len(a.procs)),
		chans: make(map[uint64]int32, len(a.chans)),
	}
	for i := range a.procs {
		n.base.procs[a.procs[i].id] = int32(i)
	}
	for i := range a.chans {
		c := &a.chans[i]
		n.base.chans[chanKeyOf(c.from, c.to)] = int32(i)
	}
	return n
}

// Require adds a participant that must record before the snapshot can
// complete: one born before the cut, while the snapshot ran. One that
// AssemblerConfig.Departed knows stopped before the snapshot began stands
// in with its final record instead.
func (a *Assembler) Require(p ProcessID) {
	if a.abort == nil && a.global == nil {
		q := a.proc(p)
		a.askDeparted(q)
		a.require(q)
	}
}

// Involves reports whether p takes part in the snapshot: it must record
// (it was given, or required since) or it has recorded.
func (a *Assembler) Involves(p ProcessID) bool {
	i, ok := a.lookup(p)
	return ok && (a.procs[i].required || a.procs[i].record != nil)
}

// StandsIn reports whether p stands in departed: its final record took
// the place of a record it will never make.
func (a *Assembler) StandsIn(p ProcessID) bool {
	i, ok := a.lookup(p)
	return ok && a.procs[i].departed && a.procs[i].record != nil
}

// AwaitsRecord reports whether p must record and has not.
func (a *Assembler) AwaitsRecord(p ProcessID) bool {
	i, ok := a.lookup(p)
	return ok && a.procs[i].required && a.procs[i].record == nil
}

// lookup returns the number of process id, if it has one.
func (a *Assembler) lookup(id ProcessID) (int32, bool) {
	if i, ok := a.num.proc(id); ok {
		return i, true
	}
	i, ok := a.index[id]
	return i, ok
}

// Snapshot returns the id being assembled.
func (a *Assembler) Snapshot() SnapshotID { return a.cfg.Snapshot }

// proc returns the number of process id, numbering it if new.
func (a *Assembler) proc(id ProcessID) int32 {
	if i, ok := a.lookup(id); ok {
		return i
	}
	i := int32(len(a.procs))
	a.procs = append(a.procs, procAcc{id: id})
	a.shapes = append(a.shapes, nil)
	a.index[id] = i
	return i
}

func (a *Assembler) require(p int32) {
	pa := &a.procs[p]
	if pa.required {
		return
	}
	pa.required = true
	if pa.record == nil {
		a.unrecord++
		a.swept = false // its record may add to the sums: judged again
		a.setPending(&a.sumPending, false)
	}
}

// channel returns the number of the channel from -> to, numbering it if
// new. Pointers into a.chans do not survive a call.
func (a *Assembler) channel(from, to int32) int32 {
	key := chanKeyOf(from, to)
	if i, ok := a.num.channel(key); ok {
		a.chans[i].seen = true
		return i
	}
	if i, ok := a.chanIndex[key]; ok {
		return i
	}
	i := int32(len(a.chans))
	a.chans = append(a.chans, chanAcc{from: from, to: to, seen: true})
	a.chanIndex[key] = i
	a.procs[from].chans = append(a.procs[from].chans, i)
	if to != from {
		a.procs[to].chans = append(a.procs[to].chans, i)
	}
	return i
}

func (a *Assembler) name(c *chanAcc) Channel {
	return Channel{From: a.procs[c.from].id, To: a.procs[c.to].id}
}

// AddRecord adds a process's local record. A second record from one
// process aborts the snapshot. Records for another snapshot are rejected.
func (a *Assembler) AddRecord(r LocalRecord) error {
	p, ok, err := a.admit(&r)
	if !ok {
		return err
	}
	return a.addRecord(p, a.recs.put(r))
}

// addKept is AddRecord for a record the caller hands over
// (Coordinator.RecordKept): the Assembler keeps r, not a copy.
func (a *Assembler) addKept(r *LocalRecord) error {
	p, ok, err := a.admit(r)
	if !ok {
		return err
	}
	return a.addRecord(p, r)
}

// admit returns the number of r's process, and whether r is to be added;
// err says why not, if it is an error.
func (a *Assembler) admit(r *LocalRecord) (p int32, ok bool, err error) {
	if r.Snapshot != a.cfg.Snapshot {
		return 0, false, fmt.Errorf("%w: record for snapshot %d given to assembler of %d", ErrProtocol, r.Snapshot, a.cfg.Snapshot)
	}
	if a.abort != nil || a.global != nil {
		return 0, false, nil
	}
	if r.Changes && a.ledger == nil {
		return 0, false, a.fail(fmt.Errorf("%w: record of %s lists the counters changed since its record %d, and no Ledger holds the sums", ErrProtocol, r.Process, r.Prev))
	}
	p = a.proc(r.Process)
	if a.procs[p].record != nil {
		return 0, false, a.fail(fmt.Errorf("%w: second local record from %s", ErrProtocol, r.Process))
	}
	return p, true, nil
}

// addRecord adds r, admitted, of process p; the Assembler keeps r.
func (a *Assembler) addRecord(p int32, r *LocalRecord) error {
	a.procs[p].record = r
	a.recorded++
	if a.procs[p].required {
		a.unrecord--
	}
	if a.cfg.Sums {
		return a.addSumsRecord(p, r)
	}
	if a.ledger != nil {
		return a.addLedgerRecord(p, r)
	}
	sh := a.shape(p, r)
	if a.cfg.Departed != nil {
		for _, ci := range sh {
			q := a.chans[ci].to
			if q == p {
				q = a.chans[ci].from
			}
			a.askDeparted(q)
		}
	}
	for k, pc := range r.Sent {
		c := &a.chans[sh[k]]
		c.sent = pc.N
		if pc.N > 0 {
			a.require(c.to)
		}
	}
	for k, pc := range r.Received {
		c := &a.chans[sh[len(r.Sent)+k]]
		c.received = pc.N
		if pc.N > 0 {
			a.require(c.from)
		}
	}
	for _, c := range a.procs[p].chans {
		if err := a.settle(c); err != nil {
			return err
		}
	}
	return nil
}

// addLedgerRecord is addRecord with a Ledger, which applied r: its
// channels are not numbered here. What its counts decide is who takes
// part (a receiver it sent to must record, or stands in departed) and,
// as a receiver, what it received before its record. Its sent counts are
// in the Ledger's sums, which the sweep reads once every participant
// recorded. The senders a record of every counter names are looked up
// only if its process is found over (judge): one not known here would
// have to record.
func (a *Assembler) addLedgerRecord(p int32, r *LocalRecord) error {
	resolved := a.ledger.resolvedOf(r)
	for k, pc := range r.Sent {
		if resolved != nil {
			a.named(a.ledgerProc(resolved[k]), pc.N)
		} else {
			a.named(a.proc(pc.Peer), pc.N)
		}
	}
	total := r.ReceivedTotal
	if !r.Changes {
		// Every channel is listed: its total is their sum. (A departed
		// process's final record, which stands in, is not judged as a
		// receiver; the names dropped since are taken off its lists.)
		var sum uint64
		for _, pc := range r.Received {
			sum += pc.N
		}
		if total != 0 && total != sum && !a.procs[p].departed {
			return a.fail(fmt.Errorf("%w: record of %s: received %d in total, but its channels add up to %d", ErrProtocol, r.Process, total, sum))
		}
		total = sum
	}
	a.procs[p].total = total
	if l := a.ledger; l.resolvedFor.ok && l.resolvedFor.process == r.Process && l.resolvedFor.snapshot == r.Snapshot {
		a.procs[p].lp = l.last
	}
	return nil
}

// named takes in a peer q of a record's process whose channel counts n:
// one that stopped before the snapshot stands in departed, and one that
// a message crossed to or from must record.
func (a *Assembler) named(q int32, n uint64) {
	a.askDeparted(q)
	if n > 0 {
		a.require(q)
	}
}

// shape returns the channels r names, sent then received, numbering
// them if new: those of p's last record in the Numbering given, if r names
// the same peers in the same order (most records do), without a lookup.
func (a *Assembler) shape(p int32, r *LocalRecord) []int32 {
	n := len(r.Sent) + len(r.Received)
	if sh := a.shapes[p]; len(sh) == n && a.matches(sh, p, r) {
		for _, ci := range sh {
			a.chans[ci].seen = true
		}
		return sh
	}
	sh := make([]int32, 0, n)
	for _, pc := range r.Sent {
		sh = append(sh, a.channel(p, a.proc(pc.Peer)))
	}
	for _, pc := range r.Received {
		sh = append(sh, a.channel(a.proc(pc.Peer), p))
	}
	a.shapes[p], a.reshaped = sh, true
	return sh
}

// matches reports whether sh, channels of the Numbering given, are the
// channels r names, in order.
func (a *Assembler) matches(sh []int32, p int32, r *LocalRecord) bool {
	for k, pc := range r.Sent {
		if c := &a.chans[sh[k]]; c.from != p || a.procs[c.to].id != pc.Peer {
			return false
		}
	}
	for k, pc := range r.Received {
		if c := &a.chans[sh[len(r.Sent)+k]]; c.to != p || a.procs[c.from].id != pc.Peer {
			return false
		}
	}
	return true
}

// AddDeparted adds the final record of a process that stopped before this
// snapshot began: its counters are final and its state is gone. It stands
// in for the process's local record: channels from it balance against its
// final counts, and channels to it are left out of the snapshot (messages
// sent to a stopped actor are dead letters).
func (a *Assembler) AddDeparted(r LocalRecord) error {
	r.Kind, r.State = "", nil
	if p := a.proc(r.Process); a.procs[p].record == nil {
		a.procs[p].departed = true
	}
	return a.AddRecord(r)
}

// Stopped says that process p, which recorded, has stopped, after it
// reported every recording it closed: a channel to it that does not
// balance with what it received and recorded never will, and aborts the
// snapshot (a message on its way to it at the cut was lost with it).
func (a *Assembler) Stopped(p ProcessID) error {
	if a.abort != nil || a.global != nil {
		return nil
	}
	q := a.proc(p)
	a.procs[q].stopped = true
	if a.cfg.Sums {
		return nil // what it owed is reported or lost (Process.Lose, Coordinator.Lost)
	}
	if a.ledger != nil {
		if a.swept {
			return a.judge(q)
		}
		return nil
	}
	for _, ci := range a.procs[q].chans {
		if a.chans[ci].to == q {
			if err := a.settle(ci); err != nil {
				return err
			}
		}
	}
	return nil
}

// askDeparted adds process q's final record if AssemblerConfig.Departed
// knows it as departed and nothing here says otherwise. Pointers into
// a.procs and a.chans do not survive a call.
func (a *Assembler) askDeparted(q int32) {
	pa := &a.procs[q]
	if a.cfg.Departed == nil || pa.record != nil || pa.required || pa.asked {
		return
	}
	pa.asked = true
	if final, ok := a.cfg.Departed(pa.id); ok {
		final.Snapshot = a.cfg.Snapshot
		_ = a.AddDeparted(final)
	}
}

// AddChannel adds the closed recording of one channel. A second recording
// of one channel aborts the snapshot, except in the Epochs mode, where the
// receiver reports its channel state as it comes, in parts: each part
// continues the last one, in sequence order.
func (a *Assembler) AddChannel(cr ChannelRecord) error {
	to := int32(-1)
	return a.addChannel(&cr, &to)
}

// AddChannels is AddChannel for each of crs in turn, as a receiver
// reports them: all to one process, whose number is found once. It
// stops at the first error, and once the snapshot is complete: what
// comes after the recording that completes it is left out, as it is
// when a Coordinator, given one recording at a time, ends the run
// between two.
func (a *Assembler) AddChannels(crs []ChannelRecord) error {
	to := int32(-1)
	for i := range crs {
		if i > 0 && a.settled() {
			return nil
		}
		if err := a.addChannel(&crs[i], &to); err != nil {
			return err
		}
	}
	return nil
}

// judged says whether, the snapshot being in progress, every
// participant required has recorded and, with a Ledger, its receivers
// were judged (swept): from then on the counters say what it waits for.
func (a *Assembler) judged() bool {
	return a.global == nil && a.abort == nil && a.unrecord == 0 && (a.ledger == nil || a.swept)
}

// addSumsRecord is addRecord with Sums: r's totals go to the sums, and a
// departed participant's lost messages of an older epoch count as
// received.
func (a *Assembler) addSumsRecord(p int32, r *LocalRecord) error {
	if len(r.Sent) > 0 || len(r.Received) > 0 || r.Changes {
		return a.fail(fmt.Errorf("%w: record of %s counts per channel, and this snapshot counts in sums", ErrProtocol, r.Process))
	}
	a.sumSent += r.SentTotal
	a.sumReceived += r.ReceivedTotal
	if a.procs[p].departed {
		a.sumReceived += r.lost().before(a.cfg.Snapshot)
	}
	a.weigh()
	return nil
}

// AddLost counts, with Sums, n messages lost with a receiver that stands
// in departed here (or was dropped before this snapshot began), sent
// before their senders' records: they were dead letters before the cut.
func (a *Assembler) AddLost(n uint64) {
	if a.abort == nil && a.global == nil {
		a.sumReceived += n
		a.weigh()
	}
}

// weigh recomputes, with Sums, whether the sums balance. Only once every
// participant required recorded do they hold the whole cut; until then
// no balance is judged (a participant required late may add to them).
func (a *Assembler) weigh() {
	if a.unrecord == 0 {
		a.setPending(&a.sumPending, a.sumSent != a.sumReceived+a.sumReported)
	}
}

// settled says whether Status would find the snapshot complete.
func (a *Assembler) settled() bool { return a.judged() && a.unsettled == 0 }

// addChannel is AddChannel of *cr, which it may change. *to caches the
// number of the receiver last found (negative: none).
func (a *Assembler) addChannel(cr *ChannelRecord, to *int32) error {
	if cr.Snapshot != a.cfg.Snapshot {
		return fmt.Errorf("%w: channel record for snapshot %d given to assembler of %d", ErrProtocol, cr.Snapshot, a.cfg.Snapshot)
	}
	if a.abort != nil || a.global != nil {
		return nil
	}
	if *to < 0 || a.procs[*to].id != cr.Channel.To {
		*to = a.proc(cr.Channel.To)
	}
	from := a.proc(cr.Channel.From)
	c := a.channel(from, *to)
	a.askDeparted(from)
	if a.cfg.Sums {
		// The receiver numbers nothing (or only for its captures): the
		// channel's messages are numbered here, in the order its parts
		// come, which is the order the receiver took them in.
		a.numberPart(c, cr)
	} else if old := a.chans[c].record; old != nil {
		if a.cfg.Mode != Epochs {
			return a.fail(fmt.Errorf("%w: second recording of channel %s", ErrProtocol, cr.Channel))
		}
		if err := a.extend(old, cr.Messages); err != nil {
			return err
		}
	} else {
		// The receiver's messages are a read-only view: a part added
		// later copies them rather than append into its array.
		cr.Messages = slices.Clip(cr.Messages)
		a.chans[c].record = a.chanRecs.put(*cr)
		a.withRecs = append(a.withRecs, c)
	}
	if a.cfg.Sums {
		// Its sender is a participant, stands in departed, or was
		// dropped drained: it is in the sums whether it records or not.
		a.sumReported += uint64(len(cr.Messages))
		a.weigh()
		return nil
	}
	if len(cr.Messages) > 0 {
		a.require(from)
	}
	if a.ledger != nil {
		to := *to
		a.procs[to].reported += uint64(len(cr.Messages))
		if a.swept {
			return a.judge(to)
		}
		return nil
	}
	return a.settle(c)
}

// numberPart adds, with Sums, a part of channel c's state: its messages,
// copied (the receiver's are shared by every snapshot it reports them
// for), numbered after those before.
func (a *Assembler) numberPart(c int32, cr *ChannelRecord) {
	old := a.chans[c].record
	if old == nil {
		rec := *cr
		rec.Messages = make([]Message, 0, len(cr.Messages))
		old = a.chanRecs.put(rec)
		a.chans[c].record = old
		a.withRecs = append(a.withRecs, c)
	}
	for _, m := range cr.Messages {
		old.Messages = append(old.Messages, Message{Seq: uint64(len(old.Messages)) + 1, Payload: m.Payload})
	}
}

// extend appends a part of a channel's state reported in the Epochs mode
// to what came before: its messages must continue those, one sequence
// number after the other, as a FIFO channel delivers them.
func (a *Assembler) extend(cr *ChannelRecord, msgs []Message) error {
	if n := len(cr.Messages); n > 0 && len(msgs) > 0 && msgs[0].Seq != cr.Messages[n-1].Seq+1 {
		return a.fail(fmt.Errorf("%w: channel %s: message %d reported after %d", ErrProtocol, cr.Channel, msgs[0].Seq, cr.Messages[n-1].Seq))
	}
	cr.Messages = append(cr.Messages, msgs...)
	return nil
}

// settle recomputes whether channel ci balances, and aborts if it never
// can. Only a channel whose both ends recorded can be judged; one with an
// end that has not is either waiting for a required participant, or
// carried nothing across the cut (its end would be required otherwise).
func (a *Assembler) settle(ci int32) error {
	c := &a.chans[ci]
	if a.procs[c.from].record == nil || a.procs[c.to].record == nil {
		return nil
	}
	if a.procs[c.to].departed {
		a.setPending(&c.pending, false)
		return nil
	}
	var k uint64
	if c.record != nil {
		k = uint64(len(c.record.Messages))
	}
	ok := c.received+k == c.sent
	closed := c.record != nil
	if a.cfg.Mode == Epochs {
		// Reported in parts, which must follow what came before the
		// receiver's record; only too many is final otherwise.
		if k > 0 && c.record.Messages[0].Seq != c.received+1 {
			return a.fail(fmt.Errorf("%w: snapshot %d: channel %s: in flight from message %d, but %d were received before the record",
				ErrProtocol, a.cfg.Snapshot, a.name(c), c.record.Messages[0].Seq, c.received))
		}
		closed = c.received+k > c.sent
	}
	if !ok && (closed || c.received > c.sent || a.procs[c.to].stopped) {
		// A closed recording, too many receipts or a receiver that
		// stopped cannot be mended.
		return a.fail(&BalanceError{Snapshot: a.cfg.Snapshot, Channel: a.name(c), Sent: c.sent, Received: c.received, Recorded: k})
	}
	a.setPending(&c.pending, !ok)
	return nil
}

// setPending marks a channel or a receiver as not balanced (pending) or
// balanced, keeping the count of those that are not.
func (a *Assembler) setPending(flag *bool, pending bool) {
	if *flag == pending {
		return
	}
	*flag = pending
	if pending {
		a.unsettled++
	} else {
		a.unsettled--
	}
}

func (a *Assembler) fail(reason error) error {
	if a.abort == nil {
		a.abort = &AbortError{Snapshot: a.cfg.Snapshot, Reason: reason, Missing: a.Missing()}
	}
	return a.abort
}

// Abort ends the snapshot with reason (for instance, a participant
// stopped). It does nothing once the snapshot is complete or aborted.
func (a *Assembler) Abort(reason error) {
	if a.global == nil {
		a.fail(reason)
	}
}

// Status says where the assembly stands at now. A pending snapshot whose
// deadline has passed is aborted with ErrTimeout. The first Status that
// finds it complete builds the Global, with End set to now.
func (a *Assembler) Status(now time.Time) Status {
	switch {
	case a.global != nil:
		return Status{State: Complete}
	case a.abort != nil:
		return Status{State: Aborted, Err: a.abort}
	case a.unrecord == 0 && a.ledger != nil && !a.swept:
		if a.sweep(); a.abort != nil {
			return Status{State: Aborted, Err: a.abort}
		}
		return a.Status(now)
	case a.settled():
		a.global = a.build(now)
		return Status{State: Complete}
	case !a.cfg.Deadline.IsZero() && !now.Before(a.cfg.Deadline):
		return Status{State: Aborted, Err: a.fail(ErrTimeout)}
	}
	return Status{State: Pending}
}

// Owed returns, once every participant required has recorded (and, with
// a Ledger, its channels in flight were added), the receivers of the
// channels that do not balance yet, each once, in the order they were
// numbered; nil before. In the Epochs mode every message such a channel
// still owes was sent before its sender's record, so in one process it
// is already in its receiver's queue: a receiver that captures its queue
// again (Process.Capture) reports it at once, rather than when it reads
// it after a pass over the busy mailboxes. Departed and stopped receivers
// are left out: nothing more comes from them. ok is false before every
// participant recorded, and once the snapshot is over.
func (a *Assembler) Owed() (owed []ProcessID, ok bool) {
	if !a.judged() {
		return nil, false
	}
	if a.unsettled == 0 {
		return nil, true
	}
	var out []ProcessID
	if a.cfg.Sums {
		// The sums cannot say whom: every participant is asked.
		for i := range a.procs {
			if pa := &a.procs[i]; pa.record != nil && !pa.departed && !pa.stopped {
				out = append(out, pa.id)
			}
		}
		return out, true
	}
	if a.ledger != nil {
		for i := range a.procs {
			if pa := &a.procs[i]; pa.pending && !pa.departed && !pa.stopped {
				out = append(out, pa.id)
			}
		}
		return out, true
	}
	var named []bool // by process number
	for i := range a.chans {
		c := &a.chans[i]
		if !c.pending {
			continue
		}
		if named == nil {
			named = make([]bool, len(a.procs))
		}
		if pa := &a.procs[c.to]; !named[c.to] && !pa.departed && !pa.stopped {
			named[c.to] = true
			out = append(out, pa.id)
		}
	}
	return out, true
}

// sweep judges, once every participant recorded, every receiver that
// recorded: the Ledger's sums are then complete for this cut but for
// what records after it added, which each run set aside (later).
func (a *Assembler) sweep() {
	a.swept = true
	a.unsettled = 0
	for i := range a.procs {
		a.procs[i].pending = false
	}
	for i := range a.procs {
		if pa := &a.procs[i]; pa.record != nil && !pa.departed {
			if a.judge(int32(i)) != nil {
				return
			}
		}
	}
}

// judge recomputes, after the sweep, whether receiver q balances: sent
// to it before its senders' records = received before its record +
// reported in flight since. One that falls short waits for its reports,
// unless it stopped; one over may still be made up by a participant
// required late, whose record adds to the sums.
func (a *Assembler) judge(q int32) error {
	pa := &a.procs[q]
	if pa.record == nil || pa.departed {
		return nil
	}
	sent := a.sentTo(pa) - pa.late
	got := pa.total + pa.reported
	ok := got == sent
	if got > sent && !pa.named && !pa.record.Changes {
		// Over: a sender it counted may be one this snapshot does not
		// know yet, which must record (its record adds to the sums).
		pa.named = true
		r := pa.record
		for _, pc := range r.Received {
			a.named(a.proc(pc.Peer), pc.N)
		}
		pa = &a.procs[q] // named may have grown a.procs
	}
	if !ok && pa.stopped {
		return a.fail(&ReceiverBalanceError{Snapshot: a.cfg.Snapshot, Receiver: pa.id, Sent: sent, Received: pa.total, Recorded: pa.reported})
	}
	a.setPending(&pa.pending, !ok)
	return nil
}

// sentTo returns the Ledger's sum of what was sent to process pa.
func (a *Assembler) sentTo(pa *procAcc) uint64 {
	if pa.lp == nil {
		pa.lp = a.ledger.procs[pa.id]
		if pa.lp == nil {
			return 0
		}
	}
	return pa.lp.sentTo
}

// after reports whether what rec adds to the Ledger's sums comes after
// this snapshot's cut: a record of a later snapshot, or a final record
// (Snapshot zero) of a process whose epoch had reached this snapshot (it
// recorded it, or was born after its cut). The final record of one that
// had not stands in for its record, so counts at its cut, whether or not
// this snapshot knows of it yet (its birth and its stop may come in
// either order).
func (a *Assembler) after(rec *LocalRecord) bool {
	if a.abort != nil || a.global != nil {
		return false
	}
	if rec.Snapshot != 0 {
		return rec.Snapshot > a.cfg.Snapshot
	}
	return rec.Epoch >= a.cfg.Snapshot
}

// later sets aside d, added to the sum of receiver lp by a record after
// this cut.
func (a *Assembler) later(lp *ledgerProc, d uint64) {
	a.procs[a.ledgerProc(lp)].late += d
}

// ledgerProc returns the number of the Ledger's process q, numbering it
// if new: the number is kept in q for this Assembler, so that a process
// named by thousands of records is looked up by name once.
func (a *Assembler) ledgerProc(q *ledgerProc) int32 {
	if q.gen != a.gen {
		q.gen, q.idx = a.gen, a.proc(q.id)
	}
	return q.idx
}

// Peers returns the processes that recorded (not departed ones) and share
// with process id a channel this snapshot's records name, in name order.
// A caller that drops a departed process (Process.DropPeer) tells these.
func (a *Assembler) Peers(id ProcessID) []ProcessID {
	q, ok := a.lookup(id)
	if !ok {
		return nil
	}
	var out []ProcessID
	if a.ledger != nil {
		// Channels no record here named are in the Ledger.
		for _, o := range a.ledger.peersOf(id) {
			if i, ok := a.lookup(o); ok && i != q && a.procs[i].record != nil && !a.procs[i].departed {
				out = append(out, o)
			}
		}
	}
	for _, ci := range a.procs[q].chans {
		c := &a.chans[ci]
		if !c.seen {
			continue
		}
		o := c.to
		if o == q {
			o = c.from
		}
		if pa := &a.procs[o]; pa.record != nil && !pa.departed && o != q {
			out = append(out, pa.id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Unrecorded lists the participants that must record and have not, in
// the order they were numbered: Missing's participants without its scan
// of the channels, for a caller that asks often (a sweep).
func (a *Assembler) Unrecorded() []ProcessID {
	if a.unrecord == 0 {
		return nil
	}
	out := make([]ProcessID, 0, a.unrecord)
	for i := range a.procs {
		if p := &a.procs[i]; p.required && p.record == nil {
			out = append(out, p.id)
		}
	}
	return out
}

// Missing lists what keeps the snapshot from completing.
func (a *Assembler) Missing() Missing {
	var m Missing
	for _, p := range a.procs {
		if p.required && p.record == nil {
			m.Participants = append(m.Participants, p.id)
		}
	}
	slices.Sort(m.Participants)
	for i := range a.chans {
		c := &a.chans[i]
		if !c.pending {
			continue
		}
		g := ChannelGap{Channel: a.name(c), Sent: c.sent, Received: c.received, Open: c.record == nil}
		if c.record != nil {
			g.Recorded = uint64(len(c.record.Messages))
		}
		m.Channels = append(m.Channels, g)
	}
	slices.SortFunc(m.Channels, func(x, y ChannelGap) int { return x.Channel.compare(y.Channel) })
	if a.ledger != nil && a.swept {
		for i := range a.procs {
			if pa := &a.procs[i]; pa.pending {
				m.Receivers = append(m.Receivers, ReceiverGap{Receiver: pa.id, Sent: a.sentTo(pa) - pa.late, Received: pa.total, Recorded: pa.reported})
			}
		}
		slices.SortFunc(m.Receivers, func(x, y ReceiverGap) int { return strings.Compare(string(x.Receiver), string(y.Receiver)) })
	}
	if a.sumPending {
		m.Sums = &SumGap{Sent: a.sumSent, Received: a.sumReceived, Recorded: a.sumReported}
	}
	return m
}

// inFlightChans returns, with a Ledger, the channels the Global of a
// complete snapshot lists (both ends recorded, the receiver not departed,
// and messages in flight), by their senders' ranks, then their
// receivers'. Only a channel with a recording can be in flight: every
// receiver balances once the snapshot is complete, and a message sent to
// it before its sender's record and received after its own was reported.
func (a *Assembler) inFlightChans(rank []int32) []int32 {
	listed := make([]int32, 0, len(a.withRecs))
	for _, ci := range a.withRecs {
		if c := &a.chans[ci]; c.seen && !a.procs[c.to].departed && a.procs[c.from].record != nil && a.procs[c.to].record != nil &&
			len(c.record.Messages) > 0 {
			listed = append(listed, ci)
		}
	}
	if len(listed) < 2 {
		return listed
	}
	// Placed by sender, after the channels of the senders ranked before
	// (a count of each rank's), then each sender's few sorted.
	at := make([]int32, len(a.procs)+1)
	for _, ci := range listed {
		at[rank[a.chans[ci].from]+1]++
	}
	for r := 1; r < len(at); r++ {
		at[r] += at[r-1]
	}
	// at[r] is where rank r's first goes, and where rank r+1's first
	// is once rank r's are placed.
	chans := make([]int32, len(listed))
	for _, ci := range listed {
		r := rank[a.chans[ci].from]
		chans[at[r]] = ci
		at[r]++
	}
	for i := 0; i < len(chans); {
		end := int(at[rank[a.chans[chans[i]].from]])
		if s := chans[i:end]; len(s) > 1 {
			slices.SortFunc(s, func(x, y int32) int { return int(rank[a.chans[x].to] - rank[a.chans[y].to]) })
		}
		i = end
	}
	return chans
}

// Global returns the assembled snapshot once Status has reported Complete.
func (a *Assembler) Global() (*Global, error) {
	if a.global == nil {
		if a.abort != nil {
			return nil, a.abort
		}
		return nil, fmt.Errorf("%w: snapshot %d: %s", ErrIncomplete, a.cfg.Snapshot, a.Missing())
	}
	return a.global, nil
}

// build makes the Global, in the order Global promises: processes sorted
// by name once, and channels sorted by their ends' ranks in that order.
func (a *Assembler) build(end time.Time) *Global {
	order := make([]int32, len(a.procs))
	for i := range order {
		order[i] = int32(i)
	}
	byName := func(x, y int32) int { return strings.Compare(string(a.procs[x].id), string(a.procs[y].id)) }
	if !slices.IsSortedFunc(order, byName) { // given in order, as a caller can
		slices.SortFunc(order, byName)
	}
	rank := make([]int32, len(a.procs))
	for r, p := range order {
		rank[p] = int32(r)
	}
	g := &Global{
		ID:           a.cfg.Snapshot,
		Mode:         a.cfg.Mode,
		Start:        a.cfg.Start,
		End:          end,
		Participants: make([]Participant, 0, a.recorded),
	}
	for _, p := range order {
		pa := &a.procs[p]
		if r := pa.record; r != nil {
			pt := Participant{ID: r.Process, Kind: r.Kind, State: r.State, Departed: pa.departed, Waits: r.Waits}
			if a.ledger != nil && !pa.departed {
				// What it was judged by, for Verify to check again.
				pt.SentTo, pt.Received = a.sentTo(pa)-pa.late, pa.total
			}
			g.Participants = append(g.Participants, pt)
		}
	}
	g.ReceiverCounts = a.ledger != nil
	if a.cfg.Sums {
		g.Sums = &SumCounts{Sent: a.sumSent, Received: a.sumReceived}
	}
	var chans []int32
	if a.ledger != nil || a.cfg.Sums {
		chans = a.inFlightChans(rank)
	} else {
		// Channels by sender in name order, then by receiver: each
		// process lists its channels, so only each sender's few are
		// sorted.
		chans = make([]int32, 0, len(a.chans))
		for _, p := range order {
			first := len(chans)
			for _, ci := range a.procs[p].chans {
				if c := &a.chans[ci]; c.from == p && c.seen && !a.procs[c.to].departed {
					chans = append(chans, ci)
				}
			}
			slices.SortFunc(chans[first:], func(x, y int32) int { return int(rank[a.chans[x].to] - rank[a.chans[y].to]) })
		}
	}
	// Sized to the channels listed: with a Ledger, those in flight, a
	// small part of every channel known.
	g.Channels = make([]ChannelState, 0, len(chans))
	for _, i := range chans {
		c := &a.chans[i]
		cs := ChannelState{Channel: a.name(c), Sent: c.sent, Received: c.received}
		if c.record != nil {
			cs.Messages = c.record.Messages
		}
		if a.ledger != nil || a.cfg.Sums {
			// Counts are kept per receiver: a channel's follow from its
			// messages, one sequence number after the other.
			ms := cs.Messages
			cs.Received, cs.Sent = ms[0].Seq-1, ms[len(ms)-1].Seq
		}
		g.Channels = append(g.Channels, cs)
	}
	return g
}
