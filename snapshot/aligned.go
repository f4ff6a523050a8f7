package snapshot

import (
	"fmt"
	"maps"
	"slices"
)

// The aligned mode (Flink's asynchronous barrier snapshotting), on top of
// the unaligned machinery of process.go. A snapshot that is neither
// recorded nor finished here but has begun (a barrier came, or the
// coordinator started it) is pending: at most one is, so that blocked
// channels always belong to one snapshot and two snapshots can never wait
// for each other's barriers behind each other's blocks. The rules:
//
//   - When a snapshot begins here, the process awaits a barrier on every
//     incoming channel it knows that is not a back edge and whose sender
//     has not departed. Channels discovered later are not awaited.
//   - A barrier for the pending snapshot blocks its channel (Ready.Pause).
//     When none is awaited any more, the process records: channels whose
//     barrier came are empty, every other incoming channel (back edges,
//     channels not awaited) is logged from the record until its barrier,
//     as in the unaligned mode; then every blocked channel is unblocked.
//   - The first message of a new channel whose sender had recorded the
//     pending snapshot stands for that sender's barrier: the channel is
//     blocked and the message handed back to be held (Ready.Hold).
//   - Anything that needs a snapshot recorded now (Initiate, a barrier or
//     a first message of another snapshot) first records the pending one
//     as it stands, logging the channels still awaited. The cut stays
//     consistent; only more channel state is stored.
//   - A coordinator's Start while another snapshot is pending waits in a
//     queue and begins once that one records or is forgotten.

// setBackEdges sets the senders whose channels to this process are back
// edges (Config.BackEdges).
func (p *Process) setBackEdges(from []ProcessID) {
	p.back = make(map[ProcessID]bool, len(from))
	for _, f := range from {
		p.back[f] = true
	}
	for _, c := range p.ins {
		c.back = p.back[c.from]
	}
}

// SetAwaited restricts the channels that aligned snapshots numbered id and
// above wait for to those from the senders in from (back edges excepted),
// whether or not a message from them has arrived yet: each must have the
// channel to this process among its outgoing ones (it sent on it, or
// declared it), so that its barriers come. Every other incoming channel,
// known now or discovered later, is logged after the record until its
// barrier, as a back edge is. Snapshots below id keep the set given for
// them before, even if they begin here later.
//
// A coordinator that knows the channel graph uses it so that no process
// waits on a channel it has not checked for cycles; the id keeps every
// snapshot aligned against one graph, even while several run and the
// graph changes (two acyclic sets of waits from different graphs may
// together form a cycle). Call it in increasing order of id.
func (p *Process) SetAwaited(id SnapshotID, from []ProcessID) {
	set := make(map[ProcessID]bool, len(from))
	for _, f := range from {
		set[f] = true
	}
	v := awaitSet{from: id, set: set, list: slices.Sorted(maps.Keys(set))}
	// A set for id replaces those given for id and above.
	i := len(p.awaits)
	for i > 0 && p.awaits[i-1].from >= id {
		i--
	}
	p.awaits = append(p.awaits[:i], v)
	p.pruneAwaits()
}

// awaitAll makes aligned snapshots wait again for every known incoming
// channel that is not a back edge: the default.
func (p *Process) awaitAll() { p.awaits = nil }

// awaitSet is whom snapshots numbered from and above wait for, up to the
// next set's from.
type awaitSet struct {
	from SnapshotID
	set  map[ProcessID]bool
	list []ProcessID // set's keys, sorted
}

// awaitFor returns the set snapshot id waits for, nil for every input.
func (p *Process) awaitFor(id SnapshotID) *awaitSet {
	for i := len(p.awaits) - 1; i >= 0; i-- {
		if p.awaits[i].from <= id {
			return &p.awaits[i]
		}
	}
	if len(p.awaits) > 0 {
		return &p.awaits[0] // ids below every set's: the oldest set
	}
	return nil
}

// pruneAwaits drops the sets no snapshot can begin with any more: those
// followed by a set whose every lower id is finished.
func (p *Process) pruneAwaits() {
	drop := 0
	for drop+1 < len(p.awaits) && p.awaits[drop+1].from <= p.done.horizon+1 {
		drop++
	}
	if drop > 0 {
		p.awaits = slices.Delete(p.awaits, 0, drop)
	}
}

// backEdgesIn returns the senders whose channels are back edges here, in
// name order.
func (p *Process) backEdgesIn() []ProcessID {
	out := make([]ProcessID, 0, len(p.back))
	for f, ok := range p.back {
		if ok {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// Awaiting returns the aligned snapshot pending at this process, if any,
// and the senders whose barriers it still waits for, in name order. A
// snapshot that stays pending names the channels to look at: a sender
// that never records, or a cycle without a back edge.
func (p *Process) Awaiting() (SnapshotID, []ProcessID) {
	s := p.pending
	if s == nil {
		return 0, nil
	}
	var from []ProcessID
	for f, r := range s.chans {
		if r.awaited && !r.closed {
			from = append(from, f)
		}
	}
	slices.Sort(from)
	return s.id, from
}

// Blocked returns the senders whose channels are blocked now, in name
// order.
func (p *Process) Blocked() []ProcessID {
	var from []ProcessID
	for _, c := range p.ins {
		if c.blocked {
			from = append(from, c.from)
		}
	}
	slices.Sort(from)
	return from
}

// begin makes id the pending snapshot. There must be none.
func (p *Process) begin(id SnapshotID) *snap {
	p.queued = slices.DeleteFunc(p.queued, func(q SnapshotID) bool { return q == id })
	aw := p.awaitFor(id)
	if aw != nil {
		for _, f := range aw.list {
			if _, gone := p.gone[f]; !gone {
				p.inChannel(f) // awaited before its first message
			}
		}
	}
	s := &snap{id: id, chans: p.newChans()}
	for _, c := range p.ins {
		if c.back || c.departed || (aw != nil && !aw.set[c.from]) {
			continue
		}
		s.chans[c.from] = recording{awaited: true}
		s.awaiting++
	}
	p.snaps = append(p.snaps, s)
	p.pending = s
	return s
}

// barrier handles an aligned barrier for id on c.
func (p *Process) barrier(c *inChan, id SnapshotID) error {
	for {
		s := p.find(id)
		switch {
		case s != nil && s.recorded:
			return p.lateMarker(s, c)
		case s != nil:
			if s.chans[c.from].closed {
				return fmt.Errorf("%w: snapshot %d: second barrier on %s", ErrProtocol, id, Channel{From: c.from, To: p.id})
			}
			p.arrive(s, c)
			return nil
		case p.pending != nil:
			p.record(p.pending.id, nil) // forced: see the rules above
		default:
			p.begin(id)
		}
	}
}

// arrive takes the barrier of the pending snapshot s on c: c is blocked,
// and s records if it awaits nothing more.
func (p *Process) arrive(s *snap, c *inChan) {
	if s.chans[c.from].awaited {
		s.awaiting--
	}
	s.chans[c.from] = recording{closed: true}
	p.setBlocked(c, true)
	if s.awaiting == 0 {
		p.record(s.id, nil)
	}
}

// holds reports whether the first message of channel c, stamped st, is to
// be held (Ready.Hold) rather than make the pending snapshot record at once:
// its sender had recorded the pending snapshot, so the message stands for
// its barrier, and it names no snapshot this process has not heard of
// (those would make it record now anyway). It then takes the barrier.
func (p *Process) holds(c *inChan, st *Stamp) bool {
	s := p.pending
	if s == nil || !st.covers(s.id) || s.chans[c.from].closed {
		return false
	}
	for _, id := range st.Recorded {
		if p.done.has(id) || id == s.id {
			continue
		}
		if t := p.find(id); t == nil || !t.recorded {
			return false
		}
	}
	p.arrive(s, c)
	return true
}

// IsBlocked reports whether the channel from from is blocked: its
// messages wait (aligned mode).
func (p *Process) IsBlocked(from ProcessID) bool {
	c := p.in[from]
	return c != nil && c.blocked
}

// recordNow records id at once, via a channel that acts as its marker
// (nil for none). In the aligned mode it first records any other pending
// snapshot.
func (p *Process) recordNow(id SnapshotID, via *inChan) {
	for p.pending != nil && p.pending.id != id {
		p.record(p.pending.id, nil)
	}
	if s := p.find(id); s != nil && s.recorded {
		// Begun and recorded from the queue meanwhile: via's message comes
		// after its sender's record, as a late marker would.
		if via != nil {
			switch r, ok := s.chans[via.from]; {
			case !ok:
				s.chans[via.from] = recording{start: via.received, closed: true}
			case !r.closed:
				p.close(s, via, r)
			}
		}
		return
	}
	p.record(id, via)
}

// startQueued begins the snapshots the coordinator started while another
// was pending, in order, while none is pending.
func (p *Process) startQueued() {
	for p.pending == nil && len(p.queued) > 0 {
		id := p.queued[0]
		p.queued = p.queued[1:]
		if p.done.has(id) || p.find(id) != nil {
			continue
		}
		if s := p.begin(id); s.awaiting == 0 {
			p.record(id, nil)
		}
	}
}

func (p *Process) setBlocked(c *inChan, b bool) {
	if c.blocked == b {
		return
	}
	c.blocked = b
	if !c.dirty {
		c.dirty = true
		p.dirty = append(p.dirty, c)
	}
}

func (p *Process) unblockAll() {
	for _, c := range p.ins {
		p.setBlocked(c, false)
	}
}
