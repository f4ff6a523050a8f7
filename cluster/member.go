package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/cluster/endpoint"
	"github.com/actorsnap/actorsnap/cluster/link"
	"github.com/actorsnap/actorsnap/cluster/membership"
	"github.com/actorsnap/actorsnap/cluster/placement"
	"github.com/actorsnap/actorsnap/cluster/wire"
	"github.com/actorsnap/actorsnap/internal/msgpackbound"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Config configures a Member.
type Config struct {
	// Membership says which cluster to join, and how: its provider,
	// this member's remote address, and the TLS that closes the cluster
	// to processes without a certificate of its authority
	// (membership.Config.TLS, membership.LoadTLS).
	Membership membership.Config
	// Link configures the links between members; zero means
	// link.DefaultConfig with this start's time as the session.
	Link link.Config
	// Members is how many members Start waits for (1 if zero): names are
	// placed over the members there are then, and stay placed there
	// until the next restore (a member that joins later hosts nothing
	// until then; one that leaves takes its participants with it).
	Members int
	// JoinTimeout bounds the join, and the wait for the members; zero
	// means 30 s.
	JoinTimeout time.Duration
}

// Member is one member of a cluster running an actorsnap system.
type Member struct {
	sys *actors.System
	t   *transport
}

// Start joins the cluster cfg names and starts an actors.System on it,
// built with opts. Every member must be given the same kinds and message
// types, and the same store: the coordinator stores the snapshots there,
// and a member that takes over continues them.
func Start(cfg Config, opts ...actors.Option) (*Member, error) {
	cfg = withDefaults(cfg)
	t := newTransport(cfg)
	sys, err := actors.NewSystem(append(slices.Clone(opts), actors.WithTransport(t))...)
	if err != nil {
		return nil, err
	}
	t.sys.Store(sys)
	sys.MembersChanged() // the list the join saw
	ctx, cancel := context.WithTimeout(context.Background(), cfg.JoinTimeout)
	defer cancel()
	err = t.waitMembers(ctx, max(cfg.Members, 1))
	if err == nil {
		err = t.awaitHellos(cfg.JoinTimeout)
	}
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.JoinTimeout)
		defer cancel()
		_ = sys.Shutdown(ctx)
		return nil, err
	}
	return &Member{sys: sys, t: t}, nil
}

// Restore joins the cluster and restores this member's part of the stored
// snapshot id (the latest complete one when id is 0) once members members
// have joined, the same number on every member: the participants are
// placed by name over those members, so a snapshot taken on any number of
// members restores onto any other (actors.RestoreMember says what each
// member does). opts are as for Start.
//
// Survivors of a member's death restore in place: each calls Shutdown on
// its Member, then Restore in the same process. Give the restore a
// cluster name of its own (cfg.Membership.ClusterName), the same on every
// member of it: a member of the old cluster that has not left yet would
// otherwise be counted among the members.
func Restore(ctx context.Context, cfg Config, store persistence.Store, id snapshot.SnapshotID, members int, opts ...actors.Option) (*Member, error) {
	if members < 1 {
		return nil, fmt.Errorf("cluster: restore onto %d members", members)
	}
	cfg = withDefaults(cfg)
	t := newTransport(cfg)
	ready := func(ctx context.Context) error { return t.waitMembers(ctx, members) }
	sys, err := actors.RestoreMember(ctx, store, id, ready, append(slices.Clone(opts), actors.WithTransport(t))...)
	if err != nil {
		return nil, err
	}
	t.sys.Store(sys)
	sys.MembersChanged()
	if err := t.awaitHellos(cfg.JoinTimeout); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.JoinTimeout)
		defer cancel()
		_ = sys.Shutdown(ctx)
		return nil, err
	}
	return &Member{sys: sys, t: t}, nil
}

func withDefaults(cfg Config) Config {
	if cfg.JoinTimeout == 0 {
		cfg.JoinTimeout = 30 * time.Second
	}
	if cfg.Link == (link.Config{}) {
		cfg.Link = link.DefaultConfig(uint64(time.Now().UnixNano()))
	}
	return cfg
}

// System returns the member's actors.System: spawn participants there,
// take snapshots with its Snapshot (from any member), shut it down with
// Shutdown.
func (m *Member) System() *actors.System { return m.sys }

// Self returns this member's address.
func (m *Member) Self() string { return m.t.Self() }

// Members returns the members' addresses, sorted.
func (m *Member) Members() []string { return m.t.Members() }

// Coordinator returns the address of the member that coordinates the
// snapshots: the lowest in the member list.
func (m *Member) Coordinator() string { return m.t.Coordinator() }

// PID returns the PID of the participant named name, on the member that
// hosts it.
func (m *Member) PID(name string) *actor.PID { return m.sys.PID(name) }

// Owns reports whether the participant named name is placed on this
// member: spawn it here if so.
func (m *Member) Owns(name string) bool { return m.t.Owner(name) == m.t.Self() }

// Shutdown shuts the system down and leaves the cluster.
func (m *Member) Shutdown(ctx context.Context) error { return m.sys.Shutdown(ctx) }

// transport is the actors.Transport of a member: membership from package
// membership, links from package endpoint.
type transport struct {
	cfg Config
	sys atomic.Pointer[actors.System]
	mem *membership.Membership
	ep  *endpoint.Endpoint

	mu      sync.RWMutex
	members []string // as the membership says
	placed  []string // the members names are placed over (waitMembers)
	hello   *wire.Hello
	greeted map[string]bool  // members whose hello agreed with ours
	refused map[string]error // members whose hello did not: left out of Members
	helloed map[string]bool  // members sent our hello
	heard   chan struct{}    // closed and replaced at each hello heard
	log     *slog.Logger

	stopWatch func()
	watched   chan struct{}
}

// kindHello is the first byte of a Hello between members' transports:
// the system's own frames never start with it (they start with a small
// kind number or a msgpack map).
const kindHello byte = 0xff

// newTransport returns a transport not attached yet: the system's
// guardian may ask it for the members before Attach has joined.
func newTransport(cfg Config) *transport {
	return &transport{cfg: cfg, greeted: map[string]bool{}, refused: map[string]error{}, helloed: map[string]bool{},
		heard: make(chan struct{})}
}

// Attach implements actors.Transport.
func (t *transport) Attach(a actors.Attachment) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.JoinTimeout)
	defer cancel()
	t.log = a.Actors.Logger()
	// The endpoint's actor before remote listens (endpoint.Spawn).
	ep, err := endpoint.Spawn(a.Actors, t.cfg.Link, func(from string, b []byte) { t.receive(from, b, a.Deliver) })
	if err != nil {
		return err
	}
	mem, err := membership.Join(ctx, a.Actors, t.cfg.Membership)
	if err != nil {
		ep.Stop()
		return err
	}
	t.hello = &wire.Hello{Version: wire.Version, Member: mem.Self(), Session: t.cfg.Link.Session, Messages: a.Messages, Kinds: a.Kinds}
	t.mem, t.ep = mem, ep
	ep.Begin()
	t.setMembers(mem.Members())
	ch, stop := mem.Watch()
	t.stopWatch, t.watched = stop, make(chan struct{})
	go func() {
		defer close(t.watched)
		for list := range ch {
			t.setMembers(list)
			if s := t.sys.Load(); s != nil {
				s.MembersChanged()
			}
		}
	}()
	return nil
}

// setMembers takes the membership's list, and greets the members new in
// it: each hears this member's Hello, which it checks against its own.
func (t *transport) setMembers(list []string) {
	t.mu.Lock()
	t.members = slices.Clone(list)
	var greet []string
	for _, m := range list {
		if m != t.hello.Member && !t.helloed[m] {
			t.helloed[m] = true
			greet = append(greet, m)
		}
	}
	t.mu.Unlock()
	for _, m := range greet {
		t.sendHello(m)
	}
}

// sendHello sends this member's Hello to member m.
func (t *transport) sendHello(m string) {
	b, err := msgpack.Marshal(t.hello)
	if err == nil {
		err = t.ep.Send(m, append([]byte{kindHello}, b...))
	}
	if err != nil {
		t.log.Warn("greeting a member failed", slog.String("member", m), slog.Any("error", err))
	}
}

// receive takes a frame from member from: a Hello is checked, and the
// system's frames are delivered unless from was refused.
func (t *transport) receive(from string, b []byte, deliver func(string, []byte)) {
	if len(b) == 0 {
		return
	}
	switch b[0] {
	default:
		t.mu.RLock()
		refused := t.refused[from] != nil
		t.mu.RUnlock()
		if !refused {
			deliver(from, b)
		}
	case kindHello:
		var h wire.Hello
		err := msgpackbound.Unmarshal(b[1:], &h)
		if err == nil {
			err = wire.CheckHello(t.hello, &h)
		}
		t.mu.Lock()
		if err != nil {
			t.refused[from] = err
		} else {
			t.greeted[from] = true
		}
		close(t.heard)
		t.heard = make(chan struct{})
		answer := !t.helloed[from] // a member this one does not list yet
		t.helloed[from] = true
		t.mu.Unlock()
		if answer {
			t.sendHello(from)
		}
		if err != nil {
			t.log.Error("a member is refused: it cannot work with this one", slog.String("member", from), slog.Any("error", err))
			if s := t.sys.Load(); s != nil {
				s.MembersChanged()
			}
		}
	}
}

// awaitHellos waits until every member this one knows has said a Hello that
// agrees with its own, at most timeout. It returns the first
// disagreement, naming it.
func (t *transport) awaitHellos(timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		t.mu.RLock()
		var waiting []string
		var refusal error
		for _, m := range t.members {
			switch {
			case t.refused[m] != nil:
				refusal = t.refused[m]
			case m != t.hello.Member && !t.greeted[m]:
				waiting = append(waiting, m)
			}
		}
		heard := t.heard
		t.mu.RUnlock()
		switch {
		case refusal != nil:
			return fmt.Errorf("cluster: %w", refusal)
		case len(waiting) == 0:
			return nil
		}
		select {
		case <-heard:
		case <-deadline.C:
			return fmt.Errorf("cluster: no hello from %v within %v", waiting, timeout)
		}
	}
}

// waitMembers waits until n members have joined, then places names over
// them for good. A member refused meanwhile ends the wait with the
// refusal, which names the difference: this member cannot work with the
// cluster it joined, and waiting for its deadline would only hide why.
func (t *transport) waitMembers(ctx context.Context, n int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		joined, refusal := t.joined()
		if refusal != nil {
			return fmt.Errorf("cluster: %w", refusal)
		}
		if joined >= n {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %d of %d members joined (%v): %w", len(t.Members()), n, t.Members(), ctx.Err())
		case <-tick.C:
		}
	}
	t.mu.Lock()
	t.placed = t.membersLocked()
	t.mu.Unlock()
	return nil
}

// joined is how many members have joined, or the refusal of one of them.
func (t *transport) joined() (int, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range t.members {
		if err := t.refused[m]; err != nil {
			return 0, err
		}
	}
	return len(t.members), nil
}

// Self implements actors.Transport.
func (t *transport) Self() string { return t.mem.Self() }

// Members implements actors.Transport: the membership's list, less the
// members refused.
func (t *transport) Members() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.membersLocked()
}

func (t *transport) membersLocked() []string {
	if len(t.refused) == 0 {
		return slices.Clone(t.members)
	}
	return slices.DeleteFunc(slices.Clone(t.members), func(m string) bool { return t.refused[m] != nil })
}

// Coordinator implements actors.Transport: the lowest address.
func (t *transport) Coordinator() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ms := t.membersLocked()
	if len(ms) == 0 {
		return ""
	}
	return ms[0]
}

// Owner implements actors.Transport.
func (t *transport) Owner(name string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.placed != nil {
		return placement.Owner(name, t.placed)
	}
	return placement.Owner(name, t.membersLocked())
}

func (t *transport) isMember(addr string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Contains(t.members, addr) && t.refused[addr] == nil
}

// sendPatience is how long Send waits for window space before it checks
// that the member it waits for is still one.
const sendPatience = time.Second

// Send implements actors.Transport: it waits while the link to member to
// is full, for as long as to is a member.
func (t *transport) Send(to string, b []byte) error {
	if b[0] == kindHello {
		return fmt.Errorf("cluster: a frame may not start with %#x", kindHello)
	}
	switch err := t.ep.Send(to, b); {
	case err == nil:
		return nil
	case !errors.Is(err, link.ErrFull):
		return err
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), sendPatience)
		err := t.ep.SendWait(ctx, to, b)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if !t.isMember(to) {
			return fmt.Errorf("%w: %s", actors.ErrMemberLeft, to)
		}
	}
}

// Detach implements actors.Transport.
func (t *transport) Detach() {
	if t.stopWatch != nil {
		t.stopWatch()
		<-t.watched
	}
	if t.ep != nil {
		t.ep.Stop()
	}
	if t.mem != nil {
		t.mem.Leave()
	}
}
