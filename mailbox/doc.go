// Package mailbox is a Proto.Actor mailbox with one FIFO queue per sender.
// It lets an actor serve its senders fairly and hold back one sender's
// messages while the others keep flowing, which is what an aligned
// (Flink-style) snapshot needs: a channel whose barrier has arrived waits in
// the mailbox until the barriers of the other channels arrive.
//
// Plug it in through Props:
//
//	props := actor.PropsFromProducer(newWorker,
//		actor.WithMailbox(mailbox.Producer(mailbox.WithSenderKey(keyOf))))
//
// Apart from the per-sender queues it behaves as Proto.Actor's default
// mailbox: all queued system messages run before the next user message;
// SuspendMailbox stops user messages (system messages still run) until
// ResumeMailbox; a panic while processing a message is recovered and passed
// to the actor's supervisor through EscalateFailure, and the mailbox
// carries on once the supervisor has decided; runs are scheduled on the
// Props' dispatcher and, like the default mailbox's, yield the goroutine
// (runtime.Gosched) after every Throughput messages rather than end.
//
// # Senders
//
// A KeyFunc, given with WithSenderKey, maps each user message to a
// SenderKey. Messages with no key (the key function says ok == false) share
// one more queue, the external queue, which takes its turn like any sender
// and cannot be paused. Messages from one sender are delivered in the order
// they were posted; messages from different senders interleave, and the
// order in which different senders posted is not kept. In particular a
// PoisonPill sent from outside any actor travels in the external queue: it
// may overtake messages of other senders posted before it, which are then
// dropped with the actor, as are messages still held for a paused sender.
//
// # Fairness
//
// Delivery is round robin with a quantum of one message: a round gives one
// message to every sender that had a deliverable message when the round
// began, in turn. Messages posted meanwhile are sorted into their queues
// between rounds, so a sender that starts sending waits at most one round,
// however many messages a flooding sender has queued.
//
// WithArrivalOrder gives up this fairness for speed: messages are then
// delivered in the order they were posted, across senders, with no queue
// per sender, until a sender is paused; from then until every queue is
// empty again the mailbox sorts and delivers as above.
//
// # Pausing a sender
//
// Of returns the mailbox of the actor whose context it is given. Its Pause,
// Resume, ResumeAll and Paused methods must be called on the actor's own
// goroutine while it processes a message: in Receive, in a receiver
// middleware, or in a lifecycle handler (Started, Stopping, Restarting...).
// They are not safe to call from any other goroutine, not even with a lock,
// because the state they change is owned by the goroutine running the
// mailbox; this is why they need no lock and cost nothing on the path of a
// message. Pause(k) means that no further message of k is delivered until
// Resume(k); messages of k posted meanwhile queue behind the held ones, and
// on Resume all of them are delivered in their original order. A mailbox
// whose only queued messages are paused goes idle; it does not poll.
// Pauses belong to the mailbox, so they survive a restart of the actor: the
// code that pauses is also in charge of resuming (ResumeAll helps after an
// abort).
//
// UserMessageCount counts every undelivered user message, held ones
// included; Held counts the held ones, and WithHeldLimit calls back when
// they pass a bound, so that an owner that pauses senders can bound the
// memory they take. WithTurnEnd calls back at the end of each run, for an
// owner that hands work on once a turn rather than once a message.
//
// # Work ahead of the queue
//
// WithHurry names work the owner may need done soon, with the actor's
// exclusive use but not in its turn (a snapshot's record); Hurry asks for
// it from any goroutine. A dispatcher with a ScheduleUrgent method runs it
// at once on an urgent lane when the mailbox is not being run; a run
// under way runs it before its next message. Once asked for, the work is
// certain to run (a suspended mailbox keeps it for after it resumes), so
// the owner need not post a message to have it done. Queued lists, on
// the actor's goroutine, the messages not yet delivered in the order
// they will be, for a mailbox that delivers as posted. Close, on an actor
// that stops, lists the keyed messages it will never deliver and refuses
// keyed posts from then on (PostTagged reports it), so that its owner
// knows exactly what was lost with the actor.
//
// # Memory
//
// Posting appends to one shared buffer under a short lock, as in
// Proto.Actor's default mailbox; the mailbox's goroutine swaps that buffer
// for an empty one once per round and sorts its messages into per-sender
// ring buffers, so in steady state no message costs an allocation. Queues of
// senders that have nothing queued and are not paused are forgotten in
// sweeps, run each time the number of queues has doubled since the last one
// (and never below 64 queues); a queue survives a sweep if its sender sent
// since the sweep before, so senders taking turns with nothing queued keep
// their queues. Short-lived senders cost constant time each and the table
// stays within a few times the number of senders active lately. A
// buffer grown by a burst is dropped when it empties, unless the last fill
// used a quarter of it (a steady flood keeps its buffers).
package mailbox
