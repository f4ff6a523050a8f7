package actors

import (
	"errors"
	"slices"

	"github.com/actorsnap/actorsnap/snapshot"
)

// The epoch mode's glue (snapshot.Epochs). A message's epoch travels in
// its receiver's queue entry (mailbox.PostTagged) or, to another member,
// in its channel frame; the Process does the rest. With lazy starts the
// guardian publishes each snapshot in System.epochNow, and a participant
// records it at its next message from a participant; the coordinator's
// sweep, WithLazyStart after the start, starts those still silent.

// publishEpoch makes id the snapshot participants record at their next
// message, unless a newer one is published.
func (s *System) publishEpoch(id snapshot.SnapshotID) { raise(&s.epochNow, uint64(id)) }

// lazyStart records the snapshot published last, if this participant has
// not: before the message in hand, which the application has not seen.
func (p *participant) lazyStart() {
	id := snapshot.SnapshotID(p.sys.epochNow.Load())
	if id <= p.proc.Epoch() {
		return
	}
	p.takeAwaited() // the departed to forget go before any record
	if err := p.proc.Initiate(id); err != nil && !errors.Is(err, snapshot.ErrFinished) {
		p.fail(id, err)
	}
	p.act()
}

// overBelowLocked returns the highest snapshot id below which every
// snapshot is over: what a participant born now from outside every
// participant has no part in (its epoch). Call it with r.mu held.
func (r *registry) overBelowLocked() snapshot.SnapshotID {
	if len(r.pending) > 0 {
		return slices.Min(r.pending) - 1
	}
	return r.started
}
