package mailbox

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/ctxext"
)

const (
	idle int32 = iota
	running
)

// Mailbox is a Proto.Actor mailbox with one FIFO queue per sender. See the
// package documentation for its policy and threading rules.
//
// PostUserMessage, PostSystemMessage and UserMessageCount may be called from
// any goroutine. Pause, Resume, ResumeAll and Paused belong to the actor's own
// goroutine. The zero value is not usable: use Producer or New.
type Mailbox struct {
	// Set before the mailbox runs, read-only afterwards.
	keyOf       KeyFunc
	middlewares []actor.MailboxMiddleware
	invoker     actor.MessageInvoker
	dispatcher  actor.Dispatcher
	process     func() // processMessages, bound once: a method value allocates
	urgent      func() // runHurried, bound once

	// Shared with posting goroutines.
	status       atomic.Int32 // idle or running: who may run the mailbox
	registered   atomic.Bool  // Start ran: runs may be scheduled
	suspended    atomic.Bool
	sysMessages  atomic.Int32
	userMessages atomic.Int32 // posted and not yet delivered, held ones included
	outside      atomic.Int32 // of those, posted without a key and bound for the external queue
	pending      atomic.Bool  // in is not empty; written under inMu
	// busy is held by whatever runs the actor's code: a run of the
	// mailbox, or hurried work (Hurry) outside one.
	busy  atomic.Bool
	hurry atomic.Bool // Hurry was called and its work has not run yet
	// waiting counts the runs spinning in acquire: hurried work asked
	// for again is left to them rather than keep busy from them.
	waiting atomic.Int32

	inMu   sync.Mutex
	in     []posted // user messages posted since the last demux, in order
	closed bool     // Close ran: posts with a key are refused; under inMu
	floor  uint64   // SetFloor's; under inMu
	// late says that a keyed post with a tag below floor came since
	// SetFloor.
	late atomic.Bool

	sysMu sync.Mutex
	sys   ring[interface{}]

	// Owned by the goroutine running the mailbox (the actor's goroutine).
	running  bool                       // inside run: Pause and Resume are allowed
	keying   bool                       // inside the key function: a panic drops batch[pos]
	arrival  bool                       // WithArrivalOrder
	straight senderQueue                // current's stand-in for a message delivered straight from batch
	batch    []posted                   // the previous in, being sorted into queues
	pos      int                        // next index of batch to sort
	queues   map[SenderKey]*senderQueue // keyed senders
	external senderQueue                // senders without a key
	last     *senderQueue               // queues[last.key], to skip the map lookup
	ready    ring[*senderQueue]         // queues with deliverable messages, in turn order
	turns    int                        // turns left in this round
	paused   int                        // number of paused queues
	held     int                        // messages in paused queues
	sweepAt  int                        // sweep empty queues when len(queues) reaches it
	gen      uint32                     // sweeps so far: the generation of queues' seen
	free     []*senderQueue             // swept queues kept for reuse
	current  *senderQueue               // queue of the user message being delivered
	// delivering is the user message being delivered, as posted, and
	// the tag it was posted with.
	delivering interface{}
	tag        uint64

	// Set before the mailbox runs (WithHeldLimit); last, so that the
	// fields above keep the cache lines they had before these came.
	heldLimit int
	overHeld  func(held int) // nil: no limit
	turnEnd   func()         // WithTurnEnd; nil: none
	hurried   func()         // WithHurry; nil: none
}

// posted is a user message and, when posted with PostFrom, its sender.
type posted struct {
	msg   interface{}
	key   SenderKey
	keyed bool
	tag   uint64
}

// entry is a queued user message and its tag (PostTagged).
type entry struct {
	msg interface{}
	tag uint64
}

// senderQueue holds one sender's undelivered messages.
type senderQueue struct {
	msgs    ring[entry]
	key     SenderKey
	paused  bool
	inReady bool   // listed in Mailbox.ready (possibly paused since)
	seen    uint32 // Mailbox.gen when a message last came
}

// Tuning of memory kept for idle senders; none of it affects behaviour.
const (
	minSweep  = 64   // never sweep fewer queues than this
	maxFree   = 16   // swept queues kept for new senders
	keepRing  = 1024 // an emptied queue keeps a bigger buffer only if it used a quarter of it
	keepBatch = 4096 // the same for the two buffers that posted messages go through
)

var extensionID = ctxext.NextContextExtensionID()

var (
	_ actor.Mailbox           = (*Mailbox)(nil)
	_ ctxext.ContextExtension = (*Mailbox)(nil)
)

// ExtensionID makes the Mailbox a Proto.Actor context extension, which is
// how Of finds it.
func (m *Mailbox) ExtensionID() ctxext.ContextExtensionID { return extensionID }

// Of returns the Mailbox of the actor whose context is ctx, or nil if that
// actor does not use this package's mailbox. Call it on the actor's goroutine
// (in Receive or a receiver middleware); the result may be kept for the
// actor's lifetime, restarts included.
func Of(ctx actor.ExtensionContext) (m *Mailbox) {
	defer func() {
		// Proto.Actor's extension table panics on an id it has never seen
		// for this actor: that only means "not ours".
		if recover() != nil {
			m = nil
		}
	}()
	m, _ = ctx.Get(extensionID).(*Mailbox)
	return m
}

// RegisterHandlers implements actor.Mailbox. Proto.Actor calls it at spawn,
// before the mailbox runs, with the actor's context as invoker: the mailbox
// registers itself there as a context extension for Of.
func (m *Mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker = invoker
	m.dispatcher = dispatcher
	if ext, ok := invoker.(actor.ExtensionContext); ok {
		ext.Set(m)
	}
}

// Start implements actor.Mailbox. Proto.Actor calls it at spawn after
// posting Started; nothing runs before, so that Started comes before any
// user message, even one posted early (see PostFrom).
func (m *Mailbox) Start() {
	for _, mw := range m.middlewares {
		mw.MailboxStarted()
	}
	m.registered.Store(true)
	m.schedule()
}

// UserMessageCount implements actor.Mailbox: user messages posted and not
// yet delivered, including those held for paused senders.
func (m *Mailbox) UserMessageCount() int { return int(m.userMessages.Load()) }

// Outside returns how many user messages posted without a sender key
// (PostUserMessage: from outside every sender the owner knows) are not yet
// delivered, less those the key function has sorted to a sender.
func (m *Mailbox) Outside() int { return int(m.outside.Load()) }

// PostUserMessage implements actor.Mailbox. The message is appended to one
// shared buffer under a short lock; sorting by sender is left to the
// mailbox's goroutine so that posting costs what it costs in Proto.Actor's
// default mailbox.
func (m *Mailbox) PostUserMessage(message interface{}) {
	// Batches are unpacked exactly as Proto.Actor's default mailbox does:
	// the messages, then the batch itself.
	if batch, ok := message.(actor.MessageBatch); ok {
		for _, msg := range batch.GetMessages() {
			m.PostUserMessage(msg)
		}
	}
	if env, ok := message.(*actor.MessageEnvelope); ok {
		if batch, ok := env.Message.(actor.MessageBatch); ok {
			for _, msg := range batch.GetMessages() {
				m.PostUserMessage(msg)
			}
		}
	}
	m.post(posted{msg: message})
}

// PostFrom posts a user message from the sender key, without asking the
// key function: for senders that know who they are and should not pay for
// a wrapper saying so. It may be called from any goroutine, and before the
// mailbox is given to an actor: messages posted then wait, in order, for
// the actor to start (a restore queues replayed messages this way). Once
// the mailbox is closed (Close) it drops the message.
func (m *Mailbox) PostFrom(key SenderKey, message interface{}) {
	m.post(posted{msg: message, key: key, keyed: true})
}

// PostTagged is PostFrom with a tag: a word the sender attaches to the
// message, which Tag returns while it is delivered. A sender that must
// say something about every message (a snapshot's epoch) says it here
// rather than in a wrapper that would cost an allocation per message.
// It reports false, posting nothing, once the mailbox is closed (Close).
func (m *Mailbox) PostTagged(key SenderKey, tag uint64, message interface{}) bool {
	return m.post(posted{msg: message, key: key, keyed: true, tag: tag})
}

// post posts p, one with a key only while the mailbox is open (Close);
// it reports whether it did.
func (m *Mailbox) post(p posted) bool {
	for _, mw := range m.middlewares {
		mw.MessagePosted(p.msg)
	}
	m.inMu.Lock()
	if m.closed && p.keyed {
		m.inMu.Unlock()
		return false
	}
	if p.tag < m.floor && p.keyed {
		m.late.Store(true)
	}
	m.in = append(m.in, p)
	if len(m.in) == 1 {
		m.pending.Store(true)
	}
	m.inMu.Unlock()
	if !p.keyed {
		m.outside.Add(1)
	}
	m.userMessages.Add(1)
	m.schedule()
	return true
}

// SetFloor notes that the owner has just taken in what is queued with a
// tag below floor (in the epoch mode, a capture of what is in flight for
// the snapshots it recorded): a keyed post with a tag below it from now
// on sets Late. Call it on the actor's own goroutine, as Queued.
func (m *Mailbox) SetFloor(floor uint64) {
	m.inMu.Lock()
	m.floor = floor
	m.late.Store(false)
	m.inMu.Unlock()
}

// Late reports whether a message posted with a key and a tag below the
// floor came since the last SetFloor. It may be called from any
// goroutine.
func (m *Mailbox) Late() bool { return m.late.Load() }

// Close closes the mailbox to messages posted with a key (PostTagged
// reports false for them, and PostFrom drops them) and hands f every
// message posted with a key that has not been
// delivered, each sender's in its order, with its tag: for an actor that
// stops, so that what it will never receive is known exactly, and what
// is posted after is its sender's to know. The messages stay where they
// are; a stopped actor receives none. Call it on the actor's own
// goroutine (in a lifecycle handler), as Queued; f must not post to this
// mailbox.
func (m *Mailbox) Close(f func(key SenderKey, tag uint64, msg interface{})) {
	m.inMu.Lock()
	m.closed = true
	m.inMu.Unlock()
	for _, q := range m.queues {
		for i := range q.msgs.n {
			e := q.msgs.buf[(q.msgs.head+i)&(len(q.msgs.buf)-1)]
			f(q.key, e.tag, e.msg)
		}
	}
	give := func(p posted) {
		if p.keyed {
			f(p.key, p.tag, p.msg)
		}
	}
	for _, p := range m.batch[m.pos:] {
		give(p)
	}
	// Posting stopped with the close, but a post may have taken the
	// lock before it: read in under the lock.
	m.inMu.Lock()
	defer m.inMu.Unlock()
	for _, p := range m.in {
		give(p)
	}
}

// Sender returns the key of the sender of the user message being delivered,
// and false when that message came without a key (the external queue) or
// when no user message is being delivered (system and lifecycle messages).
// Call it on the actor's goroutine, while it processes a message.
func (m *Mailbox) Sender() (SenderKey, bool) {
	if q := m.current; q != nil && q != &m.external {
		return q.key, true
	}
	return 0, false
}

// Message returns the user message being delivered as it was posted (an
// *actor.MessageEnvelope for a message sent with a sender or headers), or
// nil when none is. Call it on the actor's goroutine, while it processes
// a message.
func (m *Mailbox) Message() interface{} { return m.delivering }

// Tag returns the tag the user message being delivered was posted with
// (PostTagged), zero for one posted otherwise. Call it on the actor's
// goroutine, while it processes a message.
func (m *Mailbox) Tag() uint64 { return m.tag }

// PostSystemMessage implements actor.Mailbox.
func (m *Mailbox) PostSystemMessage(message interface{}) {
	for _, mw := range m.middlewares {
		mw.MessagePosted(message)
	}
	m.sysMu.Lock()
	m.sys.push(message)
	m.sysMu.Unlock()
	m.sysMessages.Add(1)
	m.schedule()
}

func (m *Mailbox) schedule() {
	if !m.registered.Load() {
		return // queued until the actor starts; see PostFrom
	}
	if m.status.CompareAndSwap(idle, running) {
		m.dispatcher.Schedule(m.process)
	}
}

// processMessages is one scheduled run. The protocol is the default
// mailbox's: a poster publishes its message (pending, sysMessages) before it
// tries idle->running, and the run publishes idle before it looks for work
// again, so one of the two always sees the other and no message is left
// behind.
func (m *Mailbox) processMessages() {
	budget := m.dispatcher.Throughput()
	m.acquire()
process:
	m.run(&budget)
	if m.turnEnd != nil {
		m.turnEnd()
	}
	if budget <= 0 {
		// The turn is used up: go to the back of the dispatcher's queue,
		// still running, so that one busy mailbox cannot keep a worker
		// (or a goroutine) from the others for long.
		m.busy.Store(false)
		m.dispatcher.Schedule(m.process)
		return
	}
	// Read the goroutine-owned state before going idle: afterwards another
	// run may own it.
	local := m.ready.len() > 0 || m.pos < len(m.batch)
	m.busy.Store(false)
	m.status.Store(idle)
	if m.sysMessages.Load() > 0 || (!m.suspended.Load() && (local || m.pending.Load() || m.hurry.Load())) {
		if m.status.CompareAndSwap(idle, running) {
			m.acquire()
			goto process
		}
	}
	if len(m.middlewares) > 0 && m.userMessages.Load() == 0 && !m.suspended.Load() {
		for _, mw := range m.middlewares {
			mw.MailboxEmpty()
		}
	}
}

// run delivers messages until none is deliverable, the mailbox is
// suspended, a message panics, or the turn's budget of user messages is
// spent.
func (m *Mailbox) run(budget *int) {
	var msg interface{}
	m.running = true
	defer func() {
		m.running = false
		m.current, m.delivering, m.tag = nil, nil, 0
		if r := recover(); r != nil {
			if m.keying {
				// The key function panicked: drop the message it was given.
				m.keying = false
				msg = m.batch[m.pos].msg
				if !m.batch[m.pos].keyed {
					m.outside.Add(-1)
				}
				m.batch[m.pos] = posted{}
				m.pos++
				m.userMessages.Add(-1)
			}
			m.invoker.EscalateFailure(r, msg)
		}
	}()

	// hurriedLast: hurried work ran since the last user message. Work
	// asked for again while it ran waits for the next message, so that
	// hurries asked for faster than their work runs share the actor with
	// its messages instead of keeping them waiting.
	hurriedLast := false
	for {

		// All system messages go before the next user message.
		if m.sysMessages.Load() > 0 {
			m.sysMu.Lock()
			msg = m.sys.pop()
			m.sysMu.Unlock()
			m.sysMessages.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			for _, mw := range m.middlewares {
				mw.MessageReceived(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return
		}
		if m.hurry.Load() && !hurriedLast {
			// Hurried work goes before the next user message, whatever
			// the budget left.
			msg = nil
			hurriedLast = m.runHurry()
			continue
		}
		if *budget <= 0 {
			return
		}
		if msg = m.next(); msg == nil {
			if m.hurry.Load() && hurriedLast {
				hurriedLast = false // no message to go first
				continue
			}
			return
		}
		hurriedLast = false
		*budget--
		m.userMessages.Add(-1)
		if m.current == &m.external {
			m.outside.Add(-1)
		}
		m.delivering = msg
		m.invoker.InvokeUserMessage(msg)
		m.current, m.delivering, m.tag = nil, nil, 0
		for _, mw := range m.middlewares {
			mw.MessageReceived(msg)
		}
	}
}

// acquire takes busy for a run. Hurried work holds it for microseconds
// (Hurry), on another worker: the run waits its end rather than lose its
// place in the dispatcher's queue.
func (m *Mailbox) acquire() {
	if m.busy.CompareAndSwap(false, true) {
		return
	}
	m.waiting.Add(1)
	for !m.busy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
	m.waiting.Add(-1)
}

// Hurry has the work named by WithHurry run with the actor's exclusive
// use, as a message's handler would be, ahead of the messages queued: at
// once on a worker of a dispatcher that takes urgent work (one with a
// ScheduleUrgent method, as the snapshot library's pool has) when no run
// of the mailbox is under way, otherwise by a run before its next
// message (the one under way, or one Hurry schedules on a dispatcher
// that takes no urgent work). Calls before the work runs run it once.
// Asked for again while it runs, it runs again, but a run of the mailbox
// delivers its next message first: hurries asked for faster than their
// work runs take turns with the messages rather than hold them back.
// The work is certain to run once asked for, unless the actor stops: a
// mailbox suspended (the actor restarting after a failure) keeps it for
// its first run after it resumes, and one not started yet for its first
// run. Hurry may be called from any goroutine; a panic in the work
// escalates as one in a message's handler does.
func (m *Mailbox) Hurry() {
	if m.hurried == nil || m.hurry.Swap(true) {
		return
	}
	if !m.registered.Load() {
		return // its first run takes it, after Started
	}
	if u, ok := m.dispatcher.(interface{ ScheduleUrgent(func()) }); ok {
		u.ScheduleUrgent(m.urgent)
		return
	}
	m.schedule() // a run takes it before its next message
}

// runHurried runs the hurried work on a dispatcher's worker, unless a run
// of the mailbox holds it, or waits for it (acquire): that run takes it
// before its next message, or once over finds it asked for and runs
// again. Work asked for while this one ran (the urgent work scheduled for
// it found the mailbox busy) runs here after it, unless a run waits:
// hurried work asked for faster than it runs would otherwise keep busy
// from the run for as long as the asking lasts.
func (m *Mailbox) runHurried() {
	for m.hurry.Load() && !m.suspended.Load() && m.waiting.Load() == 0 && m.busy.CompareAndSwap(false, true) {
		m.hurryOnce()
	}
}

// hurryOnce is one turn of runHurried; the caller took busy. It ends the
// turn (WithTurnEnd) only if the work ran: a run may have taken it
// between runHurried's look and its hold.
func (m *Mailbox) hurryOnce() {
	defer m.busy.Store(false)
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, nil)
		}
	}()
	if m.runHurry() && m.turnEnd != nil {
		m.turnEnd()
	}
}

// runHurry runs the hurried work unless the mailbox is suspended, which
// keeps it asked for, and reports whether it ran. The caller holds busy.
func (m *Mailbox) runHurry() bool {
	if !m.suspended.Load() && m.hurry.Swap(false) {
		m.hurried()
		return true
	}
	return false
}

// Queued calls f with the user messages posted and not yet delivered, in
// the order they will be delivered, each with its sender's key (keyed is
// false for one posted without) and its tag, until f returns false. It
// reports whether it could: only a mailbox that delivers as posted
// (WithArrivalOrder, no sender paused) knows that order without sorting.
// Messages posted while it runs may be left out; those it gives are the
// next delivered. Call it on the actor's own goroutine (in Receive, a
// lifecycle handler or hurried work), as Pause; f must not post to this
// mailbox.
func (m *Mailbox) Queued(f func(key SenderKey, keyed bool, tag uint64, msg interface{}) bool) bool {
	if !m.arrival || m.paused > 0 || m.ready.len() > 0 {
		return false
	}
	for _, p := range m.batch[m.pos:] {
		if !f(p.key, p.keyed, p.tag, p.msg) {
			return true
		}
	}
	if !m.pending.Load() {
		return true
	}
	m.inMu.Lock()
	defer m.inMu.Unlock()
	for _, p := range m.in {
		if !f(p.key, p.keyed, p.tag, p.msg) {
			break
		}
	}
	return true
}

// next returns the next user message in round-robin order, or nil if no
// message is deliverable. A round gives each sender that was ready at its
// start one message; newly posted messages are sorted in between rounds, so
// a new sender waits at most one round. With WithArrivalOrder, while no
// sender is paused and no queue holds a message, it returns the next
// message as posted instead.
func (m *Mailbox) next() interface{} {
	if m.arrival && m.paused == 0 && m.ready.len() == 0 {
		// ready lists every queue that holds a message when none is
		// paused, and turns never exceeds its length.
		return m.nextPosted()
	}
	for {
		if m.turns == 0 {
			m.demux()
			if m.turns = m.ready.len(); m.turns == 0 {
				return nil
			}
		}
		q := m.ready.pop()
		m.turns--
		if q.paused {
			// Paused after it was listed; Resume lists it again.
			q.inReady = false
			continue
		}
		e := q.msgs.pop()
		m.current, m.tag = q, e.tag
		if q.msgs.len() > 0 {
			m.ready.push(q)
		} else {
			q.inReady = false
			q.msgs.emptied(keepRing)
		}
		return e.msg
	}
}

// nextPosted returns the next message in the order it was posted, or nil
// if none is: the arrival-order path, which needs no queue. The message's
// sender is still known (Sender), and a Pause while it is delivered sends
// the messages after it through the queues (next).
func (m *Mailbox) nextPosted() interface{} {
	if m.pos == len(m.batch) && !m.take() {
		return nil
	}
	p := m.batch[m.pos]
	key, ok := p.key, p.keyed
	if !ok && m.keyOf != nil {
		m.keying = true
		key, ok = m.keyOf(p.msg)
		m.keying = false
	}
	m.batch[m.pos] = posted{}
	m.pos++
	if m.pos == len(m.batch) {
		m.batchDone()
	}
	m.current, m.tag = &m.external, p.tag
	if ok {
		if !p.keyed {
			m.outside.Add(-1) // the key function named its sender
		}
		m.straight.key = key
		m.current = &m.straight
	}
	return p.msg
}

// take swaps in the messages posted since the last call as the batch to
// deliver or sort, and reports whether there were any.
func (m *Mailbox) take() bool {
	if !m.pending.Load() {
		return false
	}
	m.inMu.Lock()
	m.batch, m.in = m.in, m.batch[:0]
	m.pending.Store(false)
	m.inMu.Unlock()
	m.pos = 0
	return true
}

// batchDone empties the batch once all of it is delivered or sorted.
func (m *Mailbox) batchDone() {
	// As for rings: drop a big buffer only when it was mostly unused.
	if cap(m.batch) > keepBatch && len(m.batch) < cap(m.batch)/4 {
		m.batch = nil
	}
	m.batch, m.pos = m.batch[:0], 0
}

// demux sorts the messages posted since the last call into their senders'
// queues. It may be resumed after a key function panic (see run).
func (m *Mailbox) demux() {
	if m.pos == len(m.batch) && !m.take() {
		return
	}
	held := m.held
	for m.pos < len(m.batch) {
		p := m.batch[m.pos]
		q := m.queueOf(p)
		if !p.keyed && q != &m.external {
			m.outside.Add(-1) // the key function named its sender
		}
		m.batch[m.pos] = posted{}
		m.pos++
		q.msgs.push(entry{msg: p.msg, tag: p.tag})
		q.seen = m.gen
		if q.paused {
			m.held++
		} else if !q.inReady {
			q.inReady = true
			m.ready.push(q)
		}
	}
	if m.held > held && m.held > m.heldLimit && m.overHeld != nil {
		m.overHeld(m.held)
	}
	m.batchDone()
}

// queueOf returns the queue a message belongs to.
func (m *Mailbox) queueOf(p posted) *senderQueue {
	key, ok := p.key, p.keyed
	if !ok && m.keyOf != nil {
		m.keying = true
		key, ok = m.keyOf(p.msg)
		m.keying = false
	}
	if !ok {
		return &m.external
	}
	if q := m.last; q != nil && q.key == key {
		return q
	}
	q := m.queue(key)
	m.last = q
	return q
}

// queue returns the queue of key, creating it if needed.
func (m *Mailbox) queue(key SenderKey) *senderQueue {
	if q := m.queues[key]; q != nil {
		return q
	}
	if len(m.queues) >= m.sweepAt {
		m.sweep()
	}
	var q *senderQueue
	if n := len(m.free); n > 0 {
		q, m.free = m.free[n-1], m.free[:n-1]
	} else {
		q = new(senderQueue)
	}
	q.key = key
	m.queues[key] = q
	return q
}

// sweep forgets the queues of senders that have nothing queued, are not
// paused, and sent nothing since the sweep before: a sender that comes
// back between sweeps (many senders taking turns, each with nothing
// queued most of the time) keeps its queue, rather than cost a map
// delete and insert per message. It runs when the number of queues
// doubles since the last sweep, so its cost is constant per new sender
// and the number of queues stays within a small multiple of the senders
// active since the sweep before (plus minSweep).
func (m *Mailbox) sweep() {
	m.gen++
	removed := 0
	for key, q := range m.queues {
		if q.msgs.len() > 0 || q.paused || q.seen+1 == m.gen {
			continue
		}
		delete(m.queues, key)
		removed++
		if len(m.free) < maxFree {
			if len(q.msgs.buf) > keepRing {
				q.msgs.buf, q.msgs.head = nil, 0
			}
			m.free = append(m.free, q)
		}
	}
	if removed > len(m.queues) {
		// Go maps never shrink: copy to return the memory of a past crowd.
		queues := make(map[SenderKey]*senderQueue, len(m.queues))
		for key, q := range m.queues {
			queues[key] = q
		}
		m.queues = queues
	}
	m.last = nil
	m.sweepAt = max(minSweep, 2*len(m.queues))
}

// Pause holds the messages of sender key: none is delivered until Resume,
// messages posted meanwhile are queued behind them, and other senders keep
// their turns. Pausing a paused sender does nothing; pausing a sender that
// has sent nothing yet holds its first message.
//
// Pause must be called on the actor's goroutine, while it processes a
// message (in Receive, a receiver middleware, or lifecycle handlers); it
// panics if called while the mailbox is not running. A pause outlives actor
// restarts: the mailbox belongs to the actor's context, not its instance.
func (m *Mailbox) Pause(key SenderKey) {
	m.mustRun("Pause")
	if q := m.queue(key); !q.paused {
		q.paused = true
		m.paused++
		m.held += q.msgs.len()
	}
}

// Resume delivers the held messages of sender key, in their original order,
// from its next turn on. Resuming a sender that is not paused does nothing.
// The threading rules of Pause apply.
func (m *Mailbox) Resume(key SenderKey) {
	m.mustRun("Resume")
	if q := m.queues[key]; q != nil {
		m.resume(q)
	}
}

// ResumeAll resumes every paused sender. The threading rules of Pause apply.
func (m *Mailbox) ResumeAll() {
	m.mustRun("ResumeAll")
	if m.paused == 0 {
		return
	}
	for _, q := range m.queues {
		m.resume(q)
	}
}

// Held returns the number of messages held for paused senders, sorted into
// their queues (posted messages are sorted in between rounds). The threading
// rules of Pause apply.
func (m *Mailbox) Held() int {
	m.mustRun("Held")
	return m.held
}

// Paused reports whether sender key is paused. The threading rules of Pause
// apply.
func (m *Mailbox) Paused(key SenderKey) bool {
	m.mustRun("Paused")
	q := m.queues[key]
	return q != nil && q.paused
}

func (m *Mailbox) resume(q *senderQueue) {
	if !q.paused {
		return
	}
	q.paused = false
	m.paused--
	m.held -= q.msgs.len()
	// The run that called us is still going: listing the queue is enough
	// for its messages to be delivered before the run ends.
	if q.msgs.len() > 0 && !q.inReady {
		q.inReady = true
		m.ready.push(q)
	}
}

// mustRun catches calls from outside the mailbox's run. It is a cheap check,
// not a proof: the race detector reports the calls it misses.
func (m *Mailbox) mustRun(op string) {
	if !m.running {
		panic("mailbox: " + op + " called outside message processing")
	}
}
