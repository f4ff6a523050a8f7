package actors

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/actorsnap/actorsnap/internal/msgpackbound"
	"github.com/actorsnap/actorsnap/snapshot"
)

// A member's side of the coordinator's starts (WithTransport). A start
// frame, and the drops that precede starts, are taken on the transport's
// delivery, not by the guardian: whatever the same member sends after
// them finds them applied. Channel frames from the other members that
// name a snapshot this member has not heard of yet are held until its
// start comes (startGate): a participant never records a snapshot before
// its member took what the coordinator sent before that snapshot's
// start, whichever member its first marker, stamp or epoch came from.
// So a record never names a participant dropped before the snapshot
// began, nor misses a resync asked before it, and in the aligned mode a
// participant never begins a snapshot with the awaited set of an older
// graph (the start hands the senders whose barriers it awaits).

// awaitedSets are the awaited sets of one member's participants from
// snapshot From on (the snapshot the frame starts).
type awaitedSets struct {
	Sets map[snapshot.ProcessID][]snapshot.ProcessID `msgpack:"s,omitempty"`
}

// startGate holds the frames from other members from a channel frame
// that names a snapshot not started here yet, in order per member, until
// its start arrives or the system's timeout passes (the start of a
// coordinator that died on the way never comes).
type startGate struct {
	mu       sync.Mutex
	awaited  map[snapshot.ProcessID][]snapshot.ProcessID // aligned: as last handed to this member's participants
	forced   atomic.Uint64                               // taken as started after a hold timed out
	named    atomic.Uint64                               // the highest snapshot a frame held here named
	held     map[string][]heldFrame
	draining map[string]bool
	// holding counts the frames held and the members being drained:
	// with none, a frame that names no snapshot to come passes without
	// the lock (every message of the epoch mode is asked).
	holding atomic.Int64
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
// dropped participant, then its name may be given again once every other
// member applied them too. The coordinator applied them before it sent
// them; this member tells the others it did, as it takes them.
func (s *System) dropFrame(from string, f *frame) {
	others := slices.DeleteFunc(s.others(), func(m string) bool { return m == from })
	round := s.reg.drop(f.Drops, others)
	s.reg.appliedBy(from, round)
	b, err := appendFrame(nil, &frame{K: fDropped, After: round})
	if err != nil {
		s.log.Error("encoding a frame for a cluster member", slog.Any("error", err))
		return
	}
	for _, m := range others {
		s.sendBytes(m, b)
	}
}

// gateHold reports whether the gate keeps frame b from member from: one
// is kept already from that member, or b names a snapshot not started
// here yet.
func (s *System) gateHold(from string, b []byte) bool {
	g := s.gate
	id := namedIn(b)
	if g.holding.Load() == 0 && (id == 0 || id <= s.startedHere()) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held[from]) > 0 || g.draining[from] {
		if passesGate(b) {
			return false
		}
		g.hold(from, heldFrame{from, b}, id)
		return true
	}
	if id == 0 || id <= s.startedHere() {
		return false
	}
	g.hold(from, heldFrame{from, b}, id)
	s.gateTimer(id)
	return true
}

// hold keeps f, the next frame from member from, which names snapshot
// id (zero: none). The caller holds g.mu.
func (g *startGate) hold(from string, f heldFrame, id snapshot.SnapshotID) {
	g.held[from] = append(g.held[from], f)
	g.holding.Add(1)
	raise(&g.named, uint64(id))
}

// raise makes a at least v.
func raise(a *atomic.Uint64, v uint64) {
	for old := a.Load(); old < v && !a.CompareAndSwap(old, v); old = a.Load() {
	}
}

// gateTimer takes snapshot id as started here once the system's timeout
// has passed, and releases what the gate held for it.
func (s *System) gateTimer(id snapshot.SnapshotID) {
	g := s.gate
	s.cfg.clock.AfterFunc(s.cfg.timeout, func() {
		raise(&g.forced, uint64(id))
		s.releaseGate()
	})
}

// startedHere is the last snapshot started on this member, or taken as
// started when its gate gave up waiting for the start.
func (s *System) startedHere() snapshot.SnapshotID {
	var started snapshot.SnapshotID
	if v := s.reg.view.Load(); v != nil {
		started = v.started
	}
	if g := s.gate; g != nil {
		started = max(started, snapshot.SnapshotID(g.forced.Load()))
	}
	return started
}

// heardOf is the last snapshot this member knows some member started:
// the last started here or taken as started (startedHere), or one that a
// frame its gate holds names, which a participant elsewhere recorded.
// A coordinator that takes over numbers after every member's, and each
// coordinator numbers after its own member's before every start.
func (s *System) heardOf() snapshot.SnapshotID {
	id := s.startedHere()
	if g := s.gate; g != nil {
		id = max(id, snapshot.SnapshotID(g.named.Load()))
	}
	return id
}

// passesGate reports whether b goes on even behind frames the gate
// holds, for the frames held may be waiting for what it brings:
//
//   - a start: the frames held come from the coordinator's participants
//     in the moment between its publishing the snapshot and its sending
//     the start, and may follow it;
//   - a member's confirmation to a coordinator that took over
//     (fResynced): the frames held may name a snapshot that the
//     coordinator before started and this member never heard of, and
//     the first start here waits for every confirmation. It bears on no
//     participant.
func passesGate(b []byte) bool {
	return len(b) > 0 && (b[0] == fStart || b[0] == fResynced)
}

// namedIn returns the newest snapshot a channel frame names (a marker's;
// the newest a first message's stamp says its sender recorded; or the
// epoch a message carries), or 0. It reads only as far as that: the gate
// asks it of every frame.
func namedIn(b []byte) snapshot.SnapshotID {
	if len(b) == 0 || (b[0] != fMarker && b[0] != fMessage) {
		return 0
	}
	r := frameReader{b: b[1:]}
	r.bytes() // from
	r.bytes() // to
	if b[0] == fMarker {
		return snapshot.SnapshotID(r.uvarint())
	}
	switch r.byte1() {
	case stampEpoch:
		return snapshot.SnapshotID(r.uvarint())
	case stampFirst:
		var st snapshot.Stamp
		if stamp := r.bytes(); r.err == nil && msgpackbound.Unmarshal(stamp, &st) == nil && len(st.Recorded) > 0 {
			return slices.Max(st.Recorded)
		}
	}
	return 0 // none, or malformed: deliverNow logs it
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
			g.setDraining(m, true)
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
				g.setDraining(m, false)
				g.mu.Unlock()
				break
			}
			if id := namedIn(fs[0].b); id > s.startedHere() {
				g.setDraining(m, false) // id's start, or its timer, goes on
				g.mu.Unlock()
				s.gateTimer(id)
				break
			}
			g.held[m] = fs[1:]
			g.holding.Add(-1)
			g.mu.Unlock()
			s.deliverNow(fs[0].from, fs[0].b)
		}
	}
}

// setDraining notes whether member m's held frames are being delivered.
// The caller holds g.mu.
func (g *startGate) setDraining(m string, on bool) {
	if g.draining[m] == on {
		return
	}
	g.draining[m] = on
	if on {
		g.holding.Add(1)
	} else {
		g.holding.Add(-1)
	}
}
