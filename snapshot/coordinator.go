package snapshot

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// CoordinatorConfig configures a Coordinator.
type CoordinatorConfig struct {
	// After is the highest snapshot id already used (by the store, or by
	// the snapshot a system was restored from): the first snapshot is
	// numbered After+1.
	After SnapshotID
	// Mode is the snapshots' mode, written in every Global.
	Mode Mode
	// Sums, in the Epochs mode, judges snapshots by sums, as processes
	// counting in sums (Config.Sums) record them: no Ledger, and what
	// the participants dropped so far sent and received stays in the
	// sums of every later snapshot (AssemblerConfig.Base).
	Sums bool
	// Restored, if set, is the snapshot the participants were restored
	// from: its stopped participants stand in, with the counts of their
	// channels, until a snapshot started after After shows them drained,
	// and with Learn its channels are learned.
	Restored *Global
	// Timeout, if positive, aborts a snapshot not complete that long
	// after it started.
	Timeout time.Duration
	// SweepAfter, if positive, makes the coordinator initiate a snapshot
	// at every participant whose record it still misses, that long after
	// the start and again every SweepAfter (flooding that a partition held
	// up goes on from the far side).
	SweepAfter time.Duration
	// Learn makes the coordinator hand every participant the senders
	// whose barriers it awaits in the aligned mode, computed from the
	// channels between live participants that complete snapshots showed,
	// less the declared back edges (BackEdges) and those Search finds.
	Learn bool
	// BackEdges are channels declared back edges: never awaited.
	BackEdges []Channel
	// Search returns back edges among the channels learned, breaking
	// every cycle the declared ones leave; nil means ShallowBackEdges.
	Search func(chans []Channel, roots []ProcessID) []Channel
}

// Coordinator is the coordinator of snapshots as a pure state machine, in
// the style of Process: it numbers snapshots, holds the Assemblers of the
// runs in progress and their deadlines, knows which participants each run
// requires (those live at its start, those joining while it runs, and the
// stopped ones, which stand in with their final counters until a complete
// snapshot started after their stop shows them drained), drops the
// drained at a moment no snapshot runs and names the peers that must
// forget them, and in the aligned mode computes the awaited sets. It does
// no I/O, starts no goroutine and reads no clock: time is an argument of
// Start and Tick. Its caller feeds it inputs and carries out what Ready
// returns.
//
// A Coordinator is not safe for concurrent use: one goroutine owns it.
type Coordinator struct {
	cfg       CoordinatorConfig
	now       time.Time
	last      SnapshotID // the last id given
	runs      map[SnapshotID]*coordRun
	pending   []SnapshotID   // in start order
	numbering *Numbering     // of the last complete snapshot, for the next
	spare     assemblerSpare // the accumulators of the last snapshot over, for the next

	// Stopped participants not yet dropped: their final counters, the last
	// snapshot started before they stopped, and who sent to them since.
	stopped map[ProcessID]*stoppedProcess
	drops   []Drop // drained, waiting for a moment no snapshot runs
	// stopping are the participants said to have stopped whose Stopped
	// has not come yet (Stopping), for the next Start; sentEarly, by
	// such a participant, those that sent to it since (SentTo).
	stopping  map[ProcessID]bool
	sentEarly map[ProcessID]map[ProcessID]bool

	// dropped holds, since the last complete snapshot, the round each
	// name was last dropped in (its Drop.After): a stop that comes later
	// names who it had not forgotten (Stopped).
	dropped map[ProcessID]SnapshotID

	learned map[Channel]bool // aligned mode: channels complete snapshots showed
	changed bool             // learned changed since the awaited sets were handed out

	ledger *Ledger      // Epochs mode: the counters records leave out
	asms   []*Assembler // assemblers' result, reused

	// With Sums: the totals of the participants dropped so far, and the
	// messages lost with a participant whose stop has not come yet
	// (Lost), by receiver.
	base   Totals
	parked map[ProcessID]EpochCounts

	ready CoordinatorReady
}

type coordRun struct {
	asm       *Assembler
	nextSweep time.Time // zero: no sweeps
	owed      bool      // its Owed receivers were named in Ready.Recapture
}

type stoppedProcess struct {
	final   LocalRecord
	after   SnapshotID // the last snapshot started before the stop
	senders map[ProcessID]bool
}

// CoordinatorReady is what the coordinator asks its caller to do, in this
// order of fields.
type CoordinatorReady struct {
	// Initiates ask to initiate a snapshot at a participant that has not
	// recorded it yet (sweeps).
	Initiates []Initiate
	// Over are the snapshots that ended, in the order they ended: a
	// complete one's Global is to be stored; every live participant
	// forgets the snapshot (Process.Forget), at the latest before it
	// next records one.
	Over []Outcome
	// Drops name stopped participants that complete snapshots showed
	// drained: each peer listed forgets it (Process.DropPeer) before any
	// start that follows in this Ready is delivered, and before its next
	// record; after that, the name may be given again.
	Drops []Drop
	// Awaited, in the aligned mode with Learn, gives every participant
	// the senders whose barriers it awaits from snapshot From on: hand
	// each its set (nil for one absent from Sets) before any start of
	// From is delivered.
	Awaited *Awaited
	// Starts are the snapshots to start: each is initiated at Initiator,
	// or, with no initiator, broadcast to every participant of To.
	Starts []Start
	// Resync, in the Epochs mode, names participants whose records the
	// coordinator lost track of (a record it never got, or a coordinator
	// that took over): each is to list all its counters in its next
	// record (Process.Resync). The snapshots their records were refused
	// from abort.
	Resync []ProcessID
	// ResyncAll, in the Epochs mode: the coordinator lost a record of a
	// participant whose counts its sums held, and reset them (the
	// Ledger's doc): every participant is to list all its counters in
	// its next record. The snapshots in progress abort.
	ResyncAll bool
	// Recapture, in the Epochs mode, names participants owed channel
	// state by a snapshot that every participant has recorded
	// (Assembler.Owed), once per snapshot: each may capture its queue
	// again (Process.Capture with since zero), so that what it is owed is
	// reported now rather than as it reads it. It is advice: a caller
	// that ignores it, or a participant that cannot, loses nothing.
	Recapture []ProcessID
}

// Awaited is an aligned mode's awaited sets, from a snapshot on.
type Awaited struct {
	From SnapshotID
	Sets map[ProcessID][]ProcessID
}

// Start is a snapshot to start.
type Start struct {
	Snapshot SnapshotID
	// Initiator, if set, initiates it (and markers flood the graph);
	// otherwise To are its participants, each sent a start.
	Initiator ProcessID
	To        []ProcessID
}

// Initiate asks Process to initiate Snapshot.
type Initiate struct {
	Snapshot SnapshotID
	Process  ProcessID
}

// Outcome is a snapshot that ended: complete, with its Global, or
// aborted, with the reason.
type Outcome struct {
	Snapshot SnapshotID
	Global   *Global
	Err      error
	// Unrecorded, for an aborted snapshot, are the live participants
	// that had not recorded it: in the aligned mode each may hold
	// senders paused for it, and is to forget it at once.
	Unrecorded []ProcessID
}

// Drop is a stopped participant drained and dropped. Peers are the
// participants that must forget it; After is the last snapshot started
// when it was dropped (none after holds it).
//
// After also numbers the round of drops, the Ready, that handed it over:
// its driver hands a round over whole, each participant takes what it
// holds before its next record, and a stop says the last round handed
// over before its final counters were taken (Coordinator.Stopped).
// Rounds grow, across coordinators too: a later round follows a later
// complete snapshot, and a coordinator that takes over starts its ids
// after every id before.
type Drop struct {
	Process ProcessID
	Peers   []ProcessID
	After   SnapshotID
}

// ErrIDsExhausted is returned by Coordinator.Start when no snapshot id is
// left (ids stop at 2^63-1, which every store accepts). Package
// persistence returns the same error.
var ErrIDsExhausted = errors.New("snapshot: snapshot ids exhausted")

// MaxSnapshotID is the last snapshot id a Coordinator gives, and the
// highest a store accepts.
const MaxSnapshotID SnapshotID = 1<<63 - 1

// NewCoordinator returns a coordinator with no snapshot in progress.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	switch {
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("snapshot: coordinator timeout %v: must be >= 0", cfg.Timeout)
	case cfg.SweepAfter < 0:
		return nil, fmt.Errorf("snapshot: coordinator sweep interval %v: must be >= 0", cfg.SweepAfter)
	case cfg.Sums && cfg.Mode != Epochs:
		return nil, fmt.Errorf("%w: counting in sums needs the %s mode, not %s", ErrConfig, Epochs, cfg.Mode)
	}
	if cfg.Search == nil {
		cfg.Search = ShallowBackEdges
	}
	c := &Coordinator{
		cfg:     cfg,
		last:    cfg.After,
		runs:    make(map[SnapshotID]*coordRun),
		stopped: make(map[ProcessID]*stoppedProcess),
		learned: make(map[Channel]bool),
	}
	if cfg.Mode == Epochs && !cfg.Sums {
		c.ledger = NewLedger()
	}
	if g := cfg.Restored; g != nil {
		for _, p := range g.Participants {
			if !p.Departed {
				continue
			}
			final := LocalRecord{Process: p.ID}
			for _, ch := range g.Channels {
				if ch.Channel.From != p.ID {
					continue
				}
				if cfg.Sums {
					// What it sent that the restore replays.
					final.SentTotal += uint64(len(ch.Messages))
				} else {
					final.Sent = append(final.Sent, PeerCount{Peer: ch.Channel.To, N: ch.Sent})
				}
			}
			c.stopped[p.ID] = &stoppedProcess{final: final, after: cfg.After}
			if c.ledger != nil {
				_ = c.ledger.Apply(&final, nil) // a full record: never refused
			}
		}
		c.learn(g)
	}
	return c, nil
}

// learn adds the channels g shows to those learned, with Learn.
func (c *Coordinator) learn(g *Global) {
	if !c.cfg.Learn {
		return
	}
	for _, ch := range g.Channels {
		if !c.learned[ch.Channel] {
			c.learned[ch.Channel] = true
			c.changed = true
		}
	}
}

// Start starts a snapshot at now with live, the participants live now
// (in the caller's order), initiated at initiator if it is set and live,
// else broadcast. It returns the snapshot's id.
func (c *Coordinator) Start(now time.Time, live []ProcessID, initiator ProcessID) (SnapshotID, error) {
	if c.last >= MaxSnapshotID {
		return 0, fmt.Errorf("%w: snapshot %d was the last", ErrIDsExhausted, c.last)
	}
	c.now = now
	id := c.last + 1
	cfg := AssemblerConfig{Snapshot: id, Mode: c.cfg.Mode, Participants: live, Start: now, Numbering: c.numbering, Ledger: c.ledger, Sums: c.cfg.Sums, Base: c.base,
		Departed: func(p ProcessID) (LocalRecord, bool) {
			// Only one that stopped before id began: one that stopped
			// after is among its participants, settled by Stopped.
			if s, ok := c.stopped[p]; ok && s.after < id {
				return s.final, true
			}
			return LocalRecord{}, false
		}}
	if c.cfg.Timeout > 0 {
		cfg.Deadline = now.Add(c.cfg.Timeout)
	}
	asm, err := newAssembler(cfg, c.spare)
	if err != nil {
		return 0, err
	}
	c.spare = assemblerSpare{}
	c.last = id
	// The stopped not yet dropped stand in from the start: a message of
	// theirs may still be on its way to a participant that records before
	// it arrives, and names them in no record.
	for _, p := range slices.Sorted(maps.Keys(c.stopped)) {
		asm.Require(p)
	}
	// So do those whose stop is on its way: a receiver may have counted
	// their messages against counters a Ledger keeps from their earlier
	// records, and no balance would miss them.
	for _, p := range slices.Sorted(maps.Keys(c.stopping)) {
		asm.Require(p)
	}
	clear(c.stopping)
	if c.cfg.Learn && c.changed {
		c.awaited(id, live)
	}
	r := &coordRun{asm: asm}
	if c.cfg.SweepAfter > 0 {
		r.nextSweep = now.Add(c.cfg.SweepAfter)
	}
	c.runs[id] = r
	c.pending = append(c.pending, id)
	st := Start{Snapshot: id, Initiator: initiator}
	if initiator == "" || !slices.Contains(live, initiator) {
		st = Start{Snapshot: id, To: live}
	}
	c.ready.Starts = append(c.ready.Starts, st)
	return id, nil
}

// awaited hands out, from snapshot from on, the senders of the learned
// channels between live participants that are not back edges, declared
// or found: waiting only along channels checked for cycles, no
// participant waits for itself around one, whatever channels appear
// while a snapshot runs.
func (c *Coordinator) awaited(from SnapshotID, live []ProcessID) {
	c.changed = false
	alive := make(map[ProcessID]bool, len(live))
	for _, p := range live {
		alive[p] = true
	}
	back := make(map[Channel]bool, len(c.cfg.BackEdges))
	for _, ch := range c.cfg.BackEdges {
		back[ch] = true
	}
	chans := make([]Channel, 0, len(c.learned))
	for ch := range c.learned {
		if alive[ch.From] && alive[ch.To] && !back[ch] {
			chans = append(chans, ch)
		}
	}
	slices.SortFunc(chans, func(a, b Channel) int { return strings.Compare(a.String(), b.String()) })
	for _, ch := range c.cfg.Search(chans, nil) {
		back[ch] = true
	}
	sets := make(map[ProcessID][]ProcessID)
	for _, ch := range chans {
		if !back[ch] {
			sets[ch.To] = append(sets[ch.To], ch.From)
		}
	}
	for _, s := range sets {
		slices.Sort(s)
	}
	c.ready.Awaited = &Awaited{From: from, Sets: sets}
}

// Record adds, at now, a participant's local record to its snapshot's
// run, if the snapshot is still in progress. The error says why the run
// refused it.
func (c *Coordinator) Record(now time.Time, rec LocalRecord) error {
	if err := c.apply(now, &rec); err != nil {
		return err
	}
	return c.add(now, rec.Snapshot, func(a *Assembler) error { return a.AddRecord(rec) })
}

// RecordKept is Record for a record the caller hands over: the
// Coordinator keeps rec itself, not a copy, until its snapshot is over,
// and the caller must not change it. A driver that makes each record
// anew spares the Coordinator's goroutine a copy per participant.
func (c *Coordinator) RecordKept(now time.Time, rec *LocalRecord) error {
	if err := c.apply(now, rec); err != nil {
		return err
	}
	return c.add(now, rec.Snapshot, func(a *Assembler) error { return a.addKept(rec) })
}

// untold strikes off a stopped participant's final the participants
// dropped in the rounds after took, the last it took: it stopped before
// it could forget them, and no snapshot is to wait for them.
//
// The rounds are the coordinator's. The round a stop says is one its
// driver had handed over whole, to every participant it concerned,
// before the participant left; the participant took it before its
// final was taken. Names are struck, not incarnations: a name given
// again was freed after its round was handed over, so a participant
// that sent to the new one under it took that round first. The names
// are kept until a snapshot is complete: drops wait for a moment no
// snapshot runs, so that snapshot started after them, and a participant
// whose stop was still on its way took part in it (live, or said
// Stopping): it could not complete before the stop came.
func (c *Coordinator) untold(final *LocalRecord, took SnapshotID) {
	var gone map[ProcessID]bool
	strike := func(pcs []PeerCount) {
		for _, pc := range pcs {
			if r, ok := c.dropped[pc.Peer]; ok && r > took {
				if gone == nil {
					gone = make(map[ProcessID]bool)
				}
				gone[pc.Peer] = true
			}
		}
	}
	if len(c.dropped) > 0 {
		strike(final.Sent)
		strike(final.Received)
	}
	if gone != nil {
		final.forget(gone)
	}
}

// forget strikes the participants gone off r's channels, with their
// Prior counts. A final record lists every channel; ReceivedTotal stays,
// as a departed participant is not judged as a receiver.
func (r *LocalRecord) forget(gone map[ProcessID]bool) {
	sent := make([]PeerCount, 0, len(r.Sent))
	var prior []uint64
	if r.Prior != nil {
		prior = make([]uint64, 0, len(r.Prior))
	}
	for k, pc := range r.Sent {
		if gone[pc.Peer] {
			continue
		}
		sent = append(sent, pc)
		if k < len(r.Prior) {
			prior = append(prior, r.Prior[k])
		}
	}
	r.Sent, r.Prior = sent, prior
	r.Received = slices.DeleteFunc(slices.Clone(r.Received), func(pc PeerCount) bool { return gone[pc.Peer] })
}

// apply hands rec to the Ledger, if there is one: every record, whether
// its snapshot still runs or not, since the next of its process follows
// it. A record out of step aborts its snapshot.
func (c *Coordinator) apply(now time.Time, rec *LocalRecord) error {
	if c.ledger == nil {
		return nil
	}
	err := c.ledger.Apply(rec, c.assemblers(rec.Snapshot))
	if err != nil {
		var oos *OutOfStepError
		switch {
		case errors.As(err, &oos) && oos.Reset:
			c.resynced(now, err)
		case oos != nil && oos.First:
			c.ready.Resync = append(c.ready.Resync, rec.Process)
		}
		c.add(now, rec.Snapshot, func(a *Assembler) error { a.Abort(err); return nil })
	}
	return err
}

// resynced follows a reset of the Ledger's sums (err says why): every
// participant that has not stopped is asked for all its counters, and the
// snapshots in progress, whose sums are gone, abort.
func (c *Coordinator) resynced(now time.Time, err error) {
	c.ready.ResyncAll = true
	for _, a := range c.assemblers(0) {
		a.Abort(err)
	}
	c.now = now
	c.check()
}

// assemblers returns the Assemblers of the snapshots in progress before
// snapshot before (all of them for zero): those a record of before may
// change the counts of. The slice is reused by the next call: a record
// comes per participant per snapshot.
func (c *Coordinator) assemblers(before SnapshotID) []*Assembler {
	out := c.asms[:0]
	for _, id := range c.pending {
		if before == 0 || id < before {
			out = append(out, c.runs[id].asm)
		}
	}
	c.asms = out
	return out
}

// Channel adds, at now, a participant's recording of one of its incoming
// channels to its snapshot's run, if the snapshot is still in progress.
func (c *Coordinator) Channel(now time.Time, cr ChannelRecord) error {
	return c.Channels(now, []ChannelRecord{cr})
}

// Channels is Channel for each of crs, one receiver's recordings as it
// reports them, at once: the Coordinator checks its runs once for them
// all. It returns the first error, and adds the recordings of each run
// up to its first error or the one that completes it, as Channel given
// each in turn would. It may cap the capacity of each record's
// Messages.
func (c *Coordinator) Channels(now time.Time, crs []ChannelRecord) error {
	c.now = now
	var first error
	for len(crs) > 0 {
		// The recordings of one snapshot, which a report's are.
		n := 1
		for n < len(crs) && crs[n].Snapshot == crs[0].Snapshot {
			n++
		}
		if r := c.run(crs[0].Snapshot); r != nil {
			if err := r.asm.AddChannels(crs[:n]); err != nil && first == nil {
				first = err
			}
		}
		crs = crs[n:]
	}
	c.check()
	return first
}

// add applies an input to snapshot id's run, if in progress, at now, and
// ends what the input (or the time) ends.
func (c *Coordinator) add(now time.Time, id SnapshotID, input func(*Assembler) error) error {
	c.now = now
	var err error
	if r := c.run(id); r != nil {
		err = input(r.asm)
	}
	c.check()
	return err
}

func (c *Coordinator) run(id SnapshotID) *coordRun {
	if !slices.Contains(c.pending, id) {
		return nil
	}
	return c.runs[id]
}

// Stopped says that participant p stopped, at now, with the final
// counters final (Process.Counters after Process.Stop), having recorded
// the snapshots in recorded (Process.Active before the stop), when after
// was the last snapshot started with p among its participants, and took
// the last round of drops handed to p, and taken, before its final was
// taken (its Drop.After; 0 if none). The snapshots
// p recorded hear it will report nothing more; those that await its
// record, and those that start until it is dropped, take final instead,
// without the participants dropped in the rounds p did not take: it may
// have stopped before the word reached it. It is to come after every
// report of p's. It returns the first error an Assembler gave.
func (c *Coordinator) Stopped(now time.Time, p ProcessID, final LocalRecord, recorded []SnapshotID, after SnapshotID, took SnapshotID) error {
	c.now = now
	c.untold(&final, took)
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	// A record of every counter: taken whole if need be, but one of p's
	// records before it may have been lost (a reset).
	note(c.apply(now, &final))
	for _, s := range recorded {
		if r := c.run(s); r != nil {
			note(r.asm.Stopped(p))
		}
	}
	sp := &stoppedProcess{final: final, after: after, senders: c.sentEarly[p]}
	delete(c.sentEarly, p)
	c.stopped[p] = sp
	for _, s := range c.pending {
		r := c.runs[s]
		if s > after && !r.asm.Involves(p) {
			// Started after p left the live ones, before its stop came
			// here, and no one said it Stopping (a driver that could
			// not know, as a coordinator that took over after the word
			// went to the one before): p stands in departed now, as
			// Start has every stopped one not dropped stand in. A
			// message of p's may be on its way to a participant that
			// records before it arrives and names p in no record;
			// counting in sums, what p sent, received and lost is in
			// the others' sums. Required, it awaits the record that
			// final stands in for below. Only Stopping keeps such a
			// snapshot from completing before the stop comes.
			r.asm.Require(p)
		}
		if r.asm.AwaitsRecord(p) {
			rec := final
			rec.Snapshot = s
			note(r.asm.AddDeparted(rec))
		}
	}
	for _, l := range c.parked[p] {
		c.lost(p, sp, l.Epoch, l.N)
	}
	delete(c.parked, p)
	c.check()
	return first
}

// Stopping says, before the next Start, that participant p has stopped
// and its Stopped is on its way: p is not among the live ones that
// snapshot starts with, yet it requires p (the final record that comes
// stands in for it). Without it, a receiver could count p's messages
// against the counters a Ledger keeps from p's earlier records, and the
// snapshot complete without p. A caller that learns of stops before
// their final records, as a registry does, says so before each Start.
// It is ignored once p's Stopped came.
func (c *Coordinator) Stopping(p ProcessID) {
	if _, ok := c.stopped[p]; ok {
		return
	}
	if c.stopping == nil {
		c.stopping = make(map[ProcessID]bool)
	}
	c.stopping[p] = true
}

// Lost says, counting in sums, that n messages that a sender counted,
// stamped with epoch, were lost with participant to: it had stopped
// before they reached it (a post to its closed mailbox, say). A snapshot
// above epoch that to recorded needed them, and aborts with a LostError;
// one it stands in departed counts them as received, as do the
// snapshots that start later. A Lost that comes before to's stop is
// kept until Stopped; it must come before to is dropped (Ready.Drops),
// as it does when the sender reports it before its next record.
func (c *Coordinator) Lost(now time.Time, to ProcessID, epoch SnapshotID, n uint64) {
	if !c.cfg.Sums || n == 0 {
		return
	}
	c.now = now
	sp, ok := c.stopped[to]
	if !ok {
		if c.parked == nil {
			c.parked = make(map[ProcessID]EpochCounts)
		}
		c.parked[to] = c.parked[to].add(epoch, n)
		return
	}
	c.lost(to, sp, epoch, n)
	c.check()
}

// lost applies n messages of epoch lost with the stopped participant to.
func (c *Coordinator) lost(to ProcessID, sp *stoppedProcess, epoch SnapshotID, n uint64) {
	lost := slices.Clone(sp.final.lost()).add(epoch, n)
	sp.final.Lost = &lost
	for _, id := range c.pending {
		r := c.runs[id]
		switch {
		case id <= epoch || !r.asm.Involves(to):
			// Sent after the cut; or its final, with them, stands in
			// when it is required.
		case r.asm.StandsIn(to):
			r.asm.AddLost(n)
		default:
			r.asm.Abort(&LostError{Snapshot: id, Receiver: to, N: n})
		}
	}
}

// SentTo says that from sent to the stopped participant to, after its
// stop: the send counts on a channel no snapshot may show, so from forgets
// to with its peers when it is dropped. It may come before to's Stopped,
// which then takes it.
func (c *Coordinator) SentTo(from, to ProcessID) {
	s, ok := c.stopped[to]
	if !ok {
		if c.sentEarly == nil {
			c.sentEarly = make(map[ProcessID]map[ProcessID]bool)
		}
		if c.sentEarly[to] == nil {
			c.sentEarly[to] = make(map[ProcessID]bool)
		}
		c.sentEarly[to][from] = true
		return
	}
	if s.senders == nil {
		s.senders = make(map[ProcessID]bool)
	}
	s.senders[from] = true
}

// Join says that participant p was born while snapshots run (a spawn from
// outside any participant, or a dropped name given again): it takes part
// in every snapshot in progress with its state at birth. It returns those
// snapshots, for p to record at once, in start order.
func (c *Coordinator) Join(p ProcessID) []SnapshotID {
	ids := slices.Clone(c.pending)
	for _, id := range ids {
		c.runs[id].asm.Require(p)
	}
	return ids
}

// RequireChild is Require for a child that a participant's record of id
// names as born before that record. A child dropped before id began,
// and not already part of id, is left out: its parent named it only
// because its stop had not reached the parent yet (the drop on its way
// there, or its termination notice), and a dropped participant can take
// no part. A child under a name given again after the drop is part of
// id already when its parent's record comes (its driver says it is born
// before its parent can record), so it is not left out.
func (c *Coordinator) RequireChild(id SnapshotID, p ProcessID) {
	r := c.run(id)
	if r == nil {
		return
	}
	if round, ok := c.dropped[p]; ok && round < id && !r.asm.Involves(p) {
		return
	}
	c.Require(id, p)
}

// Require says that participant p takes part in snapshot id, if in
// progress: p was born before a participant's record of id (a child
// spawned by a participant that had not recorded it), so a message from
// p may be counted in that record.
//
// A p that stopped already (its stop and its birth reach the caller from
// different goroutines, in either order) stands in with its final
// counters, as Stopped settles the runs that await its record.
func (c *Coordinator) Require(id SnapshotID, p ProcessID) {
	r := c.run(id)
	if r == nil {
		return
	}
	r.asm.Require(p)
	if s, ok := c.stopped[p]; ok && r.asm.AwaitsRecord(p) {
		rec := s.final
		rec.Snapshot = id
		_ = r.asm.AddDeparted(rec)
		c.check()
	}
}

// Tick advances the coordinator's time to now: sweeps come due (again
// every SweepAfter while a snapshot misses records), and snapshots past
// their deadline abort. Every input carries the time too, so a deadline
// is judged at the time of the input that meets it.
func (c *Coordinator) Tick(now time.Time) {
	c.now = now
	for _, id := range c.pending {
		r := c.runs[id]
		if r.nextSweep.IsZero() || now.Before(r.nextSweep) {
			continue
		}
		r.nextSweep = now.Add(c.cfg.SweepAfter)
		for _, p := range r.asm.Unrecorded() {
			if _, stopped := c.stopped[p]; !stopped {
				c.ready.Initiates = append(c.ready.Initiates, Initiate{Snapshot: id, Process: p})
			}
		}
	}
	c.check()
}

// Abort aborts snapshot id, if in progress, for reason, at now.
func (c *Coordinator) Abort(now time.Time, id SnapshotID, reason error) {
	c.now = now
	if r := c.run(id); r != nil {
		r.asm.Abort(reason)
		c.check()
	}
}

// Failed says that a participant took rec, the record of snapshot
// rec.Snapshot, but cannot hand it on whole (its state could not be
// captured, say): that snapshot aborts, at now, for reason, and the
// record's counters go to the Ledger like any record's. In the Epochs mode
// the participant's next record follows this one, so the Ledger stays in
// step with it: a record that never came would make it reset every sum
// and ask every participant for all its counters. rec's State is not
// read; the Coordinator keeps no pointer to rec. The error is the
// Ledger's, as Record returns it.
func (c *Coordinator) Failed(now time.Time, rec *LocalRecord, reason error) error {
	c.now = now
	if r := c.run(rec.Snapshot); r != nil {
		r.asm.Abort(reason)
	}
	// The counters go to the Ledger before the abort ends the snapshot:
	// with none left running, the participants that stopped are dropped,
	// and the drop must find, to forget them, the counts this record
	// (taken before it) keeps of channels to them.
	err := c.apply(now, rec)
	c.check()
	return err
}

// Fail aborts, at now, every snapshot in progress that participant p
// takes part in, for reason: p can no longer give what they need of it
// (a crash discarded the state they count).
func (c *Coordinator) Fail(now time.Time, p ProcessID, reason error) {
	c.now = now
	for _, id := range c.pending {
		if r := c.runs[id]; r.asm.Involves(p) {
			r.asm.Abort(reason)
		}
	}
	c.check()
}

// DropsWaiting reports whether stopped participants shown drained wait to
// be dropped until no snapshot runs. A caller that starts snapshots so
// that they overlap may put the drops off for ever: it holds new starts
// back while this is true, as package actors' guardian does.
func (c *Coordinator) DropsWaiting() bool { return len(c.drops) > 0 }

// Pending returns the snapshots in progress, in start order.
func (c *Coordinator) Pending() []SnapshotID { return slices.Clone(c.pending) }

// Oldest returns the snapshot in progress started first, if any: Pending's
// first, without a copy, for a caller that asks on every input.
func (c *Coordinator) Oldest() (SnapshotID, bool) {
	if len(c.pending) == 0 {
		return 0, false
	}
	return c.pending[0], true
}

// Missing returns what snapshot id, in progress, still waits for.
func (c *Coordinator) Missing(id SnapshotID) (Missing, bool) {
	r := c.run(id)
	if r == nil {
		return Missing{}, false
	}
	return r.asm.Missing(), true
}

// Last returns the last snapshot id given.
func (c *Coordinator) Last() SnapshotID { return c.last }

// NumberAfter makes every snapshot started from now on numbered after
// id, as well as after the ids given so far. A driver that takes over
// from a coordinator that left calls it with the ids the participants
// may have heard of from the one before: a start under an id they
// recorded already would never be recorded again.
func (c *Coordinator) NumberAfter(id SnapshotID) { c.last = max(c.last, id) }

// check ends every snapshot in progress that is complete or past its
// deadline, and drops the drained once none runs.
func (c *Coordinator) check() {
	kept := c.pending[:0]
	for _, id := range c.pending {
		r := c.runs[id]
		st := r.asm.Status(c.now)
		switch st.State {
		case Pending:
			if c.cfg.Mode == Epochs && !r.owed {
				if owed, ok := r.asm.Owed(); ok {
					r.owed = true
					c.ready.Recapture = append(c.ready.Recapture, owed...)
				}
			}
			kept = append(kept, id)
			continue
		case Complete:
			clear(c.dropped)
			g, _ := r.asm.Global()
			c.numbering = r.asm.Numbering()
			c.drained(g, r.asm)
			c.learn(g)
			c.ready.Over = append(c.ready.Over, Outcome{Snapshot: id, Global: g})
		case Aborted:
			var unrecorded []ProcessID
			for _, p := range r.asm.Missing().Participants {
				if _, stopped := c.stopped[p]; !stopped {
					unrecorded = append(unrecorded, p)
				}
			}
			c.ready.Over = append(c.ready.Over, Outcome{Snapshot: id, Err: st.Err, Unrecorded: unrecorded})
		}
		delete(c.runs, id)
		c.spare = r.asm.release()
	}
	clear(c.pending[len(kept):])
	c.pending = kept
	if len(c.pending) == 0 && len(c.drops) > 0 {
		c.dropDrained()
	}
}

// drained notes the stopped participants that g, started after their
// stop, shows drained: every channel from them balances with nothing in
// flight.
func (c *Coordinator) drained(g *Global, asm *Assembler) {
	if len(c.stopped) == 0 {
		return
	}
	// One pass over the channels, not one per stopped participant: a
	// workload that spawns and stops many would make it quadratic.
	undrained := make(map[ProcessID]bool)
	for _, ch := range g.Channels {
		if ch.Sent != ch.Received || len(ch.Messages) > 0 {
			if _, stopped := c.stopped[ch.Channel.From]; stopped {
				undrained[ch.Channel.From] = true
			}
		}
	}
	dropping := make(map[ProcessID]bool, len(c.drops))
	for _, d := range c.drops {
		dropping[d.Process] = true
	}
	for _, p := range slices.Sorted(maps.Keys(c.stopped)) {
		if c.stopped[p].after >= g.ID || dropping[p] || undrained[p] {
			continue
		}
		c.drops = append(c.drops, Drop{Process: p, Peers: asm.Peers(p)})
	}
}

// dropDrained drops every drained participant, now that no snapshot runs:
// its peers, and those that sent to it since it stopped, are to forget it;
// the finals of the others and the learned channels no longer name it.
func (c *Coordinator) dropDrained() {
	gone := make(map[ProcessID]bool, len(c.drops))
	for _, d := range c.drops {
		peers := make(map[ProcessID]bool, len(d.Peers))
		for _, p := range d.Peers {
			peers[p] = true
		}
		for p := range c.stopped[d.Process].senders {
			peers[p] = true
		}
		d.Peers = slices.Sorted(maps.Keys(peers))
		d.After = c.last
		if c.dropped == nil {
			c.dropped = make(map[ProcessID]SnapshotID)
		}
		c.dropped[d.Process] = c.last
		gone[d.Process] = true
		c.ready.Drops = append(c.ready.Drops, d)
	}
	c.drops = nil
	for _, p := range slices.Sorted(maps.Keys(gone)) {
		if c.cfg.Sums {
			c.base.add(&c.stopped[p].final)
		}
		delete(c.stopped, p)
	}
	if c.ledger != nil && c.ledger.Drop(slices.Collect(maps.Keys(gone))...) {
		c.ready.ResyncAll = true
	}
	for _, s := range c.stopped {
		s.final.forget(gone)
	}
	for ch := range c.learned {
		if gone[ch.From] || gone[ch.To] {
			delete(c.learned, ch)
			c.changed = true
		}
	}
}

// HasReady reports whether Ready has anything to do.
func (c *Coordinator) HasReady() bool {
	r := &c.ready
	return r.Awaited != nil || len(r.Starts) > 0 || len(r.Initiates) > 0 || len(r.Over) > 0 || len(r.Drops) > 0 || len(r.Resync) > 0 || r.ResyncAll || len(r.Recapture) > 0
}

// Ready returns what the caller must do, in the order of its fields, and
// clears it: a call to Ready hands each action over once.
func (c *Coordinator) Ready() CoordinatorReady {
	rd := c.ready
	c.ready = CoordinatorReady{}
	return rd
}
