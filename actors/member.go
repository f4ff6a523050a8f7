package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// The guardian as one member of a cluster (WithTransport). The member
// Transport.Coordinator names runs the snapshot.Coordinator for the whole
// cluster; every guardian fans the starts out to its own participants, so
// that a snapshot costs O(members) messages between members besides the
// markers on channels that cross them, and sends its participants' records
// to the coordinator, which assembles, verifies and stores them: a
// participant's state crosses the network once per snapshot, or not at
// all on the coordinator's member.

// membersMsg tells the guardian that the cluster's members changed.
type membersMsg struct{}

// announceMsg tells the guardian a participant was born here: the other
// members hear of it, to count their sends to it on its channel.
type announceMsg struct{ id snapshot.ProcessID }

// MembersChanged tells the system that the cluster's members, or its
// coordinator, changed (the Transport calls it): snapshots in progress
// that a departed member took part in abort, naming it, and a member
// that became the coordinator takes over.
func (s *System) MembersChanged() { s.tell(&membersMsg{}) }

// clustered reports whether the system is one member of a cluster.
func (g *guardian) clustered() bool { return g.s.cfg.transport != nil }

// coordinating reports whether this guardian runs the Coordinator: on the
// one system of a process, or on the cluster's coordinating member once it
// took over.
func (g *guardian) coordinating() bool { return g.coord != nil }

// forward sends a participant's input for the Coordinator to the
// coordinating member. It reports false on the coordinating member, which
// takes it itself.
func (g *guardian) forward(msg interface{}) bool {
	if !g.clustered() || g.coordinating() {
		return false
	}
	// post encodes the frame before it returns: one frame serves them all,
	// emptied after each.
	f := &g.fwd
	switch m := msg.(type) {
	case *reportMsg:
		f.K, f.ID, f.IDs, f.Chans = fReport, m.id, m.children(), toWire(m.channels)
		f.Rec = m.rec
		if failed := m.failed(); failed != nil {
			f.Err = failed.Error()
		}
		// The messages leave this member: they count against the
		// coordinator's budget, not this one's.
		g.s.recorded.Add(-int64(m.held()))
	case *failMsg:
		f.K, f.ID, f.From, f.Err = fFail, m.id, m.from, m.err.Error()
	case *stoppedMsg:
		final := m.final
		f.K, f.From, f.Rec, f.Recorded, f.After, f.ID = fStopped, m.id, &final, m.recorded, m.after, m.took
	case *restartedMsg:
		f.K, f.From = fRestarted, m.id
	case *registered:
		f.K, f.From, f.Finished, f.Horizon = fRegistered, m.id, m.finished, m.horizon
	default:
		return false
	}
	g.post(g.s.cfg.transport.Coordinator(), f)
	*f = frame{} // holds nothing of the message, and is empty for the next
	return true
}

// announce tells the other members of participants born or stopped here.
func (g *guardian) announce(live, left []snapshot.ProcessID) {
	if !g.clustered() {
		return
	}
	for _, m := range g.s.others() {
		g.post(m, &frame{K: fJoined, IDs: live, Left: left})
	}
}

// liveIDs returns the participants live in the whole cluster, sorted: this
// member's and the other members' stand-ins. The caller holds the
// registry's lock.
func (g *guardian) liveIDs(local []snapshot.ProcessID) []snapshot.ProcessID {
	if !g.clustered() {
		return local
	}
	remote := g.s.reg.remoteLiveLocked()
	if len(remote) == 0 {
		return local
	}
	ids := slices.Clone(local)
	for id := range remote {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// fanOut tells the other members of snapshot id: each posts the start to
// its own participants if broadcast, or, with sources, initiates it at
// those that await no barrier (aligned flooding), and takes id as in
// progress. With awaited (the aligned mode's sets from id on), each
// member first hands its participants their sets. An initiator on
// another member then hears it from its member.
func (g *guardian) fanOut(id snapshot.SnapshotID, broadcast, sources, probe bool, initiator snapshot.ProcessID, awaited *snapshot.Awaited) {
	if !g.clustered() {
		return
	}
	var byMember map[string]map[snapshot.ProcessID][]snapshot.ProcessID
	if awaited != nil {
		byMember = g.s.reg.byMember(awaited.Sets)
	}
	for _, m := range g.s.others() {
		f := &frame{K: fStart, ID: id, Start: broadcast, Sources: sources, Probe: probe}
		if awaited != nil {
			f.Awaited = &awaitedSets{Sets: byMember[m]}
		}
		g.post(m, f)
	}
	if initiator != "" && g.s.reg.lookup(initiator) == nil {
		g.initiateRemote(initiator, id)
	}
}

// initiateRemote asks the member of participant p to initiate id there.
func (g *guardian) initiateRemote(p snapshot.ProcessID, id snapshot.SnapshotID) bool {
	if e := g.s.reg.lookupRemote(p, ""); e != nil {
		g.post(e.addr, &frame{K: fInitiate, ID: id, To: p})
		return true
	}
	return false
}

// overRemote tells the other members that snapshot id is over, and those
// that asked for it how it ended.
func (g *guardian) overRemote(r *run, gl *snapshot.Global, err error) {
	if !g.clustered() {
		return
	}
	for _, m := range g.s.others() {
		f := &frame{K: fOver, ID: r.id}
		if err != nil {
			f.Err = err.Error()
		}
		for _, w := range r.remote {
			if w.member == m {
				f.Tokens = append(f.Tokens, w.token)
				if r.probe && gl != nil {
					// Not stored: the cut itself goes to whoever asked,
					// its messages' contents left out.
					f.Global = bareCut(gl)
				}
			}
		}
		g.post(m, f)
		// Sent now, not with the guardian's next flush: Snapshot returns
		// once its ending has left for every member (finish), which is
		// what System.Traffic then counts.
		g.flushTo(m)
	}
}

// dropRemote hands the drops to the other members: their participants
// among the peers forget the dropped, and their stand-ins go.
func (g *guardian) dropRemote(drops []snapshot.Drop) {
	if !g.clustered() {
		return
	}
	for _, m := range g.s.others() {
		g.post(m, &frame{K: fDrop, Drops: drops})
	}
}

// remoteWaiter is a member's Snapshot call waiting on a run.
type remoteWaiter struct {
	member string
	token  uint64
}

// ask forwards a Snapshot call, or an analysis's cut (probe), to the
// coordinating member.
func (g *guardian) ask(reply chan<- result, probe bool) {
	if g.down {
		reply <- result{err: ErrShutdown}
		return
	}
	g.token++
	g.asked[g.token] = reply
	g.post(g.s.cfg.transport.Coordinator(), &frame{K: fAsk, Token: g.token, Probe: probe})
}

// bareCut returns g without its messages' contents: what an analysis
// reads (who has messages on their way) at a fraction of the bytes.
func bareCut(g *snapshot.Global) *snapshot.Global {
	c := *g
	c.Channels = make([]snapshot.ChannelState, len(g.Channels))
	for i, ch := range g.Channels {
		ch.Messages = make([]snapshot.Message, len(ch.Messages))
		for j, msg := range g.Channels[i].Messages {
			ch.Messages[j] = snapshot.Message{Seq: msg.Seq}
		}
		c.Channels[i] = ch
	}
	return &c
}

// flushMsg makes the guardian send what post held.
type flushMsg struct{}

// post sends f to member to. A frame for that member's guardian waits in
// the outbox until this turn of the guardian ends (the first one posts a
// flushMsg to the guardian, which comes after what is queued now), so
// that a burst of reports crosses as one batch, which the receiving
// guardian decodes. Any other frame for that member sends the batch
// first: the member gets this guardian's frames in the order they were
// posted.
func (g *guardian) post(to string, f *frame) {
	b, err := appendFrame(g.frameBuf[:0], f)
	if err != nil {
		g.s.log.Error("encoding a frame for a cluster member", slog.String("member", to), slog.Any("error", err))
		return
	}
	g.frameBuf = b // until the next post: copied or sent as a copy
	tr := &g.s.traffic
	tr.frames.Add(1)
	if f.K == fReport && f.Rec != nil {
		tr.state.Add(uint64(len(f.Rec.State)))
	}
	if !forGuardian(f.K) {
		g.flushTo(to)
		tr.sends.Add(1)
		tr.bytes.Add(uint64(len(b)))
		g.s.sendBytes(to, bytes.Clone(b))
		return
	}
	if len(g.outbox[to])+len(b) > maxBatch {
		g.flushTo(to)
	}
	if g.outbox == nil {
		g.outbox = make(map[string][]byte)
	}
	if len(g.outbox[to]) == 0 {
		g.outbox[to] = append(make([]byte, 0, max(g.lastBatch, 1+len(b))), fBatch)
	}
	g.outbox[to] = append(g.outbox[to], b...)
	if !g.flushing {
		g.flushing = true
		g.s.root.Send(g.self, flushMsg{})
	}
}

// flush sends every batch the outbox holds.
func (g *guardian) flush() {
	g.flushing = false
	for to := range g.outbox {
		g.flushTo(to)
	}
}

// flushTo sends the batch for member to, if any.
func (g *guardian) flushTo(to string) {
	if b := g.outbox[to]; len(b) > 0 {
		delete(g.outbox, to)
		g.lastBatch = len(b)
		g.s.traffic.sends.Add(1)
		g.s.traffic.bytes.Add(uint64(len(b)))
		g.s.sendBytes(to, b)
	}
}

// memberBatch takes a batch of frames from another member's guardian.
func (g *guardian) memberBatch(from string, b []byte) {
	err := decodeBatch(b, &g.s.interned, func(f *frame) { g.memberFrame(from, f) })
	if err != nil {
		g.s.log.Error("undecodable frame from a cluster member", slog.String("member", from), slog.Any("error", err))
	}
}

// decodeBatch decodes the frames of a batch (without its fBatch byte) in
// order, their names taken from names, handing each that is well formed
// to each, which keeps nothing of the frame itself (its fields are its
// own): the next is decoded into it. It stops at the first that is not,
// or is cut short. A batch comes from another member: what decoding it
// allocates stays proportional to its size (frameReader.frame).
func decodeBatch(b []byte, names *interner, each func(*frame)) error {
	f := &frame{}
	r := frameReader{b: b}
	for len(r.b) > 0 {
		r.frame(f, names)
		if r.err != nil {
			return r.err
		}
		if err := f.check(); err != nil {
			return err
		}
		each(f)
	}
	return nil
}

// check reports what a frame for the guardian lacks that its kind needs:
// a frame from another member is not trusted to be well formed.
func (f *frame) check() error {
	switch {
	case !forGuardian(f.K):
		return fmt.Errorf("frame of kind %d in a batch", f.K)
	case f.K == fStopped && f.Rec == nil:
		return errors.New("a stop without its final record")
	}
	for _, c := range f.Chans {
		if len(c.Seqs) != len(c.Msgs) {
			return fmt.Errorf("channel %v: %d messages, %d sequence numbers", c.Channel, len(c.Msgs), len(c.Seqs))
		}
	}
	return nil
}

// memberFrame takes a frame from another member's guardian.
func (g *guardian) memberFrame(from string, f *frame) {
	reg := &g.s.reg
	switch f.K {
	case fInitiate:
		if p := reg.lookup(f.To); p != nil {
			p.mb.PostFrom(controlKey, &initiateMsg{id: f.ID})
		}
	case fResync:
		if p := reg.lookup(f.To); p != nil {
			p.handResync()
		}
	case fResyncAll:
		// Its participants were asked as it was delivered. The last
		// start this member heard of goes with the confirmation, which
		// names the takeover it answers.
		g.post(from, &frame{K: fResynced, After: g.s.heardOf(), Token: f.Token})
	case fResynced:
		// Only from a member this coordinator asked: the word of another
		// moves no id.
		switch {
		case !g.coordinating():
		case f.Token != g.resyncRound:
			// An answer to an earlier takeover of this member's: its
			// word may be older than the start that member heard since.
		case g.resyncing[from]:
			if !g.resyncWait && f.After > g.coord.Last() {
				// After the first start stopped waiting for it: the ids up
				// to After that were given meanwhile may have been recorded
				// for the coordinator before, and cannot complete; the next
				// go on after them.
				g.s.log.Warn("taking over: a member confirmed after the wait; numbering after the last start it heard",
					slog.String("member", from), slog.Uint64("after", uint64(f.After)), slog.Uint64("last", uint64(g.coord.Last())))
			}
			g.coord.NumberAfter(f.After)
			g.resynced(from)
		}
	case fOver:
		reg.mu.Lock()
		reg.endPendingLocked(f.ID)
		reg.setProbeLocked(f.ID, false)
		reg.mu.Unlock()
		if f.Err != "" && g.s.cfg.mode == snapshot.Aligned {
			// Its participants that had not recorded it may hold senders
			// paused for it: every one forgets it now.
			msg := &abortMsg{id: f.ID}
			for _, p := range reg.live() {
				p.mb.PostFrom(controlKey, msg)
			}
		}
		for _, t := range f.Tokens {
			g.answer(t, f)
		}
	case fAsk:
		if !g.coordinating() {
			g.post(from, &frame{K: fOver, Err: "no coordinator: it is changing", Tokens: []uint64{f.Token}})
			return
		}
		g.start(nil, false, f.Probe, remoteWaiter{member: from, token: f.Token})
	default:
		if g.coordinating() {
			g.coordinatorFrame(f)
		}
	}
}

// coordinatorFrame takes a participant's input that its member forwarded.
func (g *guardian) coordinatorFrame(f *frame) {
	switch f.K {
	case fReport:
		m := &reportMsg{id: f.ID, rec: f.Rec, channels: fromWire(f.Chans)}
		if len(f.IDs) > 0 || f.Err != "" {
			m.more = &reportMore{children: f.IDs}
			if f.Err != "" {
				m.more.failed = errors.New(f.Err)
			}
		}
		g.s.recorded.Add(int64(m.held()))
		g.report(m)
	case fFail:
		g.coord.Abort(g.now(), f.ID, fmt.Errorf("%s: %s", f.From, f.Err))
	case fStopped:
		g.s.reg.heard(f.From)
		_ = g.coord.Stopped(g.now(), f.From, *f.Rec, f.Recorded, f.After, f.ID)
	case fRestarted:
		g.coord.Fail(g.now(), f.From, fmt.Errorf("%w: %s", ErrParticipantRestarted, f.From))
	case fRegistered:
		g.registered(&registered{id: f.From, finished: f.Finished, horizon: f.Horizon})
	}
}

// answer ends a Snapshot call of this member that the coordinator ran.
func (g *guardian) answer(token uint64, f *frame) {
	reply, ok := g.asked[token]
	if !ok {
		return
	}
	delete(g.asked, token)
	if f.Err != "" {
		reply <- result{err: fmt.Errorf("%w: %s", snapshot.ErrAborted, f.Err)}
		return
	}
	if f.Global != nil {
		reply <- result{global: f.Global} // an analysis's cut, never stored
		return
	}
	// Stored by the coordinator in the store the members share.
	store, timeout, id := g.s.cfg.store, g.s.cfg.timeout, f.ID
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		gl, err := store.Load(ctx, id)
		reply <- result{global: gl, err: err}
	}()
}

// members takes a change of the cluster's members: this member's
// participants are announced to the new ones; the snapshots in progress
// abort if a member that left held participants, naming it; and a member
// that finds itself the coordinator takes over.
func (g *guardian) members() {
	t := g.s.cfg.transport
	now := t.Members()
	if len(now) == 0 {
		return // not joined yet: the join's list follows
	}
	was := g.known
	g.known = now
	g.s.reg.membersNow(now)
	var gone []string
	for _, m := range was {
		if !slices.Contains(now, m) {
			gone = append(gone, m)
		}
	}
	if live := g.s.Participants(); len(live) > 0 {
		for _, m := range now {
			if m != t.Self() && !slices.Contains(was, m) {
				g.post(m, &frame{K: fJoined, IDs: live})
			}
		}
	}
	for _, m := range gone {
		if g.coordinating() {
			g.resynced(m)
		}
		left := g.s.reg.memberLeft(m)
		if g.coordinating() && len(left) > 0 {
			reason := &MemberLeftError{Member: m, Participants: left}
			for _, id := range g.coord.Pending() {
				g.coord.Abort(g.s.cfg.clock.Now(), id, reason)
			}
		}
	}
	switch coordinator := t.Coordinator() == t.Self(); {
	case coordinator && !g.coordinating():
		g.takeOver()
	case !coordinator && g.coordinating():
		// Another member coordinates now (one that was away came back
		// with a lower address): this one's runs end here.
		for _, id := range g.coord.Pending() {
			g.coord.Abort(g.s.cfg.clock.Now(), id, fmt.Errorf("%w: coordination moved to %s", ErrMemberLeft, t.Coordinator()))
		}
		g.carry()
		g.coord = nil
		g.releaseLease()
		// The starts postponed here go to the coordinator now.
		postponed := g.postponed
		g.postponed, g.resyncing, g.resyncWait = nil, nil, false
		for _, p := range postponed {
			if p.reply != nil {
				g.ask(p.reply, p.probe)
			}
			for _, w := range p.remote {
				g.post(w.member, &frame{K: fOver, Err: "no coordinator: it is changing", Tokens: []uint64{w.token}})
			}
		}
	}
	if c := t.Coordinator(); c != g.coordinator {
		if g.coordinator != "" && !g.coordinating() {
			// Starts of a coordinator that left never end: let them go.
			reg := &g.s.reg
			reg.mu.Lock()
			reg.clearPendingLocked()
			for id := range reg.probes {
				reg.setProbeLocked(id, false)
			}
			reg.mu.Unlock()
		}
		g.coordinator = c
	}
}

// MemberLeftError is the reason of a snapshot aborted because a member
// that held some of its participants left the cluster (or died): it
// matches ErrMemberLeft.
type MemberLeftError struct {
	Member       string               // the member's address
	Participants []snapshot.ProcessID // the participants it held, sorted
}

func (e *MemberLeftError) Error() string {
	return fmt.Sprintf("%v: %s, with %d participants (%s)", ErrMemberLeft, e.Member, len(e.Participants), names(e.Participants))
}

// Unwrap returns ErrMemberLeft.
func (e *MemberLeftError) Unwrap() error { return ErrMemberLeft }

// takeOver makes this member the coordinator: it claims the store the
// members share, to continue its snapshots (persistence.ClaimRestore:
// the member that coordinated before held it and let it go, or died), and
// numbers after the highest id the store has held, the last start this
// member saw, and, once they confirm, the last each other member saw, so
// ids keep increasing across the change.
func (g *guardian) takeOver() {
	ctx, cancel := context.WithTimeout(context.Background(), g.s.cfg.timeout)
	defer cancel()
	if g.s.lease == nil {
		lease, err := claimRetry(ctx, g.s.cfg.store, g.s.cfg.name)
		if err != nil {
			g.s.log.Error("taking over as coordinator: claiming the store failed; trying again", slog.Any("error", err))
			g.later(g.s.cfg.timeout, &membersMsg{})
			return
		}
		g.s.lease = lease
	}
	after := max(g.s.lease.High(), g.s.heardOf())
	g.s.reg.unheardRemoteGone()
	g.coord = g.newCoordinator(after, nil)
	g.s.log.Info("coordinating the cluster's snapshots", slog.String("member", g.s.cfg.transport.Self()),
		slog.Uint64("after", uint64(g.coord.Last())))
	if !g.s.held.holding() {
		// Before its first start, this coordinator hears from every
		// member (fResyncAll, confirmed by fResynced), and its first
		// start waits for every confirmation (at most the timeout):
		//
		//  - Each confirmation carries the last start its member heard,
		//    and ids go on after the highest. The coordinator before may
		//    have died while its start reached some members and not this
		//    one: their participants recorded that snapshot for it, and a
		//    start here under the same id would never be recorded again.
		//  - In the epoch mode, a participant's record of what changed
		//    follows its last record, whose counters the coordinator
		//    before held and this one does not: every participant lists
		//    all its counters in its next record, so that the first
		//    snapshot here does not abort for each of them. A member asks
		//    its participants as the frame is delivered, before it
		//    confirms: a participant could otherwise record for the first
		//    start, at a message from another member's participant that
		//    recorded, before the frame reached its own member.
		//
		// Whether a coordinator was before it cannot be told from here:
		// a member that joins with the lowest address takes over at
		// once, before it knew another, and the store holds only the
		// ids that were stored, not those started (probes, aborted
		// runs). So it always asks. In a restore (this member holds what
		// others send until its participants are back) every
		// participant is new, ids start alike on every member, and a
		// first record lists all counters.
		g.resyncRound = g.rng.Uint64() | 1
		g.resyncing = make(map[string]bool)
		for _, m := range g.resyncAll() {
			g.resyncing[m] = true
		}
		if g.resyncWait = len(g.resyncing) > 0; g.resyncWait {
			g.later(g.s.cfg.timeout, &resyncOverMsg{coord: g.coord})
		}
	}
}

// resynced takes member's confirmation that its participants were asked
// for all their counters (takeOver), or its leaving: once every member
// confirmed, the starts postponed meanwhile go.
func (g *guardian) resynced(member string) {
	if !g.resyncing[member] {
		return
	}
	delete(g.resyncing, member)
	if len(g.resyncing) == 0 && g.resyncWait {
		g.resyncWait = false
		g.s.root.Send(g.self, &postponedMsg{})
	}
}

// resyncAll asks every participant, this member's and, in a cluster,
// the other members' (one frame each, confirmed by fResynced), to list
// all its counters in its next record. It returns the members asked.
func (g *guardian) resyncAll() []string {
	g.s.resyncLocal()
	if !g.clustered() {
		return nil
	}
	others := g.s.others()
	for _, m := range others {
		g.post(m, &frame{K: fResyncAll, Token: g.resyncRound})
	}
	return others
}

// resyncLocal asks every participant of this member to list all its
// counters in its next record.
func (s *System) resyncLocal() {
	for _, p := range s.reg.live() {
		p.handResync()
	}
}

// releaseLease gives the store up for the member that coordinates now.
func (g *guardian) releaseLease() {
	if g.s.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.s.cfg.timeout)
	defer cancel()
	if err := g.s.lease.Release(ctx); err != nil {
		g.s.log.Warn("releasing the store failed", slog.Any("error", err))
	}
	g.s.lease = nil
}

// claimRetry claims store, retrying while the coordinator before still
// holds it (it is leaving, or its death has not freed the lock yet).
func claimRetry(ctx context.Context, store persistence.Store, name string) (persistence.Lease, error) {
	for {
		lease, err := store.Claim(ctx, name, persistence.ClaimRestore)
		if err == nil || !errors.Is(err, persistence.ErrLocked) {
			return lease, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-afterRetry():
		}
	}
}

// afterRetry is the pause between two claims of a store still locked.
func afterRetry() <-chan time.Time { return time.After(50 * time.Millisecond) }

// RestoreMember restores this member's part of a cluster from the stored
// snapshot id (the latest complete one when id is 0), with opts as for
// NewSystem, WithTransport among them. After joining, it calls ready,
// which returns once the members the restore is to run on have all
// joined: names are placed over them, so every member must see the same
// list. Each member then respawns the participants placed on it, with
// their states, and replays the recorded messages of the channels into
// them (a sender on another member through its stand-in) before anything
// else reaches them, what other members send meanwhile included. The
// restored system's first snapshot is numbered after the restored one
// and every id the shared store has held, on every member alike; the
// coordinator's RestoreMember returns once it is complete and stored, the
// others' once their participants run.
func RestoreMember(ctx context.Context, store persistence.Store, id snapshot.SnapshotID, ready func(context.Context) error, opts ...Option) (*System, error) {
	cfg, err := newConfig(append([]Option{WithStore(store)}, opts...))
	if err != nil {
		return nil, err
	}
	if cfg.transport == nil {
		return nil, fmt.Errorf("%w: RestoreMember needs WithTransport (Restore restores one system)", ErrConfig)
	}
	cfg.hold = true
	s, g, err := restoreOn(ctx, store, id, cfg, nil, opts)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*System, error) {
		s.releaseFrames()
		_ = s.Shutdown(context.Background())
		return nil, fmt.Errorf("%w: snapshot %d: %w", ErrRestore, g.ID, err)
	}
	if err := ready(ctx); err != nil {
		return fail(err)
	}
	o, err := store.Ownership(ctx)
	if err != nil {
		return fail(err)
	}
	// The coordinator takes over before its restore request.
	s.MembersChanged()
	if err := s.restore(ctx, g, max(g.ID, o.High)); err != nil {
		return fail(err)
	}
	return s, nil
}
