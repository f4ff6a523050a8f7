package snapshot

import (
	"fmt"
	"slices"
	"strings"
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
	Participants []ProcessID
	// Start is when the snapshot began; it is copied into the Global.
	Start time.Time
	// Deadline, if not zero, aborts the snapshot with ErrTimeout when
	// Status is called at or after it and the snapshot is not complete.
	Deadline time.Time
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
func (m Missing) Empty() bool { return len(m.Participants) == 0 && len(m.Channels) == 0 }

func (m Missing) String() string {
	var parts []string
	if len(m.Participants) > 0 {
		names := make([]string, len(m.Participants))
		for i, p := range m.Participants {
			names[i] = string(p)
		}
		parts = append(parts, "not recorded: "+strings.Join(names, ", "))
	}
	for _, g := range m.Channels {
		state := "closed"
		if g.Open {
			state = "open"
		}
		parts = append(parts, fmt.Sprintf("channel %s %s: sent %d, received %d, recorded %d", g.Channel, state, g.Sent, g.Received, g.Recorded))
	}
	if len(parts) == 0 {
		return "nothing missing"
	}
	return strings.Join(parts, "; ")
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

// chanAcc accumulates what the records say of one channel.
type chanAcc struct {
	ch       Channel
	sent     uint64 // from the sender's record
	received uint64 // from the receiver's record
	record   *ChannelRecord
	pending  bool // both ends recorded and not balanced: counted in unsettled
}

// Assembler collects the records of one snapshot and decides, by counters,
// when it is complete (DESIGN.md decision 3): every participant has recorded
// and every channel balances, sent-before = received-before + recorded. It
// is pure and not safe for concurrent use. Records may arrive in any order.
type Assembler struct {
	cfg       AssemblerConfig
	records   map[ProcessID]*LocalRecord
	required  map[ProcessID]bool // participant -> has recorded
	unrecord  int                // required participants not recorded
	chans     map[Channel]*chanAcc
	byProcess map[ProcessID][]*chanAcc
	unsettled int
	departed  map[ProcessID]bool
	abort     *AbortError
	global    *Global
}

// NewAssembler returns an Assembler for cfg.Snapshot.
func NewAssembler(cfg AssemblerConfig) (*Assembler, error) {
	if cfg.Snapshot == 0 {
		return nil, fmt.Errorf("%w: %w", ErrConfig, ErrInvalidID)
	}
	a := &Assembler{
		cfg:       cfg,
		records:   make(map[ProcessID]*LocalRecord, len(cfg.Participants)),
		required:  make(map[ProcessID]bool, len(cfg.Participants)),
		chans:     make(map[Channel]*chanAcc),
		byProcess: make(map[ProcessID][]*chanAcc),
		departed:  make(map[ProcessID]bool),
	}
	for _, p := range cfg.Participants {
		a.require(p)
	}
	return a, nil
}

// Require adds a participant that must record before the snapshot can
// complete: one born before the cut, while the snapshot ran.
func (a *Assembler) Require(p ProcessID) {
	if a.abort == nil && a.global == nil {
		a.require(p)
	}
}

// Snapshot returns the id being assembled.
func (a *Assembler) Snapshot() SnapshotID { return a.cfg.Snapshot }

func (a *Assembler) require(p ProcessID) {
	if _, ok := a.required[p]; ok {
		return
	}
	_, recorded := a.records[p]
	a.required[p] = recorded
	if !recorded {
		a.unrecord++
	}
}

func (a *Assembler) channel(ch Channel) *chanAcc {
	c := a.chans[ch]
	if c == nil {
		c = &chanAcc{ch: ch}
		a.chans[ch] = c
		a.byProcess[ch.From] = append(a.byProcess[ch.From], c)
		if ch.To != ch.From {
			a.byProcess[ch.To] = append(a.byProcess[ch.To], c)
		}
	}
	return c
}

// AddRecord adds a process's local record. A second record from one
// process aborts the snapshot. Records for another snapshot are rejected.
func (a *Assembler) AddRecord(r LocalRecord) error {
	if r.Snapshot != a.cfg.Snapshot {
		return fmt.Errorf("%w: record for snapshot %d given to assembler of %d", ErrProtocol, r.Snapshot, a.cfg.Snapshot)
	}
	if a.abort != nil || a.global != nil {
		return nil
	}
	if _, dup := a.records[r.Process]; dup {
		return a.fail(fmt.Errorf("%w: second local record from %s", ErrProtocol, r.Process))
	}
	a.records[r.Process] = &r
	if recorded, ok := a.required[r.Process]; ok && !recorded {
		a.required[r.Process] = true
		a.unrecord--
	}
	for _, pc := range r.Sent {
		c := a.channel(Channel{From: r.Process, To: pc.Peer})
		c.sent = pc.N
		if pc.N > 0 {
			a.require(pc.Peer)
		}
	}
	for _, pc := range r.Received {
		c := a.channel(Channel{From: pc.Peer, To: r.Process})
		c.received = pc.N
		if pc.N > 0 {
			a.require(pc.Peer)
		}
	}
	for _, c := range a.byProcess[r.Process] {
		if err := a.settle(c); err != nil {
			return err
		}
	}
	return nil
}

// AddDeparted adds the final record of a process that stopped before this
// snapshot began: its counters are final and its state is gone. It stands
// in for the process's local record: channels from it balance against its
// final counts, and channels to it are left out of the snapshot (messages
// sent to a stopped actor are dead letters).
func (a *Assembler) AddDeparted(r LocalRecord) error {
	r.Kind, r.State = "", nil
	if _, dup := a.records[r.Process]; !dup {
		a.departed[r.Process] = true
	}
	return a.AddRecord(r)
}

// AddChannel adds the closed recording of one channel. A second recording
// of one channel aborts the snapshot.
func (a *Assembler) AddChannel(cr ChannelRecord) error {
	if cr.Snapshot != a.cfg.Snapshot {
		return fmt.Errorf("%w: channel record for snapshot %d given to assembler of %d", ErrProtocol, cr.Snapshot, a.cfg.Snapshot)
	}
	if a.abort != nil || a.global != nil {
		return nil
	}
	c := a.channel(cr.Channel)
	if c.record != nil {
		return a.fail(fmt.Errorf("%w: second recording of channel %s", ErrProtocol, cr.Channel))
	}
	c.record = &cr
	if len(cr.Messages) > 0 {
		a.require(cr.Channel.From)
	}
	return a.settle(c)
}

// settle recomputes whether c balances, and aborts if it never can. Only a
// channel whose both ends recorded can be judged; one with an end that has
// not is either waiting for a required participant, or carried nothing
// across the cut (its end would be required otherwise).
func (a *Assembler) settle(c *chanAcc) error {
	_, fromOK := a.records[c.ch.From]
	_, toOK := a.records[c.ch.To]
	if !fromOK || !toOK {
		return nil
	}
	if a.departed[c.ch.To] {
		if c.pending {
			c.pending = false
			a.unsettled--
		}
		return nil
	}
	var k uint64
	if c.record != nil {
		k = uint64(len(c.record.Messages))
	}
	ok := c.received+k == c.sent
	if !ok && (c.record != nil || c.received > c.sent) {
		// A closed recording or too many receipts cannot be mended.
		return a.fail(&BalanceError{Snapshot: a.cfg.Snapshot, Channel: c.ch, Sent: c.sent, Received: c.received, Recorded: k})
	}
	if ok == c.pending {
		c.pending = !ok
		if ok {
			a.unsettled--
		} else {
			a.unsettled++
		}
	}
	return nil
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
	case a.unrecord == 0 && a.unsettled == 0:
		a.global = a.build(now)
		return Status{State: Complete}
	case !a.cfg.Deadline.IsZero() && !now.Before(a.cfg.Deadline):
		return Status{State: Aborted, Err: a.fail(ErrTimeout)}
	}
	return Status{State: Pending}
}

// Missing lists what keeps the snapshot from completing.
func (a *Assembler) Missing() Missing {
	var m Missing
	for p, recorded := range a.required {
		if !recorded {
			m.Participants = append(m.Participants, p)
		}
	}
	slices.Sort(m.Participants)
	for _, c := range a.chans {
		if !c.pending {
			continue
		}
		g := ChannelGap{Channel: c.ch, Sent: c.sent, Received: c.received, Open: c.record == nil}
		if c.record != nil {
			g.Recorded = uint64(len(c.record.Messages))
		}
		m.Channels = append(m.Channels, g)
	}
	slices.SortFunc(m.Channels, func(x, y ChannelGap) int { return x.Channel.compare(y.Channel) })
	return m
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

func (a *Assembler) build(end time.Time) *Global {
	g := &Global{
		ID:           a.cfg.Snapshot,
		Mode:         a.cfg.Mode,
		Start:        a.cfg.Start,
		End:          end,
		Participants: make([]Participant, 0, len(a.records)),
		Channels:     make([]ChannelState, 0, len(a.chans)),
	}
	for _, r := range a.records {
		g.Participants = append(g.Participants, Participant{ID: r.Process, Kind: r.Kind, State: r.State, Departed: a.departed[r.Process]})
	}
	for _, c := range a.chans {
		if a.departed[c.ch.To] {
			continue
		}
		cs := ChannelState{Channel: c.ch, Sent: c.sent, Received: c.received}
		if c.record != nil {
			cs.Messages = c.record.Messages
		}
		g.Channels = append(g.Channels, cs)
	}
	g.sort()
	return g
}
