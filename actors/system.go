package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/internal/workpool"
	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Errors of the System.
var (
	// ErrConfig is wrapped by the error of NewSystem for an invalid option;
	// the message names the bound.
	ErrConfig = errors.New("actors: invalid option")
	// ErrShutdown is returned by calls on a System that is shutting down,
	// and is the reason of the snapshots Shutdown aborts.
	ErrShutdown = errors.New("actors: system shut down")
	// ErrBusy is returned by Snapshot when the maximum number of snapshots
	// is already in progress.
	ErrBusy = errors.New("actors: too many snapshots in progress")
	// ErrUnknownKind is returned by Spawn for a kind never registered.
	ErrUnknownKind = errors.New("actors: unknown kind")
	// ErrNameStopped is returned by Spawn for the name of a participant
	// that stopped and is not dropped yet: its peers still count their
	// channels with it, so a new participant under the same name would be
	// taken for it. The name is given again once a complete snapshot has
	// shown everything it sent received and the guardian has dropped it
	// (usually after the next snapshot).
	ErrNameStopped = errors.New("actors: name of a stopped participant not yet dropped")
	// ErrParticipantStopped is the reason of a snapshot aborted because a
	// participant stopped after it recorded, while messages sent to it
	// before the cut were still on their way: they were lost with it. (A
	// participant that stops before it records a snapshot stands in it as
	// departed; one that stops after, with every message of the cut
	// received, keeps its record.)
	ErrParticipantStopped = errors.New("actors: participant stopped")
	// ErrParticipantRestarted is the reason of a snapshot aborted because a
	// participant crashed and was restarted while it was in progress: the
	// crash discarded the state the snapshot is built on.
	ErrParticipantRestarted = errors.New("actors: participant restarted")
	// ErrOverBudget is the reason of a snapshot aborted because a
	// participant held more messages, as channel state or behind aligned
	// barriers, than WithMaxRecorded allows.
	ErrOverBudget = errors.New("actors: recorded messages over budget")
	// ErrCapture is wrapped by the reason of a snapshot aborted because a
	// participant's state or recorded messages could not be encoded.
	ErrCapture = errors.New("actors: capture failed")
	// ErrSave is wrapped by the reason of a snapshot aborted because the
	// store failed to save it (Snapshot's error and SnapshotAborted.Err);
	// the store's own error is wrapped too (persistence.ErrLocked, say).
	// Later snapshots still run.
	ErrSave = errors.New("actors: saving the snapshot failed")
)

// guardianName is the guardian actor's name.
const guardianName = "actorsnap-guardian"

// participantThroughput is the messages a participant handles per turn
// before it yields, as Proto.Actor's default; workerIdle is how long a
// dispatcher worker waits for a turn before it ends.
const (
	participantThroughput = 300
	workerIdle            = time.Second
)

// guardianThroughput is the messages the guardian handles per turn.
const guardianThroughput = 1 << 16

// controlKey is the sender key of the guardian's control channel in every
// participant's mailbox; participants' keys start at 1.
const controlKey mailbox.SenderKey = 0

// kind is a registered actor kind: how to make a fresh instance.
type kind struct {
	name     string
	producer func() actor.Actor
	opts     []actor.PropsOption
}

// System is a Proto.Actor actor system whose participants take consistent
// global snapshots. Participants are the actors spawned from Props with
// its Snapshotted option (or Props of a registered kind), by any of
// Proto.Actor's spawn calls; other actors keep working as usual and are
// outside the snapshots.
//
// A System's methods may be called from any goroutine.
type System struct {
	cfg      config
	actors   *actor.ActorSystem
	root     *actor.RootContext
	guardian *actor.PID
	inbox    inbox    // to the guardian (tell)
	interned interner // names in the channel frames from other members
	metrics  *metrics
	log      *slog.Logger
	// lease is the system's hold on its store, from the claim in NewSystem
	// or Restore until Shutdown: the guardian numbers snapshots after its
	// High.
	lease persistence.Lease

	kindsMu sync.RWMutex
	kinds   map[string]*kind
	types   *messageTypes

	reg     registry
	pool    *workpool.Pool
	nextKey atomic.Uint64
	// epochNow is the newest snapshot published for lazy starts
	// (WithInitiation(Lazy)): participants record it at their next
	// message.
	epochNow  atomic.Uint64
	down      atomic.Bool
	stopped   sync.WaitGroup // participants not yet stopped
	guardSTW  chan struct{}  // closed when the guardian has stopped
	guardLoop *workpool.Loop // the guardian's dispatcher
	// recorded counts the messages held for snapshots in progress, system
	// wide: recorded in participants' recordings, reported to a snapshot
	// not yet ended, held behind aligned barriers (WithMaxRecorded).
	recorded atomic.Int64
	// traffic counts what the snapshots send other members (Traffic).
	traffic protocolTraffic

	// held holds other members' frames while a restore replays (a
	// member of a cluster).
	held heldFrames
	// gate holds, in a cluster, frames that name a snapshot whose start
	// has not come yet (startGate).
	gate *startGate

	// trace, when set by tests, records every send, receipt and record.
	trace tracer
}

// tracer receives the events the snapshottest checkers need.
type tracer interface {
	Sent(ch snapshot.Channel, seq uint64)
	Received(ch snapshot.Channel, seq uint64)
	Recorded(p snapshot.ProcessID, id snapshot.SnapshotID)
}

// NewSystem starts an actor system and its snapshot guardian.
//
// Before anything starts, it claims its store for a new system named as
// WithSystemName says (persistence.ClaimNew, waiting at most WithTimeout's
// duration): a store that holds or has held snapshots is refused with an
// error wrapping persistence.ErrOwned, which names the store's owner
// (Restore continues that system), and one that another writer holds now
// with persistence.ErrLocked. The system numbers its snapshots after the
// highest id the store has held, and holds the store until Shutdown.
func NewSystem(opts ...Option) (*System, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.transport != nil {
		// A member claims the store when it coordinates.
		return newSystem(cfg, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	lease, err := cfg.store.Claim(ctx, cfg.name, persistence.ClaimNew)
	if err != nil {
		return nil, fmt.Errorf("actors: claiming the store for system %q: %w", cfg.name, err)
	}
	s, err := newSystem(cfg, lease)
	if err != nil {
		releaseLease(cfg, lease)
		return nil, err
	}
	return s, nil
}

// releaseLease gives the store up for a system that failed to start,
// logging what fails: the start's error is the one to return.
func releaseLease(cfg config, lease persistence.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	if err := lease.Release(ctx); err != nil {
		cfg.logger.Warn("releasing the store failed", slog.Any("error", err))
	}
}

// newSystem starts a system on a store it holds through lease; the caller
// releases the lease if it fails.
func newSystem(cfg config, lease persistence.Lease) (*System, error) {
	var err error
	// Proto.Actor logs through the same logger unless told otherwise.
	logger := cfg.logger
	acfg := append([]actor.ConfigOption{actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger })}, cfg.actorConfig...)
	as := actor.NewActorSystem(acfg...)
	s := &System{
		cfg:      cfg,
		actors:   as,
		root:     as.Root,
		log:      cfg.logger,
		lease:    lease,
		kinds:    make(map[string]*kind),
		types:    cfg.types,
		guardSTW: make(chan struct{}),
		pool:     workpool.New(participantThroughput, workerIdle),
		reg:      newRegistry(),
	}
	s.held.on = cfg.hold
	if cfg.transport != nil {
		s.gate = &startGate{held: make(map[string][]heldFrame), draining: make(map[string]bool)}
	}
	// fail stops what has started: the pool's watchdog and the actor
	// system.
	fail := func(err error) (*System, error) {
		s.pool.Stop()
		s.actors.Shutdown()
		return nil, err
	}
	if s.metrics, err = newMetrics(cfg.meter); err != nil {
		return fail(err)
	}
	if err := s.RegisterKind(ingressKind, func() actor.Actor { return &ingressActor{} }); err != nil {
		return fail(err)
	}
	for _, k := range cfg.kinds {
		if err := s.RegisterKind(k.name, k.producer, k.opts...); err != nil {
			return fail(err)
		}
	}
	// The guardian takes in every record of every participant: let it work
	// through its whole queue per turn instead of yielding every 300
	// messages behind a thousand busy actors.
	s.guardLoop = workpool.NewLoop(guardianThroughput)
	// The guardian's PID is known before it runs: it sends to itself from
	// its first message on (a periodic tick, say), so s.guardian must not
	// be written after the spawn.
	s.guardian = actor.NewPID(s.actors.Address(), guardianName)
	_, err = s.root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newGuardian(s) },
		actor.WithDispatcher(s.guardLoop)), guardianName)
	if err != nil {
		s.guardLoop.Stop()
		return fail(fmt.Errorf("actors: starting the guardian: %w", err))
	}
	if t := cfg.transport; t != nil {
		// After the guardian, which other members' frames go to.
		messages, kinds := s.Registered()
		if err := t.Attach(Attachment{Actors: as, Deliver: s.deliver, Messages: messages, Kinds: kinds}); err != nil {
			s.guardLoop.Stop()
			return fail(fmt.Errorf("actors: joining the cluster: %w", err))
		}
	}
	if cfg.deadlocks > 0 {
		go s.checkDeadlocks(cfg.deadlocks)
	}
	return s, nil
}

// ActorSystem returns the underlying Proto.Actor system.
func (s *System) ActorSystem() *actor.ActorSystem { return s.actors }

// Root returns the system's root context, for messages from outside any
// actor (they are outside every snapshot: see Ingress).
func (s *System) Root() *actor.RootContext { return s.root }

// Participants returns the ids of the live participants, sorted.
func (s *System) Participants() []snapshot.ProcessID {
	ps := s.reg.live()
	ids := make([]snapshot.ProcessID, len(ps))
	for i, p := range ps {
		ids[i] = p.id
	}
	return ids
}

// Snapshot takes one global snapshot and returns it once it is complete and
// saved in the store. An aborted snapshot returns an error wrapping
// snapshot.ErrAborted and its reason: one the store failed to save, ErrSave
// and the store's error. If ctx ends first, Snapshot returns ctx's error
// and the snapshot carries on.
func (s *System) Snapshot(ctx context.Context) (*snapshot.Global, error) { return s.take(ctx, false) }

// SnapshotEvery replaces the periodic schedule (WithInterval): a snapshot
// starts every d from now on, or none if d is zero. A start that finds
// the maximum of concurrent snapshots running is skipped (and logged). The
// new schedule holds when SnapshotEvery returns; d below MinInterval is
// refused with ErrConfig, and a system shut down returns ErrShutdown.
func (s *System) SnapshotEvery(d time.Duration) error {
	if err := checkInterval(d); err != nil {
		return err
	}
	if s.down.Load() {
		return ErrShutdown
	}
	reply := make(chan error, 1)
	s.tell(&everyRequest{interval: d, reply: reply})
	select {
	case err := <-reply:
		return err
	case <-s.guardSTW:
		return ErrShutdown
	}
}

// Shutdown aborts the snapshots in progress, stops every participant and
// the guardian, releases the store once the guardian, which saves, has
// stopped, and shuts the actor system down. It returns an error wrapping
// ErrShutdown if it aborted snapshots, the error of releasing the store,
// or ctx's error if the actors did not all stop before ctx ended (the
// store is then released when the guardian stops).
func (s *System) Shutdown(ctx context.Context) error {
	if !s.down.CompareAndSwap(false, true) {
		return ErrShutdown
	}
	// The steps run to their end whatever ctx does, so that the store is
	// released once the actors have stopped; ctx bounds only the wait.
	done := make(chan error, 1)
	go func() { done <- s.shutdown() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shutdown aborts the snapshots in progress, stops the participants and
// then the guardian, releases the store and stops the actor system.
func (s *System) shutdown() error {
	reply := make(chan int, 1)
	s.tell(&shutdownRequest{reply: reply})
	aborted := <-reply
	for _, p := range s.reg.live() {
		s.root.Stop(p.pid)
	}
	s.stopped.Wait()
	s.root.Stop(s.guardian)
	<-s.guardSTW
	released := s.release()
	s.pool.Stop()
	s.guardLoop.Stop()
	if t := s.cfg.transport; t != nil {
		t.Detach()
	}
	if !s.actors.IsStopped() {
		s.actors.Shutdown()
	}
	switch {
	case aborted > 0 && released != nil:
		return fmt.Errorf("%w: %d snapshots aborted; releasing the store: %w", ErrShutdown, aborted, released)
	case aborted > 0:
		return fmt.Errorf("%w: %d snapshots aborted", ErrShutdown, aborted)
	case released != nil:
		return fmt.Errorf("actors: releasing the store: %w", released)
	}
	return nil
}

// release gives the store up: no snapshot is saved afterwards.
func (s *System) release() error {
	if s.lease == nil {
		return nil // a member that never coordinated
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout)
	defer cancel()
	return s.lease.Release(ctx)
}
