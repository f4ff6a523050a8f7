package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// ErrRestore is wrapped by the errors of Restore.
var ErrRestore = errors.New("actors: restore failed")

// restoreRequest asks the guardian to continue numbering after a restored
// snapshot and to start the first snapshot of the restored system.
type restoreRequest struct {
	from    *snapshot.Global
	base    snapshot.SnapshotID // the restored system numbers snapshots after it
	reply   chan<- result
	started chan<- struct{}
}

// Restore builds a running system from the stored snapshot id (the latest
// complete one when id is 0), with opts as for NewSystem; the kinds of the
// snapshot's participants must be given with WithKind. The system saves its
// own snapshots in store unless WithStore says otherwise.
//
// Before it reads the snapshot, Restore claims the store the system saves
// in for the restored system (persistence.ClaimRestore), taking it over
// from its recorded owner, so that no other writer saves meanwhile; a
// store another writer holds now is refused with an error wrapping
// persistence.ErrLocked. The system is named as WithSystemName says, or
// else as the store's recorded owner, or else DefaultSystemName; it holds
// the store until Shutdown.
//
// Every participant is respawned by kind and name, its state restored
// before its first message; each channel's recorded messages are replayed
// in FIFO order as if from their original sender, their sequence numbers
// continuing the channel's, so that the next snapshot balances. A child
// participant comes back under its full id with its restored parent as
// ctx.Parent(), which hears of its failures; the parent does not list it
// among its own children, so it does not stop it when it stops.
//
// Before the restored actors handle anything, the system takes its first
// snapshot, numbered after the restored one and after every id the store
// has held, deleted and damaged ones included (persistence.Lease.High), so
// that restoring an older snapshot reuses no id: every participant records
// its restored state, and the replayed messages are its channel state, so
// it holds what the restored snapshot held. Restore returns once that
// snapshot is complete and stored, which also means every replayed message
// has been delivered: input the caller sends afterwards comes after the
// replay.
//
// Before it spawns anything, Restore checks that the snapshot decodes, as
// CheckDecodes does: a participant of a kind not given, a state that no
// longer fits its actor's type, or a message in flight of a type not
// registered or no longer fitting fails it with a *DecodeError matching
// ErrStateDecode.
func Restore(ctx context.Context, store persistence.Store, id snapshot.SnapshotID, opts ...Option) (*System, error) {
	cfg, err := newConfig(append([]Option{WithStore(store)}, opts...))
	if err != nil {
		return nil, err
	}
	if !cfg.nameSet {
		o, err := cfg.store.Ownership(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: reading the store's owner: %w", ErrRestore, err)
		}
		if o.Owner.System != "" {
			cfg.name = o.Owner.System
		}
	}
	lease, err := cfg.store.Claim(ctx, cfg.name, persistence.ClaimRestore)
	if err != nil {
		return nil, fmt.Errorf("%w: claiming the store for system %q: %w", ErrRestore, cfg.name, err)
	}
	s, g, err := restoreOn(ctx, store, id, cfg, lease, opts)
	if err != nil {
		releaseLease(cfg, lease)
		return nil, err
	}
	// The system holds the lease now: Shutdown releases it.
	if err := s.restore(ctx, g, max(g.ID, lease.High())); err != nil {
		_ = s.Shutdown(context.Background())
		return nil, fmt.Errorf("%w: snapshot %d: %w", ErrRestore, g.ID, err)
	}
	return s, nil
}

// restoreOn loads the snapshot to restore and starts a system for it on
// the store lease holds, without spawning anything yet.
func restoreOn(ctx context.Context, store persistence.Store, id snapshot.SnapshotID, cfg config, lease persistence.Lease, opts []Option) (*System, *snapshot.Global, error) {
	var g *snapshot.Global
	var err error
	if id == 0 {
		g, err = store.Latest(ctx)
	} else {
		g, err = store.Load(ctx, id)
	}
	if err != nil {
		if id == 0 {
			return nil, nil, fmt.Errorf("%w: loading the latest snapshot: %w", ErrRestore, err)
		}
		return nil, nil, fmt.Errorf("%w: loading snapshot %d: %w", ErrRestore, id, err)
	}
	if err := g.Verify(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrRestore, err)
	}
	high := g.ID
	if lease != nil { // a member of a cluster claims the store when it coordinates
		high = max(high, lease.High())
	}
	switch {
	case cfg.modeSet && g.Mode != cfg.mode:
		return nil, nil, fmt.Errorf("%w: snapshot %d: snapshot taken in %s mode, system in %s mode", ErrRestore, g.ID, g.Mode, cfg.mode)
	case !g.Mode.Valid():
		return nil, nil, fmt.Errorf("%w: snapshot %d: %w: mode %s not supported", ErrRestore, g.ID, ErrConfig, g.Mode)
	case high >= snapshot.MaxSnapshotID:
		return nil, nil, fmt.Errorf("%w: snapshot %d: %w: the store has held snapshot %d", ErrRestore, g.ID, persistence.ErrIDsExhausted, high)
	case cfg.countingSet && cfg.counting == InSums && g.Mode != snapshot.Epochs:
		return nil, nil, fmt.Errorf("%w: snapshot %d: %w: counting in sums needs the epoch mode, and the snapshot was taken in %s mode", ErrRestore, g.ID, ErrConfig, g.Mode)
	}
	cfg.mode = g.Mode
	switch {
	case cfg.countingSet:
	case g.Sums != nil && cfg.transport == nil:
		cfg.counting, cfg.countingSet = InSums, true
	case g.ReceiverCounts:
		cfg.counting, cfg.countingSet = PerChannel, true
	}
	// A state that no longer decodes would make its actor fail as it
	// starts, and the first snapshot abort on the restart: say why first.
	if err := CheckDecodes(g, opts...); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrRestore, err)
	}
	s, err := newSystem(cfg, lease)
	if err != nil {
		return nil, nil, err
	}
	return s, g, nil
}

// restore respawns g's participants and replays its messages in flight;
// the system numbers its snapshots after base. A member of a cluster
// respawns the participants placed on it, stands in for the others, and
// replays the channels whose receivers it hosts, holding what other
// members send until the replay is in every queue (holdFrames).
func (s *System) restore(ctx context.Context, g *snapshot.Global, base snapshot.SnapshotID) error {
	t := s.cfg.transport
	local := func(snapshot.ProcessID) bool { return true }
	coordinating := true
	if t != nil {
		self := t.Self()
		local = func(id snapshot.ProcessID) bool { return t.Owner(string(id)) == self }
		coordinating = t.Coordinator() == self
	}
	sent := make(map[snapshot.ProcessID][]snapshot.PeerCount)
	received := make(map[snapshot.ProcessID][]snapshot.PeerCount)
	inFlight := make(map[snapshot.ProcessID]uint64)
	for _, c := range g.Channels {
		inFlight[c.Channel.From] += uint64(len(c.Messages))
		sent[c.Channel.From] = append(sent[c.Channel.From], snapshot.PeerCount{Peer: c.Channel.To, N: c.Sent})
		received[c.Channel.To] = append(received[c.Channel.To], snapshot.PeerCount{Peer: c.Channel.From, N: c.Received})
	}

	// Register every participant, and a sender key for each departed one,
	// before anything runs.
	type restored struct {
		p *participant
		k *kind
	}
	live := make(map[snapshot.ProcessID]restored, len(g.Participants))
	keys := make(map[snapshot.ProcessID]mailbox.SenderKey, len(g.Participants))
	departed := make(map[snapshot.ProcessID]bool)
	for _, pt := range g.Participants {
		if pt.Departed {
			departed[pt.ID] = true
			// Its sender key names it, as a stopped participant's does.
			stopped := &participant{id: pt.ID, key: mailbox.SenderKey(s.nextKey.Add(1))}
			s.reg.stop(stopped)
			s.reg.heard(pt.ID) // the restored coordinator knows it stopped
			keys[pt.ID] = stopped.key
			continue
		}
		if !local(pt.ID) {
			// Placed on another member: sends to it and its messages
			// here go through its stand-in.
			e := s.reg.remote(pt.ID, t.Owner(string(pt.ID)), &s.nextKey)
			keys[pt.ID] = e.key
			continue
		}
		k, err := s.kind(pt.Kind)
		if err != nil {
			return fmt.Errorf("participant %s: %w (give it with WithKind)", pt.ID, err)
		}
		p, err := s.newParticipant(k.name, pt.ID, pt.State, func([]snapshot.SnapshotID) snapshot.Config {
			if s.cfg.sums() {
				// What it sent that the replay delivers counts as sent.
				return snapshot.Config{ID: pt.ID, Mode: g.Mode, Horizon: base, Sums: true, SentTotal: inFlight[pt.ID]}
			}
			return snapshot.Config{ID: pt.ID, Mode: g.Mode, Horizon: base, Sent: sent[pt.ID], Received: received[pt.ID]}
		})
		if err != nil {
			return err
		}
		if p.state == nil {
			p.state = []byte{} // restore even an empty state
		}
		p.requested = p.books.restore(pt.Waits)
		live[pt.ID] = restored{p: p, k: k}
		keys[pt.ID] = p.key
	}

	// The first snapshot's start goes into every queue first, so that each
	// participant records its restored state before any replayed message.
	// In a cluster, every member posts it to its own participants: the
	// coordinator's start (its first id is base+1 on every member) may
	// come after messages of participants that already recorded it.
	reply := make(chan result, 1)
	if coordinating {
		started := make(chan struct{})
		s.tell(&restoreRequest{from: g, base: base, reply: reply, started: started})
		select {
		case <-started:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		s.reg.mu.Lock()
		s.reg.addPendingLocked(base + 1)
		s.reg.mu.Unlock()
		msg := &initiateMsg{id: base + 1}
		for _, r := range live {
			r.p.mb.PostFrom(controlKey, msg)
		}
	}

	// Replay each channel's messages as if from their sender; a departed
	// sender's channels then say it stopped.
	for _, c := range g.Channels {
		to, ok := live[c.Channel.To]
		if !ok {
			continue
		}
		from := keys[c.Channel.From]
		for _, m := range c.Messages {
			rm, ok := m.Payload.(RecordedMessage)
			if !ok {
				return fmt.Errorf("channel %s seq %d: payload %T is not a RecordedMessage", c.Channel, m.Seq, m.Payload)
			}
			msg, err := s.types.decode(rm)
			if err != nil {
				return fmt.Errorf("channel %s seq %d: %w", c.Channel, m.Seq, err)
			}
			to.p.mb.PostFrom(from, msg)
		}
		if departed[c.Channel.From] {
			to.p.mb.PostFrom(from, &departedMsg{})
		}
	}
	// What other members sent meanwhile follows the replay.
	s.releaseFrames()

	for _, pt := range g.Participants {
		if r, ok := live[pt.ID]; ok {
			var spawner actor.SpawnerContext = s.root
			if i := strings.LastIndexByte(string(pt.ID), '/'); i > 0 {
				// Only a restored participant: the parent of a child of a
				// plain actor, or of a name with a slash, is not there to
				// supervise it.
				if _, ok := live[pt.ID[:i]]; ok {
					spawner = restoredParent{RootContext: s.root, parent: actor.NewPID(s.actors.Address(), string(pt.ID[:i]))}
				}
			}
			if _, err := s.start(actor.PropsFromProducer(r.k.producer, r.k.opts...), spawner, r.p, r.k.producer); err != nil {
				return err
			}
		}
	}
	if !coordinating {
		return nil // the coordinator completes the first snapshot
	}
	select {
	case r := <-reply:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restoredParent spawns a restored child participant: the root context,
// naming the child's parent as its Self, so that the child's ctx.Parent()
// is its parent again, which hears of its failures and its stop.
type restoredParent struct {
	*actor.RootContext
	parent *actor.PID
}

// Self implements actor.SpawnerContext.
func (r restoredParent) Self() *actor.PID { return r.parent }
