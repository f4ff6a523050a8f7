package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/actorsnap/actorsnap/cluster/link"
	"github.com/actorsnap/actorsnap/cluster/wire"
)

// EndpointName is the name of the endpoint actor on every member: it
// receives the peers' frames.
const EndpointName = "actorsnap-endpoint"

// AckName is the name of the actor on every member that receives the
// peers' acknowledgements. It is apart from the endpoint actor so that an
// acknowledgement never waits behind the delivery of frames: a member
// busy delivering what its peers send still sends on at once as they
// acknowledge.
const AckName = "actorsnap-endpoint-ack"

// ErrStopped is returned by Send on a stopped Endpoint.
var ErrStopped = errors.New("endpoint: stopped")

// Endpoint is a member's end of its links to its peers.
type Endpoint struct {
	sys     *actor.ActorSystem
	cfg     link.Config
	deliver func(from string, msg []byte)
	log     *slog.Logger
	stopped atomic.Bool

	mu    sync.RWMutex
	self  string
	peers map[string]*peer

	pids []*actor.PID
	sub  *eventstream.Subscription
	done chan struct{}
	wg   sync.WaitGroup
}

// peer is the link to one peer member, both ways.
type peer struct {
	frames *actor.PID // the peer's endpoint actor
	acks   *actor.PID // the peer's acknowledgement actor

	mu    sync.Mutex    // out and space: the sending half
	out   *link.Sender  //
	space chan struct{} // closed and replaced when acknowledgements free window space

	in link.Receiver // the receiving half, the endpoint actor's alone
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

// Spawn spawns the endpoint's actors before remote starts, as Start does
// otherwise; Begin starts it once remote is up. Peers may send to a
// member as soon as its remote listens (a member restarting, say), and
// Proto.Actor delivers to an actor being spawned before its mailbox can
// run it (a nil pointer in its mailbox): actors spawned first have none
// of that. What comes before Begin is dropped, and sent again.
func Spawn(sys *actor.ActorSystem, cfg link.Config, deliver func(from string, msg []byte)) (*Endpoint, error) {
	if _, err := link.NewSender(cfg); err != nil {
		return nil, err
	}
	e := &Endpoint{
		sys: sys, cfg: cfg, deliver: deliver, log: sys.Logger(),
		peers: make(map[string]*peer), done: make(chan struct{}),
	}
	for _, name := range []string{EndpointName, AckName} {
		pid, err := sys.Root.SpawnNamed(actor.PropsFromFunc(e.receive), name)
		if err != nil {
			e.stopActors()
			return nil, fmt.Errorf("endpoint: %w", err)
		}
		e.pids = append(e.pids, pid)
	}
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

// peer returns the link to member addr, made on first use.
func (e *Endpoint) peer(addr string) *peer {
	e.mu.RLock()
	p := e.peers[addr]
	e.mu.RUnlock()
	if p != nil {
		return p
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if p = e.peers[addr]; p == nil {
		out, _ := link.NewSender(e.cfg) // checked in Spawn
		p = &peer{frames: actor.NewPID(addr, EndpointName), acks: actor.NewPID(addr, AckName), out: out, space: make(chan struct{})}
		e.peers[addr] = p
	}
	return p
}

// Send queues msg for member to: it goes at once if nothing to that
// member is in flight or a frame's worth is queued, or else with the
// next acknowledgement, batched with what queued meanwhile. It returns
// link.ErrFull when the link's window is full: wait on Space and send
// again.
func (e *Endpoint) Send(to string, msg []byte) error {
	if e.stopped.Load() {
		return ErrStopped
	}
	p := e.peer(to)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.out.Send(msg); err != nil {
		return err
	}
	if p.out.Due() {
		e.flushLocked(p, time.Now())
	}
	return nil
}

// SendWait is Send that waits for window space, until ctx ends.
func (e *Endpoint) SendWait(ctx context.Context, to string, msg []byte) error {
	for {
		space := e.Space(to)
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
// space on the link to member to.
func (e *Endpoint) Space(to string) <-chan struct{} {
	p := e.peer(to)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.space
}

// flushLocked transmits what p's link has ready. The caller holds p.mu,
// which keeps the frames of one link in order into remote.
func (e *Endpoint) flushLocked(p *peer, now time.Time) {
	e.mu.RLock()
	self := e.self
	e.mu.RUnlock()
	for _, f := range p.out.Ready(now) {
		a, err := wire.Encode(&wire.Frame{From: self, Frame: f})
		if err != nil {
			e.log.Error("endpoint: encoding a frame", slog.Any("error", err))
			continue
		}
		e.sys.Root.Send(p.frames, a)
	}
}

// receive is the endpoint actor, and the acknowledgement actor: frames
// and acknowledgements from peers.
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
		e.mu.RLock()
		self := e.self
		e.mu.RUnlock()
		if self == "" {
			return // not begun: the peer sends it again
		}
		p := e.peer(m.From)
		msgs, ack := p.in.Receive(m.Frame)
		for _, msg := range msgs {
			e.deliver(m.From, msg)
		}
		if reply, err := wire.Encode(&wire.Ack{From: self, Ack: ack}); err == nil {
			ctx.Send(p.acks, reply)
		}
	case *wire.Ack:
		p := e.peer(m.From)
		p.mu.Lock()
		if err := p.out.Ack(m.Ack, time.Now()); err != nil {
			e.log.Error("endpoint: a peer acknowledged what was never sent", slog.String("peer", m.From), slog.Any("error", err))
		}
		e.flushLocked(p, time.Now())
		close(p.space)
		p.space = make(chan struct{})
		p.mu.Unlock()
	}
}

// reset makes the link to addr resend at once: its connection ended.
func (e *Endpoint) reset(addr string) {
	if e.stopped.Load() {
		return
	}
	e.mu.RLock()
	p := e.peers[addr]
	e.mu.RUnlock()
	if p != nil {
		p.mu.Lock()
		p.out.Reset(time.Now())
		e.flushLocked(p, time.Now())
		p.mu.Unlock()
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
			e.mu.RLock()
			peers := make([]*peer, 0, len(e.peers))
			for _, p := range e.peers {
				peers = append(peers, p)
			}
			e.mu.RUnlock()
			for _, p := range peers {
				p.mu.Lock()
				p.out.Tick(now)
				e.flushLocked(p, now)
				p.mu.Unlock()
			}
		}
	}
}

// Unacked returns the messages to member to not yet acknowledged.
func (e *Endpoint) Unacked(to string) int {
	e.mu.RLock()
	p := e.peers[to]
	e.mu.RUnlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n, _ := p.out.Unacked()
	return n
}

// Resends returns how many times the link to member to went back to
// resend what was not acknowledged.
func (e *Endpoint) Resends(to string) int {
	e.mu.RLock()
	p := e.peers[to]
	e.mu.RUnlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Resends()
}

// Stop stops the endpoint: its actors, its resends and its subscription.
// What is not acknowledged is dropped.
func (e *Endpoint) Stop() {
	if e.stopped.Swap(true) {
		return
	}
	close(e.done)
	e.wg.Wait()
	e.sys.EventStream.Unsubscribe(e.sub)
	e.stopActors()
}

func (e *Endpoint) stopActors() {
	for _, pid := range e.pids {
		_ = e.sys.Root.StopFuture(pid).Wait()
	}
}
