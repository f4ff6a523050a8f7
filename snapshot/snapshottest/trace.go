package snapshottest

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Trace is the history a run leaves for the invariant checkers: each
// process's sends, receipts and local records, in the order that process
// did them. A message is named by its channel and sequence number. A Trace
// is safe for concurrent use, so a test of real actors can fill it from
// every actor's goroutine.
type Trace struct {
	mu       sync.Mutex
	clock    map[snapshot.ProcessID]uint64
	chans    map[snapshot.Channel]*chanTrace
	recorded map[snapshot.SnapshotID]map[snapshot.ProcessID]uint64
	dropped  map[snapshot.ProcessID]snapshot.SnapshotID // Dropped
}

// chanTrace holds, per sequence number (index seq-1), the sender's and the
// receiver's event index; zero means not (yet) done.
type chanTrace struct {
	sent, received []uint64
}

// NewTrace returns an empty Trace.
func NewTrace() *Trace {
	return &Trace{
		clock:    make(map[snapshot.ProcessID]uint64),
		chans:    make(map[snapshot.Channel]*chanTrace),
		recorded: make(map[snapshot.SnapshotID]map[snapshot.ProcessID]uint64),
	}
}

func (t *Trace) tick(p snapshot.ProcessID) uint64 {
	t.clock[p]++
	return t.clock[p]
}

func (t *Trace) channel(ch snapshot.Channel) *chanTrace {
	c := t.chans[ch]
	if c == nil {
		c = &chanTrace{}
		t.chans[ch] = c
	}
	return c
}

func put(s []uint64, seq, v uint64) []uint64 {
	if need := int(seq); len(s) < need {
		s = append(s, make([]uint64, need-len(s))...)
	}
	s[seq-1] = v
	return s
}

// Sent notes that the sender of ch sent the message with sequence seq;
// seq zero numbers it as the next on ch, for processes that number
// nothing (counting in sums, which also numbers receipts so).
func (t *Trace) Sent(ch snapshot.Channel, seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.channel(ch)
	if seq == 0 {
		seq = uint64(len(c.sent)) + 1
	}
	c.sent = put(c.sent, seq, t.tick(ch.From))
}

// Received notes that the receiver of ch took in the message with sequence
// seq (after any local record that message caused); seq zero, the next on
// ch, as Sent numbers them (the channel is FIFO).
func (t *Trace) Received(ch snapshot.Channel, seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.channel(ch)
	if seq == 0 {
		seq = uint64(len(c.received)) + 1
	}
	c.received = put(c.received, seq, t.tick(ch.To))
}

// Recorded notes that p recorded its state for id.
func (t *Trace) Recorded(p snapshot.ProcessID, id snapshot.SnapshotID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.recorded[id]
	if m == nil {
		m = make(map[snapshot.ProcessID]uint64)
		t.recorded[id] = m
	}
	m[p] = t.tick(p)
}

// Event notes an event of p that the checkers do not look at, such as a
// message sent outside the snapshot, and returns its place in p's order,
// for RecordedBefore.
func (t *Trace) Event(p snapshot.ProcessID) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tick(p)
}

// RecordedBefore reports whether p recorded snapshot id before its event
// at (Event).
func (t *Trace) RecordedBefore(id snapshot.SnapshotID, p snapshot.ProcessID, at uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec, ok := t.recorded[id][p]
	return ok && rec < at
}

// HasRecorded reports whether p recorded its state for snapshot id.
func (t *Trace) HasRecorded(id snapshot.SnapshotID, p snapshot.ProcessID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.recorded[id][p]
	return ok
}

// SentBeforeRecord reports whether the message with sequence seq on ch was
// sent before its sender recorded snapshot id, or by a sender that never
// recorded it.
func (t *Trace) SentBeforeRecord(id snapshot.SnapshotID, ch snapshot.Channel, seq uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec, ok := t.recorded[id][ch.From]
	if !ok {
		return true
	}
	c := t.chans[ch]
	return c != nil && seq >= 1 && int(seq) <= len(c.sent) && c.sent[seq-1] != 0 && c.sent[seq-1] <= rec
}

// CheckCut checks that g is a consistent cut: every message whose receipt
// is reflected in a recorded state was sent before its sender recorded. A
// participant departed in g stands in with its final record: everything
// it sent was sent before the cut.
func (t *Trace) CheckCut(g *snapshot.Global) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.cut(g)
	for ch, c := range t.chans {
		to, ok := rec[ch.To]
		if !ok || to == stoodIn {
			continue
		}
		from, fromOK := rec[ch.From]
		for i, r := range c.received {
			if r == 0 || r > to {
				continue
			}
			if !fromOK {
				return fmt.Errorf("snapshot %d: %s received seq %d before recording, but %s never recorded", g.ID, ch.To, i+1, ch.From)
			}
			if s := c.sent[i]; s == 0 || s > from {
				return fmt.Errorf("snapshot %d: channel %s seq %d: received before %s recorded but sent after %s recorded", g.ID, ch, i+1, ch.To, ch.From)
			}
		}
	}
	return nil
}

// stoodIn is the record time of a participant departed in a snapshot:
// after everything it did.
const stoodIn = math.MaxUint64

// Forget forgets the channels from and to p, and that it was dropped: a
// new process takes its name, and its channels start afresh. Check the
// snapshots that hold the old one first.
func (t *Trace) Forget(p snapshot.ProcessID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ch := range t.chans {
		if ch.From == p || ch.To == p {
			delete(t.chans, ch)
		}
	}
	delete(t.dropped, p)
}

// Dropped notes that p, stopped, was forgotten by its peers once snapshot
// after had started: later snapshots do not hold it, and the checkers
// take it as having stopped before their cut.
func (t *Trace) Dropped(p snapshot.ProcessID, after snapshot.SnapshotID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped == nil {
		t.dropped = make(map[snapshot.ProcessID]snapshot.SnapshotID)
	}
	t.dropped[p] = after
}

// cut returns when each participant of g recorded it, departed ones, and
// those dropped before g started, at stoodIn.
func (t *Trace) cut(g *snapshot.Global) map[snapshot.ProcessID]uint64 {
	rec := t.recorded[g.ID]
	var departed []snapshot.ProcessID
	for _, p := range g.Participants {
		if _, ok := rec[p.ID]; p.Departed && !ok {
			departed = append(departed, p.ID)
		}
	}
	for p, after := range t.dropped {
		if _, ok := rec[p]; after < g.ID && !ok {
			departed = append(departed, p)
		}
	}
	if len(departed) == 0 {
		return rec
	}
	out := maps.Clone(rec)
	if out == nil {
		out = make(map[snapshot.ProcessID]uint64, len(departed))
	}
	for _, id := range departed {
		out[id] = stoodIn
	}
	return out
}

// CheckChannels checks that the state of every channel in g is exactly the
// messages sent on it before its sender recorded and received after its
// receiver recorded (or never), in order. A departed participant's
// channels in count every message it sent; channels to it are not in the
// snapshot (what was sent to it after it stopped is lost).
func (t *Trace) CheckChannels(g *snapshot.Global) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.cut(g)
	seen := make(map[snapshot.Channel]bool, len(g.Channels))
	for _, cs := range g.Channels {
		seen[cs.Channel] = true
		if err := t.checkChannel(g.ID, rec, cs.Channel, cs.Messages, g.Sums != nil); err != nil {
			return err
		}
	}
	for ch := range t.chans {
		if !seen[ch] {
			if err := t.checkChannel(g.ID, rec, ch, nil, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *Trace) checkChannel(id snapshot.SnapshotID, rec map[snapshot.ProcessID]uint64, ch snapshot.Channel, got []snapshot.Message, sums bool) error {
	from, fromOK := rec[ch.From]
	to, toOK := rec[ch.To]
	if to == stoodIn {
		toOK = false
	}
	var want []uint64
	if c := t.chans[ch]; c != nil && fromOK && toOK {
		for i, s := range c.sent {
			if s == 0 || s > from {
				continue
			}
			if i >= len(c.received) || c.received[i] == 0 || c.received[i] > to {
				want = append(want, uint64(i+1))
			}
		}
	}
	gotSeq := make([]uint64, len(got))
	for i, m := range got {
		gotSeq[i] = m.Seq
		if t, ok := m.Payload.(Traced); ok {
			gotSeq[i] = t.Seq // numbered by its link, not by its receiver
		} else if sums && i < len(want) {
			// Counting in sums, a receiver numbers what is in flight by
			// its arrival, which no trace sees: the trace can check how
			// many, in the order Verify checks, and not which.
			gotSeq[i] = want[i]
		}
	}
	if !slices.Equal(want, gotSeq) {
		return fmt.Errorf("snapshot %d: channel %s: recorded seqs %v, want %v", id, ch, gotSeq, want)
	}
	return nil
}

// CheckConservation checks that the values held in recorded states plus the
// values carried by recorded in-flight messages add up to total: tokens in
// a token system, money in a bank. Departed participants hold nothing: the
// total is what the system held at the cut.
func CheckConservation(g *snapshot.Global, total int64, stateValue func(state []byte) (int64, error), messageValue func(payload any) (int64, error)) error {
	var sum, inFlight int64
	for _, p := range g.Participants {
		if p.Departed {
			continue // its state is gone: what it held left with it
		}
		v, err := stateValue(p.State)
		if err != nil {
			return fmt.Errorf("snapshot %d: state of %s: %w", g.ID, p.ID, err)
		}
		sum += v
	}
	for _, c := range g.Channels {
		for _, m := range c.Messages {
			v, err := messageValue(m.Payload)
			if err != nil {
				return fmt.Errorf("snapshot %d: channel %s seq %d: %w", g.ID, c.Channel, m.Seq, err)
			}
			inFlight += v
		}
	}
	if sum+inFlight != total {
		return fmt.Errorf("snapshot %d: not conserved: states hold %d, in flight %d, sum %d, want %d", g.ID, sum, inFlight, sum+inFlight, total)
	}
	return nil
}
