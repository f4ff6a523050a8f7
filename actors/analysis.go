package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Analyses on consistent cuts: deadlocks, termination and invariants. A
// deadlock, termination, a broken invariant are stable: once true of a
// consistent cut they stay true, so a cut never reports one that is not
// there. The cuts for deadlocks and termination are probes: snapshots
// whose records carry counters and waits but no state, never stored.

// invariant is one WithInvariant.
type invariant struct {
	name  string
	check func(*snapshot.Global) error
}

// WithInvariant checks every complete snapshot with check before it is
// stored: an error is a violation, stored with the snapshot
// (Global.Violations), logged with the snapshot's id, counted
// (actorsnap.invariants.violated) and published as an
// *InvariantViolated. check runs on the saver's goroutine, never
// concurrently with itself; a panic in it is a violation too.
func WithInvariant(name string, check func(*snapshot.Global) error) Option {
	return func(c *config) { c.invariants = append(c.invariants, invariant{name: name, check: check}) }
}

// InvariantViolated is published on the actor system's event stream, as
// an *InvariantViolated, for each invariant a stored snapshot broke.
type InvariantViolated struct {
	Snapshot  snapshot.SnapshotID
	Invariant string
	Err       string
}

// checkInvariants runs the invariants on g and returns the violations.
func checkInvariants(invs []invariant, g *snapshot.Global) []snapshot.Violation {
	var out []snapshot.Violation
	for _, inv := range invs {
		if err := checkOne(inv, g); err != nil {
			out = append(out, snapshot.Violation{Invariant: inv.name, Err: err.Error()})
		}
	}
	return out
}

func checkOne(inv invariant, g *snapshot.Global) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return inv.check(g)
}

// violated logs, counts and publishes the invariants a stored snapshot
// broke.
func (g *guardian) violated(gl *snapshot.Global) {
	for _, v := range gl.Violations {
		g.s.log.Warn("invariant violated", slog.Uint64("id", uint64(gl.ID)), slog.String("invariant", v.Invariant), slog.String("error", v.Err))
		g.s.metrics.violations.Add(context.Background(), 1, metric.WithAttributes(attribute.String("invariant", v.Invariant)))
		g.s.actors.EventStream.Publish(&InvariantViolated{Snapshot: gl.ID, Invariant: v.Invariant, Err: v.Err})
	}
}

// BlockedError is the reason of a snapshot that timed out because
// participants that never recorded it wait for one another in a handler,
// on a future's Result: a participant blocked there cannot take a marker.
// It matches snapshot.ErrTimeout.
type BlockedError struct {
	Snapshot  snapshot.SnapshotID
	Deadlocks []snapshot.Deadlock
}

func (e *BlockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "snapshot %d timed out: ", e.Snapshot)
	for i, d := range e.Deadlocks {
		if i > 0 {
			b.WriteString("; ")
		}
		for j, edge := range d.Edges {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s waits in Result for %s (request %d, %s)", edge.From, edge.To, edge.Request, edge.Type)
		}
		if len(d.Blocked) > 0 {
			fmt.Fprintf(&b, "; blocked on them: %s", names(d.Blocked))
		}
	}
	return b.String()
}

func (e *BlockedError) Unwrap() error { return snapshot.ErrTimeout }

// blocked returns, for snapshot id past its deadline, a reason naming
// the participants that never recorded it because they wait in a handler
// for one another's answers, or nil if none do.
func (g *guardian) blocked(id snapshot.SnapshotID, now time.Time) error {
	m, _ := g.coord.Missing(id)
	waits := make(map[snapshot.ProcessID]*snapshot.Waits)
	for _, pid := range m.Participants {
		if p := g.s.reg.lookup(pid); p != nil {
			if edges, ok := p.books.blocked(); ok {
				waits[pid] = &snapshot.Waits{Edges: edges}
			}
		}
	}
	if len(waits) == 0 {
		return nil
	}
	ds := snapshot.FindDeadlocks(waits, func(id snapshot.ProcessID) bool { return waits[id] == nil }, now)
	if len(ds) == 0 {
		return nil
	}
	return &BlockedError{Snapshot: id, Deadlocks: ds}
}

// take takes a snapshot, or with probe a cut for an analysis.
func (s *System) take(ctx context.Context, probe bool) (*snapshot.Global, error) {
	if s.down.Load() {
		return nil, ErrShutdown
	}
	reply := make(chan result, 1)
	s.tell(&startRequest{reply: reply, probe: probe})
	select {
	case r := <-reply:
		return r.global, r.err
	case <-s.guardSTW: // shut down meanwhile: the request went nowhere
		select {
		case r := <-reply:
			return r.global, r.err
		default:
			return nil, ErrShutdown
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Deadlocks takes a cut of the system (counters and what each
// participant waits for, no state; not stored) and returns the deadlocks
// it shows: cycles of participants waiting for one another's answers (the
// AND model) or knots of them (the OR model, for an actor whose Waiter
// says Any), with nothing on its way to any of them that could wake it.
// Requests count from the glue's own books (Request, RequestFuture and
// RequestWithCustomSender to another participant, until its answer
// comes), and waits an actor declares (Waiter). If the cut cannot
// complete because participants are blocked on futures' Result waiting
// for one another, Deadlocks returns that cycle once the system's timeout
// has passed. In a cluster, waits in Result are seen on the coordinating
// member only.
func (s *System) Deadlocks(ctx context.Context) ([]snapshot.Deadlock, error) {
	ds, _, err := s.deadlocks(ctx)
	return ds, err
}

// deadlocks is Deadlocks, with the id of the cut that shows them.
func (s *System) deadlocks(ctx context.Context) ([]snapshot.Deadlock, snapshot.SnapshotID, error) {
	g, err := s.take(ctx, true)
	if err != nil {
		var be *BlockedError
		if errors.As(err, &be) {
			return be.Deadlocks, be.Snapshot, nil
		}
		return nil, 0, err
	}
	return snapshot.Deadlocks(g), g.ID, nil
}

// ProbableLossError is AwaitQuiescence's answer when successive cuts
// find the same channel, or in the epoch mode the same receiver, short
// of messages their senders counted, with the same counts each time:
// messages were probably lost (sent to a participant that stopped, say),
// and the system will not look idle.
type ProbableLossError struct {
	// Channel is the channel short of messages, in the marker modes.
	Channel snapshot.Channel
	// Receiver is the receiver short of messages, in the epoch mode,
	// which counts what each participant received from all its senders
	// together.
	Receiver       snapshot.ProcessID
	Sent, Received uint64
	Cuts           int
}

func (e *ProbableLossError) Error() string {
	on := e.Channel.String()
	if e.Receiver != "" {
		on = "the way to " + string(e.Receiver)
	}
	return fmt.Sprintf("actors: probable message loss on %s: %d sent, %d received in %d cuts in a row", on, e.Sent, e.Received, e.Cuts)
}

// shortGap is a shortfall a cut found: a channel's, or a receiver's.
type shortGap struct {
	channel                  snapshot.Channel
	receiver                 snapshot.ProcessID
	sent, received, recorded uint64
}

// lossCuts is how many cuts in a row must find the same shortfall before
// AwaitQuiescence reports it.
const lossCuts = 3

// AwaitQuiescence returns nil once a consistent cut shows the system
// terminated: every participant idle (no request unanswered, no timer it
// declared through Waiter) and nothing on its way on any channel. It
// takes cuts with counters and waits but no state, back to back with a
// pause that grows to 100 ms while the system is busy. It returns ctx's
// error when ctx ends first, and a *ProbableLossError when cuts keep
// finding a channel short of the same messages.
func (s *System) AwaitQuiescence(ctx context.Context) error {
	pause := time.Millisecond
	var short shortGap
	shortCuts := 0
	for {
		g, err := s.take(ctx, true)
		switch {
		case err == nil:
			if snapshot.Quiescent(g) == nil {
				return nil
			}
			shortCuts = 0
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrShutdown):
			return err
		default:
			if gap, ok := shortfall(err); ok {
				if shortCuts > 0 && gap == short {
					shortCuts++
				} else {
					short, shortCuts = gap, 1
				}
				if shortCuts >= lossCuts {
					return &ProbableLossError{Channel: gap.channel, Receiver: gap.receiver, Sent: gap.sent, Received: gap.received, Cuts: shortCuts}
				}
			} else {
				shortCuts = 0
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// shortfall returns the channel or receiver a cut that err aborted found
// short of messages their senders counted, when that is why it aborted:
// counts that cannot balance, or a deadline met with every participant
// recorded and counts still short (a recording waits for a message that
// does not come).
func shortfall(err error) (shortGap, bool) {
	var be *snapshot.BalanceError
	if errors.As(err, &be) && be.Received+be.Recorded < be.Sent {
		return shortGap{channel: be.Channel, sent: be.Sent, received: be.Received, recorded: be.Recorded}, true
	}
	var rbe *snapshot.ReceiverBalanceError
	if errors.As(err, &rbe) && rbe.Lost() {
		return shortGap{receiver: rbe.Receiver, sent: rbe.Sent, received: rbe.Received, recorded: rbe.Recorded}, true
	}
	var ae *snapshot.AbortError
	if errors.As(err, &ae) && errors.Is(err, snapshot.ErrTimeout) && len(ae.Missing.Participants) == 0 {
		for _, c := range ae.Missing.Channels {
			if c.Received+c.Recorded < c.Sent {
				return shortGap{channel: c.Channel, sent: c.Sent, received: c.Received, recorded: c.Recorded}, true
			}
		}
		for _, r := range ae.Missing.Receivers {
			if r.Received+r.Recorded < r.Sent {
				return shortGap{receiver: r.Receiver, sent: r.Sent, received: r.Received, recorded: r.Recorded}, true
			}
		}
	}
	return shortGap{}, false
}

// WithDeadlockCheck looks for deadlocks (System.Deadlocks) every d: each
// one found is logged, counted (actorsnap.deadlocks.found) and published
// as a *DeadlockFound, once for as long as it lasts. In a cluster the
// coordinating member checks.
func WithDeadlockCheck(d time.Duration) Option { return func(c *config) { c.deadlocks = d } }

// DeadlockFound is published on the actor system's event stream, as a
// *DeadlockFound, when the periodic check (WithDeadlockCheck) finds a
// deadlock it had not reported.
type DeadlockFound struct {
	Deadlock snapshot.Deadlock
	Snapshot snapshot.SnapshotID // the cut that showed it first (a probe: not stored)
}

// checkDeadlocks runs WithDeadlockCheck until the system shuts down.
func (s *System) checkDeadlocks(every time.Duration) {
	reported := make(map[string]bool)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.guardSTW:
			return
		case <-t.C:
		}
		if tr := s.cfg.transport; tr != nil && tr.Coordinator() != tr.Self() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.timeout)
		ds, id, err := s.deadlocks(ctx)
		cancel()
		if err != nil {
			if !errors.Is(err, ErrShutdown) {
				s.log.Debug("deadlock check skipped", slog.Any("error", err))
			}
			continue
		}
		now := make(map[string]bool, len(ds))
		for _, d := range ds {
			key := deadlockKey(d)
			now[key] = true
			if reported[key] {
				continue
			}
			s.log.Warn("deadlock", slog.Uint64("cut", uint64(id)), slog.String("cycle", d.String()))
			s.metrics.deadlocks.Add(context.Background(), 1)
			s.actors.EventStream.Publish(&DeadlockFound{Deadlock: d, Snapshot: id})
		}
		reported = now
		if s.cfg.checkHook != nil {
			s.cfg.checkHook()
		}
	}
}

// withCheckHook calls f after each periodic deadlock check, for tests.
func withCheckHook(f func()) Option { return func(c *config) { c.checkHook = f } }

// deadlockKey names a deadlock by its waits, so that the check reports
// it once however many cuts show it.
func deadlockKey(d snapshot.Deadlock) string {
	keys := make([]string, len(d.Edges))
	for i, e := range d.Edges {
		keys[i] = fmt.Sprintf("%s>%s#%d:%s", e.From, e.To, e.Request, e.Type)
	}
	slices.Sort(keys)
	return strings.Join(keys, " ")
}
