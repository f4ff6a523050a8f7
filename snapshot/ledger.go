package snapshot

import (
	"fmt"
	"slices"
	"strings"
)

// Ledger is the book of what every process has sent, in the Epochs
// mode, as the latest records gave it, kept across snapshots by whoever
// assembles them (the Coordinator keeps one). A snapshot there is
// complete when every receiver balances: the messages sent to it before
// its senders' records equal those it received before its own record
// (LocalRecord.ReceivedTotal) plus those it reported in flight. So the
// Ledger keeps, per receiver, the sum of the sent counts that records
// gave for its channels, and per channel only the sender's count, which
// a record of changes (LocalRecord.Prev; Config.DeltaMin says when) sets
// anew. A receiver's records name no channel: the work per record is
// its sent counts that changed, whatever the number of channels a
// workload ever used.
//
// Every record of the mode must pass through Apply, in the order each
// process made them, before it is given to its snapshot's Assembler (the
// Assembler's config names the Ledger): a record the Ledger did not see
// leaves it behind that process, and the next one is refused with an
// *OutOfStepError until the process sends all its counters again
// (Process.Resync). The sender's count kept per channel is what lets
// that one record repair the sums.
//
// Snapshots overlap: what a record adds after a snapshot's cut (a record
// of a later snapshot, or the final record of a process that recorded
// it) is added aside in that snapshot's Assembler too, which takes it
// off the sums when it judges its receivers.
type Ledger struct {
	procs map[ProcessID]*ledgerProc
	// resolved are the channels of the last record's Sent, in its order
	// (nil for a zero count on a channel never used), for its Assembler.
	resolved []*ledgerChan
	// resolvedFor names that record (its process and snapshot), or
	// nothing (ok false).
	resolvedFor struct {
		process  ProcessID
		snapshot SnapshotID
		ok       bool
	}
	last  *ledgerProc  // the process of the record last applied
	after []*Assembler // Apply's runs for which its record is after the cut
	marks uint64       // zeroUnlisted's calls
}

// ledgerChan is one channel: its sender's count, as the latest record of
// the sender gave it.
type ledgerChan struct {
	from, to *ledgerProc
	sent     uint64
	dropped  bool   // its process was dropped: in no map
	mark     uint64 // Ledger.marks when zeroUnlisted last found it listed
}

type ledgerProc struct {
	id   ProcessID
	gen  uint64 // the last Assembler to number it, and its number there
	idx  int32
	last SnapshotID // the snapshot of its last record applied
	// stale: a record was refused, and only a full one is taken.
	stale bool
	// sentTo is the sum of its incoming channels' sent counts: what was
	// sent to it as of each sender's last record.
	sentTo uint64
	// Its outgoing channels by receiver; its incoming ones in the order
	// they were made.
	out map[ProcessID]*ledgerChan
	ins []*ledgerChan
	// The channels its last record named, in its order: a process names
	// the same ones in the same order record after record when the same
	// counters change (all of them, on a ring), found then without a
	// lookup.
	shape []*ledgerChan
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

// Apply takes rec's sent counts; it keeps no pointer to rec. runs are the
// Assemblers of the snapshots in progress that rec may come after: each
// for which it does (a record of a later snapshot; the final record of a
// process that recorded the run's, or took no part in it) sets aside what
// rec adds. A final record (Process.Counters of a process that stopped)
// is taken as a record listing every channel. It returns an
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
	if rec.Prev == 0 {
		lp.stale = false
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
	same := l.update(lp, rec.Sent)
	if rec.Prev == 0 && !(same && len(lp.out) == len(rec.Sent)) {
		l.zeroUnlisted(lp, l.resolved)
	}
	clear(l.after)
	return nil
}

// zeroUnlisted sets to zero the sent counts of lp's channels that a
// record of all of them, whose channels are listed, does not name: they
// had not been used when it was made. In the order of their receivers.
func (l *Ledger) zeroUnlisted(lp *ledgerProc, listed []*ledgerChan) {
	l.marks++
	named := 0
	for _, e := range listed {
		if e != nil && e.mark != l.marks {
			e.mark = l.marks
			named++
		}
	}
	if named == len(lp.out) {
		return // every one is listed
	}
	unlisted := make([]*ledgerChan, 0, len(lp.out)-named)
	for _, e := range lp.out {
		if e.mark != l.marks {
			unlisted = append(unlisted, e)
		}
	}
	slices.SortFunc(unlisted, func(x, y *ledgerChan) int { return strings.Compare(string(x.to.id), string(y.to.id)) })
	for _, e := range unlisted {
		l.set(e, 0)
	}
}

// update sets the sent counts a record of lp's lists, resolving its
// channels into l.resolved, and reports whether they are those of its
// last record, in order.
func (l *Ledger) update(lp *ledgerProc, sent []PeerCount) bool {
	same := sameShape(lp.shape, sent)
	for k, pc := range sent {
		var e *ledgerChan
		if same {
			e = lp.shape[k]
		} else if e = lp.out[pc.Peer]; e == nil && pc.N > 0 {
			e = l.channel(lp, l.proc(pc.Peer))
		}
		if e != nil {
			l.set(e, pc.N)
		}
		l.resolved = append(l.resolved, e)
	}
	if !same && len(sent) > 0 && !slices.Contains(l.resolved, nil) {
		lp.shape = slices.Clone(l.resolved)
	}
	return same
}

// sameShape reports whether the channels of shape are those cs names, in
// order, none of them dropped since.
func sameShape(shape []*ledgerChan, cs []PeerCount) bool {
	if len(shape) != len(cs) || len(cs) == 0 {
		return false
	}
	for k, pc := range cs {
		if e := shape[k]; e.dropped || e.to.id != pc.Peer {
			return false
		}
	}
	return true
}

// resolvedOf returns the channels of rec's Sent, if it is the record last
// applied.
func (l *Ledger) resolvedOf(rec *LocalRecord) []*ledgerChan {
	if f := &l.resolvedFor; !f.ok || f.process != rec.Process || f.snapshot != rec.Snapshot || len(l.resolved) != len(rec.Sent) {
		return nil
	}
	return l.resolved
}

// channel adds the channel from process from to process to.
func (l *Ledger) channel(from, to *ledgerProc) *ledgerChan {
	e := &ledgerChan{from: from, to: to}
	from.out[to.id] = e
	to.ins = append(to.ins, e)
	return e
}

// set sets e's sent count to n, adding the change to its receiver's sum,
// and setting it aside in the runs it comes after.
func (l *Ledger) set(e *ledgerChan, n uint64) {
	if e.sent == n {
		return
	}
	d := n - e.sent // modulo 2^64: a count that went down subtracts
	e.sent = n
	e.to.sentTo += d
	for _, a := range l.after {
		a.later(e.to, d)
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
	for _, e := range lp.out {
		out = append(out, Channel{From: p, To: e.to.id})
	}
	for _, e := range lp.ins {
		if e.from != lp { // a channel to itself is in both
			out = append(out, Channel{From: e.from.id, To: p})
		}
	}
	slices.SortFunc(out, Channel.compare)
	return out
}

// Drop forgets the processes gone and every channel with one of them at
// either end: they stopped and were dropped (Coordinator's Ready.Drops),
// and their names may be given again. What a process dropped had sent
// leaves its receivers' sums, as its receivers forget what they received
// from it (Process.DropPeer): it was all received, or it would not be
// dropped.
func (l *Ledger) Drop(gone ...ProcessID) {
	for _, p := range gone {
		l.drop(p)
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
		e.to.sentTo -= e.sent
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
