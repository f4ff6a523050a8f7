package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// SnapshotCompleted is published on the actor system's event stream when a
// snapshot is complete and stored.
type SnapshotCompleted struct {
	Global   *snapshot.Global
	Duration time.Duration
}

// SnapshotAborted is published on the actor system's event stream when a
// snapshot is aborted. Err wraps snapshot.ErrAborted and the reason
// (ErrSave and the store's error for a save that failed).
type SnapshotAborted struct {
	ID  snapshot.SnapshotID
	Err error
}

// Messages to the guardian.
type (
	startRequest    struct{ reply chan<- result }
	shutdownRequest struct{ reply chan<- int }
	result          struct {
		global *snapshot.Global
		err    error
	}
	// reportMsg is a participant's part of one snapshot: its local record
	// (nil in a report of channel recordings closed after the first report)
	// and its channel recordings that hold messages. Recordings that closed
	// empty are left out: an empty recording means every message sent before
	// the sender recorded was received before the receiver did, which the
	// counters already say.
	reportMsg struct {
		id       snapshot.SnapshotID
		from     snapshot.ProcessID // set in a stopped report only
		stopped  bool               // its sender stopped: it reported all it will
		hasRec   bool
		rec      snapshot.LocalRecord
		children []snapshot.ProcessID // live children: born before the record
		channels []snapshot.ChannelRecord
	}
	failMsg struct {
		id   snapshot.SnapshotID
		from snapshot.ProcessID
		err  error
	}
	registered struct {
		id       snapshot.ProcessID
		finished []snapshot.SnapshotID
		horizon  snapshot.SnapshotID
	}
	stoppedMsg struct {
		id       snapshot.ProcessID
		final    snapshot.LocalRecord
		recorded []snapshot.SnapshotID // the snapshots in progress it recorded
		after    snapshot.SnapshotID   // the last snapshot started when it left the registry
	}
	restartedMsg struct{ id snapshot.ProcessID }
	overMsg      struct{ id snapshot.SnapshotID }
	deadlineMsg  struct{ id snapshot.SnapshotID }
	sweepMsg     struct{ id snapshot.SnapshotID }
	postponedMsg struct{}                  // start the snapshots postponed for a drop
	savedMsg     struct{}                  // a save is over: take its outcome (saver.done)
	tickMsg      struct{ schedule uint64 } // a tick of that schedule
	everyRequest struct {
		interval time.Duration
		reply    chan<- error
	}
)

// maxSnapshotID is the highest snapshot id a store accepts
// (persistence.Store.Save refuses higher ones): the guardian starts no
// snapshot past it.
const maxSnapshotID snapshot.SnapshotID = 1<<63 - 1

// guardian numbers snapshots, starts them, assembles the records the
// participants send, stores complete snapshots and tells everyone when a
// snapshot is over. It is an ordinary actor: its state is its own.
type guardian struct {
	s         *System
	saver     *saver // started with the first complete snapshot
	saving    int    // runs complete and being saved
	self      *actor.PID
	next      snapshot.SnapshotID
	runs      map[snapshot.SnapshotID]*run
	departed  departedBook
	drops     []dropping      // departed to drop once no snapshot runs
	postponed []chan<- result // starts asked for while drops wait (start)
	ticker    timer
	interval  time.Duration       // between periodic starts; zero: none
	schedule  uint64              // numbers the schedules: a tick of an older one is ignored
	numbering *snapshot.Numbering // of the last completed snapshot, for the next
	// The live participants sorted by id, as of registry version
	// partsVersion; shared by the snapshots that start with them, never
	// changed in place.
	parts        []*participant
	partIDs      []snapshot.ProcessID // their ids
	partsVersion uint64
	down         bool
	rng          *rand.Rand

	// Aligned mode: the channel graph seen in completed snapshots, and
	// whose barriers each participant was last told to wait for.
	graph   map[snapshot.Channel]bool
	changed bool // graph changed since the awaited sets were computed
	awaited map[snapshot.ProcessID][]snapshot.ProcessID
}

func newGuardian(s *System) *guardian {
	return &guardian{
		s:        s,
		next:     s.lease.High(), // ids the store has held are never used again
		runs:     make(map[snapshot.SnapshotID]*run),
		departed: departedBook{m: make(map[snapshot.ProcessID]departure)},
		rng:      rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)),
		graph:    make(map[snapshot.Channel]bool),
		awaited:  make(map[snapshot.ProcessID][]snapshot.ProcessID),
	}
}

// dropping is a departed participant that a complete snapshot showed
// drained, and the participants whose records named it there.
type dropping struct {
	id    snapshot.ProcessID
	peers []snapshot.ProcessID
}

// later sends msg to the guardian after d, from a timer.
func (g *guardian) later(d time.Duration, msg interface{}) timer {
	self := g.self
	return g.s.cfg.clock.AfterFunc(d, func() { g.s.root.Send(self, msg) })
}

func (g *guardian) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.self = ctx.Self()
		g.every(g.s.cfg.interval)
	case *actor.Stopped:
		close(g.s.guardSTW)
	case *tickMsg:
		if !g.down && m.schedule == g.schedule {
			g.start(nil, false)
			g.ticker = g.later(g.interval, &tickMsg{schedule: g.schedule})
		}
	case *everyRequest:
		if g.down {
			m.reply <- ErrShutdown
			break
		}
		g.every(m.interval)
		m.reply <- nil
	case *startRequest:
		g.start(m.reply, false)
	case *restoreRequest:
		g.next = m.base
		for _, p := range m.from.Participants {
			if !p.Departed {
				continue
			}
			final := snapshot.LocalRecord{Process: p.ID}
			for _, c := range m.from.Channels {
				if c.Channel.From == p.ID {
					final.Sent = append(final.Sent, snapshot.PeerCount{Peer: c.Channel.To, N: c.Sent})
				}
			}
			g.departed.add(p.ID, final, m.base)
		}
		g.learn(m.from)
		g.start(m.reply, true)
		close(m.started)
	case *overMsg:
		if r := g.runs[m.id]; r != nil {
			g.check(r)
		}
	case *failMsg:
		if r := g.runs[m.id]; r != nil {
			g.abort(r, fmt.Errorf("%s: %w", m.from, m.err))
		}
	case *registered:
		for _, r := range g.runs {
			r.mu.Lock()
			if m.horizon < r.id && !slices.Contains(m.finished, r.id) {
				r.asm.Require(m.id)
			}
			r.mu.Unlock()
		}
	case *stoppedMsg:
		// Kept even if it sent nothing: participants that sent to it name
		// it in their records, and a snapshot must know it is gone rather
		// than wait for its record.
		g.departed.add(m.id, m.final, m.after)
		g.stopped(m)
	case *restartedMsg:
		g.lost(m.id, ErrParticipantRestarted)
	case *deadlineMsg:
		if r := g.runs[m.id]; r != nil {
			if reason := g.stalled(r); reason != nil {
				g.abort(r, reason)
			} else {
				g.check(r)
			}
		}
	case *sweepMsg:
		if r := g.runs[m.id]; r != nil {
			r.mu.Lock()
			missing := r.asm.Missing()
			r.mu.Unlock()
			for _, id := range missing.Participants {
				if p := g.s.reg.lookup(id); p != nil {
					p.mb.PostFrom(controlKey, &initiateMsg{id: r.id})
				}
			}
		}
	case *savedMsg:
		for _, out := range g.saver.outcomes() {
			g.saved(out)
		}
	case *postponedMsg:
		postponed := g.postponed
		g.postponed = nil
		for _, reply := range postponed {
			g.start(reply, false)
		}
	case *shutdownRequest:
		g.down = true
		if g.ticker != nil {
			g.ticker.Stop()
		}
		for _, reply := range g.postponed {
			reply <- result{err: ErrShutdown}
		}
		g.postponed = nil
		n := 0
		for _, r := range g.runs {
			if r.saving == nil {
				g.abort(r, ErrShutdown)
				if r.saving == nil {
					n++ // aborted, not found complete
				}
			}
		}
		// The saves under way end before the system does, and before it
		// gives up its store.
		if g.saver != nil {
			for _, out := range g.saver.close() {
				g.saved(out)
			}
		}
		m.reply <- n
	}
}

// every replaces the periodic schedule: a start every d from now on, none
// if d is zero.
func (g *guardian) every(d time.Duration) {
	if g.ticker != nil {
		g.ticker.Stop()
		g.ticker = nil
	}
	g.schedule++
	g.interval = d
	if d > 0 {
		g.ticker = g.later(d, &tickMsg{schedule: g.schedule})
	}
}

// start begins a new snapshot, or answers why it cannot. direct posts the
// start to every participant from here, before start returns (a restore
// needs it in every queue before the replayed messages).
func (g *guardian) start(reply chan<- result, direct bool) {
	fail := func(err error) {
		if reply != nil {
			reply <- result{err: err}
		} else {
			g.s.log.Warn("periodic snapshot skipped", slog.Any("error", err))
		}
	}
	switch {
	case g.down:
		fail(ErrShutdown)
		return
	case len(g.runs)-g.saving >= g.s.cfg.concurrent:
		fail(fmt.Errorf("%w: %d of %d", ErrBusy, len(g.runs)-g.saving, g.s.cfg.concurrent))
	case len(g.runs) >= 2*g.s.cfg.concurrent:
		// The store is slow: as many complete snapshots wait for it as
		// may run at once. Refusing here bounds what they hold in memory.
		fail(fmt.Errorf("%w: %d snapshots wait for the store", ErrBusy, g.saving))
		return
	case len(g.drops) > 0 && len(g.runs) > 0 && !direct:
		// Departed participants wait to be dropped until no snapshot runs
		// (dropDeparted): postpone new starts until then, so that
		// snapshots that overlap cannot put the drop off for ever. A
		// periodic start is skipped, as when too many run.
		if reply != nil {
			g.postponed = append(g.postponed, reply)
		}
		return
	case g.next >= maxSnapshotID:
		fail(fmt.Errorf("%w: snapshot %d was the last", persistence.ErrIDsExhausted, g.next))
		return
	}
	g.next++
	id := g.next
	now := g.s.cfg.clock.Now()

	// Read the participants and publish the snapshot as pending at once: a
	// spawn from outside any actor is then either among them or joins it
	// at birth.
	reg := &g.s.reg
	reg.mu.Lock()
	if g.parts == nil || g.partsVersion != reg.version {
		// Sorted by id, and kept while no one spawns or stops: the
		// Assembler numbers them in this order, so the Global needs no
		// sort by name (a sort of 10,000 names per snapshot otherwise).
		g.parts = reg.liveLocked()
		g.partIDs = make([]snapshot.ProcessID, len(g.parts))
		for i, p := range g.parts {
			g.partIDs[i] = p.id
		}
		g.partsVersion = reg.version
	}
	parts := g.parts
	if g.s.cfg.mode == snapshot.Aligned && !direct {
		// Before id is pending: a participant spawned from then on joins
		// it at birth and may send a barrier of id at once, and no one may
		// begin id with the sets of an older graph (two acyclic sets of
		// waits from different graphs may form a cycle together).
		g.tellAwaited(id, parts)
	}
	r := &run{id: id, start: now}
	// Locked until its Assembler is in place: a participant spawned from
	// now on joins the run at birth and may report before that.
	r.mu.Lock()
	reg.pending = append(reg.pending, id)
	reg.started = id
	reg.runs[id] = r
	reg.mu.Unlock()

	r.asm, _ = snapshot.NewAssembler(snapshot.AssemblerConfig{
		Snapshot: id, Mode: g.s.cfg.mode, Participants: g.partIDs, Start: now, Deadline: now.Add(g.s.cfg.timeout),
		Numbering: g.numbering,
		Departed:  func(p snapshot.ProcessID) (snapshot.LocalRecord, bool) { return g.departed.before(id, p) },
	})
	for _, p := range g.departed.undrained() {
		r.asm.Require(p) // stands in with its final record (Departed above)
	}
	r.mu.Unlock()
	if reply != nil {
		r.waiters = append(r.waiters, reply)
	}
	g.runs[id] = r
	g.s.metrics.started.Add(context.Background(), 1)
	g.s.log.Debug("snapshot started", slog.Uint64("id", uint64(id)), slog.Int("participants", len(parts)))

	r.timers = append(r.timers, g.later(g.s.cfg.timeout, &deadlineMsg{id: id}))
	switch {
	case len(parts) == 0:
	case direct:
		msg := &initiateMsg{id: id}
		for _, p := range parts {
			p.mb.PostFrom(controlKey, msg)
		}
	case g.s.cfg.initiation == Flooding:
		msg := &initiateMsg{id: id}
		if g.s.cfg.mode == snapshot.Aligned {
			// As Flink injects barriers at the sources: every participant
			// that waits for no one starts; one started at random would
			// wait for barriers that only its waiting peers can send.
			for _, p := range parts {
				if len(g.awaited[p.id]) == 0 {
					p.mb.PostFrom(controlKey, msg)
				}
			}
		} else {
			parts[g.rng.IntN(len(parts))].mb.PostFrom(controlKey, msg)
		}
		r.timers = append(r.timers, g.later(g.s.cfg.timeout/4, &sweepMsg{id: id}))
	default:
		broadcast(id, parts)
	}
	r.mu.Lock()
	r.signalLocked(g.s)
	r.mu.Unlock()
}

// broadcast starts snapshot id at every participant: the guardian posts
// the start to each, from its own goroutine (about 0.1 µs a post). It
// used to post to one participant of each group of sqrt(n), which told
// the rest of its group; that costs a pass over the busy mailboxes more
// (measured at 10,000 busy actors: p50 113-128 ms in two hops, 99-102 ms
// in one, same runs).
func broadcast(id snapshot.SnapshotID, parts []*participant) {
	msg := &initiateMsg{id: id, start: true}
	for _, p := range parts {
		p.mb.PostFrom(controlKey, msg)
	}
}

// stopped settles the snapshots in progress with a participant that
// stopped: those it recorded keep its record (it closed its recordings:
// the counters say if a message in flight to it was lost); in those it had
// not recorded, it takes no state and stands as departed, with its final
// counters: it never had a marker of them, so all it received was sent
// before its senders' records, and the cut can pass after its stop.
func (g *guardian) stopped(m *stoppedMsg) {
	for _, r := range g.runs {
		if slices.Contains(m.recorded, r.id) {
			continue
		}
		r.mu.Lock()
		awaited := r.asm.AwaitsRecord(m.id)
		if awaited {
			final := m.final
			final.Snapshot = r.id
			_ = r.asm.AddDeparted(final)
		}
		r.mu.Unlock()
		if awaited {
			g.check(r)
		}
	}
}

// lost aborts every snapshot in progress that p takes part in.
func (g *guardian) lost(p snapshot.ProcessID, reason error) {
	for _, r := range g.runs {
		r.mu.Lock()
		member := r.asm.Involves(p)
		r.mu.Unlock()
		if member {
			g.abort(r, fmt.Errorf("%w: %s", reason, p))
		}
	}
}

// check finishes r if it is complete or past its deadline.
func (g *guardian) check(r *run) {
	if r.saving != nil {
		return // complete: its outcome waits for the store
	}
	r.mu.Lock()
	st := r.asm.Status(g.s.cfg.clock.Now())
	var gl *snapshot.Global
	if st.State == snapshot.Complete {
		// Only then: for a pending snapshot, Global builds an error
		// listing everything missing, a pass over every participant.
		gl, _ = r.asm.Global()
	}
	r.signaled = st.State != snapshot.Pending
	r.mu.Unlock()
	switch st.State {
	case snapshot.Complete:
		g.complete(r, gl)
	case snapshot.Aborted:
		g.finish(r, nil, g.explain(st.Err))
	}
}

// explain names a stopped participant as the reason of a snapshot that
// does not balance on a channel to it: messages on their way to it at the
// cut were lost when it stopped.
func (g *guardian) explain(err error) error {
	var be *snapshot.BalanceError
	if errors.As(err, &be) && be.Received+be.Recorded < be.Sent && g.s.reg.isRetired(be.Channel.To) {
		return fmt.Errorf("%w: %s, with messages from %s still on their way to it: %w", ErrParticipantStopped, be.Channel.To, be.Channel.From, err)
	}
	return err
}

func (g *guardian) abort(r *run, reason error) {
	if r.saving != nil {
		return // complete already: nothing can abort it now
	}
	r.mu.Lock()
	r.asm.Abort(reason)
	r.mu.Unlock()
	g.check(r)
}

// complete hands a complete snapshot to the saver, off the guardian's
// goroutine: a slow store holds up neither starts nor deadlines. The run
// stays in progress (not counted against WithMaxConcurrent) until the
// save is over (saved).
func (g *guardian) complete(r *run, gl *snapshot.Global) {
	r.saving = gl
	g.saving++
	for _, t := range r.timers {
		t.Stop()
	}
	if g.saver == nil {
		g.saver = newSaver(g.s.cfg.store, g.s.cfg.timeout, g.s.cfg.retain, func() { g.s.root.Send(g.self, &savedMsg{}) })
	}
	g.saver.save(r.id, gl)
}

// saved takes the outcome of a save: a failed one aborts its snapshot
// (finish logs it, at Warn, and publishes it), and later snapshots go on;
// only a saved one moves what the next snapshots start from (the
// numbering, the channel graph) and may drop the stopped participants it
// shows drained.
func (g *guardian) saved(out saveOutcome) {
	r := g.runs[out.id]
	if r == nil || r.saving == nil {
		return
	}
	gl := r.saving
	r.saving = nil
	g.saving--
	if out.retainErr != nil {
		g.s.log.Warn("retention failed", slog.Any("error", out.retainErr))
	}
	if out.err != nil {
		g.finish(r, nil, &snapshot.AbortError{Snapshot: r.id, Reason: fmt.Errorf("%w: %w", ErrSave, out.err)})
		return
	}
	r.mu.Lock()
	g.numbering = r.asm.Numbering()
	r.mu.Unlock()
	g.learn(gl)
	if drained := g.departed.drained(gl); len(drained) > 0 {
		r.mu.Lock()
		for _, id := range drained {
			g.drops = append(g.drops, dropping{id: id, peers: r.asm.Peers(id)})
		}
		r.mu.Unlock()
	}
	g.finish(r, gl, nil)
}

// dropDeparted forgets the departed participants that complete snapshots
// showed drained, while no snapshot runs: no record of a snapshot in
// progress can name them then, and every participant that may name one in
// a later record (a participant cannot open a channel with a stopped one)
// named it in that snapshot and is told to drop it before its next record
// (the handover, as for the aligned waits). Snapshots then stop carrying
// participants long gone: their size and cost follow the live system, not
// its history.
func (g *guardian) dropDeparted() {
	gone := make(map[snapshot.ProcessID]bool, len(g.drops))
	for _, d := range g.drops {
		gone[d.id] = true
		for _, id := range d.peers {
			if p := g.s.reg.lookup(id); p != nil {
				p.handDrop(d.id)
			}
		}
	}
	g.drops = g.drops[:0]
	g.departed.remove(gone)
	g.s.reg.free(gone) // after the handovers: a new one under the name finds them
	for c := range g.graph {
		if gone[c.From] || gone[c.To] {
			delete(g.graph, c)
			g.changed = true
		}
	}
}

// finish ends r: waiters get the outcome, and the event stream and the
// metrics hear of it.
func (g *guardian) finish(r *run, gl *snapshot.Global, err error) {
	delete(g.runs, r.id)
	r.mu.Lock()
	r.ended = true
	g.s.recorded.Add(-r.held)
	r.held = 0
	r.mu.Unlock()
	if len(g.runs) == 0 && len(g.drops) > 0 {
		g.dropDeparted()
		if len(g.postponed) > 0 {
			g.s.root.Send(g.self, &postponedMsg{})
		}
	}
	for _, t := range r.timers {
		t.Stop()
	}
	reg := &g.s.reg
	reg.mu.Lock()
	reg.pending = slices.DeleteFunc(reg.pending, func(id snapshot.SnapshotID) bool { return id == r.id })
	delete(reg.runs, r.id)
	reg.mu.Unlock()

	if err != nil && g.s.cfg.mode == snapshot.Aligned {
		// Those that had not recorded may hold senders blocked for it.
		r.mu.Lock()
		missing := r.asm.Missing().Participants
		r.mu.Unlock()
		msg := &abortMsg{id: r.id}
		for _, id := range missing {
			if p := g.s.reg.lookup(id); p != nil {
				p.mb.PostFrom(controlKey, msg)
			}
		}
	}
	d := g.s.cfg.clock.Now().Sub(r.start)
	ctx := context.Background()
	if err == nil {
		g.s.metrics.completed.Add(ctx, 1)
		g.s.metrics.duration.Record(ctx, d.Seconds())
		g.s.metrics.stateBytes.Record(ctx, int64(gl.TotalStateBytes()))
		g.s.metrics.recorded.Record(ctx, int64(gl.TotalInFlight()))
		g.s.log.Info("snapshot complete", slog.Uint64("id", uint64(r.id)), slog.Int("participants", len(gl.Participants)),
			slog.Int("in_flight", gl.TotalInFlight()), slog.Duration("duration", d))
		g.s.actors.EventStream.Publish(&SnapshotCompleted{Global: gl, Duration: d})
	} else {
		reason := "other"
		switch {
		case errors.Is(err, snapshot.ErrTimeout):
			reason = "timeout"
		case errors.Is(err, ErrParticipantStopped):
			reason = "stopped"
		case errors.Is(err, ErrParticipantRestarted):
			reason = "restarted"
		case errors.Is(err, ErrCapture):
			reason = "capture"
		case errors.Is(err, ErrSave):
			reason = "save"
		case errors.Is(err, ErrShutdown):
			reason = "shutdown"
		}
		g.s.metrics.abort(reason)
		g.s.log.Warn("snapshot aborted", slog.Uint64("id", uint64(r.id)), slog.Any("error", err))
		g.s.actors.EventStream.Publish(&SnapshotAborted{ID: r.id, Err: err})
	}
	for _, w := range r.waiters {
		w <- result{global: gl, err: err}
	}
	// Participants let go of r themselves, when they next record or report
	// (participant.forgetFinished): no message per participant.
}
