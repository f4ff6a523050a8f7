package snapshot

import (
	"fmt"
	"slices"
)

// Ledger is the book of what every process has sent, in the Epochs
// mode, as the latest records gave it, kept across snapshots by whoever
// assembles them (the Coordinator keeps one). A snapshot there is
// complete when every receiver balances: the messages sent to it before
// its senders' records equal those it received before its own record
// (LocalRecord.ReceivedTotal) plus those it reported in flight. So the
// Ledger keeps, per receiver, the sum of the sent counts that records
// gave for its channels, and no count per channel: each record says, for
// each channel it lists, the count as of the process's previous record
// (LocalRecord.Prior), and the Ledger adds the difference. The work per
// record is its sent counts listed; per channel the Ledger keeps only
// the sender in its receiver's list of senders, made once, when the
// channel is new (a drop tells them), so a workload whose pairs keep
// forming costs it little more than one whose channels stay the same.
//
// Every record of the mode must pass through Apply, in the order each
// process made them, before it is given to its snapshot's Assembler (the
// Assembler's config names the Ledger). A process is in step when the
// sums hold its counts as of its last record applied; the next record
// must follow that one (LocalRecord.Prev). A process not in step (new to
// the Ledger, or after a reset) has no share in the sums, and a record of
// all its counters gives it one; a record of changes from it is refused
// with an *OutOfStepError until the process sends all its counters
// (Process.Resync). A record that does not follow the last applied of a
// process in step means one was lost, and the Ledger cannot take that
// process's share off channel by channel: it resets every sum, and every
// process is asked for all its counters (OutOfStepError.Reset).
//
// A stopped process's final record (Snapshot zero) is kept until the
// process is dropped, to take its share off its receivers' sums then and
// to name its peers; a reset adds it again.
//
// Snapshots overlap: what a record adds after a snapshot's cut (a record
// of a later snapshot, or the final record of a process that recorded
// it) is added aside in that snapshot's Assembler too, which takes it
// off the sums when it judges its receivers.
type Ledger struct {
	procs map[ProcessID]*ledgerProc
	// resolved are the receivers of the last record's Sent, in its order,
	// for its Assembler.
	resolved []*ledgerProc
	// resolvedFor names that record (its process and snapshot), or
	// nothing (ok false).
	resolvedFor struct {
		process  ProcessID
		snapshot SnapshotID
		ok       bool
	}
	last  *ledgerProc  // the process of the record last applied
	after []*Assembler // Apply's runs for which its record is after the cut
}

type ledgerProc struct {
	id   ProcessID
	gen  uint64 // the last Assembler to number it, and its number there
	idx  int32
	last SnapshotID // the snapshot of its last record applied
	// inStep: the sums hold its counts as of last (or its final record's).
	inStep bool
	// asked: it is not in step and was asked for all its counters.
	asked   bool
	dropped bool // Drop removed it: in no map
	// sentTo is the sum of what its senders' records say they sent to it.
	sentTo uint64
	// senders are the processes whose records named a channel to it
	// since it, or they, came into the Ledger (or since a reset): each
	// once per channel, when the channel was new to the sender (its
	// Prior zero). They are told to forget it when it is dropped.
	senders []*ledgerProc
	// shape are the receivers its last record named, in its order: a
	// process names the same ones in the same order record after record
	// when the same counters change (all of them, on a ring), found then
	// without a lookup.
	shape []*ledgerProc
	// Once it stopped: what its final record says it sent to each
	// receiver, and the senders that record names. They point at the
	// processes rather than name them: one dropped since (its name
	// perhaps given again) is marked dropped, and skipped.
	stopped   bool
	final     []ledgerShare
	finalFrom []*ledgerProc
}

// ledgerShare is what a stopped process sent to receiver to.
type ledgerShare struct {
	to *ledgerProc
	n  uint64
}

// OutOfStepError refuses a record that follows one the Ledger did not
// apply: its counters cannot be completed, and the snapshot is lost. With
// Reset the process was in step, so a record of it was lost: every sum
// was reset, and every process that has not stopped is to send all its
// counters again (Process.Resync); the snapshots in progress are lost.
// Without it the process alone is to send them.
type OutOfStepError struct {
	Process ProcessID
	Record  SnapshotID // the record refused
	Prev    SnapshotID // the record it follows
	Last    SnapshotID // the process's last record the Ledger applied
	// First is set on the first record refused since the process was in
	// step: its counters are to be asked for then, once.
	First bool
	Reset bool
}

func (e *OutOfStepError) Error() string {
	if e.Reset {
		return fmt.Sprintf("snapshot: record %d of %s follows record %d, but the coordinator's last of it is %d: every participant's counters are asked for again",
			e.Record, e.Process, e.Prev, e.Last)
	}
	return fmt.Sprintf("snapshot: record %d of %s follows record %d, but the coordinator's last of it is %d: its counters are asked for again",
		e.Record, e.Process, e.Prev, e.Last)
}

// Unwrap returns ErrProtocol.
func (e *OutOfStepError) Unwrap() error { return ErrProtocol }

// NewLedger returns an empty Ledger.
func NewLedger() *Ledger {
	return &Ledger{procs: make(map[ProcessID]*ledgerProc)}
}

func (l *Ledger) proc(id ProcessID) *ledgerProc {
	lp := l.procs[id]
	if lp == nil {
		lp = &ledgerProc{id: id}
		l.procs[id] = lp
	}
	return lp
}

// Apply takes rec's sent counts; it keeps no pointer to rec. runs are the
// Assemblers of the snapshots in progress that rec may come after: each
// for which it does (a record of a later snapshot; the final record of a
// process that recorded the run's, or took no part in it) sets aside what
// rec adds. A final record (Snapshot zero: Process.Counters of a process
// that stopped) lists every channel. It returns an *OutOfStepError for a
// record that does not follow the last applied; with Reset set, every
// sum was reset, and the runs given must be aborted.
func (l *Ledger) Apply(rec *LocalRecord, runs []*Assembler) error {
	lp := l.proc(rec.Process)
	if lp.stopped {
		return fmt.Errorf("%w: record %d of %s after its final record", ErrProtocol, rec.Snapshot, rec.Process)
	}
	var reset *OutOfStepError
	whole := false // its counts replace a share of zero
	switch {
	case lp.inStep && rec.Prev == lp.last:
		if len(rec.Prior) != len(rec.Sent) {
			return fmt.Errorf("%w: record %d of %s lists %d sent counts and %d prior ones", ErrProtocol, rec.Snapshot, rec.Process, len(rec.Sent), len(rec.Prior))
		}
	case lp.inStep:
		// A record of it was lost, or it listed its counters anew after
		// one it could not hand on: its share is in the sums, and cannot
		// be taken off channel by channel. A record of every counter (a
		// final one among them) then gives it its share at once.
		reset = &OutOfStepError{Process: rec.Process, Record: rec.Snapshot, Prev: rec.Prev, Last: lp.last, First: true, Reset: true}
		l.reset()
		if rec.Changes {
			return reset
		}
		whole = true
	case rec.Changes:
		err := &OutOfStepError{Process: rec.Process, Record: rec.Snapshot, Prev: rec.Prev, Last: lp.last, First: !lp.asked}
		lp.asked = true
		return err
	default:
		whole = true
	}
	lp.inStep, lp.asked = true, false
	if rec.Snapshot != 0 {
		lp.last = rec.Snapshot
	}
	l.after = l.after[:0]
	for _, a := range runs {
		if a.after(rec) {
			l.after = append(l.after, a)
		}
	}
	l.resolved = l.resolved[:0]
	l.resolvedFor.process, l.resolvedFor.snapshot, l.resolvedFor.ok = rec.Process, rec.Snapshot, true
	l.last = lp
	l.update(lp, rec, whole)
	if rec.Snapshot == 0 {
		lp.stopped = true
		for k, q := range l.resolved {
			lp.final = append(lp.final, ledgerShare{to: q, n: rec.Sent[k].N})
		}
		for _, pc := range rec.Received {
			lp.finalFrom = append(lp.finalFrom, l.proc(pc.Peer))
		}
	}
	clear(l.after)
	if reset != nil {
		return reset
	}
	return nil
}

// update adds what a record of lp's changed to its receivers' sums,
// resolving them into l.resolved: each count less its prior one, or the
// whole count when lp had no share.
func (l *Ledger) update(lp *ledgerProc, rec *LocalRecord, whole bool) {
	sent := rec.Sent
	same := sameShape(lp.shape, sent)
	for k, pc := range sent {
		var q *ledgerProc
		if same {
			q = lp.shape[k]
		} else {
			q = l.proc(pc.Peer)
		}
		l.resolved = append(l.resolved, q)
		var prior uint64
		if !whole {
			prior = rec.Prior[k]
		}
		if pc.N != 0 && (whole || prior == 0) {
			q.senders = append(q.senders, lp)
		}
		l.add(q, pc.N-prior) // modulo 2^64: a count that went down subtracts
	}
	if !same && len(sent) > 0 {
		lp.shape = append(lp.shape[:0], l.resolved...)
	}
}

// sameShape reports whether the receivers of shape are those cs names, in
// order, none of them dropped since.
func sameShape(shape []*ledgerProc, cs []PeerCount) bool {
	if len(shape) != len(cs) || len(cs) == 0 {
		return false
	}
	for k, pc := range cs {
		if q := shape[k]; q.dropped || q.id != pc.Peer {
			return false
		}
	}
	return true
}

// add adds d to the sum of receiver q, and sets it aside in the runs the
// record comes after.
func (l *Ledger) add(q *ledgerProc, d uint64) {
	if d == 0 {
		return
	}
	q.sentTo += d
	for _, a := range l.after {
		a.later(q, d)
	}
}

// reset empties every sum: no process is in step but the stopped ones,
// whose final records are added again, and every other is to be asked
// for all its counters (CoordinatorReady.ResyncAll).
func (l *Ledger) reset() {
	for _, lp := range l.procs {
		lp.sentTo, lp.senders, lp.shape = 0, nil, nil
		if !lp.stopped && lp.inStep {
			lp.inStep, lp.asked = false, true
		}
	}
	l.resolvedFor.ok = false
	l.after = l.after[:0]
	for _, lp := range l.procs {
		for _, sh := range lp.final {
			if q := sh.to; !q.dropped {
				if sh.n != 0 {
					q.senders = append(q.senders, lp)
				}
				q.sentTo += sh.n
			}
		}
	}
}

// resolvedOf returns the receivers of rec's Sent, if it is the record
// last applied.
func (l *Ledger) resolvedOf(rec *LocalRecord) []*ledgerProc {
	if f := &l.resolvedFor; !f.ok || f.process != rec.Process || f.snapshot != rec.Snapshot || len(l.resolved) != len(rec.Sent) {
		return nil
	}
	return l.resolved
}

// peersOf returns the processes that share a channel with p, as the
// Ledger knows them, sorted: those whose records named a channel to it,
// and, once it stopped, those its final record names.
func (l *Ledger) peersOf(p ProcessID) []ProcessID {
	lp := l.procs[p]
	if lp == nil {
		return nil
	}
	var out []ProcessID
	note := func(q *ledgerProc) {
		if !q.dropped && q != lp {
			out = append(out, q.id)
		}
	}
	for _, q := range lp.senders {
		note(q)
	}
	for _, sh := range lp.final {
		note(sh.to)
	}
	for _, q := range lp.finalFrom {
		note(q)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Drop forgets the processes gone: they stopped and were dropped
// (Coordinator's Ready.Drops), and their names may be given again. What a
// process dropped had sent, as its final record gives it, leaves its
// receivers' sums, as its receivers forget what they received from it
// (Process.DropPeer): it was all received, or it would not be dropped.
// It reports whether it reset every sum: a process dropped without a
// final record, and in step, had a share it cannot take off (Ledger's
// doc).
func (l *Ledger) Drop(gone ...ProcessID) (reset bool) {
	var dropped []*ledgerProc
	for _, p := range gone {
		lp := l.procs[p]
		if lp == nil {
			continue
		}
		if !lp.stopped && lp.inStep {
			reset = true
		}
		lp.dropped = true
		delete(l.procs, p)
		dropped = append(dropped, lp)
	}
	if reset {
		l.reset()
		return true
	}
	isGone := func(q *ledgerProc) bool { return q.dropped }
	for _, lp := range dropped {
		for _, sh := range lp.final {
			if q := sh.to; !q.dropped {
				q.sentTo -= sh.n
				q.senders = slices.DeleteFunc(q.senders, isGone)
			}
		}
	}
	return false
}
