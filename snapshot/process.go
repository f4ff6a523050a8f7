package snapshot

import (
	"fmt"
	"maps"
	"slices"
)

// Config configures a Process.
type Config struct {
	// ID is the process's name; required.
	ID ProcessID
	// Mode is the snapshot algorithm. The zero value is Unaligned.
	Mode Mode
	// Outgoing declares channels to processes this one will send to.
	// Channels are also discovered by Send; declaring them up front makes
	// markers travel on them before the first message does. Where
	// processes stop and are dropped (DropPeer), declare each such channel
	// at the receiver too (Incoming), as package actors does for a child:
	// a receiver that has not heard of the channel when its sender is
	// dropped cannot tell that sender's markers still on their way from a
	// new channel's, and would name the sender again.
	Outgoing []ProcessID
	// Incoming declares channels from processes this one will receive from.
	// Channels are also discovered by Receive and Marker. In the aligned
	// mode a snapshot waits for a barrier on every known incoming channel
	// that is not a back edge, so declare one only if its sender declares
	// it outgoing too (or has sent on it): else the snapshot waits for a
	// barrier that never comes, until its timeout.
	Incoming []ProcessID
	// Finished lists snapshots this process must never take part in, as if
	// they were already finished here: for a process created while they ran,
	// by a creator that had already recorded them (it was born after their
	// cut; docs/design.md, decision 7).
	Finished []SnapshotID
	// Horizon, like Finished, marks every snapshot up to it as finished.
	Horizon SnapshotID
	// Sent and Received restore a process's channels from a snapshot: the
	// messages already sent on each outgoing channel and received on each
	// incoming one, so that sequence numbers continue and the next snapshot
	// balances.
	Sent, Received []PeerCount
	// DeltaMin, in the Epochs mode, when positive, is the fewest channels
	// a process has for a record to list only the counters that changed
	// since its last (when at most a quarter of them did, or half if its
	// last record listed only changes): below it, or past that share, a
	// record lists them all. Zero or negative: every record but the first
	// (and the first after Resync) lists only what changed, which costs
	// the process and the coordinator's Ledger least; a positive value is
	// for tests of records of every counter that follow the last.
	DeltaMin int
	// Sums, in the Epochs mode, counts in sums rather than per channel:
	// the process keeps two totals, the messages it sent and those it
	// received, and its records carry them (LocalRecord.SentTotal and
	// ReceivedTotal) and no count per channel, as in Mattern's sum
	// counters. A send touches no table, and a receipt none either but
	// while a capture's messages are still to come on its channel
	// (sums.go); the coordinator numbers the messages in flight
	// (Stamp.Seq is neither given nor read). Outgoing,
	// Incoming, Sent, Received and DeltaMin do not apply. The coordinator
	// must count in sums too (CoordinatorConfig.Sums); a process that
	// stops hands over what is still queued for it (Lose) before its
	// final record.
	Sums bool
	// SentTotal, with Sums, restores a process from a snapshot: the
	// messages it sent that the snapshot holds in flight, which a
	// restore replays, so that the next snapshot balances.
	SentTotal uint64
	// BackEdges names, in the aligned mode, the senders of incoming
	// channels that are back edges: the process does not wait for their
	// barriers before recording, and logs what arrives on them after its
	// record until the barrier comes, as their channel state. They must
	// break every cycle of the channel graph (BackEdges computes such a
	// set), or processes on a cycle wait for each other until the snapshot
	// times out. Ignored in the unaligned mode.
	BackEdges []ProcessID
}

// outChan is the sending end of a channel.
type outChan struct {
	to      ProcessID
	sent    uint64 // messages sent so far; the last stamp's Seq
	dropped bool   // Drop removed it: a handle on it is filled again
	changed bool   // Epochs mode: sent since the last record (in Process.changedOut)
	slot    int32  // its index in Process.outs
	listed  uint64 // Epochs mode: sent as of the last record that listed it (LocalRecord.Prior)
}

// OutHandle holds a process's outgoing channel to one peer, for a caller
// that sends to many peers in turn and keeps a handle per peer (an actor
// beside its cached targets): SendOn then finds the channel without
// looking its peer's name up. The zero value is empty. A handle whose
// channel was dropped (Drop: the peer stopped, and its name may be given
// again) is filled again by name, so a stale handle never counts on a
// channel the process no longer has. A handle belongs to one Process.
type OutHandle struct{ c *outChan }

// inChan is the receiving end of a channel. While any snapshot records it,
// the messages received are appended to one log shared by every open
// recording: a recording is a range of that log, so a message recorded for k
// snapshots is held once.
type inChan struct {
	from     ProcessID
	dropped  bool      // Drop removed it: a handle on it is filled again
	received uint64    // messages received so far; the last stamp's Seq
	log      []Message // received messages with Seq in (base, received]
	base     uint64
	open     int        // snapshots recording this channel
	departed bool       // the sender stopped: nothing more will come
	epoch    SnapshotID // Epochs mode: the last message's
	// Epochs mode: what captures reported of its messages not received
	// yet, by increasing sequence number (capture.go); empty when none.
	capt []capSeg
	slot int32 // its index in Process.ins

	// Aligned mode.
	back    bool // a back edge: never waited for
	blocked bool // held until the pending snapshot records
	shown   bool // blocked as last reported by Ready
	dirty   bool // in Process.dirty
}

// InHandle holds a process's incoming channel from one peer, as
// OutHandle holds an outgoing one: for ReceivedOn and ReceiveOn.
type InHandle struct{ c *inChan }

// recording is the state of one incoming channel for one snapshot. Before
// an aligned snapshot records, closed means its barrier has arrived and
// awaited that the process waits for it.
type recording struct {
	start   uint64 // c.received when recording began
	closed  bool
	awaited bool
}

// snap is a snapshot this process takes part in.
type snap struct {
	id        SnapshotID
	recorded  bool
	chans     map[ProcessID]recording
	open      int  // recordings not closed
	finished  bool // Finished was reported
	awaiting  int  // aligned, before the record: barriers still awaited
	discarded bool // Discard: markers and stamps for it are ignored
}

// Process is the snapshot state machine of one process. The caller feeds it
// events (Send, Receive, Marker, Initiate, Forget) and carries out the
// actions it returns through Ready. A Process is not safe for concurrent
// use: drive it from the process's own goroutine only.
type Process struct {
	id   ProcessID
	mode Mode

	out     map[ProcessID]*outChan
	outs    []*outChan // in order of discovery: markers go out in this order
	in      map[ProcessID]*inChan
	ins     []*inChan
	lastIn  *inChan // one-entry caches: most traffic repeats a peer
	lastOut *outChan

	snaps []*snap // live snapshots, in order of arrival
	// spareChans is the recordings map of the last snapshot forgotten,
	// emptied, for the next one: one map per process, not one per
	// process and snapshot (3.8 MB a snapshot of 10,000 processes).
	spareChans map[ProcessID]recording
	logged     int // messages in the logs of all incoming channels
	done       doneSet
	ready      Ready

	// Aligned mode.
	back    map[ProcessID]bool
	awaits  []awaitSet   // by increasing from; none: every input that is not a back edge
	pending *snap        // the one snapshot aligning here, not yet recorded
	queued  []SnapshotID // started by the coordinator while another aligned
	dirty   []*inChan    // channels whose blocking changed since Ready

	// bornAfter is Config.Finished: the snapshots this process was born
	// after the cut of. Its first messages name them, so that a receiver
	// that has not recorded one records it before (the message comes after
	// the cut); folded into done's horizon, they would not.
	bornAfter []SnapshotID

	// epoch is the newest snapshot recorded here (Epochs mode; epoch.go).
	epoch SnapshotID
	// segs is Capture's scratch for a channel's new segments.
	segs []capSeg
	// spareSnap is a snapshot forgotten in the Epochs mode, for the next
	// record to take.
	spareSnap *snap
	// Epochs mode: the outgoing channels whose counters changed since the
	// last record, which the next record lists; that record's snapshot;
	// whether the next record lists every channel instead (the first, and
	// the first after Resync); whether the last listed only changes;
	// Config.DeltaMin.
	changedOut []*outChan
	sortKeys   []uint64 // epochCounters' scratch
	lastRecord SnapshotID
	full       bool
	deltas     bool // the last record listed only what changed
	deltaMin   int
	// receivedTotal is the sum of the incoming channels' counts
	// (LocalRecord.ReceivedTotal).
	receivedTotal uint64
	// Config.Sums: counting in sums (sums.go), with the messages sent
	// and those lost at a stop (Lose).
	sums      bool
	sentTotal uint64
	lost      EpochCounts

	// gone holds senders that are no more, with no channel here: those
	// that departed before any message of theirs came (Departed on an
	// unknown channel), which an aligned snapshot does not await, and those
	// dropped before their departure came, whose markers still on their
	// way are stale. A message from the name (a new sender under it) ends
	// it, and so does the departure of a dropped one: nothing of it comes
	// after that. Nil until one is.
	gone map[ProcessID]goneState
}

// goneState says why a sender is in Process.gone.
type goneState uint8

const (
	goneUnheard  goneState = iota + 1 // departed before anything of it came
	goneDropping                      // dropped; its departure is still to come
)

func (p *Process) setGone(from ProcessID, st goneState) {
	if p.gone == nil {
		p.gone = make(map[ProcessID]goneState)
	}
	p.gone[from] = st
}

// NewProcess returns a Process with cfg's declared channels.
func NewProcess(cfg Config) (*Process, error) {
	if cfg.ID == "" {
		return nil, fmt.Errorf("%w: empty process id", ErrConfig)
	}
	if !cfg.Mode.Valid() {
		return nil, fmt.Errorf("%w: unknown mode %s", ErrConfig, cfg.Mode)
	}
	if cfg.Sums {
		if err := cfg.checkSums(); err != nil {
			return nil, err
		}
	}
	p := &Process{
		id:   cfg.ID,
		mode: cfg.Mode,
		sums: cfg.Sums,
		out:  make(map[ProcessID]*outChan, len(cfg.Outgoing)),
		in:   make(map[ProcessID]*inChan, len(cfg.Incoming)),
	}
	p.setBackEdges(cfg.BackEdges)
	if p.sums {
		p.sentTotal = cfg.SentTotal
		p.initEpoch(cfg)
		return p, nil
	}
	for _, to := range cfg.Outgoing {
		p.outChannel(to)
	}
	for _, from := range cfg.Incoming {
		p.inChannel(from)
	}
	for _, pc := range cfg.Sent {
		p.outChannel(pc.Peer).sent = pc.N
	}
	for _, pc := range cfg.Received {
		c := p.inChannel(pc.Peer)
		p.receivedTotal += pc.N - c.received
		c.received, c.base = pc.N, pc.N
	}
	p.done.horizon = cfg.Horizon
	for _, id := range cfg.Finished {
		p.done.add(id)
		if id > cfg.Horizon {
			p.bornAfter = append(p.bornAfter, id)
		}
	}
	if p.mode == Epochs {
		p.initEpoch(cfg)
	}
	return p, nil
}

// ID returns the process's name.
func (p *Process) ID() ProcessID { return p.id }

// Mode returns the process's snapshot algorithm.
func (p *Process) Mode() Mode { return p.mode }

// DeclareOutgoing adds a channel to to, as Config.Outgoing does. A channel
// declared after the process recorded a snapshot is not part of it: its
// first message tells the receiver so.
func (p *Process) DeclareOutgoing(to ProcessID) {
	if !p.sums {
		p.outChannel(to)
	}
}

func (p *Process) outChannel(to ProcessID) *outChan {
	c := p.out[to]
	if c == nil {
		c = &outChan{to: to, slot: int32(len(p.outs))}
		p.out[to] = c
		p.outs = append(p.outs, c)
	}
	return c
}

func (p *Process) inChannel(from ProcessID) *inChan {
	if c := p.lastIn; c != nil && c.from == from {
		return c
	}
	c := p.in[from]
	if c == nil {
		c = &inChan{from: from, back: p.back[from], slot: int32(len(p.ins))}
		p.in[from] = c
		p.ins = append(p.ins, c)
		delete(p.gone, from) // a new sender under the name
	}
	p.lastIn = c
	return c
}

// Send is called for every application message about to be sent to to,
// before it is sent; the returned stamp must travel with the message. It
// never produces actions.
func (p *Process) Send(to ProcessID) Stamp {
	if p.sums {
		p.sentTotal++
		return Stamp{Epoch: p.epoch}
	}
	c := p.lastOut
	if c == nil || c.to != to {
		if c = p.out[to]; c == nil {
			c = p.outChannel(to)
		}
		p.lastOut = c
	}
	return p.send(c)
}

// SendOn is Send through h, a handle on the channel to to, which it
// fills when it is empty or its channel was dropped.
func (p *Process) SendOn(h *OutHandle, to ProcessID) Stamp {
	if p.sums {
		p.sentTotal++
		return Stamp{Epoch: p.epoch}
	}
	c := h.c
	if c == nil || c.dropped || c.to != to {
		if c = p.out[to]; c == nil {
			c = p.outChannel(to)
		}
		h.c = c
	}
	return p.send(c)
}

// send counts a message on c and returns its stamp.
func (p *Process) send(c *outChan) Stamp {
	c.sent++
	if p.mode == Epochs {
		if !c.changed {
			c.changed = true
			p.changedOut = append(p.changedOut, c)
		}
		return Stamp{Seq: c.sent, Epoch: p.epoch}
	}
	if c.sent == 1 {
		return p.firstStamp()
	}
	return Stamp{Seq: c.sent}
}

// firstStamp is the stamp of a channel's first message: the snapshots this
// process has recorded or finished, so that the receiver can tell whether
// the message was sent before or after this process's record.
func (p *Process) firstStamp() Stamp {
	st := Stamp{Seq: 1, Horizon: p.done.horizon}
	n := len(p.done.above) + len(p.bornAfter)
	for _, s := range p.snaps {
		if s.recorded {
			n++
		}
	}
	if n == 0 {
		return st
	}
	st.Recorded = make([]SnapshotID, 0, n)
	for _, s := range p.snaps {
		if s.recorded {
			st.Recorded = append(st.Recorded, s.id)
		}
	}
	st.Recorded = slices.AppendSeq(st.Recorded, maps.Keys(p.done.above))
	st.Recorded = append(st.Recorded, p.bornAfter...)
	slices.Sort(st.Recorded)
	st.Recorded = slices.Compact(st.Recorded)
	return st
}

// Receive is called for every application message received from from,
// before the application sees it. If it leaves actions (HasReady), the
// caller carries them out before delivering the message: the message may
// act as a marker, and the state must be recorded without it; in the
// aligned mode, Ready.Hold says not to deliver it but to give it again
// later. An error means the channel's FIFO guarantee was broken or the
// stamp contradicts the protocol; the message was not accounted for.
func (p *Process) Receive(from ProcessID, st Stamp, payload any) error {
	if p.sums {
		return p.receiveSums(nil, from, st, payload)
	}
	return p.receive(p.inChannel(from), from, st, payload)
}

// ReceiveNextOn is Receive through h, a handle on the channel from from,
// which it fills when it is empty or its channel was dropped, for a caller
// whose channels are FIFO by construction and number nothing (one mailbox
// queue per sender): the message is the channel's next, and st.Seq is set
// to its number. The channel is found once, however new it is.
func (p *Process) ReceiveNextOn(h *InHandle, from ProcessID, st Stamp, payload any) error {
	if p.sums {
		return p.receiveSums(h, from, st, payload)
	}
	c := h.c
	if c == nil || c.dropped || c.from != from {
		c = p.inChannel(from)
		h.c = c
	}
	st.Seq = c.received + 1
	return p.receive(c, from, st, payload)
}

func (p *Process) receive(c *inChan, from ProcessID, st Stamp, payload any) error {
	if c.blocked {
		return fmt.Errorf("%w: message on %s, blocked until snapshot %d records", ErrProtocol, Channel{From: from, To: p.id}, p.pending.id)
	}
	if st.Seq != c.received+1 {
		return &SequenceError{Channel: Channel{From: from, To: p.id}, Expected: c.received + 1, Got: st.Seq}
	}
	if p.mode == Epochs {
		return p.receiveEpoch(c, &st, payload)
	}
	if st.Seq == 1 && (len(p.snaps) > 0 || len(st.Recorded) > 0 || st.Horizon > 0) {
		if p.holds(c, &st) {
			p.ready.Hold = true
			return nil
		}
		if err := p.firstMessage(c, &st); err != nil {
			return err
		}
	}
	c.received = st.Seq
	p.receivedTotal++
	if c.open > 0 {
		c.log = append(c.log, Message{Seq: st.Seq, Payload: payload})
		p.logged++
	}
	return nil
}

// firstMessage applies docs/design.md decision 2 to the first message on c,
// before it is counted: for every snapshot its sender had recorded, the
// message acts as a marker; for every snapshot this process recorded and the
// sender had not, the message is channel state and c is recorded until the
// sender's marker.
func (p *Process) firstMessage(c *inChan, st *Stamp) error {
	for _, s := range p.snaps {
		if !s.recorded || s.discarded {
			continue
		}
		r, ok := s.chans[c.from]
		switch {
		case st.covers(s.id):
			// The sender recorded s before sending: the message is after its
			// marker, whether or not a marker came on this channel.
			if ok && !r.closed {
				p.close(s, c, r)
			} else if !ok {
				s.chans[c.from] = recording{start: c.received, closed: true}
			}
		case !ok:
			p.open(s, c)
		case r.closed:
			return fmt.Errorf("%w: snapshot %d: first message on %s claims to precede a marker that already came",
				ErrProtocol, s.id, Channel{From: c.from, To: p.id})
		}
	}
	// Recording one may record others first (the aligned mode records the
	// pending snapshot, and begins the queued ones): for those the sender
	// had recorded too, the message is after its marker as well.
	for _, id := range st.Recorded {
		if p.done.has(id) {
			continue
		}
		switch s := p.find(id); {
		case s == nil || !s.recorded:
			p.recordNow(id, c)
		case s.discarded:
		default:
			if r, ok := s.chans[c.from]; !ok {
				s.chans[c.from] = recording{start: c.received, closed: true}
			} else if !r.closed {
				p.close(s, c, r)
			}
		}
	}
	return nil
}

// Marker is called when a marker for id arrives from from.
func (p *Process) Marker(from ProcessID, id SnapshotID) error {
	if id == 0 {
		return ErrInvalidID
	}
	if p.mode == Epochs {
		// No marker is sent in this mode; one given anyway is a start.
		if id > p.epoch && !p.done.has(id) {
			return p.advance(id)
		}
		return nil
	}
	if p.in[from] == nil {
		if _, gone := p.gone[from]; gone || p.done.has(id) {
			// A stale marker of a sender that is no more, or of a snapshot
			// over here: nothing to learn, not even the channel.
			return nil
		}
	}
	return p.marker(p.inChannel(from), id)
}

func (p *Process) marker(c *inChan, id SnapshotID) error {
	if p.done.has(id) {
		return nil // late marker of a finished snapshot
	}
	s := p.find(id)
	if p.mode == Aligned {
		return p.barrier(c, id)
	}
	if s == nil || !s.recorded {
		p.record(id, c)
		return nil
	}
	return p.lateMarker(s, c)
}

// lateMarker handles a marker for s, which this process has recorded.
func (p *Process) lateMarker(s *snap, c *inChan) error {
	id := s.id
	if s.discarded {
		return nil
	}
	r, ok := s.chans[c.from]
	switch {
	case !ok:
		// Discovered after the record, with nothing sent before the marker:
		// the channel's state is empty.
		s.chans[c.from] = recording{start: c.received, closed: true}
	case r.closed:
		return fmt.Errorf("%w: snapshot %d: second marker on %s", ErrProtocol, id, Channel{From: c.from, To: p.id})
	default:
		p.close(s, c, r)
	}
	return nil
}

// Departed is called when the sender of channel from has stopped, after its
// last message on the channel was received: every open recording of the
// channel closes now, and later snapshots do not record it. A channel this
// process does not know stays unknown: if nothing came on it, an aligned
// snapshot told to await that sender (SetAwaited) does not wait for it,
// until a message comes from the name again (a new process under it) or
// DropPeer forgets it; if DropPeer dropped it, its departure ends the
// wait for its stale markers.
func (p *Process) Departed(from ProcessID) {
	c := p.in[from]
	if c == nil {
		if p.gone[from] == goneDropping {
			delete(p.gone, from) // the last of it: nothing stale is left
		} else {
			p.setGone(from, goneUnheard)
		}
		return
	}
	c.departed = true
	for _, s := range p.snaps {
		if r, ok := s.chans[from]; ok && !r.closed && s.recorded {
			p.close(s, c, r)
		}
	}
	if s := p.pending; s != nil && s.chans[from].awaited {
		s.chans[from] = recording{closed: true}
		s.awaiting--
		if s.awaiting == 0 {
			p.record(s.id, nil)
		}
	}
}

// Stop is called when this process stops, after its last message: every
// open recording closes with what it logged. A message that was in flight
// to this process at a snapshot's cut and never arrives leaves its channel
// short of what its sender counted, and the Assembler aborts that snapshot
// (a BalanceError); otherwise the snapshots this process recorded need
// nothing more from it.
func (p *Process) Stop() {
	for _, c := range p.ins {
		for _, s := range p.snaps {
			if r, ok := s.chans[c.from]; ok && !r.closed && s.recorded && !s.discarded {
				p.close(s, c, r)
			}
		}
	}
}

// DropPeer forgets the channels between this process and peer, a process
// that has stopped and whose every message to this one was received and
// counted in a complete snapshot: records from now on do not name it, so
// that snapshots do not carry processes long gone. The caller calls it
// when no snapshot that could still need the channels' counters is in
// progress anywhere; the snapshots this process still knows of are over,
// and what they recorded of the channels is let go (as by Departed). A
// sender that was blocked is resumed. If its departure has not come yet,
// its markers still on their way are ignored until it does.
func (p *Process) DropPeer(peer ProcessID) {
	if p.gone[peer] == goneUnheard {
		delete(p.gone, peer)
	} // a second DropPeer keeps the wait of the first for its departure
	if c := p.in[peer]; c != nil {
		if !c.departed {
			// Its markers may still be on their way, before its departure:
			// they are stale, and must not open the channel again.
			defer p.setGone(peer, goneDropping)
		}
		p.Departed(peer)
		for _, s := range p.snaps {
			delete(s.chans, peer)
		}
		c.capt = nil
		p.setBlocked(c, false)
		p.logged -= len(c.log)
		c.log = nil
		c.dropped = true
		p.receivedTotal -= c.received
		delete(p.in, peer)
		p.ins = slices.DeleteFunc(p.ins, func(x *inChan) bool { return x == c })
		for i, x := range p.ins {
			x.slot = int32(i)
		}
		if p.lastIn == c {
			p.lastIn = nil
		}
	}
	if c := p.out[peer]; c != nil {
		c.dropped = true
		delete(p.out, peer)
		p.outs = slices.DeleteFunc(p.outs, func(x *outChan) bool { return x == c })
		for i, x := range p.outs {
			x.slot = int32(i)
		}
		if p.lastOut == c {
			p.lastOut = nil
		}
	}
	// Back edges stay: they are declared for the name (Config.BackEdges),
	// and hold for a new process under it.
	for i := range p.awaits {
		if aw := &p.awaits[i]; aw.set[peer] {
			delete(aw.set, peer)
			aw.list = slices.DeleteFunc(aw.list, func(f ProcessID) bool { return f == peer })
		}
	}
}

// Initiate starts snapshot id at this process: it records its state and
// sends markers on every outgoing channel. A coordinator's marker on its
// control channel is an Initiate too. Initiating a snapshot already
// recorded does nothing.
func (p *Process) Initiate(id SnapshotID) error {
	if id == 0 {
		return ErrInvalidID
	}
	if p.done.has(id) {
		return fmt.Errorf("%w: %d", ErrFinished, id)
	}
	if s := p.find(id); s != nil && s.recorded {
		return nil
	}
	if p.mode == Epochs {
		if id > p.epoch {
			return p.advance(id)
		}
		return nil
	}
	p.recordNow(id, nil)
	return nil
}

// Start starts snapshot id at this process on a coordinator's control
// channel, when the coordinator tells every process (broadcast). In the
// unaligned mode it is Initiate. In the aligned mode the process records
// once barriers for id have arrived on every incoming channel that is not
// a back edge (at once when there is none), as if the control channel
// were one more input whose barrier came; while another aligned snapshot
// is pending here, id waits its turn.
func (p *Process) Start(id SnapshotID) error {
	if p.mode != Aligned {
		return p.Initiate(id)
	}
	if id == 0 {
		return ErrInvalidID
	}
	if p.done.has(id) {
		return fmt.Errorf("%w: %d", ErrFinished, id)
	}
	if p.find(id) != nil || slices.Contains(p.queued, id) {
		return nil
	}
	if p.pending != nil {
		p.queued = append(p.queued, id)
		return nil
	}
	if s := p.begin(id); s.awaiting == 0 {
		p.record(id, nil)
	}
	return nil
}

// Forget ends snapshot id at this process once it is complete or aborted
// everywhere: its recordings are dropped, and markers and stamps naming it
// are ignored from now on. The caller must call it on every process for
// every snapshot, or the process keeps its state.
func (p *Process) Forget(id SnapshotID) {
	if id == 0 || p.done.has(id) {
		return
	}
	p.queued = slices.DeleteFunc(p.queued, func(q SnapshotID) bool { return q == id })
	if i := slices.IndexFunc(p.snaps, func(s *snap) bool { return s.id == id }); i >= 0 {
		s := p.snaps[i]
		p.snaps = slices.Delete(p.snaps, i, i+1)
		if s == p.pending {
			p.pending = nil
			p.unblockAll()
		} else {
			for from, r := range s.chans {
				if !r.closed {
					p.trim(p.in[from])
				}
			}
		}
		if s.chans != nil {
			clear(s.chans)
			p.spareChans, s.chans = s.chans, nil
		}
		if p.mode == Epochs {
			// Nothing else points at a snapshot once forgotten: the next
			// record takes it (advance).
			p.spareSnap = s
		}
	}
	p.done.add(id)
	if p.sums && len(p.snaps) == 0 {
		p.dropEntries()
	}
	p.pruneAwaits()
	p.startQueued()
}

// Discard lets go of what this process holds as channel state for
// snapshot id, which cannot complete (the caller has it aborted, e.g. over
// a memory budget): its open recordings close without a ChannelRecord and
// nothing more is logged for it. The snapshot stays active here until
// Forget, so that first-message stamps still name it while it is not over
// everywhere: forgetting it early would tell receivers that it is.
func (p *Process) Discard(id SnapshotID) {
	s := p.find(id)
	if s == nil || !s.recorded {
		return
	}
	s.finished = true // no Finished report either
	s.discarded = true
	for from, r := range s.chans {
		if !r.closed {
			s.chans[from] = recording{start: r.start, closed: true}
			s.open--
			p.trim(p.in[from])
		}
	}
}

func (p *Process) find(id SnapshotID) *snap {
	for _, s := range p.snaps {
		if s.id == id {
			return s
		}
	}
	return nil
}

// record records the local state for id, reached through a marker on via
// (nil for Initiate): via's state is empty, every other incoming channel is
// recorded, and markers go out on every outgoing channel.
func (p *Process) record(id SnapshotID, via *inChan) {
	s := p.find(id)
	if s == nil {
		s = &snap{id: id}
		p.snaps = append(p.snaps, s)
	}
	s.recorded = true
	aligned := s.chans != nil // barriers that came before the record
	if !aligned {
		s.chans = p.newChans()
	}
	rec := LocalRecord{
		Snapshot: id,
		Process:  p.id,
		Sent:     make([]PeerCount, len(p.outs)),
		Received: make([]PeerCount, len(p.ins)),
	}
	for i, c := range p.outs {
		rec.Sent[i] = PeerCount{Peer: c.to, N: c.sent}
	}
	for i, c := range p.ins {
		rec.Received[i] = PeerCount{Peer: c.from, N: c.received}
		if c == via || c.departed {
			s.chans[c.from] = recording{start: c.received, closed: true}
			continue
		}
		if aligned && s.chans[c.from].closed {
			s.chans[c.from] = recording{start: c.received, closed: true}
			continue
		}
		p.open(s, c)
	}
	p.ready.Records = append(p.ready.Records, rec)
	for _, c := range p.outs {
		p.ready.Markers = append(p.ready.Markers, MarkerSend{Snapshot: id, To: c.to})
	}
	if s == p.pending {
		p.pending = nil
		p.unblockAll()
	}
	p.checkFinished(s)
	p.startQueued()
}

// newChans returns an empty recordings map for a new snapshot.
func (p *Process) newChans() map[ProcessID]recording {
	if m := p.spareChans; m != nil {
		p.spareChans = nil
		return m
	}
	return make(map[ProcessID]recording, len(p.ins))
}

// open starts recording c for s from its next message.
func (p *Process) open(s *snap, c *inChan) {
	if c.open == 0 {
		p.logged -= len(c.log)
		c.log = nil // never reuse: closed recordings alias the old array
		c.base = c.received
	}
	c.open++
	s.open++
	s.chans[c.from] = recording{start: c.received}
}

// close ends the recording r of c for s and reports its messages.
func (p *Process) close(s *snap, c *inChan, r recording) {
	msgs := c.log[r.start-c.base : c.received-c.base : c.received-c.base]
	if len(msgs) == 0 {
		msgs = nil
	}
	s.chans[c.from] = recording{start: r.start, closed: true}
	s.open--
	p.ready.Channels = append(p.ready.Channels, ChannelRecord{
		Snapshot: s.id,
		Channel:  Channel{From: c.from, To: p.id},
		Messages: msgs,
	})
	p.trim(c)
	p.checkFinished(s)
}

// trim drops the part of c's log that no open recording needs.
func (p *Process) trim(c *inChan) {
	c.open = 0
	low := c.received
	for _, s := range p.snaps {
		if r, ok := s.chans[c.from]; ok && !r.closed && s.recorded {
			c.open++
			low = min(low, r.start)
		}
	}
	if c.open == 0 {
		p.logged -= len(c.log)
		c.log, c.base = nil, c.received
		return
	}
	p.logged -= int(low - c.base)
	c.log = c.log[low-c.base:]
	c.base = low
}

func (p *Process) checkFinished(s *snap) {
	if s.open == 0 && !s.finished {
		s.finished = true
		p.ready.Finished = append(p.ready.Finished, s.id)
	}
}

// Ready holds the actions a Process asks of its caller, to be carried out in
// this order: capture the local state once for all of Records (before
// delivering the message whose Receive produced them); send Markers in
// order, before any further application message; then report Records (with
// State and Kind filled), Channels and Finished to the snapshot's
// Assembler. The slices belong to the Process and are valid until Advance.
type Ready struct {
	// Records asks the caller to capture its local state once for all of
	// them, before the application sees another message and without the
	// message whose Receive produced them, to fill in State (and Kind),
	// and to hand each to its snapshot's coordinator.
	Records []LocalRecord
	// Markers to send, in order, each on the path application messages to
	// its receiver take, before any later application message to it.
	Markers []MarkerSend
	// Channels whose recording closed: hand each to its snapshot's
	// coordinator. Its Messages are a read-only view.
	Channels []ChannelRecord
	// Finished lists snapshots whose every recording known to this process
	// is closed. It is informational: a channel discovered later may still
	// produce a ChannelRecord, and the Assembler's counters decide
	// completion.
	Finished []SnapshotID
	// Pause lists senders whose channel is now blocked (aligned mode): the
	// caller delivers nothing more from them, and holds what they send in
	// order, until Resume names them. A blocked channel's message given to
	// Receive is refused with ErrProtocol.
	Pause []ProcessID
	// Resume lists senders whose channel is unblocked: their held messages
	// are delivered, in order, before their later ones.
	Resume []ProcessID
	// Hold (aligned mode) says that the message just given to Receive is
	// not delivered: it is the first of its channel and came after its
	// sender's barrier, which it stands for, and was not accounted for;
	// its channel is now blocked (Pause). The caller holds it and gives it
	// to Receive again, before any later message of that sender, once
	// IsBlocked(sender) is false (at once if carrying out this Ready
	// unblocked it already).
	Hold bool
}

// HasReady reports whether there are actions to carry out.
func (p *Process) HasReady() bool {
	r := &p.ready
	return r.Hold || len(r.Records)+len(r.Markers)+len(r.Channels)+len(r.Finished)+len(p.dirty) > 0
}

// Ready returns the pending actions. Call Advance once they are carried out.
func (p *Process) Ready() Ready {
	for _, c := range p.dirty {
		c.dirty = false
		if c.blocked == c.shown {
			continue
		}
		c.shown = c.blocked
		if c.blocked {
			p.ready.Pause = append(p.ready.Pause, c.from)
		} else {
			p.ready.Resume = append(p.ready.Resume, c.from)
		}
	}
	clear(p.dirty)
	p.dirty = p.dirty[:0]
	return p.ready
}

// Advance acknowledges the actions returned by the last Ready.
func (p *Process) Advance() {
	clear(p.ready.Records)
	clear(p.ready.Channels)
	p.ready = Ready{
		Records:  p.ready.Records[:0],
		Markers:  p.ready.Markers[:0],
		Channels: p.ready.Channels[:0],
		Finished: p.ready.Finished[:0],
		Pause:    p.ready.Pause[:0],
		Resume:   p.ready.Resume[:0],
	}
}

// Received returns the number of messages received so far from from: the
// sequence number of the last one. A transport that guarantees FIFO and
// exactly-once delivery (an in-process mailbox) stamps a receipt with
// Received(from)+1 instead of carrying the number in every message.
func (p *Process) Received(from ProcessID) uint64 {
	if c := p.lastIn; c != nil && c.from == from {
		return c.received
	}
	if c := p.in[from]; c != nil {
		p.lastIn = c
		return c.received
	}
	return 0
}

// Counters returns the process's counters as of now, in the form of a
// LocalRecord without a snapshot: messages sent per outgoing channel and
// received per incoming channel. A process that stops reports them as its
// final record (Assembler.AddDeparted); in the Epochs mode they follow
// its last record (Prev, Prior), as its records do.
func (p *Process) Counters() LocalRecord {
	if p.sums {
		rec := LocalRecord{Process: p.id, SentTotal: p.sentTotal, ReceivedTotal: p.receivedTotal, Epoch: p.epoch}
		if len(p.lost) > 0 {
			lost := slices.Clone(p.lost)
			rec.Lost = &lost
		}
		return rec
	}
	counts := make([]PeerCount, len(p.outs)+len(p.ins)) // one allocation for both
	rec := LocalRecord{Process: p.id, Sent: counts[:len(p.outs):len(p.outs)], Received: counts[len(p.outs):], ReceivedTotal: p.receivedTotal, Epoch: p.epoch}
	for i, c := range p.outs {
		rec.Sent[i] = PeerCount{Peer: c.to, N: c.sent}
	}
	for i, c := range p.ins {
		rec.Received[i] = PeerCount{Peer: c.from, N: c.received}
	}
	if p.mode == Epochs {
		rec.Prev = p.lastRecord
		rec.Prior = make([]uint64, len(p.outs))
		for i, c := range p.outs {
			rec.Prior[i] = c.listed
		}
	}
	return rec
}

// ChildConfig returns the Config of a process this one creates now: it
// receives from this process, and it takes no part in the snapshots this
// process has already recorded (it is born after their cut) but in those it
// has not (docs/design.md, decision 7). The caller also declares the channel to
// the child with DeclareOutgoing, so that this process's markers reach it.
func (p *Process) ChildConfig(id ProcessID) Config {
	if p.mode == Epochs {
		return p.childConfigEpoch(id)
	}
	cfg := Config{ID: id, Mode: p.mode, Incoming: []ProcessID{p.id}, Horizon: p.done.horizon}
	for _, s := range p.snaps {
		if s.recorded {
			cfg.Finished = append(cfg.Finished, s.id)
		}
	}
	for id := range p.done.above {
		cfg.Finished = append(cfg.Finished, id)
	}
	slices.Sort(cfg.Finished)
	return cfg
}

// Active returns the snapshots this process has recorded and not
// forgotten, in the order they began.
func (p *Process) Active() []SnapshotID {
	ids := make([]SnapshotID, 0, len(p.snaps))
	for _, s := range p.snaps {
		if s.recorded {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// Recorded returns the number of messages held for open recordings, each
// counted once however many snapshots record it. Callers enforce their
// memory budget with it.
func (p *Process) Recorded() int { return p.logged }

// doneSet remembers finished snapshot ids: all ids up to horizon, and the
// finished ids above it.
type doneSet struct {
	horizon SnapshotID
	above   map[SnapshotID]struct{}
}

func (d *doneSet) has(id SnapshotID) bool {
	if id <= d.horizon {
		return true
	}
	_, ok := d.above[id]
	return ok
}

func (d *doneSet) add(id SnapshotID) {
	if id <= d.horizon {
		return
	}
	if id == d.horizon+1 {
		d.horizon++
		for {
			if _, ok := d.above[d.horizon+1]; !ok {
				return
			}
			delete(d.above, d.horizon+1)
			d.horizon++
		}
	}
	if d.above == nil {
		d.above = make(map[SnapshotID]struct{})
	}
	d.above[id] = struct{}{}
}
