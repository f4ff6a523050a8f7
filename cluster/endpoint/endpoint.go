package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/actorsnap/actorsnap/cluster/link"
	"github.com/actorsnap/actorsnap/cluster/wire"
)

// EndpointName is the name of the endpoint actor on every member.
const EndpointName = "actorsnap-endpoint"

// ErrStopped is returned by Send on a stopped Endpoint.
var ErrStopped = errors.New("endpoint: stopped")

// Endpoint is a member's end of its links to its peers.
type Endpoint struct {
	sys     *actor.ActorSystem
	self    string
	cfg     link.Config
	deliver func(from string, msg []byte)
	log     *slog.Logger

	mu      sync.Mutex
	peers   map[string]*peer
	space   chan struct{} // closed and replaced when acknowledgements free window space
	stopped bool

	pid  *actor.PID
	sub  *eventstream.Subscription
	done chan struct{}
	wg   sync.WaitGroup
}

// peer is the link to one peer member, both ways.
type peer struct {
	target *actor.PID
	out    *link.Sender
	in     link.Receiver
}

// Start starts the endpoint of the member whose actor system is sys, with
// remote already started (its address is the member's). deliver is
// called with every message a peer sent, once and in order per peer, on
// the endpoint actor's goroutine. cfg configures the links; its Session
// must grow at each start of the member.
func Start(sys *actor.ActorSystem, cfg link.Config, deliver func(from string, msg []byte)) (*Endpoint, error) {
	e, err := Spawn(sys, cfg, deliver)
	if err != nil {
		return nil, err
	}
	e.Begin()
	return e, nil
}

// Spawn spawns the endpoint's actor before remote starts, as Start does
// otherwise; Begin starts it once remote is up. Peers may send to a
// member as soon as its remote listens (a member restarting, say), and
// Proto.Actor delivers to an actor being spawned before its mailbox can
// run it (a nil pointer in its mailbox): an actor spawned first has none
// of that. What comes before Begin is dropped, and sent again.
func Spawn(sys *actor.ActorSystem, cfg link.Config, deliver func(from string, msg []byte)) (*Endpoint, error) {
	if _, err := link.NewSender(cfg); err != nil {
		return nil, err
	}
	e := &Endpoint{
		sys: sys, cfg: cfg, deliver: deliver, log: sys.Logger(),
		peers: make(map[string]*peer), space: make(chan struct{}), done: make(chan struct{}),
	}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromFunc(e.receive), EndpointName)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	e.pid = pid
	e.sub = sys.EventStream.Subscribe(func(evt interface{}) {
		if t, ok := evt.(*remote.EndpointTerminatedEvent); ok {
			e.reset(t.Address)
		}
	})
	return e, nil
}

// Begin starts the endpoint of a member whose remote has started: its
// address is the member's from now on.
func (e *Endpoint) Begin() {
	e.mu.Lock()
	e.self = e.sys.Address()
	e.mu.Unlock()
	e.wg.Add(1)
	go e.resend()
}

// peerLocked returns the link to member addr, made on first use.
func (e *Endpoint) peerLocked(addr string) *peer {
	p := e.peers[addr]
	if p == nil {
		out, _ := link.NewSender(e.cfg) // checked in Start
		p = &peer{target: actor.NewPID(addr, EndpointName), out: out}
		e.peers[addr] = p
	}
	return p
}

// Send queues msg for member to: it goes at once if nothing to that
// member is in flight, or else with the next acknowledgement, batched with
// what queued meanwhile. It returns link.ErrFull when the link's window
// is full: wait on Space and send again.
func (e *Endpoint) Send(to string, msg []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return ErrStopped
	}
	p := e.peerLocked(to)
	if err := p.out.Send(msg); err != nil {
		return err
	}
	// At once when nothing is in flight; otherwise with the next
	// acknowledgement, in larger frames.
	if p.out.InFlight() == 0 {
		e.flushLocked(p, time.Now())
	}
	return nil
}

// SendWait is Send that waits for window space, until ctx ends.
func (e *Endpoint) SendWait(ctx context.Context, to string, msg []byte) error {
	for {
		space := e.Space()
		err := e.Send(to, msg)
		if !errors.Is(err, link.ErrFull) {
			return err
		}
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.done:
			return ErrStopped
		}
	}
}

// Space returns a channel closed when acknowledgements next free window
// space.
func (e *Endpoint) Space() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.space
}

// flushLocked transmits what p's link has ready.
func (e *Endpoint) flushLocked(p *peer, now time.Time) {
	for _, f := range p.out.Ready(now) {
		a, err := wire.Encode(&wire.Frame{From: e.self, Frame: f})
		if err != nil {
			e.log.Error("endpoint: encoding a frame", slog.Any("error", err))
			continue
		}
		e.sys.Root.Send(p.target, a)
	}
}

// receive is the endpoint actor: frames and acknowledgements from peers.
func (e *Endpoint) receive(ctx actor.Context) {
	a, ok := ctx.Message().(*anypb.Any)
	if !ok {
		return
	}
	m, err := wire.Decode(a)
	if err != nil {
		e.log.Warn("endpoint: dropping what a peer sent", slog.Any("error", err))
		return
	}
	switch m := m.(type) {
	case *wire.Frame:
		e.mu.Lock()
		self := e.self
		if self == "" {
			e.mu.Unlock()
			return // not begun: the peer sends it again
		}
		p := e.peerLocked(m.From)
		msgs, ack := p.in.Receive(m.Frame)
		e.mu.Unlock()
		for _, msg := range msgs {
			e.deliver(m.From, msg)
		}
		if reply, err := wire.Encode(&wire.Ack{From: self, Ack: ack}); err == nil {
			ctx.Send(p.target, reply)
		}
	case *wire.Ack:
		e.mu.Lock()
		p := e.peerLocked(m.From)
		if err := p.out.Ack(m.Ack, time.Now()); err != nil {
			e.log.Error("endpoint: a peer acknowledged what was never sent", slog.String("peer", m.From), slog.Any("error", err))
		}
		e.flushLocked(p, time.Now())
		close(e.space)
		e.space = make(chan struct{})
		e.mu.Unlock()
	}
}

// reset makes the link to addr resend at once: its connection ended.
func (e *Endpoint) reset(addr string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.peers[addr]; p != nil && !e.stopped {
		p.out.Reset(time.Now())
		e.flushLocked(p, time.Now())
	}
}

// resend ticks every link, a few times per resend interval.
func (e *Endpoint) resend() {
	defer e.wg.Done()
	t := time.NewTicker(max(e.cfg.Resend/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.done:
			return
		case now := <-t.C:
			e.mu.Lock()
			for _, p := range e.peers {
				p.out.Tick(now)
				e.flushLocked(p, now)
			}
			e.mu.Unlock()
		}
	}
}

// Unacked returns the messages to member to not yet acknowledged.
func (e *Endpoint) Unacked(to string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.peers[to]; p != nil {
		n, _ := p.out.Unacked()
		return n
	}
	return 0
}

// Resends returns how many times the link to member to went back to
// resend what was not acknowledged.
func (e *Endpoint) Resends(to string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.peers[to]; p != nil {
		return p.out.Resends()
	}
	return 0
}

// Stop stops the endpoint: its actor, its resends and its subscription.
// What is not acknowledged is dropped.
func (e *Endpoint) Stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	e.mu.Unlock()
	close(e.done)
	e.wg.Wait()
	e.sys.EventStream.Unsubscribe(e.sub)
	_ = e.sys.Root.StopFuture(e.pid).Wait()
}
