package actors

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/snapshot"
)

// ErrProps is wrapped by the error of a spawn whose Props cannot make a
// participant: an option that conflicts with the snapshot's mailbox or
// dispatcher, or Props of another actor system.
var ErrProps = errors.New("actors: props cannot make a participant")

// Snapshotted returns the Props option that makes the actors spawned
// from those Props participants of the system's snapshots, recorded as
// kind (a restore rebuilds each from the producer registered under kind:
// WithKind). Add it to the Props a program already builds and spawn with
// any of Proto.Actor's calls, from the root context, from any actor or as
// a child:
//
//	props := actor.PropsFromProducer(newAccount, sys.Snapshotted("account"))
//	pid, err := sys.Root().SpawnNamed(props, "alice")
//
// A participant's id is its PID's id. It gets the snapshot's per-sender
// mailbox and runs on the system's worker pool: Props that set their own
// mailbox or dispatcher, or sender middleware (which sends between
// participants would bypass), fail to spawn with an error wrapping
// ErrProps, as do Props spawned in another actor system. The spawn fails
// too, before the actor starts, if its state would not survive a snapshot
// (ErrLossy). Snapshotted sets the Props' spawn function: a later
// actor.WithSpawnFunc replaces it. Receiver middleware is kept, and sees
// the snapshot's own control messages (starts, markers) besides the
// application's.
func (s *System) Snapshotted(kind string) actor.PropsOption {
	return actor.WithSpawnFunc(func(as *actor.ActorSystem, id string, props *actor.Props, parent actor.SpawnerContext) (*actor.PID, error) {
		switch {
		case kind == "":
			return nil, fmt.Errorf("%w: %s: Snapshotted needs a kind, which a restore rebuilds the participant from", ErrProps, id)
		case as != s.actors:
			return nil, fmt.Errorf("%w: %s: Props of one actor system spawned in another", ErrProps, id)
		}
		producer, err := propsProducer(props)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrProps, id, err)
		}
		return s.spawn(props, parent, kind, snapshot.ProcessID(id), func() actor.Actor { return producer(as) })
	})
}

// RegisterKind registers an actor kind: a name and how to make a fresh
// instance, with optional Props options (a supervisor, say). A restore
// spawns participants by kind; Props and Spawn spawn one by kind.
func (s *System) RegisterKind(name string, producer func() actor.Actor, opts ...actor.PropsOption) error {
	if name == "" || producer == nil {
		return fmt.Errorf("%w: a kind needs a name and a producer", ErrConfig)
	}
	if err := propsConflict(actor.PropsFromProducer(producer, opts...)); err != nil {
		return fmt.Errorf("%w: kind %q: %w", ErrConfig, name, err)
	}
	s.kindsMu.Lock()
	defer s.kindsMu.Unlock()
	if _, ok := s.kinds[name]; ok {
		return fmt.Errorf("%w: kind %q registered twice", ErrConfig, name)
	}
	s.kinds[name] = &kind{name: name, producer: producer, opts: opts}
	return nil
}

// Props returns Props that spawn a participant of a registered kind, with
// any of Proto.Actor's spawn calls: sys.Root().SpawnNamed(sys.Props("account"), "a1"),
// or ctx.Spawn(sys.Props("account")) inside an actor for a child. It
// returns nil for a kind never registered.
func (s *System) Props(kindName string) *actor.Props {
	k, err := s.kind(kindName)
	if err != nil {
		return nil
	}
	return actor.PropsFromProducer(k.producer, append(slices.Clone(k.opts), s.Snapshotted(k.name))...)
}

func (s *System) kind(name string) (*kind, error) {
	s.kindsMu.RLock()
	defer s.kindsMu.RUnlock()
	k, ok := s.kinds[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKind, name)
	}
	return k, nil
}

// Spawn starts a participant of a registered kind under name, from outside
// any actor: sys.Root().SpawnNamed(sys.Props(kindName), name). It is born
// outside the cut of any snapshot in progress, so it takes part only in
// later ones.
func (s *System) Spawn(kindName, name string) (*actor.PID, error) {
	props := s.Props(kindName)
	if props == nil {
		return nil, fmt.Errorf("actors: spawning %s: %w: %q", name, ErrUnknownKind, kindName)
	}
	return s.root.SpawnNamed(props, name)
}

// spawn starts participant id of kind from props (the spawn function of
// Snapshotted), with parent the context spawning it: a participant's own
// for a child, whose Process knows which snapshots the child is born
// into; anything else for a spawn from outside every participant.
func (s *System) spawn(props *actor.Props, parent actor.SpawnerContext, kindName string, id snapshot.ProcessID, producer func() actor.Actor) (*actor.PID, error) {
	if s.down.Load() {
		return nil, ErrShutdown
	}
	if err := propsConflict(props); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrProps, id, err)
	}
	// The first instance is made here, to check its state, and is the
	// one the actor starts with.
	first := producer()
	if err := checkLossless(first); err != nil {
		return nil, fmt.Errorf("actors: spawning %s: %w", id, err)
	}
	var from *participant // the participant spawning it, if any
	if self := parent.Self(); self != nil && self.Address == s.actors.Address() {
		from = s.reg.lookup(snapshot.ProcessID(self.Id))
	}
	var pcfg snapshot.Config
	var joins []snapshot.SnapshotID
	p, err := s.newParticipant(kindName, id, nil, func(pending []snapshot.SnapshotID) snapshot.Config {
		if from != nil {
			pcfg = from.proc.ChildConfig(id)
		} else {
			// Born while these run, from outside any participant: it
			// takes part in them with its state at birth (a participant
			// that has not recorded one may send to it before its record).
			pcfg = snapshot.Config{ID: id, Mode: s.cfg.mode, Sums: s.cfg.sums()}
			if s.cfg.mode == snapshot.Epochs {
				pcfg.Horizon = s.reg.overBelowLocked()
			}
			joins = slices.Clone(pending)
		}
		return pcfg
	})
	if err != nil {
		return nil, err
	}
	p.joins = joins
	p.parent = from
	pid, err := s.start(props, parent, p, func() actor.Actor {
		if a := first; a != nil {
			first = nil
			return a
		}
		return producer()
	})
	if err != nil {
		return nil, err
	}
	if from != nil {
		from.takeDrops() // id may be the name of a child dropped
		from.proc.DeclareOutgoing(id)
		if from.children == nil {
			from.children = make(map[snapshot.ProcessID]bool)
		}
		from.children[id] = true
		s.tell(&registered{id: id, finished: pcfg.Finished, horizon: pcfg.Horizon})
	} else if len(joins) > 0 {
		s.tell(&registered{id: id})
	}
	if s.cfg.transport != nil {
		s.tell(&announceMsg{id: id})
	}
	return pid, nil
}

// newParticipant registers a participant that is not running yet. config
// gives its Process's Config, under the registry lock, from the snapshots
// in progress.
func (s *System) newParticipant(kindName string, id snapshot.ProcessID, state []byte, config func(pending []snapshot.SnapshotID) snapshot.Config) (*participant, error) {
	p := &participant{
		sys: s, id: id, kind: kindName, key: mailbox.SenderKey(s.nextKey.Add(1)), state: state,
		// Known before the actor runs, which may spawn children at once.
		pid:     actor.NewPID(s.actors.Address(), string(id)),
		targets: make(map[*actor.PID]*targetRef),
		peers:   make(map[mailbox.SenderKey]*peerRef),
	}
	mopts := []mailbox.Option{mailbox.WithHeldLimit(0, p.overHeld), mailbox.WithTurnEnd(p.turnEnd), mailbox.WithHurry(p.startHurried)}
	if s.cfg.mode != snapshot.Aligned {
		// Only the aligned mode holds a sender back; the others need
		// each channel's order, which posting order keeps, and not the
		// fairness of a queue per sender that costs a lookup a message.
		mopts = append(mopts, mailbox.WithArrivalOrder())
	}
	p.mb = mailbox.New(mopts...)
	p.enc.types, p.late.enc.types = s.types, s.types
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if _, dup := s.reg.byID[id]; dup {
		return nil, fmt.Errorf("actors: spawning %s: %w", id, actor.ErrNameExists)
	}
	if !s.reg.nameFreeLocked(id) {
		return nil, fmt.Errorf("actors: spawning %s: %w", id, ErrNameStopped)
	}
	var err error
	pcfg := config(s.reg.pending)
	if pcfg.DeltaMin == 0 {
		pcfg.DeltaMin = s.cfg.deltaMin
	}
	if p.proc, err = snapshot.NewProcess(pcfg); err != nil {
		return nil, err
	}
	p.capturedAt = p.proc.Epoch()
	p.lazy = s.cfg.initiation == Lazy
	p.epochs = p.proc.Mode() == snapshot.Epochs
	p.sums = p.proc.Sums()
	if p.aligned = p.proc.Mode() == snapshot.Aligned; p.aligned {
		// Wait for no one until the guardian, which knows the channel
		// graph and its cycles, says whom (WithMode).
		p.proc.SetAwaited(0, nil)
	}
	s.reg.byID[id] = p
	s.reg.version++
	s.reg.byKey[p.key] = p
	// Messages other members' participants sent to it before it was
	// born here come first, in their order.
	for _, e := range s.reg.early[id] {
		p.mb.PostTagged(e.key, e.tag, e.msg)
	}
	delete(s.reg.early, id)
	return p, nil
}

// start runs a registered participant's actor under Proto.Actor: a copy
// of props (the user's supervisor, middleware and hooks kept) whose
// producer wraps each instance in the participant's shell, with the
// participant's mailbox and the system's worker pool.
func (s *System) start(props *actor.Props, parent actor.SpawnerContext, p *participant, producer func() actor.Actor) (*actor.PID, error) {
	run := *props
	run.Configure(
		actor.WithProducer(func() actor.Actor { return &shell{p: p, inner: producer()} }),
		actor.WithMailbox(func() actor.Mailbox { return p.mb }),
		actor.WithDispatcher(s.pool),
	)
	s.stopped.Add(1)
	pid, err := actor.DefaultSpawner(s.actors, string(p.id), &run, parent)
	if err != nil {
		s.stopped.Done()
		s.reg.remove(p)
		return nil, fmt.Errorf("actors: spawning %s: %w", p.id, err)
	}
	return pid, nil
}

// propsField returns the unexported field name of props. Proto.Actor's
// Props keep their settings unexported, with no getters; the version in
// go.mod is pinned, and a test checks every field used here.
func propsField(props *actor.Props, name string) (reflect.Value, error) {
	f := reflect.ValueOf(props).Elem().FieldByName(name)
	if !f.IsValid() {
		return reflect.Value{}, fmt.Errorf("this Proto.Actor version's Props have no %s", name)
	}
	return f, nil
}

// propsProducer returns the producer props were made with.
func propsProducer(props *actor.Props) (actor.ProducerWithActorSystem, error) {
	f, err := propsField(props, "producer")
	if err != nil {
		return nil, err
	}
	producer, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(actor.ProducerWithActorSystem)
	if !ok || producer == nil {
		return nil, errors.New("Props without a producer")
	}
	return producer, nil
}

// propsConflict says which of props' options a participant cannot keep:
// its mailbox and dispatcher are the snapshot's, and sends between
// participants do not pass through sender middleware.
func propsConflict(props *actor.Props) error {
	for _, c := range []struct{ field, option, why string }{
		{"mailboxProducer", "actor.WithMailbox", "a participant's mailbox is the snapshot's per-sender one"},
		{"dispatcher", "actor.WithDispatcher", "participants run on the system's worker pool"},
		{"senderMiddleware", "actor.WithSenderMiddleware", "sends between participants go straight to the receiver's queue, past any sender middleware"},
	} {
		f, err := propsField(props, c.field)
		if err != nil {
			return err
		}
		if (f.Kind() == reflect.Slice && f.Len() > 0) || (f.Kind() != reflect.Slice && !f.IsNil()) {
			return fmt.Errorf("%s is set: %s; leave it out of a participant's Props", c.option, c.why)
		}
	}
	return nil
}

// SystemOf returns the System of the participant whose context ctx is,
// or nil for any other context: a participant reaches its System (to
// build Props with Snapshotted for its children, say) without holding it
// in its state, which a restored instance could not have.
func SystemOf(ctx actor.Context) *System {
	if c, ok := ctx.(*snapContext); ok {
		return c.p.sys
	}
	return nil
}
