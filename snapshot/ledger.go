package snapshot

import (
	"fmt"
	"slices"
	"strings"
)

// Ledger is the book of every channel's counters in the Epochs mode, as
// the latest records gave them, kept across snapshots by whoever assembles
// them (the Coordinator keeps one). A record in that mode may list only
// the channels whose counters changed since the process's previous record
// (LocalRecord.Prev; Config.DeltaMin says when); the Ledger holds the
// rest, so that a snapshot costs what changed and what is in flight, not
// the number of channels a workload ever used.
//
// Every record of the mode must pass through Apply, in the order each
// process made them, before it is given to its snapshot's Assembler (the
// Assembler's config names the Ledger): a record the Ledger did not see
// leaves it behind that process, and the next one is refused with an
// *OutOfStepError until the process sends all its counters again
// (Process.Resync).
//
// Snapshots overlap: when a record changes a counter, the Assemblers of
// earlier snapshots that the process recorded take the value it had, so
// that each judges its channels by the counters of its own cut.
type Ledger struct {
	procs map[ProcessID]*ledgerProc
	// open holds the channels whose two counts differ, and some that no
	// longer do (ledgerChan.open says), let go at the next sweep.
	open []*ledgerChan
	// resolved are the channels of the last record applied, in the order
	// of its Sent then Received (nil for a zero count on a channel never
	// used), for its Assembler.
	resolved []*ledgerChan
	// resolvedFor names that record (its process and snapshot), or
	// nothing (ok false) after a record kept whole.
	resolvedFor struct {
		process  ProcessID
		snapshot SnapshotID
		ok       bool
	}
	marks uint64 // zeroUnlisted's calls
}

// ledgerChan is one channel's counters, shared by the entries of its two
// ends.
type ledgerChan struct {
	ch             Channel
	from, to       *ledgerProc
	sent, received uint64
	open           bool   // in Ledger.open
	dropped        bool   // its process was dropped: in no map
	mark           uint64 // Ledger.marks when zeroUnlisted last found it listed
	// The number the Assembler of generation gen (Assembler.gen) gave it,
	// the last to number it: most are named twice or more in one snapshot
	// (both ends, a report). A generation, not a pointer, so that an
	// Assembler long done is not kept alive.
	gen uint64
	idx int32
}

type ledgerProc struct {
	id    ProcessID
	gen   uint64 // the last Assembler to number it, and its number there
	idx   int32
	last  SnapshotID // the snapshot of its last record applied
	stale bool       // a record was refused: only a full one is taken
	// Its outgoing channels by receiver. Its incoming ones are found in
	// their senders' tables: one table entry a channel, not one at each
	// end, for a graph that makes thousands of channels a snapshot.
	out map[ProcessID]*ledgerChan
	// Its incoming channels, in the order they were made.
	ins []*ledgerChan
	// The channels its last record named, in its order: a process names
	// the same ones in the same order record after record when the same
	// counters change (all of them, on a ring), found then without a
	// lookup.
	shapeOut, shapeIn []*ledgerChan
	// full holds the counters of its last record if that listed them all
	// and no record since listed only changes: the Ledger takes them only
	// when one does (materialize). Until then the process's records give
	// all its counts to their Assemblers, and the Ledger's are not read.
	full                   bool
	fullSent, fullReceived []PeerCount
}

// OutOfStepError refuses a record that follows one the Ledger did not
// apply: its counters cannot be completed. The process is to send all of
// them again (Process.Resync); the snapshot is lost.
type OutOfStepError struct {
	Process ProcessID
	Record  SnapshotID // the record refused
	Prev    SnapshotID // the record it follows
	Last    SnapshotID // the process's last record the Ledger applied
	// First is set on the first record refused since the process was in
	// step: its counters are to be asked for then, once.
	First bool
}

func (e *OutOfStepError) Error() string {
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
		lp = &ledgerProc{id: id, out: make(map[ProcessID]*ledgerChan)}
		l.procs[id] = lp
	}
	return lp
}

// Apply takes rec's counters, keeping its Sent and Received, which must
// not change after; it keeps no pointer to rec. runs are the Assemblers of the snapshots in progress:
// each in which rec's process recorded takes the value a counter had
// before rec changes it. A final record (Process.Counters of a process
// that stopped) is taken as a record listing every channel. It returns an
// *OutOfStepError for a record that does not follow the last applied.
func (l *Ledger) Apply(rec *LocalRecord, runs []*Assembler) error {
	lp := l.proc(rec.Process)
	if rec.Prev != 0 && (lp.stale || lp.last != rec.Prev) {
		err := &OutOfStepError{Process: rec.Process, Record: rec.Snapshot, Prev: rec.Prev, Last: lp.last, First: !lp.stale}
		lp.stale = true
		return err
	}
	if rec.Snapshot != 0 {
		lp.last = rec.Snapshot
	}
	l.resolvedFor.ok = false
	if rec.Prev == 0 {
		// Kept as it is until a record that lists only changes follows
		// it: a process whose every counter changes between records (a
		// ring under load) sends them all each time, and costs the
		// Ledger nothing.
		lp.stale = false
		// Records are read-only once handed out: their counters are kept,
		// not copied.
		lp.full, lp.fullSent, lp.fullReceived = true, rec.Sent, rec.Received
		return nil
	}
	l.materialize(lp, runs)
	l.resolved = l.resolved[:0]
	l.resolvedFor.process, l.resolvedFor.snapshot, l.resolvedFor.ok = rec.Process, rec.Snapshot, true
	l.update(lp, rec.Sent, rec.Received, runs)
	return nil
}

// materialize takes the counts of lp's last record that listed them all,
// if it has not yet: every channel of the process is listed there, and
// those that are not count nothing at its end.
func (l *Ledger) materialize(lp *ledgerProc, runs []*Assembler) {
	if !lp.full {
		return
	}
	sentAll, receivedAll := lp.fullSent, lp.fullReceived
	lp.full, lp.fullSent, lp.fullReceived = false, nil, nil
	sameOut := sameShape(lp.shapeOut, sentAll, true) && len(lp.out) == len(sentAll)
	sameIn := sameShape(lp.shapeIn, receivedAll, false) && len(lp.ins) == len(receivedAll)
	if !sameOut {
		l.zeroUnlisted(lp, sentAll, true, runs)
	}
	if !sameIn {
		l.zeroUnlisted(lp, receivedAll, false, runs)
	}
	l.resolved = l.resolved[:0]
	l.update(lp, sentAll, receivedAll, runs)
}

// zeroUnlisted sets to zero the counts, at lp's end (the sender's if
// sender), of lp's channels (outgoing if sender) that a record of all of
// them, listed, does not name: they had not been used there when it was
// made. In the order of their peers.
func (l *Ledger) zeroUnlisted(lp *ledgerProc, listed []PeerCount, sender bool, runs []*Assembler) {
	l.marks++
	named := 0
	for _, pc := range listed {
		if e := l.find(lp, pc.Peer, sender); e != nil && e.mark != l.marks {
			e.mark = l.marks
			named++
		}
	}
	peer, total := func(e *ledgerChan) ProcessID { return e.ch.From }, len(lp.ins)
	if sender {
		peer, total = func(e *ledgerChan) ProcessID { return e.ch.To }, len(lp.out)
	}
	if named == total {
		return // every one is listed
	}
	unlisted := make([]*ledgerChan, 0, total-named)
	keep := func(e *ledgerChan) {
		if e.mark != l.marks {
			unlisted = append(unlisted, e)
		}
	}
	if sender {
		for _, e := range lp.out {
			keep(e)
		}
	} else {
		for _, e := range lp.ins {
			keep(e)
		}
	}
	slices.SortFunc(unlisted, func(x, y *ledgerChan) int { return strings.Compare(string(peer(x)), string(peer(y))) })
	for _, e := range unlisted {
		l.set(e, sender, 0, runs)
	}
}

// find returns lp's channel to peer (from peer, if not sender), if the
// Ledger holds it: an incoming one is in its sender's table.
func (l *Ledger) find(lp *ledgerProc, peer ProcessID, sender bool) *ledgerChan {
	if sender {
		return lp.out[peer]
	}
	if q := l.procs[peer]; q != nil {
		return q.out[lp.id]
	}
	return nil
}

// update sets the counts a record of lp's lists, resolving its channels
// into l.resolved.
func (l *Ledger) update(lp *ledgerProc, sent, received []PeerCount, runs []*Assembler) {
	l.updateSide(lp, sent, true, runs)
	l.updateSide(lp, received, false, runs)
}

// updateSide is update for one direction: the counts at lp of its
// outgoing channels (sender) or of its incoming ones.
func (l *Ledger) updateSide(lp *ledgerProc, cs []PeerCount, sender bool, runs []*Assembler) {
	shape := &lp.shapeIn
	if sender {
		shape = &lp.shapeOut
	}
	first := len(l.resolved)
	same := sameShape(*shape, cs, sender)
	for k, pc := range cs {
		var e *ledgerChan
		if same {
			e = (*shape)[k]
		} else if e = l.find(lp, pc.Peer, sender); e == nil && pc.N > 0 {
			if sender {
				e = l.channel(Channel{From: lp.id, To: pc.Peer}, lp, l.proc(pc.Peer))
			} else {
				e = l.channel(Channel{From: pc.Peer, To: lp.id}, l.proc(pc.Peer), lp)
			}
		}
		if e != nil {
			l.set(e, sender, pc.N, runs)
		}
		l.resolved = append(l.resolved, e)
	}
	if got := l.resolved[first:]; !same && !slices.Contains(got, nil) {
		*shape = slices.Clone(got)
	}
}

// sameShape reports whether the channels of shape are those cs names, in
// order (as the sender's outgoing channels, or the receiver's incoming
// ones), none of them dropped since.
func sameShape(shape []*ledgerChan, cs []PeerCount, sender bool) bool {
	if len(shape) != len(cs) || len(cs) == 0 {
		return false
	}
	for k, pc := range cs {
		e := shape[k]
		peer := e.ch.From
		if sender {
			peer = e.ch.To
		}
		if e.dropped || peer != pc.Peer {
			return false
		}
	}
	return true
}

// resolvedOf returns the channels of rec, if it is the record last
// applied.
func (l *Ledger) resolvedOf(rec *LocalRecord) []*ledgerChan {
	if f := &l.resolvedFor; !f.ok || f.process != rec.Process || f.snapshot != rec.Snapshot ||
		len(l.resolved) != len(rec.Sent)+len(rec.Received) {
		return nil
	}
	return l.resolved
}

// openChans returns the channels whose two counts differ, letting go of
// those that no longer do.
func (l *Ledger) openChans() []*ledgerChan {
	kept := l.open[:0]
	for _, e := range l.open {
		if e.sent != e.received && !e.dropped {
			kept = append(kept, e)
		} else {
			e.open = false
		}
	}
	clear(l.open[len(kept):])
	l.open = kept
	return kept
}

// channel adds channel ch, from process from to process to.
func (l *Ledger) channel(ch Channel, from, to *ledgerProc) *ledgerChan {
	e := &ledgerChan{ch: ch, from: from, to: to}
	from.out[ch.To] = e
	to.ins = append(to.ins, e)
	return e
}

// set sets the sender's (or the receiver's) count of e to n, the runs
// taking the count it replaces.
func (l *Ledger) set(e *ledgerChan, sender bool, n uint64, runs []*Assembler) {
	old := &e.received
	if sender {
		old = &e.sent
	}
	if *old == n {
		return
	}
	for _, a := range runs {
		a.capture(e, sender, *old)
	}
	*old = n
	if e.sent != e.received && !e.open {
		e.open = true
		l.open = append(l.open, e)
	}
}

// chansOf returns the channels with p at either end that the Ledger
// holds, sorted.
func (l *Ledger) chansOf(p ProcessID) []Channel {
	lp := l.procs[p]
	if lp == nil {
		return nil
	}
	out := make([]Channel, 0, len(lp.out)+len(lp.ins))
	for _, pc := range lp.fullSent {
		out = append(out, Channel{From: p, To: pc.Peer})
	}
	for _, pc := range lp.fullReceived {
		out = append(out, Channel{From: pc.Peer, To: p})
	}
	for _, e := range lp.out {
		out = append(out, e.ch)
	}
	for _, e := range lp.ins {
		if e.ch.From != p { // a channel to itself is in both
			out = append(out, e.ch)
		}
	}
	slices.SortFunc(out, Channel.compare)
	return slices.Compact(out)
}

// counts returns channel ch's counters.
func (l *Ledger) counts(ch Channel) (sent, received uint64) {
	if lp := l.procs[ch.From]; lp != nil {
		if e := lp.out[ch.To]; e != nil {
			return e.sent, e.received
		}
	}
	return 0, 0
}

// Drop forgets the processes gone and every channel with one of them at
// either end: they stopped and were dropped (Coordinator's Ready.Drops),
// and their names may be given again.
func (l *Ledger) Drop(gone ...ProcessID) {
	set := make(map[ProcessID]bool, len(gone))
	for _, p := range gone {
		set[p] = true
		l.drop(p)
	}
	// The records kept whole still name them: not their channels any more.
	named := func(pc PeerCount) bool { return set[pc.Peer] }
	for _, lp := range l.procs {
		if slices.ContainsFunc(lp.fullSent, named) {
			lp.fullSent = slices.DeleteFunc(slices.Clone(lp.fullSent), named)
		}
		if slices.ContainsFunc(lp.fullReceived, named) {
			lp.fullReceived = slices.DeleteFunc(slices.Clone(lp.fullReceived), named)
		}
	}
}

func (l *Ledger) drop(p ProcessID) {
	lp := l.procs[p]
	if lp == nil {
		return
	}
	// Each receiver's list lets go of its channels from p once, whatever
	// their number.
	receivers := make(map[*ledgerProc]bool, len(lp.out))
	for _, e := range lp.out {
		e.dropped = true
		receivers[e.to] = true
	}
	for _, e := range lp.ins {
		e.dropped = true
		delete(e.from.out, p)
	}
	dropped := func(e *ledgerChan) bool { return e.dropped }
	for q := range receivers {
		q.ins = slices.DeleteFunc(q.ins, dropped)
	}
	delete(l.procs, p)
}
