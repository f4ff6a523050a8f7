package snapshot

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotQuiescent is wrapped by every NotQuiescentError.
var ErrNotQuiescent = errors.New("snapshot: not quiescent")

// NotQuiescentError is returned by Quiescent, naming what still runs or
// still waits.
type NotQuiescentError struct {
	Snapshot SnapshotID
	// InFlight are the channels with messages in flight, in the order of
	// Global.Channels, and Messages how many messages are in flight on
	// them.
	InFlight []Channel
	Messages uint64
	// Requests are the requests not answered, by participant and then
	// oldest first. With nothing in flight, each is a reply lost or a
	// deadlock (Deadlocks).
	Requests []WaitEdge
	// Timers are the participants something outside the cut will wake (a
	// timer, or input queued from outside: Waits.Timer), by ID.
	Timers []ProcessID
}

// quiescentNamed is how many of each kind Error names.
const quiescentNamed = 3

func (e *NotQuiescentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "snapshot %d: not quiescent", e.Snapshot)
	sep := ": "
	part := func(format string, args ...any) {
		b.WriteString(sep)
		fmt.Fprintf(&b, format, args...)
		sep = "; "
	}
	if len(e.InFlight) > 0 {
		part("%d %s in flight on %d %s (%s)", e.Messages, plural(e.Messages, "message"),
			len(e.InFlight), plural(uint64(len(e.InFlight)), "channel"), names(e.InFlight))
	}
	if len(e.Requests) > 0 {
		part("%d %s not answered (%s)", len(e.Requests), plural(uint64(len(e.Requests)), "request"), names(e.Requests))
	}
	if len(e.Timers) > 0 {
		part("%d woken from outside the cut, by a timer or queued input (%s)", len(e.Timers), names(e.Timers))
	}
	return b.String()
}

// Unwrap returns ErrNotQuiescent.
func (e *NotQuiescentError) Unwrap() error { return ErrNotQuiescent }

func plural(n uint64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// names lists the first few of xs, and how many more there are.
func names[T any](xs []T) string {
	var b strings.Builder
	for i, x := range xs[:min(len(xs), quiescentNamed)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, x)
	}
	if more := len(xs) - quiescentNamed; more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	return b.String()
}

// Quiescent reports whether g shows a system that has terminated: every
// participant idle, nothing left to happen. Termination is a stable
// property, so a consistent cut that shows it shows it for good. It
// returns nil if no channel has a message in flight (its state is empty
// and as many were received as sent), no participant that is not
// Departed has a request not answered (a Wait with a Request number) or a
// timer set; otherwise a *NotQuiescentError saying which.
//
// A declared wait (Request 0) is idle: a participant waiting for a fork,
// with nothing on its way to it, does nothing until someone sends. A
// request not answered is not: its answer is owed, and with nothing in
// flight it was lost or is held up by a deadlock.
func Quiescent(g *Global) error {
	e := NotQuiescentError{Snapshot: g.ID}
	for i := range g.Channels {
		c := &g.Channels[i]
		if len(c.Messages) > 0 || c.Sent != c.Received {
			e.InFlight = append(e.InFlight, c.Channel)
			// Sent - Received counts them even on a channel whose
			// state does not balance (Verify).
			e.Messages += max(uint64(len(c.Messages)), c.Sent-min(c.Sent, c.Received))
		}
	}
	for i := range g.Participants {
		p := &g.Participants[i]
		if p.Departed || p.Waits == nil {
			continue
		}
		if p.Waits.Timer {
			e.Timers = append(e.Timers, p.ID)
		}
		for _, w := range p.Waits.Edges {
			if w.Request == 0 {
				continue
			}
			e.Requests = append(e.Requests, WaitEdge{From: p.ID, Wait: w, Waited: waitedSince(w.Since, g.End)})
		}
	}
	if len(e.InFlight) == 0 && len(e.Requests) == 0 && len(e.Timers) == 0 {
		return nil
	}
	return &e
}
