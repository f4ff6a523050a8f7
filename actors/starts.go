package actors

import (
	"slices"
	"sync"

	"github.com/actorsnap/actorsnap/snapshot"
)

// A member's side of the coordinator's starts (WithTransport). A start
// frame, and the drops that precede starts, are taken on the transport's
// delivery, not by the guardian: whatever the same member sends after
// them finds them applied. In the aligned mode the start also hands this
// member's participants the senders whose barriers they await, and
// channel frames from the other members that name a snapshot this member
// has not heard of yet are held until its start comes (startGate): a
// participant never begins a snapshot with the awaited set of an older
// graph, whichever member its first barrier came from.

// awaitedSets are the awaited sets of one member's participants from
// snapshot From on (the snapshot the frame starts).
type awaitedSets struct {
	Sets map[snapshot.ProcessID][]snapshot.ProcessID `msgpack:"s,omitempty"`
}

// startGate holds, in the aligned mode, the frames from other members
// from a channel frame that names a snapshot not started here yet, in
// order per member, until its start arrives or the system's timeout
// passes (the start of a coordinator that died on the way never comes).
type startGate struct {
	mu       sync.Mutex
	awaited  map[snapshot.ProcessID][]snapshot.ProcessID // as last handed to this member's participants
	forced   snapshot.SnapshotID                         // taken as started after a hold timed out
	held     map[string][]heldFrame
	draining map[string]bool
}

// startFrame takes a start from the coordinating member: awaited sets
// first, then the snapshot as pending, then the start posted to this
// member's participants, and last the frames it held for it.
func (s *System) startFrame(f *frame) {
	reg := &s.reg
	if f.Awaited != nil {
		s.handRemoteAwaited(f.ID, f.Awaited.Sets, reg.live())
	}
	reg.mu.Lock()
	reg.addPendingLocked(f.ID)
	if f.Probe {
		reg.setProbeLocked(f.ID, true)
	}
	reg.mu.Unlock()
	switch {
	case f.Start:
		broadcast(f.ID, reg.live(), s.cfg.hurried())
	case s.cfg.initiation == Lazy && !f.Sources:
		s.publishEpoch(f.ID)
	case f.Sources:
		// Aligned flooding: the sources of the awaited graph here start.
		msg := &initiateMsg{id: f.ID}
		g := s.gate
		for _, p := range reg.live() {
			g.mu.Lock()
			n := len(g.awaited[p.id])
			g.mu.Unlock()
			if n == 0 {
				p.mb.PostFrom(controlKey, msg)
			}
		}
	}
	if s.gate != nil {
		s.releaseGate()
	}
}

// handRemoteAwaited hands each of parts its awaited set from snapshot id
// on, if it changed since the last it was handed.
func (s *System) handRemoteAwaited(id snapshot.SnapshotID, sets map[snapshot.ProcessID][]snapshot.ProcessID, parts []*participant) {
	g := s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.awaited
	g.awaited = make(map[snapshot.ProcessID][]snapshot.ProcessID, len(parts))
	for _, p := range parts {
		from := sets[p.id]
		g.awaited[p.id] = from
		if prev, ok := old[p.id]; ok && slices.Equal(prev, from) {
			continue
		}
		p.handAwaited(awaitHandover{id: id, from: from})
	}
}

// dropFrame takes the coordinator's drops: the peers here forget each
// dropped participant, then its name may be given again.
func (s *System) dropFrame(f *frame) {
	s.reg.drop(f.Drops)
}

// gateHold reports whether the gate keeps frame b from member from: one
// is kept already from that member, or b names a snapshot not started
// here yet.
func (s *System) gateHold(from string, b []byte) bool {
	g := s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held[from]) > 0 || g.draining[from] {
		if isStart(b) {
			// A start is never held: the frames held may be waiting for
			// it. They come from the coordinator's participants in the
			// moment between its publishing the snapshot and its sending
			// the start, and may follow it.
			return false
		}
		g.held[from] = append(g.held[from], heldFrame{from, b})
		return true
	}
	id := s.names(b)
	if id == 0 || id <= s.startedHere(g) {
		return false
	}
	g.held[from] = append(g.held[from], heldFrame{from, b})
	s.gateTimer(id)
	return true
}

// gateTimer takes snapshot id as started here once the system's timeout
// has passed, and releases what the gate held for it.
func (s *System) gateTimer(id snapshot.SnapshotID) {
	g := s.gate
	s.cfg.clock.AfterFunc(s.cfg.timeout, func() {
		g.mu.Lock()
		g.forced = max(g.forced, id)
		g.mu.Unlock()
		s.releaseGate()
	})
}

// startedHere is the last snapshot started on this member, or taken as
// started. The caller holds g.mu.
func (s *System) startedHere(g *startGate) snapshot.SnapshotID {
	s.reg.mu.RLock()
	started := s.reg.started
	s.reg.mu.RUnlock()
	return max(started, g.forced)
}

// isStart reports whether b is a start frame.
func isStart(b []byte) bool {
	return len(b) > 0 && b[0] == fStart
}

// names returns the newest snapshot a channel frame names (a marker's, or
// the newest a first message's stamp says its sender recorded), or 0.
func (s *System) names(b []byte) snapshot.SnapshotID {
	if len(b) == 0 || (b[0] != fMarker && b[0] != fMessage) {
		return 0
	}
	c, err := readChannel(b, &s.interned)
	if err != nil {
		return 0 // deliverNow logs it
	}
	if c.k == fMarker {
		return c.id
	}
	if c.stamp != nil && len(c.stamp.Recorded) > 0 {
		return slices.Max(c.stamp.Recorded)
	}
	return 0
}

// releaseGate delivers the frames held for snapshots now started, in
// order per member, up to the next that names one still to come. One
// caller at a time drains a member; frames that arrive meanwhile queue
// behind.
func (s *System) releaseGate() {
	g := s.gate
	g.mu.Lock()
	var members []string
	for m, fs := range g.held {
		if len(fs) > 0 && !g.draining[m] {
			g.draining[m] = true
			members = append(members, m)
		}
	}
	g.mu.Unlock()
	for _, m := range members {
		for {
			g.mu.Lock()
			fs := g.held[m]
			if len(fs) == 0 {
				delete(g.held, m)
				g.draining[m] = false
				g.mu.Unlock()
				break
			}
			if id := s.names(fs[0].b); id > s.startedHere(g) {
				g.draining[m] = false // id's start, or its timer, goes on
				g.mu.Unlock()
				s.gateTimer(id)
				break
			}
			g.held[m] = fs[1:]
			g.mu.Unlock()
			s.deliverNow(fs[0].from, fs[0].b)
		}
	}
}
