package actors_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
)

// These benchmarks run the same actor code on four kinds of plumbing, in
// the same run, so that each figure reads as a ratio to bare Proto.Actor:
//
//   - bare: Proto.Actor as it comes (default mailbox, no middleware);
//   - middleware: one pass-through receiver and one pass-through sender
//     middleware, the cost of the obvious way to hook every message;
//   - actorsnap: participants of an actors.System, no snapshot running;
//   - actorsnap-snapshotting: the same while a goroutine takes snapshots
//     back to back;
//   - actorsnap-every-100ms: the same with a snapshot started every 100 ms
//     (none while one is running): what a periodic schedule costs, where
//     back to back pays for as many snapshots as fit.
//
// The actors only call ctx.Send, so the difference is the plumbing. Waits
// are on channels closed by the actors, bounded by benchDeadline.

// benchDeadline bounds every wait: a failure bound, not a timing assumption.
const benchDeadline = 2 * time.Minute

// benchMessages registers the benchmarks' message types.
var benchMessages = []actors.Option{
	actors.WithMessage[*benchPing]("bench.ping"),
	actors.WithMessage[*benchTransfer]("bench.transfer"),
	actors.WithMessage[*pipeData]("bench.pipe.data"),
	actors.WithMessage[*pipeAck]("bench.pipe.ack"),
	actors.WithMessage[*slowTick]("bench.pipe.tick"),
	actors.WithMessage[*bump]("bench.bump"),
	actors.WithMessage[*denseTransfer]("bench.dense.transfer"),
	actors.WithMessage[*tellerReport]("bench.teller.report"),
	actors.WithMessage[*tellerAck]("bench.teller.ack"),
}

// variant is one kind of plumbing.
type variant struct {
	name         string
	snap         bool          // participants of an actors.System
	snapshotting bool          // snapshots while the benchmark runs
	every        time.Duration // between the starts of two snapshots; zero: back to back
	props        []actor.PropsOption
	floor        floorKind       // bank only: rounds that bound what any snapshot costs
	opts         []actors.Option // appended to the System's options: a snapshot mode, say
	// counts makes a workload's actors (the dense bank's) count their
	// messages, on bare Proto.Actor: per channel, the least a snapshot
	// whose completion counts messages per channel pays (floorCounts);
	// per channel at the sender and in total at the receiver, the least
	// one that counts per receiver pays (floorSenderCounts); in total at
	// both ends, the least one that counts at all pays (floorTotalCounts).
	counts countKind
}

// countKind is what a floor row's actors count (variant.counts).
type countKind uint8

const (
	countNone     countKind = iota
	countChannels           // each channel, at both ends
	countSenders            // each channel at its sender; one total at the receiver
	countTotals             // one total at each end
)

func passReceive(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) { next(c, env) }
}

func passSend(next actor.SenderFunc) actor.SenderFunc {
	return func(c actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) { next(c, target, env) }
}

var variants = []variant{
	{name: "bare"},
	{name: "middleware", props: []actor.PropsOption{
		actor.WithReceiverMiddleware(passReceive),
		actor.WithSenderMiddleware(passSend),
	}},
	{name: "actorsnap", snap: true},
	{name: "actorsnap-snapshotting", snap: true, snapshotting: true},
	{name: "actorsnap-every-100ms", snap: true, snapshotting: true, every: 100 * time.Millisecond},
}

// rig runs actors on one variant's plumbing.
type rig struct {
	v     variant
	sys   *actor.ActorSystem
	snap  *actors.System // nil for bare Proto.Actor
	kinds map[string]func() actor.Actor
	pids  []*actor.PID
	shots *snapshotter
	times []time.Duration // each snapshot's latency, from startSnapshots to stopSnapshots
}

func newRig(b *testing.B, v variant) *rig {
	b.Helper()
	r := &rig{v: v, kinds: make(map[string]func() actor.Actor)}
	if v.snap {
		// Retain 1: back-to-back snapshots must not fill the memory store.
		// The timeout is raised so that a slow run (-race, 10000 actors)
		// measures a slow snapshot rather than aborting it.
		s, err := actors.NewSystem(slices.Concat([]actors.Option{actors.WithRetain(1), actors.WithTimeout(benchDeadline)}, benchMessages, v.opts)...)
		if err != nil {
			b.Fatal(err)
		}
		r.snap, r.sys = s, s.ActorSystem()
		return r
	}
	r.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	return r
}

func (r *rig) register(b *testing.B, kind string, producer func() actor.Actor) {
	b.Helper()
	if r.snap != nil {
		if err := r.snap.RegisterKind(kind, producer); err != nil {
			b.Fatal(err)
		}
		return
	}
	r.kinds[kind] = producer
}

func (r *rig) spawn(b *testing.B, kind, name string) *actor.PID {
	b.Helper()
	var pid *actor.PID
	var err error
	if r.snap != nil {
		pid, err = r.snap.Spawn(kind, name)
	} else {
		pid, err = r.sys.Root.SpawnNamed(actor.PropsFromProducer(r.kinds[kind], r.v.props...), name)
	}
	if err != nil {
		b.Fatal(err)
	}
	r.pids = append(r.pids, pid)
	return pid
}

func (r *rig) root() *actor.RootContext { return r.sys.Root }

// startSnapshots starts taking snapshots back to back if the variant says
// so, timing each (r.times, to be read once they stopped).
func (r *rig) startSnapshots() {
	if r.v.snapshotting {
		r.shots = r.timedRounds(r.v.every, nil)
	}
}

// timedRounds runs round every every (back to back if zero) until halted,
// each completed round's latency appended to r.times. A nil round is a
// snapshot; a floor round (floorRoundOn) is timed the same way.
func (r *rig) timedRounds(every time.Duration, round func(ctx context.Context, quit <-chan struct{}) error) *snapshotter {
	if round == nil {
		round = r.snapshotRound
	}
	return startRounds(every, func(ctx context.Context, quit <-chan struct{}) error {
		t0 := time.Now()
		err := round(ctx, quit)
		if err == nil {
			r.times = append(r.times, time.Since(t0))
		}
		return err
	})
}

// snapshotRound takes one snapshot: timedRounds' round when given none.
func (r *rig) snapshotRound(ctx context.Context, _ <-chan struct{}) error {
	_, err := r.snap.Snapshot(ctx)
	return err
}

// stopSnapshots stops the snapshots and reports their rate over the
// benchmark's elapsed time.
func (r *rig) stopSnapshots(b *testing.B) {
	b.Helper()
	if r.shots == nil {
		return
	}
	n, err := r.shots.halt()
	r.shots = nil
	if err != nil {
		b.Fatalf("snapshot %d: %v", n+1, err)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "snapshots/s")
}

func (r *rig) shutdown(b *testing.B) {
	b.Helper()
	if r.shots != nil {
		_, _ = r.shots.halt()
	}
	if r.snap != nil {
		ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
		defer cancel()
		if err := r.snap.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		return
	}
	futures := make([]*actor.Future, len(r.pids))
	for i, pid := range r.pids {
		futures[i] = r.sys.Root.StopFuture(pid)
	}
	for _, f := range futures {
		if err := f.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	r.sys.Shutdown()
}

// snapshotter takes snapshots until halted: back to back, or one started
// every interval (skipping a start while the last one still runs).
type snapshotter struct {
	stop atomic.Bool
	quit chan struct{}
	done chan struct{}
	n    int
	err  error
}

// startRounds calls take until halted: back to back, or once every
// interval (skipping a start while the last call still runs). take gets
// the halting signal for what it waits on.
func startRounds(every time.Duration, take func(ctx context.Context, quit <-chan struct{}) error) *snapshotter {
	s := &snapshotter{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
		defer cancel()
		var tick <-chan time.Time
		if every > 0 {
			t := time.NewTicker(every)
			defer t.Stop()
			tick = t.C
		}
		for !s.stop.Load() {
			if tick != nil {
				select {
				case <-tick:
				case <-s.quit:
					return
				}
			}
			if err := take(ctx, s.quit); err != nil {
				if !errors.Is(err, errHalted) {
					s.err = err
				}
				return
			}
			s.n++
		}
	}()
	return s
}

// errHalted ends a round cut short by halt.
var errHalted = errors.New("halted")

// halt waits for the snapshot in progress and returns how many completed.
func (s *snapshotter) halt() (int, error) {
	s.stop.Store(true)
	close(s.quit)
	<-s.done
	return s.n, s.err
}

func await(b *testing.B, ch <-chan struct{}, what string) {
	b.Helper()
	select {
	case <-ch:
	case <-time.After(benchDeadline):
		b.Fatalf("timed out waiting for %s", what)
	}
}

// ready is a set-up message; the actor acknowledges it on ack.
type ready struct {
	peers []*actor.PID
	ack   *sync.WaitGroup
}

// --- Ping-pong ---

// pingInFlight is the number of messages bouncing between the pair.
const pingInFlight = 100

// benchPing is sent again and again (one per actor, preallocated), so the
// allocations measured are the plumbing's.
type benchPing struct{ From int }

type pingStart struct {
	n    int // round trips
	done chan struct{}
}

// pinger keeps pingInFlight pings going to its peer and closes done when
// n have come back. With request, each ping is a Request.
type pinger struct {
	Sent, Recv int
	peer       *actor.PID `msgpack:"-"`
	start      *pingStart `msgpack:"-"`
	msg        benchPing  `msgpack:"-"`
	request    bool       `msgpack:"-"`
}

func (p *pinger) ping(ctx actor.Context) {
	p.Sent++
	if p.request {
		ctx.Request(p.peer, &p.msg)
	} else {
		ctx.Send(p.peer, &p.msg)
	}
}

func (p *pinger) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *ready:
		p.peer = m.peers[0]
		m.ack.Done()
	case *pingStart:
		p.start = m
		for p.Sent < min(pingInFlight, m.n) {
			p.ping(ctx)
		}
	case *benchPing:
		p.Recv++
		if p.Sent < p.start.n {
			p.ping(ctx)
		}
		if p.Recv == p.start.n {
			close(p.start.done)
		}
	}
}

// ponger sends every ping back, with respond as its answer.
type ponger struct {
	Recv    int
	peer    *actor.PID `msgpack:"-"`
	msg     benchPing  `msgpack:"-"`
	respond bool       `msgpack:"-"`
}

func (p *ponger) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *ready:
		p.peer = m.peers[0]
		m.ack.Done()
	case *benchPing:
		p.Recv++
		if p.respond {
			ctx.Respond(&p.msg)
		} else {
			ctx.Send(p.peer, &p.msg)
		}
	}
}

// BenchmarkPingPong bounces pingInFlight messages between one pair of
// actors. One op is one message delivered (either direction).
func BenchmarkPingPong(b *testing.B) {
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) { benchPingPong(b, v, false) })
	}
}

func benchPingPong(b *testing.B, v variant, request bool) {
	r := newRig(b, v)
	defer r.shutdown(b)
	r.register(b, "pinger", func() actor.Actor { return &pinger{msg: benchPing{From: 1}, request: request} })
	r.register(b, "ponger", func() actor.Actor { return &ponger{msg: benchPing{From: 2}, respond: request} })
	ping := r.spawn(b, "pinger", "pinger")
	pong := r.spawn(b, "ponger", "ponger")
	var ack sync.WaitGroup
	ack.Add(2)
	r.root().Send(ping, &ready{peers: []*actor.PID{pong}, ack: &ack})
	r.root().Send(pong, &ready{peers: []*actor.PID{ping}, ack: &ack})
	ack.Wait()

	start := &pingStart{n: max(1, b.N/2), done: make(chan struct{})}
	b.ReportAllocs()
	b.ResetTimer()
	r.startSnapshots()
	r.root().Send(ping, start)
	await(b, start.done, "ping-pong")
	b.StopTimer()
	r.stopSnapshots(b)
	b.ReportMetric(float64(2*start.n)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRequestResponse is BenchmarkPingPong with each ping a
// Request and each pong its Respond: one op is one message delivered,
// half of them answers. Beside bare Proto.Actor, the cost of the glue's
// books of requests (a number on each request, one on each answer).
func BenchmarkRequestResponse(b *testing.B) {
	for _, v := range []variant{variants[0], variants[2]} {
		b.Run(v.name, func(b *testing.B) { benchPingPong(b, v, true) })
	}
}

// --- Bank ---

// benchTransfer moves money between accounts.
type benchTransfer struct{ Amount int64 }

// kick makes an account start n chains of transfers.
type kick struct{ n int }

// pause makes an account report that it has arrived, then block until
// release is closed: the stop-the-world baselines. With log set, the
// account logs the transfers it receives from then on until its mark.
type pause struct {
	arrived *sync.WaitGroup
	release <-chan struct{}
	log     bool
}

// mark ends an account's log of a consistent stop-the-world: the account
// hands the transfers it logged since its pause to cut. Posted while every
// account is paused, it follows in each mailbox (one FIFO queue in
// Proto.Actor) exactly the transfers sent before the cut and not yet
// received: the messages in flight.
type mark struct {
	cut  *stwCut
	done *sync.WaitGroup
}

// stwCut collects the transfers in flight of a consistent stop-the-world,
// encoded as actorsnap records them.
type stwCut struct {
	mu       sync.Mutex
	messages [][]byte
	amount   int64
	err      error
}

// goal is a transfer count the benchmark waits for; with stop set, the
// accounts stop forwarding from then on, so that traffic drains.
type goal struct {
	at      int64
	stop    bool
	reached atomic.Bool
	done    chan struct{}
}

func newGoal(at int64, stop bool) *goal {
	return &goal{at: at, stop: stop, done: make(chan struct{})}
}

// load is a workload's traffic, shared by its actors: it counts what one
// op is (a transfer of the bank; a message, or a transfer, of the other
// workloads) and, at a stop goal, ends its chains: every message received
// either passes one on or ends its chain.
type load struct {
	transfers atomic.Int64 // received: transfers, or messages
	goal      atomic.Pointer[goal]
	chains    int64        // in flight while running: the bank's transfers, 2 per account; a flock's perKick per start
	ended     atomic.Int64 // chains that ended (not forwarded) after a stop goal
	drained   chan struct{}
	epochs    bool                  // floor-epoch: accounts look for a round at every transfer
	touch     atomic.Pointer[touch] // floor-epoch: the round in progress
}

func newLoad(chains int64) *load {
	return &load{chains: chains, drained: make(chan struct{})}
}

// arrive counts one received and reports whether its chain goes on: false
// once a stop goal is reached, the receiver then sending nothing on.
func (l *load) arrive() bool {
	n := l.transfers.Add(1)
	if g := l.goal.Load(); g != nil && n >= g.at {
		if !g.reached.Load() && g.reached.CompareAndSwap(false, true) {
			close(g.done)
		}
		if g.stop {
			if l.ended.Add(1) == l.chains {
				close(l.drained)
			}
			return false
		}
	}
	return true
}

// wait waits until n more have been received.
func (l *load) wait(b *testing.B, n int64) {
	b.Helper()
	g := newGoal(l.transfers.Load()+n, false)
	l.goal.Store(g)
	await(b, g.done, "traffic")
	l.goal.CompareAndSwap(g, nil)
}

// drain stops the traffic and waits until nothing is in flight, so that
// shutdown makes no dead letters.
func (l *load) drain(b *testing.B) {
	b.Helper()
	l.goal.Store(newGoal(0, true))
	await(b, l.drained, "the traffic to drain")
}

// account forwards a random part of every transfer it gets to a random
// peer, so the number of transfers in flight stays constant. Only Balance
// is exported: it is the state msgpack captures.
type account struct {
	Balance int64
	peers   []*actor.PID `msgpack:"-"`
	rng     *rand.Rand   `msgpack:"-"`
	load    *load        `msgpack:"-"`
	logging bool         `msgpack:"-"` // consistent stop-the-world: between pause and mark
	logged  [][]byte     `msgpack:"-"` // transfers received meanwhile, encoded
	amounts int64        `msgpack:"-"` // their sum
	logErr  error        `msgpack:"-"`
	seen    uint64       `msgpack:"-"` // the last floor round this account took part in
}

func (a *account) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *benchTransfer:
		if a.logging {
			a.log(m)
		}
		a.Balance += m.Amount
		l := a.load
		if l.epochs {
			if t := l.touch.Load(); t != nil && t.round != a.seen {
				a.seen = t.round
				t.visit(a)
			}
		}
		if l.arrive() {
			a.pay(ctx)
		}
	case *kick:
		for range m.n {
			a.pay(ctx)
		}
	case *ready:
		a.peers = m.peers
		m.ack.Done()
	case *pause:
		a.logging = m.log
		m.arrived.Done()
		<-m.release
	case *touch:
		m.visit(a)
	case *mark:
		m.cut.add(a.logged, a.amounts, a.logErr)
		a.logging, a.logged, a.amounts, a.logErr = false, nil, 0, nil
		m.done.Done()
	}
}

// log records a transfer in flight at a consistent stop-the-world's cut.
func (a *account) log(m *benchTransfer) {
	data, err := msgpack.Marshal(m)
	if err != nil {
		a.logErr = err
		return
	}
	a.logged = append(a.logged, data)
	a.amounts += m.Amount
}

func (c *stwCut) add(messages [][]byte, amount int64, err error) {
	c.mu.Lock()
	c.messages = append(c.messages, messages...)
	c.amount += amount
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

func (a *account) pay(ctx actor.Context) {
	amount := int64(0)
	if a.Balance > 0 {
		amount = a.rng.Int64N(a.Balance + 1)
	}
	a.Balance -= amount
	ctx.Send(a.peers[a.rng.IntN(len(a.peers))], &benchTransfer{Amount: amount})
}

// bank is n accounts on a ring plus random chords.
type bank struct {
	r      *rig
	pids   []*actor.PID
	accts  []*account
	load   *load
	rounds uint64 // floor rounds run
}

const chainsPerAccount = 2

// newBank spawns n accounts with their peers set; traffic starts at kick.
func newBank(b *testing.B, r *rig, n int, seed uint64) *bank {
	b.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	bk := &bank{r: r, load: newLoad(int64(chainsPerAccount * n))}
	// Spawns are sequential, so a plain append is safe.
	r.register(b, "account", func() actor.Actor {
		a := &account{Balance: 1000, rng: rand.New(rand.NewPCG(rng.Uint64(), 1)), load: bk.load}
		bk.accts = append(bk.accts, a)
		return a
	})
	for i := range n {
		bk.pids = append(bk.pids, r.spawn(b, "account", fmt.Sprintf("acct-%05d", i)))
	}
	// Peers first, acknowledged, then the kicks: an account must know its
	// peers before its first transfer (in actorsnap, root messages and
	// transfers are in different per-sender queues).
	var ack sync.WaitGroup
	ack.Add(n)
	for i, pid := range bk.pids {
		ps := []*actor.PID{bk.pids[(i+1)%n], bk.pids[rng.IntN(n)], bk.pids[rng.IntN(n)]}
		r.root().Send(pid, &ready{peers: ps, ack: &ack})
	}
	ack.Wait()
	return bk
}

func (bk *bank) kick() {
	for _, pid := range bk.pids {
		bk.r.root().Send(pid, &kick{n: chainsPerAccount})
	}
}

// waitTransfers waits until the bank has received n more transfers.
func (bk *bank) waitTransfers(b *testing.B, n int64) {
	b.Helper()
	bk.load.wait(b, n)
}

// drain stops the traffic and waits until no transfer is in flight.
func (bk *bank) drain(b *testing.B) {
	b.Helper()
	bk.load.drain(b)
}

// BenchmarkBank runs 1000 accounts passing transfers around. One op is one
// transfer delivered.
func BenchmarkBank(b *testing.B) {
	const n = 1000
	for _, v := range slices.Concat(variants, floors) {
		b.Run(v.name, func(b *testing.B) {
			r := newRig(b, v)
			defer r.shutdown(b)
			bk := newBank(b, r, n, 1)
			g := newGoal(int64(b.N), true)
			bk.load.goal.Store(g)
			b.ReportAllocs()
			b.ResetTimer()
			r.startSnapshots()
			bk.startFloor()
			bk.kick()
			await(b, g.done, "transfers")
			b.StopTimer()
			r.stopSnapshots(b)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transfers/s")
			await(b, bk.load.drained, "the bank to drain")
		})
	}
}

// --- Floors ---

// floorKind names rounds that do, back to back on the bank, the least any
// snapshot of it must do, and nothing else: no markers, no channel state,
// no assembly, no store. They bound (d)/(c) from above for the bank.
type floorKind uint8

const (
	noFloor floorKind = iota
	// floorTouch sends every account one message per round, as a
	// broadcast start does, and waits until all have taken it.
	floorTouch
	// floorCapture is floorTouch plus each account encoding its state
	// (msgpack) on its goroutine: a broadcast snapshot's floor.
	floorCapture
	// floorEpoch sends nothing: an account sees the round at its next
	// transfer (one atomic load per transfer) and encodes its state: the
	// floor of any snapshot that captures every actor's state, whatever
	// carries the start.
	floorEpoch
	// floorCaptureDrain is floorCapture, then, once every state is
	// encoded, floorTouch: the transfers queued at the last capture are
	// taken before the second round's message. It is the latency floor of
	// a snapshot that records the messages in flight at their receivers,
	// which must wait, after the last state, for the messages sent before
	// it to arrive: one more turn of every account that has any.
	floorCaptureDrain
	// floorCaptureInFlight is floorCapture with the actors also encoding,
	// between them, as many messages as the workload keeps in flight
	// (load.chains), each its share: a workload holds that many in flight
	// at all times, and a consistent cut records every one of them as
	// channel state. The least a snapshot of the workload encodes,
	// without waiting for the messages actually in flight; on the bank,
	// chainsPerAccount transfers per account.
	floorCaptureInFlight
	// floorCollect is floorCaptureInFlight with each actor's share kept
	// and handed on: every actor sends one record (its state, its share
	// of the messages in flight, two counters) to a collector that keeps
	// every record of the round and sums the counters, and the round ends
	// when the collector has them all. The least a snapshot must pay
	// that gathers one record per participant at one place, as a
	// coordinator does, and decides completion from their counters.
	floorCollect
	// floorCollectBulk is floorCollect with the records handed over in
	// bulk: each actor appends its record to one of a few shards under
	// its lock, and the collector, once every actor is done, reads them
	// all and sums their counters. The least a design pays that gathers
	// the records without a message per participant.
	floorCollectBulk
)

var floors = []variant{
	{name: "floor-touch", snap: true, floor: floorTouch},
	{name: "floor-capture", snap: true, floor: floorCapture},
	{name: "floor-epoch", snap: true, floor: floorEpoch},
}

// touch is one floor round.
type touch struct {
	round    uint64
	capture  bool
	actors   int64        // actors taking part
	inFlight int64        // messages the actors encode between them besides their states
	taken    atomic.Int64 // actors that have begun their part
	left     atomic.Int64 // actors yet to finish their part
	done     chan struct{}
	// records, for floorCollect, takes each actor's record to the
	// collector (wait); nil for the other floors.
	records chan floorRecord
	// shards, for floorCollectBulk, hold the records handed over.
	shards []floorShard
}

// floorShard is a share of a floorCollectBulk round's records.
type floorShard struct {
	mu   sync.Mutex
	recs []floorRecord
	_    [64]byte // one shard a cache line, apart from the next
}

// floorSums keeps the last floorCollect round's sums, so that they are
// computed.
var floorSums atomic.Uint64

// floorRecord is one actor's part of a round that collects: its state
// and its share of the messages in flight, encoded one after the other,
// and two counters.
type floorRecord struct {
	data           []byte
	messages       int
	sent, received uint64
}

func newTouch(round uint64, capture bool, n int) *touch {
	t := &touch{round: round, capture: capture, actors: int64(n), done: make(chan struct{})}
	t.left.Store(int64(n))
	return t
}

// visit is an actor taking part in the round, on its goroutine; state is
// the actor, encoded when the round captures. The actor also encodes its
// share of the round's inFlight messages: the k-th actor to take part
// encodes ⌊inFlight/actors⌋ of them, one more if k < inFlight mod actors,
// so that the shares add up to inFlight.
func (t *touch) visit(state any) {
	keep := t.records != nil || t.shards != nil
	var k, share int64
	if t.inFlight > 0 || keep {
		k = t.taken.Add(1) - 1
	}
	if t.inFlight > 0 {
		share = t.inFlight / t.actors
		if k < t.inFlight%t.actors {
			share++
		}
	}
	if keep {
		t.keep(k, state, share)
		return
	}
	if t.capture {
		if _, err := msgpack.Marshal(state); err != nil {
			panic(err)
		}
	}
	for i := range share {
		if _, err := msgpack.Marshal(&benchTransfer{Amount: i}); err != nil {
			panic(err)
		}
	}
	if t.left.Add(-1) == 0 {
		close(t.done)
	}
}

// keep is visit for the floors that collect (floorCollect,
// floorCollectBulk): the k-th actor encodes its state and its share of
// the messages in flight into one buffer, as a record report holds them,
// and hands the record over.
func (t *touch) keep(k int64, state any, share int64) {
	var buf bytes.Buffer
	buf.Grow(64)
	enc := msgpack.GetEncoder()
	enc.Reset(&buf)
	if err := enc.Encode(state); err != nil {
		panic(err)
	}
	for i := range share {
		if err := enc.Encode(&benchTransfer{Amount: i}); err != nil {
			panic(err)
		}
	}
	msgpack.PutEncoder(enc)
	rec := floorRecord{data: buf.Bytes(), messages: int(share), sent: uint64(share), received: uint64(k)}
	if t.records != nil {
		t.records <- rec
		return
	}
	sh := &t.shards[k%int64(len(t.shards))]
	sh.mu.Lock()
	sh.recs = append(sh.recs, rec)
	sh.mu.Unlock()
	if t.left.Add(-1) == 0 {
		close(t.done)
	}
}

// wait waits for every actor of the round to take part, or for quit.
// With records (floorCollect) it collects them: it keeps each until the
// round is over and sums their counters.
func (t *touch) wait(quit <-chan struct{}) error {
	if t.records != nil {
		kept := make([]floorRecord, 0, t.actors)
		var sent, received uint64
		deadline := time.After(benchDeadline)
		for int64(len(kept)) < t.actors {
			select {
			case rec := <-t.records:
				kept = append(kept, rec)
				sent += rec.sent
				received += rec.received
			case <-quit:
				return errHalted
			case <-deadline:
				return errors.New("floor round timed out")
			}
		}
		floorSums.Store(sent ^ received) // what a completion check reads
		return nil
	}
	select {
	case <-t.done:
		var sent, received uint64
		for i := range t.shards {
			for _, rec := range t.shards[i].recs {
				sent += rec.sent
				received += rec.received
			}
		}
		floorSums.Store(sent ^ received)
		return nil
	case <-quit:
		return errHalted
	case <-time.After(benchDeadline):
		return errors.New("floor round timed out")
	}
}

// startFloor runs the variant's floor rounds back to back.
func (bk *bank) startFloor() {
	kind := bk.r.v.floor
	if kind == noFloor {
		return
	}
	bk.load.epochs = kind == floorEpoch
	bk.r.shots = startRounds(0, func(_ context.Context, quit <-chan struct{}) error {
		return bk.floorRound(kind, quit)
	})
}

// floorRound runs one floor round of the given kind and waits for it,
// or for quit.
func (bk *bank) floorRound(kind floorKind, quit <-chan struct{}) error {
	if kind != floorEpoch {
		return floorRoundOn(bk.r, bk.pids, kind, bk.load.chains, &bk.rounds, quit)
	}
	bk.rounds++
	t := newTouch(bk.rounds, true, len(bk.pids))
	bk.load.touch.Store(t)
	return t.wait(quit)
}

// floorRoundOn runs one round of a floor that a message starts
// (floorTouch, floorCapture, floorCaptureDrain, floorCaptureInFlight)
// over the actors pids, which take part at a *touch, and waits for it, or
// for quit. inFlight is the number of messages the workload keeps in
// flight (its load.chains), which floorCaptureInFlight's actors encode
// between them. rounds counts the rounds run.
func floorRoundOn(r *rig, pids []*actor.PID, kind floorKind, inFlight int64, rounds *uint64, quit <-chan struct{}) error {
	if kind == floorCaptureDrain {
		if err := floorRoundOn(r, pids, floorCapture, inFlight, rounds, quit); err != nil {
			return err
		}
		kind = floorTouch
	}
	*rounds++
	t := newTouch(*rounds, kind != floorTouch, len(pids))
	if kind == floorCaptureInFlight || kind == floorCollect || kind == floorCollectBulk {
		t.inFlight = inFlight
	}
	switch kind {
	case floorCollect:
		t.records = make(chan floorRecord, len(pids))
	case floorCollectBulk:
		t.shards = make([]floorShard, 2*runtime.GOMAXPROCS(0))
	}
	for _, pid := range pids {
		r.root().Send(pid, t)
	}
	return t.wait(quit)
}

// --- Snapshot latency ---

// BenchmarkSnapshotLatency takes one snapshot per op of a bank under load.
// actorsnap is a consistent snapshot of a running actors.System;
// stop-the-world is the naive alternative on bare Proto.Actor, as
// consistent: pause every actor, encode every actor's state, mark every
// mailbox, release them, and collect what each receives before its mark
// (the transfers in flight). stop-the-world-states-only leaves out the
// marks, so its cut loses the money in flight: a lower bound on what
// stopping the world costs. floor-capture is the least a snapshot started
// by broadcast must do (floorCapture): a message to every account and its
// state encoded, on the actorsnap plumbing with no snapshot;
// floor-capture-drain adds the wait for the transfers in flight at the
// last capture (floorCaptureDrain), the least a snapshot that records
// them at their receivers waits; floor-capture-in-flight encodes them
// besides the states (floorCaptureInFlight), the least a snapshot of the
// bank encodes; floor-collect also hands each account's encodings and two
// counters to one collector that keeps them until the round ends and sums
// the counters (floorCollect), the least a snapshot pays that gathers
// its records in one place to store them whole; floor-collect-bulk hands
// them over in shards rather than a message each (floorCollectBulk).
//
// Besides ns/op (mean time from initiation to completion) it reports the
// median and the worst snapshot, the bank's transfers/s during the
// snapshots, and throughput-ratio: that rate over the rate of the same bank
// with no snapshot, measured just before. Back to back, a quicker method
// takes more snapshots in the same time, so lost-ms/snapshot compares the
// methods per snapshot: the throughput lost, in milliseconds of the bank's
// full rate.
//
// At 100,000 accounts only actorsnap and floor-capture run: one
// stop-the-world of them, consistent or states only, took 26 s on two
// cores, too long for a run of every benchmark once.
func BenchmarkSnapshotLatency(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("actors=%d", n), func(b *testing.B) {
			for _, m := range workloadModes {
				b.Run("actorsnap/mode="+m.name, func(b *testing.B) {
					benchLatency(b, n, inMode(variants[2], m), func(b *testing.B, bk *bank) {
						if _, err := bk.r.snap.Snapshot(context.Background()); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
			if n <= stopTheWorldMax {
				b.Run("stop-the-world", func(b *testing.B) {
					benchLatency(b, n, variants[0], stopTheWorld)
				})
				b.Run("stop-the-world-states-only", func(b *testing.B) {
					benchLatency(b, n, variants[0], stopTheWorldStates)
				})
			}
			for _, f := range []struct {
				name string
				kind floorKind
			}{{"floor-capture", floorCapture}, {"floor-capture-drain", floorCaptureDrain}, {"floor-capture-in-flight", floorCaptureInFlight}, {"floor-collect", floorCollect}, {"floor-collect-bulk", floorCollectBulk}} {
				b.Run(f.name, func(b *testing.B) {
					benchLatency(b, n, variants[2], func(b *testing.B, bk *bank) {
						if err := bk.floorRound(f.kind, nil); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
		})
	}
}

// BenchmarkSnapshotIdle takes snapshots back to back of a bank whose
// traffic has drained: what a snapshot costs by itself, per participant,
// with every participant's memory cold (its mailbox, its Process, its
// channels are touched once per snapshot).
func BenchmarkSnapshotIdle(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, m := range workloadModes {
			b.Run(fmt.Sprintf("actors=%d/mode=%s", n, m.name), func(b *testing.B) {
				r := newRig(b, inMode(variants[2], m))
				defer r.shutdown(b)
				bk := newBank(b, r, n, 1)
				bk.kick()
				bk.waitTransfers(b, int64(20*n))
				bk.drain(b)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := r.snap.Snapshot(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/participant")
			})
		}
	}
}

// stopTheWorldMax is the most accounts BenchmarkSnapshotLatency stops
// the world of.
const stopTheWorldMax = 10000

// stopTheWorld is the consistent stop-the-world snapshot: it pauses every
// account on a shared barrier, encodes each account's state from this
// goroutine while they are all blocked, posts a mark to each, releases
// them, and waits for the marks: each account hands over the transfers it
// received between its pause and its mark, the transfers in flight at the
// cut. It checks the cut: balances plus transfers in flight are the bank's
// total.
func stopTheWorld(b *testing.B, bk *bank) {
	states, release := pauseTheWorld(b, bk, true)
	cut := &stwCut{}
	var done sync.WaitGroup
	done.Add(len(bk.pids))
	m := &mark{cut: cut, done: &done}
	for _, pid := range bk.pids {
		bk.r.root().Send(pid, m)
	}
	close(release)
	done.Wait()
	if cut.err != nil {
		b.Fatal(cut.err)
	}
	total := cut.amount
	for _, st := range states {
		var a struct{ Balance int64 }
		if err := msgpack.Unmarshal(st, &a); err != nil {
			b.Fatal(err)
		}
		total += a.Balance
	}
	if want := int64(1000 * len(bk.pids)); total != want {
		b.Fatalf("stop-the-world cut holds %d, want %d", total, want)
	}
}

// stopTheWorldStates is stop-the-world without the messages in flight:
// pause, encode the states, release. Its cut loses the money in flight; it
// is a lower bound on what stopping the world costs.
func stopTheWorldStates(b *testing.B, bk *bank) {
	_, release := pauseTheWorld(b, bk, false)
	close(release)
}

// pauseTheWorld pauses every account (logging from then on, if log is set),
// waits until all are paused and encodes their states. The accounts stay
// paused until the caller closes release.
func pauseTheWorld(b *testing.B, bk *bank, log bool) ([][]byte, chan struct{}) {
	var arrived sync.WaitGroup
	arrived.Add(len(bk.pids))
	release := make(chan struct{})
	p := &pause{arrived: &arrived, release: release, log: log}
	for _, pid := range bk.pids {
		bk.r.root().Send(pid, p)
	}
	arrived.Wait()
	states := make([][]byte, len(bk.accts))
	for i, a := range bk.accts {
		var err error
		if states[i], err = msgpack.Marshal(a); err != nil {
			close(release)
			b.Fatal(err)
		}
	}
	return states, release
}

// percentile returns the q quantile (0 ≤ q ≤ 1) of sorted: the element at
// ⌊q·n⌋, the last for q = 1, so that the median is sorted[n/2].
func percentile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// ms is d in milliseconds, the unit of the latency metrics.
func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// reportLatency sorts times (snapshot latencies) and reports their median
// and 99th percentile as p50-ms and p99-ms; nothing if there are none.
func reportLatency(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	b.ReportMetric(ms(percentile(times, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(times, 0.99)), "p99-ms")
}

func benchLatency(b *testing.B, n int, v variant, snapshot func(*testing.B, *bank)) {
	r := newRig(b, v)
	defer r.shutdown(b)
	bk := newBank(b, r, n, 1)
	defer bk.drain(b)
	bk.kick()
	// 50 transfers per account, at least 500,000 and at most 1,000,000 (10
	// per account at 100,000, which keeps a run of every benchmark short).
	window := int64(min(max(500_000, 50*n), 1_000_000))
	bk.waitTransfers(b, window) // warm up
	t0 := time.Now()
	bk.waitTransfers(b, window)
	base := float64(window) / time.Since(t0).Seconds()

	b.ReportAllocs()
	var times []time.Duration
	var c0 int64
	var start time.Time
	for b.Loop() {
		if times == nil { // the timer starts at the first b.Loop
			c0, start = bk.load.transfers.Load(), time.Now()
		}
		s := time.Now()
		snapshot(b, bk)
		times = append(times, time.Since(s))
	}
	span := time.Since(start)
	rate := float64(bk.load.transfers.Load()-c0) / span.Seconds()
	reportLatency(b, times)
	b.ReportMetric(ms(percentile(times, 1)), "max-ms")
	b.ReportMetric(rate, "transfers/s")
	b.ReportMetric(base, "base-transfers/s")
	b.ReportMetric(rate/base, "throughput-ratio")
	b.ReportMetric((1-rate/base)*span.Seconds()*1000/float64(b.N), "lost-ms/snapshot")
}
