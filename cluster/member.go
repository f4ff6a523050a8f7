package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/cluster/endpoint"
	"github.com/actorsnap/actorsnap/cluster/link"
	"github.com/actorsnap/actorsnap/cluster/membership"
	"github.com/actorsnap/actorsnap/cluster/placement"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Config configures a Member.
type Config struct {
	// Membership says which cluster to join, and how: its provider and
	// this member's remote address.
	Membership membership.Config
	// Link configures the links between members; zero means
	// link.DefaultConfig with this start's time as the session.
	Link link.Config
	// JoinTimeout bounds the join; zero means 30 s.
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
	t := &transport{cfg: cfg}
	sys, err := actors.NewSystem(append(slices.Clone(opts), actors.WithTransport(t))...)
	if err != nil {
		return nil, err
	}
	t.sys.Store(sys)
	sys.MembersChanged() // the list the join saw
	return &Member{sys: sys, t: t}, nil
}

// Restore joins the cluster and restores this member's part of the stored
// snapshot id (the latest complete one when id is 0) once members members
// have joined, the same number on every member: the participants are
// placed by name over those members, so a snapshot taken on any number of
// members restores onto any other (actors.RestoreMember says what each
// member does). opts are as for Start.
func Restore(ctx context.Context, cfg Config, store persistence.Store, id snapshot.SnapshotID, members int, opts ...actors.Option) (*Member, error) {
	if members < 1 {
		return nil, fmt.Errorf("cluster: restore onto %d members", members)
	}
	cfg = withDefaults(cfg)
	t := &transport{cfg: cfg}
	ready := func(ctx context.Context) error {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for len(t.Members()) < members {
			select {
			case <-ctx.Done():
				return fmt.Errorf("cluster: %d of %d members joined (%v): %w", len(t.Members()), members, t.Members(), ctx.Err())
			case <-tick.C:
			}
		}
		return nil
	}
	sys, err := actors.RestoreMember(ctx, store, id, ready, append(slices.Clone(opts), actors.WithTransport(t))...)
	if err != nil {
		return nil, err
	}
	t.sys.Store(sys)
	sys.MembersChanged()
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
	members []string

	stopWatch func()
	watched   chan struct{}
}

// Attach implements actors.Transport.
func (t *transport) Attach(as *actor.ActorSystem, deliver func(from string, b []byte)) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.JoinTimeout)
	defer cancel()
	mem, err := membership.Join(ctx, as, t.cfg.Membership)
	if err != nil {
		return err
	}
	ep, err := endpoint.Start(as, t.cfg.Link, deliver)
	if err != nil {
		mem.Leave()
		return err
	}
	t.mem, t.ep = mem, ep
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

func (t *transport) setMembers(list []string) {
	t.mu.Lock()
	t.members = slices.Clone(list)
	t.mu.Unlock()
}

// Self implements actors.Transport.
func (t *transport) Self() string { return t.mem.Self() }

// Members implements actors.Transport.
func (t *transport) Members() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Clone(t.members)
}

// Coordinator implements actors.Transport: the lowest address.
func (t *transport) Coordinator() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.members) == 0 {
		return ""
	}
	return t.members[0]
}

// Owner implements actors.Transport.
func (t *transport) Owner(name string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return placement.Owner(name, t.members)
}

func (t *transport) isMember(addr string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Contains(t.members, addr)
}

// sendPatience is how long Send waits for window space before it checks
// that the member it waits for is still one.
const sendPatience = time.Second

// Send implements actors.Transport: it waits while the link to member to
// is full, for as long as to is a member.
func (t *transport) Send(to string, b []byte) error {
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
