package mailbox

import "github.com/asynkron/protoactor-go/actor"

// SenderKey identifies the sender of a user message: all messages with the
// same key share one FIFO queue. It is an integer so that finding a queue is
// a cheap map lookup; callers map their sender identity (an interned actor
// id, a channel number) to it. Two senders given the same key share a queue:
// each keeps its FIFO order, but they take one turn between them and are
// paused together, so keys should be unique rather than hashes.
type SenderKey uint64

// KeyFunc tells the mailbox who sent a user message. message is exactly what
// PostUserMessage received: the bare message, or a *actor.MessageEnvelope
// when the sender used headers, a sender PID or a middleware (use
// actor.UnwrapEnvelopeMessage to reach the message inside). It returns false
// for messages that have no sending actor (the root context, timers,
// futures, plain goroutines); those share the external queue.
//
// It runs on the mailbox's goroutine, at most once per message, and must
// neither block nor touch the actor's state. A panic in it is escalated to
// the actor's supervisor like a panic in Receive, and the message is dropped.
type KeyFunc func(message interface{}) (key SenderKey, ok bool)

// Option configures a Mailbox.
type Option func(*Mailbox)

// WithSenderKey sets how the mailbox finds a message's sender. Without it
// (or with nil) every message goes to the external queue and the mailbox is a
// plain FIFO mailbox.
func WithSenderKey(f KeyFunc) Option {
	return func(m *Mailbox) { m.keyOf = f }
}

// WithArrivalOrder delivers messages in the order they were posted, across
// senders, as Proto.Actor's default mailbox does, for as long as no sender
// is paused: the per-sender queues and their rounds (see the package
// documentation) are used only from a Pause until every queue is empty
// again. Each sender's messages still come in its order and Sender still
// names it; what is given up is the fairness between senders, for a
// mailbox that costs no queue lookup per message. For owners that pause
// senders rarely or never.
func WithArrivalOrder() Option {
	return func(m *Mailbox) { m.arrival = true }
}

// WithHeldLimit bounds the messages held for paused senders: each time the
// mailbox sorts newly posted messages into their queues (between rounds),
// some of them into paused ones, and more than n are held, over is called
// with the number held, on the mailbox's goroutine, between two messages
// (so it must not use the actor's context). It may post to this mailbox,
// e.g. a message to the actor that makes it resume senders; Pause and
// Resume are allowed there too. It is called again as more are held, so
// it should do its work once.
func WithHeldLimit(n int, over func(held int)) Option {
	return func(m *Mailbox) { m.heldLimit, m.overHeld = n, over }
}

// WithTurnEnd calls f on the mailbox's goroutine at the end of each run
// (a turn of up to the dispatcher's throughput in messages), after the
// last message of the run was processed and before the mailbox lets
// another goroutine run it. It is for an owner that gathers work while
// its actor processes messages and hands it on once per turn instead of
// once per message. f must not use the actor's context; it may post to
// any mailbox, this one included.
func WithTurnEnd(f func()) Option {
	return func(m *Mailbox) { m.turnEnd = f }
}

// WithHurry names the work Hurry runs: f is run with the actor's
// exclusive use, as a message's handler would be, ahead of the messages
// queued. Like WithTurnEnd's, f must not use the actor's context.
func WithHurry(f func()) Option {
	return func(m *Mailbox) { m.hurried = f }
}

// WithMiddleware attaches Proto.Actor mailbox middlewares (statistics). They
// are called as by Proto.Actor's default mailbox: MessagePosted on the
// posting goroutine, MessageReceived after each message is processed,
// MailboxStarted once, and MailboxEmpty when a run ends with no user message
// left (held messages of paused senders count as left).
func WithMiddleware(mw ...actor.MailboxMiddleware) Option {
	return func(m *Mailbox) { m.middlewares = append(m.middlewares, mw...) }
}

// New returns a mailbox configured by opts. Most callers want Producer
// instead; New is for driving a mailbox directly.
func New(opts ...Option) *Mailbox {
	m := &Mailbox{
		queues:  make(map[SenderKey]*senderQueue),
		sweepAt: minSweep,
	}
	m.process, m.urgent = m.processMessages, m.runHurried
	for _, opt := range opts {
		opt(m)
	}
	return m
}

// Producer returns a Proto.Actor mailbox producer, for
// actor.WithMailbox(mailbox.Producer(...)). Every actor spawned from the
// Props gets its own Mailbox.
func Producer(opts ...Option) actor.MailboxProducer {
	return func() actor.Mailbox { return New(opts...) }
}
