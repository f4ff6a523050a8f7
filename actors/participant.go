package actors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/snapshot"
)

// maxTargets bounds the cache of PIDs a participant has sent to.
const maxTargets = 4096

// participant is one actor's snapshot bookkeeping. It outlives the actor
// instances that Proto.Actor makes on restarts.
type participant struct {
	// What a sender reads of its target on every message comes first, in
	// one cache line: a busy system's sends mostly find their target out
	// of the sender's cache, and each further line is another miss.
	sys     *System
	id      snapshot.ProcessID
	key     mailbox.SenderKey
	mb      *mailbox.Mailbox
	stopped atomic.Bool
	// addr is the member a stand-in for a participant of another member
	// lives on (WithTransport); empty for this member's participants.
	addr string

	// What a record reads comes next, in the three lines after it: a
	// snapshot of many participants finds each one's out of the cache,
	// and each further line is another miss. From proc to enc they are
	// the actor's goroutine's, but for hurryTo and recapture, which the
	// guardian sets.
	proc  *snapshot.Process
	inner actor.Actor
	// hurryTo is the newest snapshot broadcast to it in the epoch mode:
	// the one its mailbox's hurried work records (startHurried).
	hurryTo atomic.Uint64
	// capturedAt is the epoch when it last captured its queue (epoch
	// mode, captureQueued); capture holds that capture's buffers.
	capturedAt snapshot.SnapshotID
	// recapture asks its hurried work to capture its queue again: the
	// coordinator found it owed channel state of a snapshot every
	// participant recorded (snapshot.CoordinatorReady.Recapture).
	recapture atomic.Bool
	epochs    bool // the Process's mode is Epochs: any message may make it record
	sums      bool // the Process counts in sums (WithCounting(InSums))
	lazy      bool // lazy starts: look for a newer snapshot at every message
	aligned   bool // the Process's mode is Aligned: senders may be held paused
	live      bool // Started handled, and neither restarting nor stopping: its state may be recorded outside a message
	// stopping is set at Stopping and never cleared: Proto.Actor lets a
	// Restart that follows a Stop (a failure before the Stop was read)
	// undo it, and the participant stops again after such a restart.
	stopping bool
	departed bool // depart ran: a restarted instance stops without a second departure
	// finalEpoch is its epoch when it stopped (counting in sums), set
	// before stopped: a sender that finds it stopped and is behind it
	// sends a message a snapshot it recorded needed.
	finalEpoch snapshot.SnapshotID
	// parent is the participant that spawned it, here, if any: its
	// records name its children until their Terminated comes, which may
	// be after a child is dropped, so it is handed each drop of it
	// (registry.drop). Set before the actor runs.
	parent *participant
	unread bool // a message taken off the queue is not received yet: no capture
	budget bool // a budgetMsg is on its way
	kind   string
	// byID, held, children and reports are made at their first entry:
	// most participants never have one, and a record reads some of them
	// (an empty table made beforehand is a miss in the cache at every
	// record of a participant among many).
	children map[snapshot.ProcessID]bool
	reports  map[snapshot.SnapshotID][]snapshot.ChannelRecord // recorded, not yet finished: closed recordings held for one report
	forget   []snapshot.SnapshotID                            // to Forget after the actions in hand
	late     lateChannels                                     // channel state recorded during this mailbox turn, reported at its end
	enc      encoder

	pid *actor.PID
	// awaits holds whose barriers to wait for (aligned mode), each for the
	// snapshot the guardian is starting and those after it, left by the
	// guardian before it posts that start; awaitsNew says there are some.
	// They are taken before each start and barrier, so no barrier of a
	// snapshot can find a set older than its own: its sender got the start
	// after the guardian left the set. Older snapshots keep theirs
	// (snapshot.Process.SetAwaited), so each waits along one graph.
	awaitsMu  sync.Mutex
	awaits    []awaitHandover
	awaitsNew atomic.Bool
	// paused is the senders this participant holds paused (aligned mode),
	// for the guardian's timeout reasons.
	paused atomic.Pointer[[]snapshot.ProcessID]

	// Owned by the actor's goroutine.
	state    []byte // to restore before the first message, then nil
	sctx     snapContext
	lastPID  *actor.PID
	lastT    *targetRef
	targets  map[*actor.PID]*targetRef
	byID     map[snapshot.ProcessID]*participant
	lastKey  mailbox.SenderKey
	lastPeer *peerRef
	peers    map[mailbox.SenderKey]*peerRef
	keys     map[snapshot.ProcessID]mailbox.SenderKey // peers, reversed; nil until needed (latestKeys)
	held     map[snapshot.ProcessID]heldMsg           // aligned: first messages held behind barriers
	release  []snapshot.ProcessID                     // senders whose held message can go
	counted  int                                      // this participant's part of System.recorded
	nReports int                                      // messages in reports, for the budget
	capture  queueCapture

	// The requests it sent to participants and has not had answered
	// (waits.go); requested says it ever sent one. current is the
	// request it is handling, blocking that its handler made a request
	// to a future.
	books     books
	requested bool
	current   handling
	blocking  bool

	// joins holds the snapshots in progress when it was spawned from
	// outside every participant: it records them at birth (shell.lifecycle).
	joins []snapshot.SnapshotID

	// drops holds departed participants to forget, left by the guardian
	// with the awaited sets, under awaitsMu, and taken with them
	// (guardian.drop); resync, the coordinator's word that the next
	// record lists all counters (handResync). Kept apart from the fields
	// every message reads.
	drops  []snapshot.ProcessID
	resync bool
}

// shell is the actor Proto.Actor runs for a participant: it keeps the
// snapshot's books around the application's actor, which it calls with a
// context that stamps sends. It adds no middleware, so a message costs no
// envelope (docs/design.md, Proto.Actor facts).
type shell struct {
	p     *participant
	inner actor.Actor
}

func (w *shell) Receive(ctx actor.Context) {
	p := w.p
	p.inner = w.inner
	key, keyed := p.mb.Sender()
	if !keyed {
		w.lifecycle(ctx)
		return
	}
	w.receive(ctx, key)
	if len(p.release) > 0 {
		w.releaseHeld(ctx)
	}
}

// receive handles a message from a participant or the guardian.
func (w *shell) receive(ctx actor.Context, key mailbox.SenderKey) {
	p := w.p
	if key == controlKey {
		switch m := ctx.Message().(type) {
		case *initiateMsg:
			if !p.sys.reg.isPending(m.id) {
				// Over everywhere, complete or aborted: its hurried record
				// went ahead of this message, or it ended before this
				// participant's turn. Starting it now would only be
				// refused as finished, and report that to the guardian.
				return
			}
			p.takeAwaited()
			if m.start {
				p.fail(m.id, p.proc.Start(m.id))
			} else {
				p.fail(m.id, p.proc.Initiate(m.id))
			}
			p.act()
		case *abortMsg:
			p.forget = append(p.forget, m.id)
			p.act()
		case *budgetMsg:
			p.budget = false
			p.recount()
			if total := p.sys.recorded.Load(); p.sys.pastBudget(total) && p.counted > 0 {
				p.overBudget(total)
			}
			p.act()
		}
		return
	}
	if p.lazy {
		// The message is off the queue and not received yet: a capture
		// now would give its channel's queue from the wrong message on.
		p.unread = true
		p.lazyStart()
		p.unread = false
	}
	ref := p.peer(key)
	from := ref.from
	switch m := ctx.Message().(type) {
	case *markerMsg:
		if k, ok := p.latestKeys()[from]; ok && k != key {
			break // from a stopped one whose name a new participant has
		}
		p.takeAwaited()
		p.fail(m.id, p.proc.Marker(from, m.id))
		p.act()
	case *departedMsg:
		p.takeAwaited()
		if p.latestKeys()[from] == key {
			p.proc.Departed(from)
			delete(p.keys, from)
		}
		p.act()
		delete(p.peers, key)
	case *firstMsg:
		p.takeAwaited()
		if p.receive(from, nil, m.stamp, m.msg) {
			w.deliver(ctx, from, m.msg)
		} else {
			if p.held == nil {
				p.held = make(map[snapshot.ProcessID]heldMsg)
			}
			p.held[from] = heldMsg{stamp: m.stamp, msg: m.msg}
		}
	default:
		if p.epochs {
			// A newer epoch makes it record: the departed to forget go
			// first, as before any record.
			p.takeAwaited()
		}
		// As posted: a message with a sender or headers is recorded with
		// its envelope, so that a restore replays the request itself.
		p.receive(from, &ref.in, snapshot.Stamp{Epoch: snapshot.SnapshotID(p.mb.Tag())}, p.mb.Message())
		w.deliver(ctx, from, nil)
	}
}

// lifecycle handles what comes without a sending participant: lifecycle
// messages, and messages from outside the snapshot (the root context,
// timers, futures, plain actors), which the application sees as usual.
func (w *shell) lifecycle(ctx actor.Context) {
	p := w.p
	if p.departed {
		// Proto.Actor restarted it after its Stopped: it is out of the
		// registry and the snapshots. It stops again, unseen.
		if _, started := ctx.Message().(*actor.Started); started {
			ctx.Stop(ctx.Self())
		}
		return
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if p.state != nil {
			if err := restoreState(w.inner, p.state); err != nil {
				panic(fmt.Errorf("actors: restoring %s: %w", p.id, err))
			}
			p.state = nil
		}
	case *actor.Restarting:
		p.live = false
		p.sys.tell(&restartedMsg{id: p.id})
	case *actor.Terminated:
		if m.Who != nil {
			// Unless a new child lives under the name already (a dropped
			// one's name is given again).
			id := snapshot.ProcessID(m.Who.Id)
			if t := p.sys.reg.lookup(id); t == nil || t.stopped.Load() {
				delete(p.children, id)
			}
		}
	case *actor.Stopping:
		p.live = false
		p.stopping = true
	case *actor.Stopped:
		p.live = false
		defer p.depart()
	}
	w.deliver(ctx, "", nil)
	if _, started := ctx.Message().(*actor.Started); started && len(p.joins) > 0 {
		// Spawned from outside every participant while these snapshots ran: it
		// records its state at birth, before any message.
		joins := p.joins
		p.joins = nil
		p.takeAwaited()
		for _, id := range joins {
			p.fail(id, p.proc.Start(id))
		}
		p.act()
	}
	if _, started := ctx.Message().(*actor.Started); started {
		p.live = true
		if p.stopping || p.sys.down.Load() {
			// A restart undid a Stop, or it was born after Shutdown
			// listed the participants to stop: either way nobody stops
			// it but itself.
			ctx.Stop(ctx.Self())
		}
	}
}

// startHurried is the work its mailbox hurries (mailbox.WithHurry) when
// the guardian broadcasts a snapshot in the epoch mode: the participant
// records it ahead of the messages queued, rather than when its turn
// comes after a pass over every busy mailbox. Any point between two
// messages is a cut in this mode: the messages queued from older epochs
// are channel state wherever the record falls among them. No start
// message is posted (broadcast), since the mailbox runs hurried work
// once asked for; a participant found restarting records nothing then
// and posts itself the start for after its restart.
//
// The guardian also hurries a participant to capture its queue again
// (recapture) once every participant has recorded a snapshot that still
// waits for messages to it: those were sent before their senders'
// records, so they are queued here, and reading them in turn would wait
// for a pass over the busy mailboxes.
func (p *participant) startHurried() {
	again := p.recapture.Swap(false)
	// The newest still running: snapshots may overlap, and the newest
	// asked for may have been aborted since while an older one runs.
	id := p.sys.reg.newestPending(p.proc.Epoch(), snapshot.SnapshotID(p.hurryTo.Load()))
	start := id != 0
	if !p.live {
		if start && !p.stopping {
			p.mb.PostFrom(controlKey, &initiateMsg{id: id, start: true})
		}
		return
	}
	if start {
		p.takeAwaited()
		p.fail(id, p.proc.Start(id))
	} else if !again {
		return
	}
	p.act()
	if again && !p.unread {
		p.captureQueued(0)
		p.act()
	}
	// What the record left to report goes now, not at the end of a turn
	// of messages that may follow.
	p.turnEnd()
}

// deliver hands the current message to the application. msg, when set,
// replaces the message Proto.Actor delivered (an unwrapped first message).
func (w *shell) deliver(ctx actor.Context, from snapshot.ProcessID, msg interface{}) {
	p := w.p
	c := &p.sctx
	if p.current.id != 0 {
		p.current = handling{} // a handler that panicked left it
	}
	if from != "" {
		// From a participant: the books' marks (waits.go), on the
		// message as it was posted.
		raw := msg
		if raw == nil {
			raw = p.mb.Message()
		}
		switch m := raw.(type) {
		case *tagged:
			p.takeTags(m, from)
			msg = m // snapContext reads through it
		case *actor.MessageEnvelope:
			if len(m.Header) > 0 {
				p.takeHeaders(m.Header, from)
			} else if p.requested {
				p.books.heard(from)
			}
		default:
			if p.requested {
				p.books.heard(from)
			}
		}
	}
	c.Context, c.p, c.msg = ctx, p, msg
	w.inner.Receive(c)
	c.msg = nil
	if p.current.id != 0 {
		p.current = handling{}
	}
	if p.blocking {
		p.blocking = false
		p.books.handled()
	}
}

// peer returns the participant id of a sender key.
func (p *participant) peer(key mailbox.SenderKey) *peerRef {
	if key == p.lastKey && p.lastPeer != nil {
		return p.lastPeer
	}
	ref, ok := p.peers[key]
	if !ok {
		var from snapshot.ProcessID
		// A new sender may reuse the name of one dropped: forget the old
		// one's channels first.
		p.takeAwaited()
		t := p.sys.reg.lookupKey(key)
		if t != nil {
			from = t.id
		} else {
			from = snapshot.ProcessID(fmt.Sprintf("#%d", key)) // gone before its first message was read
		}
		ref = &peerRef{from: from}
		p.peers[key] = ref
		// keys holds the key of each sender's latest incarnation: what to
		// pause, and whose departure is the one to apply (departedMsg
		// forgets both). A stopped one's late departure does not take the
		// name back from a new participant under it.
		if p.keys != nil {
			p.noteKey(from, key)
		}
	}
	p.lastKey, p.lastPeer = key, ref
	return ref
}

// noteKey notes key as from's, if it is from's latest incarnation.
func (p *participant) noteKey(from snapshot.ProcessID, key mailbox.SenderKey) {
	if old, seen := p.keys[from]; !seen || key > old {
		p.keys[from] = key // keys only grow: a later incarnation's is larger
	}
}

// latestKeys returns the sender key of each sender's latest incarnation,
// made from peers the first time it is asked for and kept from then on.
// Until then peers holds every key seen: only a departure removes one,
// and it asks for latestKeys first.
// Only markers, departures and pauses need it: a participant of the
// epoch mode whose senders never stop never pays a map entry per new
// sender for it.
func (p *participant) latestKeys() map[snapshot.ProcessID]mailbox.SenderKey {
	if p.keys == nil {
		p.keys = make(map[snapshot.ProcessID]mailbox.SenderKey, len(p.peers))
		for key, ref := range p.peers {
			p.noteKey(ref.from, key)
		}
	}
	return p.keys
}

// peerRef is what a participant knows of one sender's key: the sender's
// name, and a handle on the channel from it, so that a message's receipt
// finds its channel without looking the name up.
type peerRef struct {
	from snapshot.ProcessID
	in   snapshot.InHandle
}

// targetRef is a participant a participant sends to, and a handle on the
// channel to it, so that a send finds its channel without looking the
// name up.
type targetRef struct {
	t   *participant
	out snapshot.OutHandle
}

// receive accounts for a message (payload, as posted) from from, before
// the application sees it: through the handle in on its channel when the
// caller has one, as the channel's next message (the sender's mailbox
// queue is FIFO; st.Seq is not read), and otherwise as st numbers it. It
// reports false if the message must be held instead (aligned mode: a new
// channel's first message that stands for its sender's barrier), until
// the Process unblocks its sender.
func (p *participant) receive(from snapshot.ProcessID, in *snapshot.InHandle, st snapshot.Stamp, payload interface{}) bool {
	for {
		var err error
		if in != nil {
			err = p.proc.ReceiveNextOn(in, from, st, payload)
		} else {
			err = p.proc.Receive(from, st, payload)
		}
		if err != nil {
			// Only a broken FIFO path gets here: every snapshot in progress is lost.
			for _, id := range p.proc.Active() {
				p.fail(id, err)
			}
		}
		p.checkBudget()
		if p.act() {
			// Held behind the barrier it stands for.
			if p.proc.IsBlocked(from) {
				return false
			}
			continue // carrying out the barrier unblocked it already
		}
		if tr := p.sys.trace; tr != nil {
			seq := p.proc.Received(from)
			if p.sums {
				seq = 0 // numbered by the trace: the Process numbers none
			}
			tr.Received(snapshot.Channel{From: from, To: p.id}, seq)
		}
		return true
	}
}

// releaseHeld delivers the held messages of the senders the last actions
// unblocked, before the mailbox delivers anything else of theirs.
func (w *shell) releaseHeld(ctx actor.Context) {
	p := w.p
	p.takeAwaited()
	for len(p.release) > 0 {
		from := p.release[0]
		p.release = p.release[1:]
		h, ok := p.held[from]
		if !ok || p.proc.IsBlocked(from) {
			continue // blocked again: released at its next resume
		}
		delete(p.held, from)
		if p.receive(from, nil, h.stamp, h.msg) {
			w.deliver(ctx, from, h.msg)
		} else {
			p.held[from] = h
		}
	}
}

// fail reports that snapshot id cannot complete because of err.
func (p *participant) fail(id snapshot.SnapshotID, err error) {
	if err != nil {
		p.sys.tell(&failMsg{id: id, from: p.id, err: err})
	}
}

// target returns the live participant behind pid, or nil when pid is not
// a participant of this system.
func (p *participant) target(pid *actor.PID) *participant {
	if r := p.targetRef(pid); r != nil {
		return r.t
	}
	return nil
}

// targetRef returns the live participant behind pid with the handle on
// the channel to it, or nil when pid is not a participant of this
// system.
func (p *participant) targetRef(pid *actor.PID) *targetRef {
	if pid == p.lastPID && p.lastT != nil && !p.lastT.t.stopped.Load() {
		return p.lastT
	}
	r := p.targets[pid]
	if r == nil || r.t.stopped.Load() {
		if pid == nil {
			return nil
		}
		// Dropped ones first: the target may be a new participant under
		// a dropped one's name, whose channel starts afresh.
		p.takeDrops()
		var t *participant
		if pid.Address != p.sys.actors.Address() {
			if p.sys.cfg.transport == nil {
				return nil
			}
			id := snapshot.ProcessID(pid.Id)
			if t = p.sys.reg.lookupRemote(id, pid.Address); t == nil {
				if p.sys.cfg.transport.Owner(pid.Id) != pid.Address {
					return nil
				}
				// Placed there: a participant whose member has not
				// announced it yet (its spawn may lag this one's). Its
				// member keeps what comes before its birth.
				t = p.sys.reg.remote(id, pid.Address, &p.sys.nextKey)
			}
			return p.cacheTarget(pid, t)
		}
		if t = p.sys.reg.lookupOrStopped(snapshot.ProcessID(pid.Id), p); t == nil {
			return nil
		}
		return p.cacheTarget(pid, t)
	}
	p.lastPID, p.lastT = pid, r
	return r
}

func (p *participant) cacheTarget(pid *actor.PID, t *participant) *targetRef {
	if len(p.targets) >= maxTargets {
		clear(p.targets)
	}
	r := &targetRef{t: t}
	p.targets[pid] = r
	p.lastPID, p.lastT = pid, r
	return r
}

// targetByID returns the live participant id, or nil.
func (p *participant) targetByID(id snapshot.ProcessID) *participant {
	t := p.byID[id]
	if t == nil || t.stopped.Load() {
		if t = p.sys.reg.lookup(id); t == nil {
			if p.sys.cfg.transport == nil {
				return nil
			}
			if t = p.sys.reg.lookupRemote(id, ""); t == nil {
				return nil
			}
		}
		if p.byID == nil {
			p.byID = make(map[snapshot.ProcessID]*participant)
		}
		p.byID[id] = t
	}
	return t
}

// send sends msg (a message or an envelope) to pid: stamped, straight into
// the receiver's queue for this sender when pid is a participant; through
// Proto.Actor, outside the snapshot, otherwise.
func (p *participant) send(ctx actor.Context, pid *actor.PID, msg interface{}) {
	r := p.targetRef(pid)
	var t *participant
	if r != nil {
		t = r.t
	}
	if t != nil && p.current.id != 0 {
		msg = p.answer(t, msg)
	}
	if t == nil || t.stopped.Load() {
		msg = untag(msg) // leaves the participants' channels
	}
	if t == nil {
		if pid != nil && p.sys.cfg.transport != nil && pid.Address != p.sys.actors.Address() && slices.Contains(p.sys.cfg.transport.Members(), pid.Address) {
			// To another member's actor that no snapshot counts: through
			// the transport still, which needs no protobuf and loses
			// nothing.
			if err := p.sendOutside(pid, msg); err != nil {
				p.sys.log.Error("message not sent", slog.String("to", pid.String()), slog.Any("error", err))
			}
			return
		}
		ctx.Send(pid, msg)
		return
	}
	if t.addr != "" {
		// To another member: only a registered type can cross, and a
		// message that cannot is refused before it counts.
		if err := p.canCross(msg); err != nil {
			p.sys.log.Error("message not sent", slog.Any("error", err))
			p.sys.actors.DeadLetter.SendUserMessage(pid, msg)
			return
		}
	}
	if p.sums && t.stopped.Load() {
		// A message it will never receive. If it recorded a snapshot
		// this sender has not, that snapshot needed the message: it is
		// counted, and reported lost (the snapshot aborts). Otherwise it
		// leaves the snapshots uncounted.
		if t.finalEpoch > p.proc.Epoch() {
			st := p.proc.SendOn(&r.out, t.id)
			if tr := p.sys.trace; tr != nil {
				tr.Sent(snapshot.Channel{From: p.id, To: t.id}, st.Seq)
			}
			p.sys.tell(&lostMsg{to: t.id, epoch: st.Epoch})
		}
		ctx.Send(pid, msg)
		return
	}
	st := p.proc.SendOn(&r.out, t.id)
	if tr := p.sys.trace; tr != nil {
		tr.Sent(snapshot.Channel{From: p.id, To: t.id}, st.Seq)
	}
	if t.stopped.Load() {
		// Stopped and not yet dropped: the message is lost with it (a dead
		// letter), but counted on the channel, so that a snapshot it
		// recorded before it stopped, which counts the message as sent
		// before this one's record, is aborted rather than short of it.
		ctx.Send(pid, msg)
		return
	}
	if t.addr != "" {
		if tg, ok := msg.(*tagged); ok {
			msg = tg.envelope()
		}
		if err := p.sendRemote(t, st, msg); err != nil {
			p.sys.log.Error("message lost: encoding failed", slog.String("from", string(p.id)), slog.String("to", string(t.id)), slog.Any("error", err))
		}
		return
	}
	if st.Seq == 1 && (len(st.Recorded) > 0 || st.Horizon > 0) {
		msg = &firstMsg{stamp: st, msg: msg}
	}
	// The epoch (zero but in the epoch mode) rides in the queue entry.
	if !t.mb.PostTagged(p.key, uint64(st.Epoch), msg) {
		// Its mailbox closed as it stopped (counting in sums): counted,
		// and never received.
		p.sys.tell(&lostMsg{to: t.id, epoch: st.Epoch})
		p.sys.actors.DeadLetter.SendUserMessage(pid, untag(msg))
	}
}

// loseQueued closes the mailbox of a participant that stops, counting in
// sums, and hands its Process what is still queued for it, sender by
// sender (snapshot.Process.Lose): it will never receive it. What is
// posted after the close its sender reports lost (lostMsg).
func (p *participant) loseQueued() {
	var keys []mailbox.SenderKey
	queued := make(map[mailbox.SenderKey][]snapshot.Queued)
	p.mb.Close(func(key mailbox.SenderKey, tag uint64, msg interface{}) {
		if key == controlKey {
			return
		}
		switch msg.(type) {
		case *markerMsg, *departedMsg:
			return
		}
		if _, ok := queued[key]; !ok {
			keys = append(keys, key)
		}
		queued[key] = append(queued[key], snapshot.Queued{Epoch: snapshot.SnapshotID(tag), Payload: msg})
	})
	for _, key := range keys {
		if err := p.proc.Lose(p.peer(key).from, queued[key]); err != nil {
			for _, id := range p.proc.Active() {
				p.fail(id, err)
			}
		}
	}
}

// post posts a marker or a departure to participant t, on the channel
// from p: into its queue for p, or through the transport to its member.
func (p *participant) post(t *participant, msg interface{}) {
	if t.addr == "" {
		t.mb.PostFrom(p.key, msg)
		return
	}
	var b []byte
	if m, ok := msg.(*markerMsg); ok {
		b = binary.AppendUvarint(appendHead(nil, fMarker, p.id, t.id), uint64(m.id))
	} else {
		b = appendHead(nil, fDeparted, p.id, t.id)
	}
	p.sys.traffic.markers.Add(1)
	p.sys.sendBytes(t.addr, b)
}

// act carries out the snapshot actions the last input produced, and those
// that forgetting finished snapshots produces in turn (an aligned snapshot
// queued behind one may begin and record): all before the application
// sees another message, so that every record captures the state it
// counts. It reports whether the message last given to Receive is held
// (Ready.Hold).
func (p *participant) act() (held bool) {
	if p.epochs && !p.unread && p.proc.Epoch() > p.capturedAt {
		since := p.capturedAt
		p.capturedAt = p.proc.Epoch()
		p.captureQueued(since)
	}
	acted := false
	for {
		if p.proc.HasReady() {
			held = p.actOnce() || held
			acted = true
		}
		if len(p.forget) == 0 {
			if acted {
				p.recount() // recordings closed, discarded or forgotten
			}
			return
		}
		for _, id := range p.forget {
			p.proc.Forget(id)
			p.dropReports(id)
		}
		p.forget = p.forget[:0]
		acted = true
	}
}

func (p *participant) actOnce() (held bool) {
	rd := p.proc.Ready()
	// The recordings that closed have left the Process's logs: their
	// messages are counted again, in their snapshot's assembly, when
	// reported below.
	p.recount()
	if len(rd.Records) > 0 {
		p.forgetFinished()
		// A cut for an analysis carries no state: encode it only for a
		// record of a snapshot to store.
		var state []byte
		var err error
		for _, r := range rd.Records {
			if !p.sys.reg.isProbe(r.Snapshot) {
				state, err = p.enc.state(p.inner)
				break
			}
		}
		waits := p.waiting()
		var children []snapshot.ProcessID
		for c := range p.children {
			children = append(children, c)
		}
		slices.Sort(children)
		for _, r := range rd.Records {
			if tr := p.sys.trace; tr != nil {
				tr.Recorded(p.id, r.Snapshot)
			}
			if err != nil {
				reason := fmt.Errorf("%w: state of %s: %w", ErrCapture, p.id, err)
				if !p.epochs {
					p.fail(r.Snapshot, reason)
					continue
				}
				// Its counters still go, where the record would have
				// gone: the next record lists what changed since this
				// one, and the coordinator's ledger must have it
				// (snapshot.Coordinator.Failed).
				r.Kind = p.kind
				rep := newRecordReport(r.Snapshot, r, nil)
				rep.more = &reportMore{failed: reason}
				p.late.hold(rep)
				continue
			}
			r.Kind, r.State, r.Waits = p.kind, state, waits
			rep := newRecordReport(r.Snapshot, r, children)
			if slices.Contains(rd.Finished, r.Snapshot) {
				// Over here at once (the epoch mode): the record waits
				// for the turn's end, to go in one report with the
				// channel state captured with it (lateChannels).
				p.late.hold(rep)
				continue
			}
			// The record goes at once, so that the guardian's work
			// spreads out; the channel recordings follow in one report
			// when all have closed. What the turn holds goes before it,
			// so that the guardian takes each participant's reports in
			// the order recorded.
			p.late.flush(p.report)
			p.report(rep)
			if p.reports == nil {
				p.reports = make(map[snapshot.SnapshotID][]snapshot.ChannelRecord)
			}
			p.reports[r.Snapshot] = nil
		}
	}
	var marker *markerMsg
	for _, m := range rd.Markers {
		if marker == nil || marker.id != m.Snapshot {
			marker = &markerMsg{id: m.Snapshot}
		}
		if t := p.targetByID(m.To); t != nil {
			p.post(t, marker)
		}
	}
	for _, c := range rd.Channels {
		if len(c.Messages) == 0 {
			continue
		}
		held, ok := p.reports[c.Snapshot]
		var err error
		if ok {
			if c.Messages, err = p.enc.messages(c.Messages); err == nil {
				p.reports[c.Snapshot] = append(held, c)
				p.nReports += len(c.Messages)
			}
		} else {
			err = p.late.add(c)
		}
		if err != nil {
			p.fail(c.Snapshot, fmt.Errorf("%w: channel %s: %w", ErrCapture, c.Channel, err))
		}
	}
	for _, id := range rd.Finished {
		if held, ok := p.reports[id]; ok {
			p.dropReports(id)
			if len(held) > 0 {
				p.report(&reportMsg{id: id, channels: held})
			}
		}
	}
	// Aligned mode: a sender's queue is held from its barrier to the
	// record (docs/design.md, aligned mode).
	for _, from := range rd.Pause {
		if k, ok := p.latestKeys()[from]; ok {
			p.mb.Pause(k)
		}
	}
	for _, from := range rd.Resume {
		if k, ok := p.latestKeys()[from]; ok {
			p.mb.Resume(k)
		}
		if _, ok := p.held[from]; ok {
			p.release = append(p.release, from)
		}
	}
	if len(rd.Pause)+len(rd.Resume) > 0 {
		blocked := p.proc.Blocked()
		p.paused.Store(&blocked)
	}
	p.proc.Advance()
	return rd.Hold
}

// forgetFinished lets go of the snapshots this participant recorded that
// are over (complete or aborted): it runs whenever it records a new one,
// so that a participant holds at most the snapshots in progress and the
// ones that ended since its last record. The Process forgets them once
// the actions in hand are carried out (act).
func (p *participant) forgetFinished() {
	for _, id := range p.proc.Active() {
		if !p.sys.reg.isPending(id) {
			p.forget = append(p.forget, id)
		}
	}
}

// dropReports lets go of the closed recordings held for snapshot id's
// one report (reported, or the snapshot is over).
func (p *participant) dropReports(id snapshot.SnapshotID) {
	for _, c := range p.reports[id] {
		p.nReports -= len(c.Messages)
	}
	delete(p.reports, id)
}

// report sends a report to the guardian, for its snapshot's assembly;
// the messages it holds count in System.recorded from now until the
// snapshot ends. A snapshot already over is forgotten once the actions in
// hand are carried out.
func (p *participant) report(rep *reportMsg) {
	if !p.sys.reg.isPending(rep.id) {
		p.forget = append(p.forget, rep.id)
		if rep.rec != nil && p.sys.cfg.mode == snapshot.Epochs {
			// The snapshot is over, but the participant's next record
			// lists what changed since this one: the coordinator's
			// ledger takes its counters, without state or channels.
			rec := *rep.rec
			rec.State, rec.Waits = nil, nil
			p.sys.tell(newRecordReport(rep.id, rec, nil))
		}
		return
	}
	if held := rep.held(); held > 0 {
		p.sys.recorded.Add(int64(held))
	}
	p.sys.tell(rep)
}

// turnEnd runs on the actor's goroutine when a mailbox turn ends
// (mailbox.WithTurnEnd): the channel state recorded during the turn after
// its snapshot was over here goes to the guardian (lateChannels).
func (p *participant) turnEnd() {
	p.late.flush(p.report)
}

// recordBeforeStop records every snapshot in progress that the
// participant takes part in and has not recorded, as a spontaneous
// initiation may at any moment. Its final counters would stand in for
// those records, but in a cluster the coordinator may not know it takes
// part: its member announced its birth, and a snapshot that started
// before the announcement arrived does not have it among the live ones.
// A record that names it later (a message its parent sent it before the
// cut) would then wait for a record that never comes. A snapshot it was
// born after the cut of is finished here, and left alone.
func (p *participant) recordBeforeStop() {
	v := p.sys.reg.view.Load()
	if v == nil {
		return
	}
	for _, id := range v.pending {
		if err := p.proc.Initiate(id); err != nil && !errors.Is(err, snapshot.ErrFinished) {
			p.fail(id, err)
		}
	}
	p.act()
}

// depart runs when the actor has stopped: receivers of its channels are
// told nothing more will come, and the guardian gets its final counters.
func (p *participant) depart() {
	p.departed = true
	p.finalEpoch = p.proc.Epoch()
	p.stopped.Store(true)
	// Every round of drops handed over before it left the registry is
	// taken below: its final counters name none of them (took,
	// snapshot.Coordinator.Stopped). A later round may not reach it.
	after, took := p.sys.reg.stop(p)
	p.takeAwaited()
	if p.sys.cfg.transport != nil && !p.aligned {
		p.recordBeforeStop()
	}
	if p.sums {
		p.loseQueued()
	}
	// What it recorded stands: its open recordings close with what came,
	// reported before the stop, and each snapshot it recorded hears with
	// the stop that nothing more will come from it, so that the counters
	// tell at once whether a message on its way to it at the cut was lost
	// with it. The snapshots it had not recorded take it as departed.
	p.proc.Stop()
	p.act()
	p.turnEnd() // what it received goes before the stop, or it looks lost
	recorded := p.proc.Active()
	final := p.proc.Counters()
	for _, pc := range final.Sent {
		if t := p.targetByID(pc.Peer); t != nil {
			p.post(t, &departedMsg{})
		}
	}
	p.sys.tell(&stoppedMsg{id: p.id, final: final, recorded: recorded, after: after, took: took})
	// What it still held (messages its paused senders sent) goes with it.
	p.sys.recorded.Add(-int64(p.counted))
	p.counted = 0
	p.sys.stopped.Done()
}
