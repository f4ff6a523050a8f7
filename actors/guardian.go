package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/snapshot"
)

// SnapshotCompleted is published on the actor system's event stream, as a
// *SnapshotCompleted (a pointer), when a snapshot is complete and stored:
// subscribe with sys.ActorSystem().EventStream.Subscribe and match
// `case *actors.SnapshotCompleted:`.
type SnapshotCompleted struct {
	Global   *snapshot.Global
	Duration time.Duration
}

// SnapshotAborted is published on the actor system's event stream, as a
// *SnapshotAborted (a pointer), when a snapshot is aborted. Err wraps snapshot.ErrAborted and the reason
// (ErrSave and the store's error for a save that failed).
type SnapshotAborted struct {
	ID  snapshot.SnapshotID
	Err error
}

// Messages to the guardian.
type (
	startRequest struct {
		reply  chan<- result
		probe  bool           // a cut for an analysis (run.probe)
		remote []remoteWaiter // Snapshot calls of other members (a start postponed)
	}
	shutdownRequest struct{ reply chan<- int }
	result          struct {
		global *snapshot.Global
		err    error
	}
	// reportMsg is a participant's part of one snapshot: its local record
	// (none in a report of channel recordings closed after the first) and
	// its channel recordings that hold messages. Recordings that closed
	// empty are left out: an empty recording means every message sent
	// before the sender recorded was received before the receiver did,
	// which the counters already say. The messages it holds are counted in
	// System.recorded from when it is sent.
	reportMsg struct {
		id       snapshot.SnapshotID
		rec      *snapshot.LocalRecord // nil in a report of channel recordings only
		channels []snapshot.ChannelRecord
		// more is what few reports carry; nil when none. A pointer: a
		// record's report is made per participant per snapshot, and is
		// most of what an idle snapshot allocates, so it is kept within
		// its size class (256 bytes).
		more *reportMore
	}
	// reportMore is the rarer part of a report.
	reportMore struct {
		// children are the live children born before the record.
		children []snapshot.ProcessID
		// failed says that rec could not be taken whole (its state, in
		// the epoch mode): its snapshot aborts for failed, and rec,
		// without state, gives the coordinator's ledger its counters.
		failed error
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
		took     snapshot.SnapshotID   // the last round of drops handed out before it left the registry
	}
	restartedMsg struct{ id snapshot.ProcessID }
	// lostMsg says, counting in sums, that a message a participant sent
	// and counted, stamped with epoch, met the closed mailbox of to, a
	// participant that had stopped (Coordinator.Lost).
	lostMsg struct {
		to    snapshot.ProcessID
		epoch snapshot.SnapshotID
	}
	timerMsg struct {
		id    snapshot.SnapshotID
		sweep bool // a sweep is due; otherwise the deadline
	}
	postponedMsg struct{} // start the snapshots postponed for a drop or a takeover
	// resyncOverMsg ends, for the Coordinator coord, the wait for members
	// to confirm a takeover's resync: they took longer than the timeout.
	resyncOverMsg struct{ coord *snapshot.Coordinator }
	savedMsg      struct{}                  // a save is over: take its outcome (saver.done)
	tickMsg       struct{ schedule uint64 } // a tick of that schedule
	everyRequest  struct {
		interval time.Duration
		reply    chan<- error
	}
	// missingRequest asks what snapshot id, in progress, waits for.
	missingRequest struct {
		id    snapshot.SnapshotID
		reply chan<- []snapshot.ProcessID
	}
)

// children returns the live children of m's participant that were born
// before its record.
func (m *reportMsg) children() []snapshot.ProcessID {
	if m.more == nil {
		return nil
	}
	return m.more.children
}

// failed returns why m's record could not be taken whole; nil if it was.
func (m *reportMsg) failed() error {
	if m.more == nil {
		return nil
	}
	return m.more.failed
}

// held returns the messages m's channel recordings hold, which count in
// System.recorded from when m is sent until its snapshot ends.
func (m *reportMsg) held() int {
	n := 0
	for _, c := range m.channels {
		n += len(c.Messages)
	}
	return n
}

// recordReport is a report with its record, in one allocation: a report
// of channel recordings only, one for almost every message in flight
// that a snapshot records, is the bare reportMsg. The guardian hands the
// record to the Coordinator, which keeps it (Coordinator.RecordKept):
// the participant's allocation, made on its own worker, spares the
// guardian's goroutine a copy of every record.
type recordReport struct {
	reportMsg
	record snapshot.LocalRecord
}

// newRecordReport returns the report of rec for snapshot id.
func newRecordReport(id snapshot.SnapshotID, rec snapshot.LocalRecord, children []snapshot.ProcessID) *reportMsg {
	r := &recordReport{reportMsg: reportMsg{id: id}, record: rec}
	if len(children) > 0 {
		r.more = &reportMore{children: children}
	}
	r.rec = &r.record
	return &r.reportMsg
}

// guardian drives the snapshot.Coordinator, which holds the rules: it
// feeds it the participants' reports, stops and restarts, and the time
// from its timers, and carries out what it answers (starts posted,
// sweeps, drops handed over, aligned awaited sets handed over, complete
// snapshots handed to the saver, outcomes published). It is an ordinary
// actor: its state, the Coordinator's included, is its own.
type guardian struct {
	s         *System
	coord     *snapshot.Coordinator
	saver     *saver // started with the first complete snapshot
	saving    int    // runs complete and being saved
	self      *actor.PID
	runs      map[snapshot.SnapshotID]*run // in progress or being saved
	postponed []startRequest               // starts asked for while drops wait, or resyncing (start)
	// resyncing holds the members that a coordinator that took over
	// asked (takeOver) and that have not confirmed yet; its first start
	// waits for them while resyncWait, at most the timeout
	// (resyncOverMsg). A confirmation after that still moves the ids on.
	resyncing  map[string]bool
	resyncWait bool
	// resyncRound names the last takeover's asking (fResyncAll's
	// Token), which a confirmation must echo.
	resyncRound uint64
	ticker      timer
	interval    time.Duration // between periodic starts; zero: none
	schedule    uint64        // numbers the schedules: a tick of an older one is ignored
	// The live participants sorted by id, as of registry version
	// partsVersion; shared by the snapshots that start with them, never
	// changed in place.
	parts        []*participant
	partIDs      []snapshot.ProcessID // their ids
	partsVersion uint64
	down         bool
	downAborted  int // snapshots aborted since the shutdown began: each published
	rng          *rand.Rand

	// Aligned mode: whose barriers each participant was last handed.
	awaited map[snapshot.ProcessID][]snapshot.ProcessID

	// In a cluster (WithTransport): the members last known, and this
	// member's Snapshot calls waiting on the coordinator, by token.
	known       []string
	coordinator string // the coordinating member last known
	token       uint64
	asked       map[uint64]chan<- result
	// Frames for other members' guardians waiting for the end of this
	// turn (post), by member, each an fBatch; flushing says a flushMsg
	// is on its way.
	outbox   map[string][]byte
	flushing bool
	// frameBuf holds the frame post encodes, one at a time; fwd is the
	// frame forward fills for each.
	frameBuf []byte
	fwd      frame
	// lastBatch is the size of the last batch sent: a new batch starts
	// with room for as much, rather than growing to it by doubling.
	lastBatch int
}

func newGuardian(s *System) *guardian {
	g := &guardian{
		s:       s,
		runs:    make(map[snapshot.SnapshotID]*run),
		rng:     rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)),
		awaited: make(map[snapshot.ProcessID][]snapshot.ProcessID),
		asked:   make(map[uint64]chan<- result),
	}
	if s.cfg.transport == nil {
		// Ids the store has held are never used again.
		g.coord = g.newCoordinator(s.lease.High(), nil)
	}
	// A member of a cluster coordinates once it is the coordinating
	// member (members).
	return g
}

// newCoordinator returns the system's Coordinator, numbering after after,
// restored from restored if set.
func (g *guardian) newCoordinator(after snapshot.SnapshotID, restored *snapshot.Global) *snapshot.Coordinator {
	cfg := g.s.cfg
	search := cfg.search
	if search == nil {
		search = func([]snapshot.Channel, []snapshot.ProcessID) []snapshot.Channel { return nil }
	}
	ccfg := snapshot.CoordinatorConfig{
		After: after, Mode: cfg.mode, Sums: cfg.sums(), Restored: restored, Timeout: cfg.timeout,
		Learn: cfg.mode == snapshot.Aligned, BackEdges: cfg.backEdges, Search: search,
	}
	if !cfg.broadcasts() {
		ccfg.SweepAfter = g.sweepEvery()
	}
	c, err := snapshot.NewCoordinator(ccfg)
	if err != nil {
		panic(fmt.Errorf("actors: %w", err)) // newConfig checked the timeout
	}
	return c
}

// sweepEvery is how long after a start, and again after each sweep, the
// coordinator starts the participants that have not recorded: a quarter
// of the timeout when starts flood, the lazy delay when they are lazy.
func (g *guardian) sweepEvery() time.Duration {
	if g.s.cfg.initiation == Lazy {
		return g.s.cfg.lazyAfter
	}
	return g.s.cfg.timeout / 4
}

// later sends msg to the guardian after d, from a timer.
func (g *guardian) later(d time.Duration, msg interface{}) timer {
	self := g.self
	return g.s.cfg.clock.AfterFunc(d, func() { g.s.root.Send(self, msg) })
}

func (g *guardian) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(inboxMsg); !ok {
		if _, ok := ctx.Message().(*actor.Started); ok {
			g.self = ctx.Self()
		}
		g.handle(ctx.Message())
		return
	}
	batch := g.s.inbox.take()
	for _, m := range batch {
		g.handle(m)
	}
	g.s.inbox.done(batch)
}

// handle takes one message, from its mailbox or its inbox, and carries
// out what the Coordinator then asks.
func (g *guardian) handle(msg any) {
	now := g.now
	switch m := msg.(type) {
	case *actor.Started:
		g.every(g.s.cfg.interval)
		if g.clustered() {
			g.members()
		}
	case *actor.Stopped:
		close(g.s.guardSTW)
	case *membersMsg:
		g.members()
	case *memberFrame:
		g.memberFrame(m.from, m.f)
	case *memberBatch:
		g.memberBatch(m.from, m.b)
	case flushMsg:
		g.flush()
	case *actor.Stopping:
		g.flush()
	case *announceMsg:
		g.announce([]snapshot.ProcessID{m.id}, nil)
	case *reportMsg:
		if !g.forward(m) {
			g.report(m)
		}
	case *failMsg:
		if !g.forward(m) {
			g.coord.Abort(now(), m.id, fmt.Errorf("%s: %w", m.from, m.err))
		}
	case *registered:
		if !g.forward(m) {
			g.registered(m)
		}
	case *stoppedMsg:
		g.s.reg.heard(m.id)
		g.announce(nil, []snapshot.ProcessID{m.id})
		if !g.forward(m) {
			// Kept even if it sent nothing: participants that sent to it
			// name it in their records, and a snapshot must know it
			// stopped rather than wait for its record.
			_ = g.coord.Stopped(now(), m.id, m.final, m.recorded, m.after, m.took)
		}
	case *lostMsg:
		g.coord.Lost(now(), m.to, m.epoch, 1)
	case *restartedMsg:
		if !g.forward(m) {
			g.coord.Fail(now(), m.id, fmt.Errorf("%w: %s", ErrParticipantRestarted, m.id))
		}
	case *timerMsg:
		g.timer(m)
	case *tickMsg:
		if !g.down && m.schedule == g.schedule {
			if g.coordinating() {
				g.start(nil, false, false)
			}
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
		if g.clustered() && !g.coordinating() {
			g.ask(m.reply, m.probe)
			break
		}
		g.start(m.reply, false, m.probe)
	case *restoreRequest:
		g.coord = g.newCoordinator(m.base, m.from)
		g.start(m.reply, true, false)
		close(m.started)
	case *missingRequest:
		var missing snapshot.Missing
		if g.coordinating() {
			missing, _ = g.coord.Missing(m.id)
		}
		m.reply <- missing.Participants
	case *savedMsg:
		for _, out := range g.saver.outcomes() {
			g.saved(out)
		}
	case *postponedMsg:
		postponed := g.postponed
		g.postponed = nil
		for _, p := range postponed {
			g.start(p.reply, false, p.probe, p.remote...)
		}
	case *resyncOverMsg:
		if m.coord == g.coord && g.resyncWait {
			g.s.log.Warn("taking over: members did not confirm the takeover (their last starts heard; in the epoch mode, their participants asked for all their counters); starting without",
				slog.Any("members", slices.Sorted(maps.Keys(g.resyncing))))
			g.resyncWait = false
			g.s.root.Send(g.self, &postponedMsg{})
		}
	case *shutdownRequest:
		m.reply <- g.shutdown()
	}
	g.carry()
}

// registered takes a participant born while snapshots ran: those it
// had not finished at birth require it. In the epoch mode nothing else
// may ever reach it: no marker follows its creator's record, and its
// peers may all be at epochs below the snapshot (a creator that spawned
// it, and sent it its last message, before recording). So the newest
// snapshot it must take part in starts it; recording that one records
// those below it.
func (g *guardian) registered(m *registered) {
	var newest snapshot.SnapshotID
	for _, id := range g.coord.Pending() {
		if m.horizon < id && !slices.Contains(m.finished, id) {
			g.coord.Require(id, m.id)
			newest = max(newest, id)
		}
	}
	if newest == 0 || g.s.cfg.mode != snapshot.Epochs {
		return
	}
	if p := g.s.reg.lookup(m.id); p != nil {
		p.mb.PostFrom(controlKey, &initiateMsg{id: newest})
	} else if g.clustered() {
		g.initiateRemote(m.id, newest)
	}
}

// shutdown refuses further starts, aborts the snapshots in progress and
// waits for the saves under way. It returns how many snapshots ended
// aborted meanwhile, each published as a SnapshotAborted: those in
// progress, and saves that failed.
func (g *guardian) shutdown() int {
	g.down = true
	if g.ticker != nil {
		g.ticker.Stop()
	}
	postponed := g.postponed
	g.postponed = nil
	for _, p := range postponed {
		g.start(p.reply, false, p.probe, p.remote...) // refused: down
	}
	for t, reply := range g.asked {
		reply <- result{err: ErrShutdown}
		delete(g.asked, t)
	}
	if g.coordinating() {
		for _, id := range g.coord.Pending() {
			g.coord.Abort(g.s.cfg.clock.Now(), id, ErrShutdown)
		}
		g.carry()
	}
	// The saves under way end before the system does, and before it gives
	// up its store.
	if g.saver != nil {
		for _, out := range g.saver.close() {
			g.saved(out)
		}
	}
	return g.downAborted
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

// timer takes a run's deadline or sweep: the Coordinator judges both by
// the time.
func (g *guardian) timer(m *timerMsg) {
	r := g.runs[m.id]
	if r == nil || r.saving != nil || !g.coordinating() {
		return
	}
	g.coord.Tick(g.now())
	if m.sweep && slices.Contains(g.coord.Pending(), m.id) {
		r.timers = append(r.timers, g.later(g.sweepEvery(), &timerMsg{id: m.id, sweep: true}))
	}
}

// now reads the clock for an input to the Coordinator. It first aborts
// the snapshots past their deadline with a reason naming what holds them
// up, when it knows: participants blocked in a handler waiting for one
// another (blocked), or, in the aligned mode, the barriers still awaited
// (stalled). Whichever input meets a deadline first (a report, or the
// deadline's own timer), the reason is the same.
func (g *guardian) now() time.Time {
	now := g.s.cfg.clock.Now()
	if !g.coordinating() {
		return now
	}
	if !g.pastDeadline(now) {
		return now // the common case, without the copy of Pending
	}
	for _, id := range g.coord.Pending() {
		if r := g.runs[id]; r != nil && !now.Before(r.start.Add(g.s.cfg.timeout)) {
			if reason := g.blocked(id, now); reason != nil {
				g.coord.Abort(now, id, reason)
			} else if reason := g.stalled(id); reason != nil {
				g.coord.Abort(now, id, reason)
			}
		}
	}
	return now
}

// pastDeadline reports whether a snapshot in progress may be past its
// deadline at now: runs start in the Coordinator's order, each with the
// same timeout, so none is if the oldest, known here, is not.
func (g *guardian) pastDeadline(now time.Time) bool {
	id, ok := g.coord.Oldest()
	if !ok {
		return false
	}
	r := g.runs[id]
	return r == nil || !now.Before(r.start.Add(g.s.cfg.timeout))
}

// start begins a new snapshot, or answers why it cannot. direct posts the
// start to every participant from here, before start returns (a restore
// needs it in every queue before the replayed messages).
func (g *guardian) start(reply chan<- result, direct, probe bool, remote ...remoteWaiter) {
	fail := func(err error) {
		switch {
		case reply != nil:
			reply <- result{err: err}
		case len(remote) > 0:
			for _, w := range remote {
				g.post(w.member, &frame{K: fOver, Err: err.Error(), Tokens: []uint64{w.token}})
			}
		default:
			g.s.log.Warn("periodic snapshot skipped", slog.Any("error", err))
		}
	}
	// What an input before this one left for the guardian to do comes
	// first (a batch of frames carries out the Coordinator's Ready once,
	// at its end): Start's Ready is taken for its awaited sets below.
	g.carry()
	switch {
	case g.down:
		fail(ErrShutdown)
		return
	case len(g.runs)-g.saving >= g.s.cfg.concurrent:
		fail(fmt.Errorf("%w: %d of %d", ErrBusy, len(g.runs)-g.saving, g.s.cfg.concurrent))
		return
	case len(g.runs) >= 2*g.s.cfg.concurrent:
		// The store is slow: as many complete snapshots wait for it as
		// may run at once. Refusing here bounds what they hold in memory.
		fail(fmt.Errorf("%w: %d snapshots wait for the store", ErrBusy, g.saving))
		return
	case g.resyncWait:
		// A coordinator that took over waits until every member has asked
		// its participants for all their counters (takeOver). A periodic
		// start is skipped.
		if reply != nil || len(remote) > 0 {
			g.postponed = append(g.postponed, startRequest{reply: reply, probe: probe, remote: remote})
		}
		return
	case g.coord.DropsWaiting() && !direct:
		// Stopped participants wait to be dropped until no snapshot runs:
		// postpone new starts until then, so that snapshots that overlap
		// cannot put the drop off for ever. A periodic start is skipped,
		// as when too many run.
		if reply != nil {
			g.postponed = append(g.postponed, startRequest{reply: reply, probe: probe})
		}
		if len(remote) > 0 {
			fail(fmt.Errorf("%w: stopped participants wait to be dropped", ErrBusy))
		}
		return
	}
	now := g.s.cfg.clock.Now()
	var initiator snapshot.ProcessID

	// Read the participants and publish the snapshot as pending at once: a
	// spawn from outside every participant is then either among them or joins it
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
	live := g.liveIDs(g.partIDs)
	if g.s.cfg.initiation == Flooding && g.s.cfg.mode != snapshot.Aligned && !direct && len(live) > 0 {
		if pick := g.s.cfg.initiator; pick != nil {
			initiator = pick(live)
		} else {
			initiator = live[g.rng.IntN(len(live))]
		}
	}
	reg.stoppingLocked(g.coord.Stopping)
	// Never an id this member heard of: one a coordinator before started
	// and this one did not (its gate took it as started, or holds frames
	// naming it).
	g.coord.NumberAfter(g.s.heardOf())
	id, err := g.coord.Start(now, live, initiator)
	if err != nil {
		reg.mu.Unlock()
		fail(err)
		return
	}
	rd := g.coord.Ready()
	if rd.Awaited != nil {
		// Before id is pending: a participant spawned from then on joins
		// it at birth and may send a barrier of id at once, and no one may
		// begin id with the sets of an older graph (two acyclic sets of
		// waits from different graphs may form a cycle together).
		g.handAwaited(rd.Awaited, parts)
	}
	reg.addPendingLocked(id)
	if probe {
		reg.setProbeLocked(id, true)
	}
	reg.mu.Unlock()

	r := &run{id: id, start: now, remote: remote, probe: probe}
	if reply != nil {
		r.waiters = append(r.waiters, reply)
	}
	aligned := g.s.cfg.mode == snapshot.Aligned
	g.fanOut(id, !direct && g.s.cfg.broadcasts(), !direct && aligned && g.s.cfg.initiation == Flooding, probe, initiator, rd.Awaited)
	g.runs[id] = r
	g.s.metrics.started.Add(context.Background(), 1)
	g.s.log.Debug("snapshot started", slog.Uint64("id", uint64(id)), slog.Int("participants", len(parts)))

	r.timers = append(r.timers, g.later(g.s.cfg.timeout, &timerMsg{id: id}))
	if !direct && !g.s.cfg.broadcasts() {
		// Whether or not this member hosts any participant: those of the
		// other members that nothing reaches are swept up from here too.
		r.timers = append(r.timers, g.later(g.sweepEvery(), &timerMsg{id: id, sweep: true}))
	}
	switch {
	case len(parts) == 0:
	case direct:
		msg := &initiateMsg{id: id}
		for _, p := range parts {
			p.mb.PostFrom(controlKey, msg)
		}
	case g.s.cfg.initiation == Flooding:
		msg := &initiateMsg{id: id}
		if initiator != "" {
			if i := slices.IndexFunc(parts, func(p *participant) bool { return p.id == initiator }); i >= 0 {
				parts[i].mb.PostFrom(controlKey, msg)
			}
		} else {
			// Aligned: as Flink injects barriers at the sources, every
			// participant that waits for no one starts; one started at
			// random would wait for barriers that only its waiting peers
			// can send.
			for _, p := range parts {
				if len(g.awaited[p.id]) == 0 {
					p.mb.PostFrom(controlKey, msg)
				}
			}
		}
	case g.s.cfg.initiation == Lazy:
		// Each participant records at its next message; the sweep starts
		// those still silent.
		g.s.publishEpoch(id)
	default:
		broadcast(id, parts, g.s.cfg.hurried())
	}
	if g.s.gate != nil && g.s.gate.holding.Load() > 0 {
		// Frames that name a snapshot the coordinator before started and
		// this member never heard of (a takeover) go on now, behind the
		// start, as they do on the other members (startFrame).
		g.s.releaseGate()
	}
}

// carry carries out what the Coordinator asks, in the order of its
// Ready's fields. Starts and awaited sets come from Start only, which
// carries them out itself.
func (g *guardian) carry() {
	for g.coordinating() && g.coord.HasReady() {
		rd := g.coord.Ready()
		for _, in := range rd.Initiates {
			if p := g.s.reg.lookup(in.Process); p != nil {
				p.mb.PostFrom(controlKey, &initiateMsg{id: in.Snapshot})
			} else if g.clustered() {
				g.initiateRemote(in.Process, in.Snapshot)
			}
		}
		for _, o := range rd.Over {
			r := g.runs[o.Snapshot]
			switch {
			case o.Global != nil && r.probe:
				g.finish(r, o.Global, nil, nil)
			case o.Global != nil:
				g.complete(r, o.Global)
			default:
				g.finish(r, nil, g.explain(o.Err), o.Unrecorded)
			}
		}
		if len(rd.Drops) > 0 {
			g.drop(rd.Drops)
		}
		if len(rd.Resync) > 0 {
			g.s.log.Warn("the coordinator lost track of participants' records: it asks them for all their counters",
				slog.Int("participants", len(rd.Resync)), slog.String("first", string(rd.Resync[0])))
		}
		if rd.ResyncAll {
			// A record was lost on its way, and the coordinator's sums
			// were reset: every participant, here and on the other
			// members, lists all its counters in its next record.
			g.s.log.Warn("the coordinator lost a record of a participant: it asks every participant for all its counters")
			g.resyncAll()
		}
		// Participants of other members read what they are owed in
		// turn: a capture helps only where the messages are queued.
		for _, id := range rd.Recapture {
			if p := g.s.reg.lookup(id); p != nil {
				if p.sums && !p.mb.Late() {
					// Counting in sums the coordinator names every
					// participant: one that was posted nothing from an
					// older epoch since its capture owes nothing.
					continue
				}
				p.recapture.Store(true)
				p.mb.Hurry()
				if tr, ok := g.s.trace.(recaptureTracer); ok {
					tr.Recapture(id) // once asked: its hurried work is due
				}
			}
		}
		for _, id := range rd.Resync {
			if p := g.s.reg.lookup(id); p != nil {
				p.handResync()
			} else if e := g.s.reg.lookupRemote(id, ""); g.clustered() && e != nil {
				g.post(e.addr, &frame{K: fResync, To: id})
			}
		}
	}
}

// broadcast starts snapshot id at every participant: the guardian posts
// the start to each, from its own goroutine (about 0.1 µs a post), one
// hop rather than a relay through a few participants, which would cost
// a pass over the busy mailboxes more (docs/benchmarks.md). In the epoch
// mode (hurry) it posts nothing: each records it ahead of its queued
// messages, in its mailbox's hurried work (participant.startHurried),
// which is certain to run (mailbox.Hurry), so the records take one pass
// over the participants' records rather than over every message queued;
// a start posted besides would cost each participant a turn of its
// mailbox to find the snapshot recorded (an idle one, a run of its own).
func broadcast(id snapshot.SnapshotID, parts []*participant, hurry bool) {
	var msg *initiateMsg
	if !hurry {
		msg = &initiateMsg{id: id, start: true}
	}
	for _, p := range parts {
		if !hurry {
			p.mb.PostFrom(controlKey, msg)
			continue
		}
		raise(&p.hurryTo, uint64(id))
		p.mb.Hurry()
	}
	if len(parts) > 0 {
		if tr, ok := parts[0].sys.trace.(broadcastTracer); ok {
			tr.Broadcast(id)
		}
	}
}

// broadcastTracer is a tracer (System.trace) that also hears when a
// broadcast has posted, or hurried, the start to every participant.
type broadcastTracer interface {
	Broadcast(id snapshot.SnapshotID)
}

// recaptureTracer is a tracer (System.trace) that also hears when the
// guardian has asked a participant to capture its queue again: its
// hurried work goes before its next message from then on.
type recaptureTracer interface {
	Recapture(p snapshot.ProcessID)
}

// explain names a stopped participant as the reason of a snapshot that
// does not balance on a channel to it: messages on their way to it at the
// cut were lost when it stopped.
func (g *guardian) explain(err error) error {
	var be *snapshot.BalanceError
	if errors.As(err, &be) && be.Received+be.Recorded < be.Sent && g.s.reg.isStopped(be.Channel.To) {
		return fmt.Errorf("%w: %s, with messages from %s still on their way to it: %w", ErrParticipantStopped, be.Channel.To, be.Channel.From, err)
	}
	var rbe *snapshot.ReceiverBalanceError
	if errors.As(err, &rbe) && rbe.Lost() && g.s.reg.isStopped(rbe.Receiver) {
		return fmt.Errorf("%w: %s, with messages still on their way to it: %w", ErrParticipantStopped, rbe.Receiver, err)
	}
	var le *snapshot.LostError
	if errors.As(err, &le) {
		return fmt.Errorf("%w: %s, with messages still on their way to it: %w", ErrParticipantStopped, le.Receiver, err)
	}
	return err
}

// complete hands a complete snapshot to the saver, off the guardian's
// goroutine: a slow store holds up neither starts nor deadlines. The run
// stays (not counted against WithMaxConcurrent) until the save is over
// (saved).
func (g *guardian) complete(r *run, gl *snapshot.Global) {
	r.saving = gl
	g.saving++
	for _, t := range r.timers {
		t.Stop()
	}
	if g.saver == nil {
		g.saver = newSaver(g.s.cfg.store, g.s.cfg.timeout, g.s.cfg.retain, g.s.cfg.invariants, func() { g.s.root.Send(g.self, &savedMsg{}) })
	}
	g.saver.save(r.id, gl)
}

// saved takes the outcome of a save: a failed one aborts its snapshot
// (finish logs it, at Warn, and publishes it), and later snapshots go on.
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
		g.finish(r, nil, &snapshot.AbortError{Snapshot: r.id, Reason: fmt.Errorf("%w: %w", ErrSave, out.err)}, nil)
		return
	}
	g.finish(r, gl, nil, nil)
}

// drop carries out the Coordinator's drops of stopped participants that
// complete snapshots showed drained, at a moment no snapshot runs: each
// peer named is handed the word to forget it before its next record, and
// the name is given again (registry.drop) after that. Snapshots then stop
// carrying participants long gone: their size and cost follow the live
// system, not its history.
func (g *guardian) drop(drops []snapshot.Drop) {
	var wait []string
	if g.clustered() {
		wait = g.s.others()
	}
	// Applied here before it leaves: the other members take the drops
	// as this member's word that it applied them (registry.appliedBy).
	g.s.reg.drop(drops, wait)
	g.dropRemote(drops)
	if len(g.postponed) > 0 {
		g.s.root.Send(g.self, &postponedMsg{})
	}
}

// finish ends r: waiters get the outcome, and the event stream and the
// metrics hear of it. In the aligned mode, the participants that had not
// recorded an aborted snapshot (unrecorded) are told at once: they may
// hold senders paused for it.
func (g *guardian) finish(r *run, gl *snapshot.Global, err error, unrecorded []snapshot.ProcessID) {
	delete(g.runs, r.id)
	g.s.recorded.Add(-r.held)
	r.held = 0
	for _, t := range r.timers {
		t.Stop()
	}
	reg := &g.s.reg
	reg.mu.Lock()
	reg.endPendingLocked(r.id)
	reg.setProbeLocked(r.id, false)
	reg.mu.Unlock()

	if err != nil && g.s.cfg.mode == snapshot.Aligned {
		msg := &abortMsg{id: r.id}
		for _, id := range unrecorded {
			if p := g.s.reg.lookup(id); p != nil {
				p.mb.PostFrom(controlKey, msg)
			}
		}
	}
	d := g.s.cfg.clock.Now().Sub(r.start)
	ctx := context.Background()
	if r.probe {
		// A cut for an analysis: its caller hears of it, no one else.
		g.s.log.Debug("analysis cut over", slog.Uint64("id", uint64(r.id)), slog.Any("error", err))
	} else if err == nil {
		g.s.metrics.completed.Add(ctx, 1)
		g.s.metrics.duration.Record(ctx, d.Seconds())
		g.s.metrics.stateBytes.Record(ctx, int64(gl.TotalStateBytes()))
		g.s.metrics.recorded.Record(ctx, int64(gl.TotalInFlight()))
		g.s.log.Info("snapshot complete", slog.Uint64("id", uint64(r.id)), slog.Int("participants", len(gl.Participants)),
			slog.Int("in_flight", gl.TotalInFlight()), slog.Duration("duration", d))
		g.s.actors.EventStream.Publish(&SnapshotCompleted{Global: gl, Duration: d})
		g.violated(gl)
	} else {
		if g.down {
			g.downAborted++
		}
		g.s.metrics.abort(abortReason(err))
		g.s.log.Warn("snapshot aborted", slog.Uint64("id", uint64(r.id)), slog.Any("error", err))
		g.s.actors.EventStream.Publish(&SnapshotAborted{ID: r.id, Err: err})
	}
	// The other members are told before the callers hear: a Snapshot
	// that returned has had its ending sent everywhere (System.Traffic
	// counts it then).
	g.overRemote(r, gl, err)
	for _, w := range r.waiters {
		w <- result{global: gl, err: err}
	}
	// Participants let go of r themselves, when they next record or report
	// (participant.forgetFinished): no message per participant.
}

// abortReason is the metrics' label for an abort's reason.
func abortReason(err error) string {
	switch {
	case errors.Is(err, snapshot.ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrParticipantStopped):
		return "stopped"
	case errors.Is(err, ErrParticipantRestarted):
		return "restarted"
	case errors.Is(err, ErrCapture):
		return "capture"
	case errors.Is(err, ErrSave):
		return "save"
	case errors.Is(err, ErrShutdown):
		return "shutdown"
	}
	return "other"
}
