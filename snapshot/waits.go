package snapshot

import "time"

// Waits is what a participant waited for when it recorded: the requests
// it had sent to other participants and not yet had answered, and the
// waits it declared itself (a philosopher waiting for a fork from its
// neighbour, say). A participant that waits for something is idle unless
// a message on its way to it, or a timer it set, wakes it: a consistent
// cut in which a set of participants all wait for one another, with
// nothing in flight to any of them, shows a deadlock that lasts (a
// stable property, so the cut makes no false report).
type Waits struct {
	// Any makes the participant wait for any one of Edges (the OR model):
	// one answer frees it. Otherwise it waits for all of them (the AND
	// model, the default for requests).
	Any bool `msgpack:"any,omitempty"`
	// Timer says something outside the cut will wake the participant: a
	// timer it set, or input from outside the snapshot already queued
	// for it. It is not idle, and waits on nothing for good.
	Timer bool `msgpack:"timer,omitempty"`
	// Edges are the waits, oldest first.
	Edges []Wait `msgpack:"edges,omitempty"`
}

// Wait is one wait-for edge: the participant waits for To.
type Wait struct {
	To ProcessID `msgpack:"to"`
	// Request is the number of the request not answered yet, as the
	// waiting participant numbered it; 0 for a declared wait.
	Request uint64 `msgpack:"req,omitempty"`
	// Type is the request's message type name, or the name of what a
	// declared wait awaits.
	Type string `msgpack:"type,omitempty"`
	// Since is when the request was sent, or the wait declared.
	Since time.Time `msgpack:"since"`
}

// Violation is an invariant that a snapshot broke.
type Violation struct {
	Invariant string `msgpack:"name"`
	Err       string `msgpack:"err"`
}

// Empty reports whether w waits for nothing and no timer.
func (w *Waits) Empty() bool { return w == nil || (len(w.Edges) == 0 && !w.Timer) }
