package actors

import "sync"

// inbox carries every message for the guardian from outside it: records
// and reports of participants, spawns, stops, requests of the API, frames
// of other members. Senders append under a short lock; the first message
// into an empty inbox posts one inboxMsg to the guardian, which then takes
// all that came, in the order they came. A snapshot of 10,000 participants
// sends the guardian some 30,000 messages under load: through Proto.Actor
// each cost a root send and a turn of the guardian's mailbox, and the
// participants' workers contended on its queue's lock.
type inbox struct {
	mu    sync.Mutex
	msgs  []any
	spare []any // the last batch taken, emptied, for the next
}

// inboxMsg tells the guardian its inbox has messages.
type inboxMsg struct{}

// put appends msg and reports whether the inbox was empty: the caller
// then posts the guardian an inboxMsg.
func (b *inbox) put(msg any) (first bool) {
	b.mu.Lock()
	first = len(b.msgs) == 0
	b.msgs = append(b.msgs, msg)
	b.mu.Unlock()
	return first
}

// take returns the messages in the inbox, in order, and empties it. The
// caller gives the batch back (done) once it has handled it.
func (b *inbox) take() []any {
	b.mu.Lock()
	msgs := b.msgs
	b.msgs = b.spare
	b.spare = nil
	b.mu.Unlock()
	return msgs
}

// done gives back a batch take returned, for reuse.
func (b *inbox) done(msgs []any) {
	clear(msgs)
	b.mu.Lock()
	if b.spare == nil {
		b.spare = msgs[:0]
	}
	b.mu.Unlock()
}

// tell sends msg to the guardian through the inbox: every sender outside
// the guardian goes this way, so that the guardian takes their messages
// in the order they were sent.
func (s *System) tell(msg any) {
	if s.inbox.put(msg) {
		s.root.Send(s.guardian, inboxMsg{})
	}
}
