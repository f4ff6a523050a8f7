package actors_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

// Workloads beside the bank, each a shape of traffic that the bank's ring
// does not have, run on the rig's plumbing (bench_test.go) in every
// snapshot mode of workloadModes:
//
//   - all-to-all: every actor sends to every other, so that a snapshot
//     has N·(N−1) channels in use;
//   - fan-in: many senders request from one receiver, which answers each:
//     one participant with a thousand incoming channels;
//   - chain: one message passed around a ring, so that throughput is
//     bound by the latency of one delivery;
//   - dense bank: transfers between random pairs of accounts, each
//     reported to one teller: channels between ever more pairs as it runs,
//     and a hot spot.
//
// As in the bank, every message received either passes exactly one on or,
// once the benchmark's goal is reached, ends its chain (load.arrive), so
// that the number in flight is constant while running and the traffic
// drains before shutdown. The actors only call ctx.Send, ctx.Request and
// ctx.Respond, so the difference between the rows is the plumbing.

// benchMode is a snapshot mode and how snapshots start in it.
type benchMode struct {
	name string
	opts []actors.Option
}

// workloadModes are the snapshot modes every workload's actorsnap rows
// run in: each mode, and the epoch mode with lazy starts, and counting
// in sums, too.
var workloadModes = []benchMode{
	{"unaligned", []actors.Option{actors.WithMode(snapshot.Unaligned)}},
	{"aligned", []actors.Option{actors.WithMode(snapshot.Aligned)}},
	{"epoch", []actors.Option{actors.WithMode(snapshot.Epochs), actors.WithCounting(actors.PerChannel)}},
	{"epoch-lazy", []actors.Option{actors.WithMode(snapshot.Epochs), actors.WithCounting(actors.PerChannel), actors.WithInitiation(actors.Lazy)}},
	{"epoch-sums", []actors.Option{actors.WithMode(snapshot.Epochs), actors.WithCounting(actors.InSums)}},
}

// The workloads' sizes.
const (
	allToAllActors   = 120
	allToAllInFlight = 8 // messages in flight per actor
	fanInSenders     = 1000
	fanInOutstanding = 4 // requests each sender keeps outstanding
	chainLength      = 100
	denseAccounts    = 1000
	accountOpening   = 1000 // every account's opening balance, as in newBank
	// shapeWarmup is what BenchmarkSnapshotLatencyByShape lets pass (a
	// transfer, or a message) before its snapshots: enough that every
	// channel of all-to-all has been used.
	shapeWarmup = 200_000
)

// workload is an actor program spawned on a rig, waiting for kick.
type workload interface {
	traffic() *load // counts one op at each arrive, and drains
	kick()          // starts the traffic
	// floorRound runs a round of a floor that a message starts
	// (floorRoundOn) over every actor of the workload, each of which
	// takes part at a *touch; floorCaptureInFlight's actors encode
	// between them as many messages as the workload keeps in flight.
	floorRound(kind floorKind, quit <-chan struct{}) error
}

func (bk *bank) traffic() *load { return bk.load }

// flock is a workload's actors and their traffic. The actors keep a
// pointer to it and read it from their first message on: its fields are
// all set before the kick, which those reads follow (through the kick,
// and every message after it), so no set-up message is needed.
type flock struct {
	r       *rig
	pids    []*actor.PID // the actors that pick whom to send to among them
	all     []*actor.PID // every actor spawned
	load    *load
	starts  []*actor.PID // the actors kicked, each starting perKick chains
	perKick int
	rounds  uint64 // floor rounds run
}

func (f *flock) traffic() *load { return f.load }

func (f *flock) floorRound(kind floorKind, quit <-chan struct{}) error {
	return floorRoundOn(f.r, f.all, kind, f.load.chains, &f.rounds, quit)
}

func (f *flock) kick() {
	for _, pid := range f.starts {
		f.r.root().Send(pid, &kick{n: f.perKick})
	}
}

// spawn spawns n actors of kind, named kind-i, the i-th made by
// produce(i): spawns are sequential and make their actor once, so the
// count of those made is the index.
func (f *flock) spawn(b *testing.B, kind string, n int, produce func(i int) actor.Actor) []*actor.PID {
	b.Helper()
	made := 0
	f.r.register(b, kind, func() actor.Actor {
		a := produce(made)
		made++
		return a
	})
	pids := make([]*actor.PID, n)
	for i := range n {
		pids[i] = f.r.spawn(b, kind, fmt.Sprintf("%s-%05d", kind, i))
	}
	f.all = append(f.all, pids...)
	return pids
}

// run makes kick start perKick chains at each of starts.
func (f *flock) run(starts []*actor.PID, perKick int) {
	f.starts, f.perKick = starts, perKick
	f.load = newLoad(int64(len(starts) * perKick))
}

// --- All-to-all ---

// peer sends, for each message it receives, one to the next of every other
// actor in a turn it shuffles anew each round (seeded by its index): every
// channel is used once per N−1 messages the sender sends. A fixed turn,
// the same for every round, let the traffic fall into convoys where each
// mailbox run took many messages at once, and a run stayed in whichever
// of the two regimes it fell into (bare Proto.Actor 3.2–3.8 M msgs/s in
// one, 5.4–6.5 M in the other).
type peer struct {
	Sent, Recv int64
	Next       int        // how far along its turn the next receiver is
	self       int        `msgpack:"-"`
	f          *flock     `msgpack:"-"`
	msg        benchPing  `msgpack:"-"`
	order      []int      `msgpack:"-"` // this round's turn: the others' indexes
	rng        *rand.Rand `msgpack:"-"` // shuffles order
}

func (p *peer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *benchPing:
		p.Recv++
		if p.f.load.arrive() {
			p.send(ctx)
		}
	case *kick:
		for range m.n {
			p.send(ctx)
		}
	case *touch:
		m.visit(p)
	}
}

func (p *peer) send(ctx actor.Context) {
	n := len(p.f.pids)
	if p.Next == 0 {
		if p.order == nil {
			p.order = make([]int, n-1)
			for i := range p.order {
				p.order[i] = (p.self + 1 + i) % n
			}
			p.rng = rand.New(rand.NewPCG(uint64(p.self), 17))
		}
		p.rng.Shuffle(len(p.order), func(i, j int) { p.order[i], p.order[j] = p.order[j], p.order[i] })
	}
	to := p.f.pids[p.order[p.Next]]
	p.Next = (p.Next + 1) % (n - 1)
	p.Sent++
	ctx.Send(to, &p.msg)
}

// newAllToAll spawns n peers, allToAllInFlight messages in flight each.
func newAllToAll(b *testing.B, r *rig, n int) *flock {
	f := &flock{r: r}
	f.pids = f.spawn(b, "peer", n, func(i int) actor.Actor {
		return &peer{self: i, f: f, msg: benchPing{From: i}}
	})
	f.run(f.pids, allToAllInFlight)
	return f
}

// BenchmarkAllToAll runs allToAllActors actors each sending to every other.
// One op is one message delivered.
func BenchmarkAllToAll(b *testing.B) {
	benchWorkload(b, "msgs", func(b *testing.B, r *rig) workload { return newAllToAll(b, r, allToAllActors) })
}

// --- Fan-in ---

// fanSender keeps its requests outstanding at the receiver: one more for
// each answer.
type fanSender struct {
	Sent, Answers int64
	to            *actor.PID `msgpack:"-"`
	f             *flock     `msgpack:"-"`
	msg           benchPing  `msgpack:"-"`
}

func (s *fanSender) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *benchPing:
		s.Answers++
		if s.f.load.arrive() {
			s.request(ctx)
		}
	case *kick:
		for range m.n {
			s.request(ctx)
		}
	case *touch:
		m.visit(s)
	}
}

func (s *fanSender) request(ctx actor.Context) {
	s.Sent++
	ctx.Request(s.to, &s.msg)
}

// fanReceiver answers every request.
type fanReceiver struct {
	Requests int64
	f        *flock    `msgpack:"-"`
	msg      benchPing `msgpack:"-"`
}

func (rc *fanReceiver) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *benchPing:
		rc.Requests++
		if rc.f.load.arrive() {
			ctx.Respond(&rc.msg)
		}
	case *touch:
		m.visit(rc)
	}
}

// newFanIn spawns one receiver and n senders, fanInOutstanding requests
// outstanding each. The load counts requests and answers alike.
func newFanIn(b *testing.B, r *rig, n int) *flock {
	f := &flock{r: r}
	rc := f.spawn(b, "receiver", 1, func(int) actor.Actor { return &fanReceiver{f: f} })
	f.pids = f.spawn(b, "sender", n, func(i int) actor.Actor {
		return &fanSender{to: rc[0], f: f, msg: benchPing{From: i}}
	})
	f.run(f.pids, fanInOutstanding)
	return f
}

// BenchmarkFanIn runs fanInSenders senders requesting from one receiver,
// which answers each. One op is one message delivered, request or answer.
func BenchmarkFanIn(b *testing.B) {
	benchWorkload(b, "msgs", func(b *testing.B, r *rig) workload { return newFanIn(b, r, fanInSenders) })
}

// --- Chain ---

// link passes every message it receives to the next actor of the ring.
type link struct {
	Passed int64
	self   int    `msgpack:"-"`
	f      *flock `msgpack:"-"`
}

func (l *link) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *benchPing:
		if l.f.load.arrive() {
			l.pass(ctx, m)
		}
	case *kick:
		for range m.n {
			l.pass(ctx, &benchPing{})
		}
	case *touch:
		m.visit(l)
	}
}

func (l *link) pass(ctx actor.Context, m *benchPing) {
	l.Passed++
	ctx.Send(l.f.pids[(l.self+1)%len(l.f.pids)], m)
}

// newChain spawns a ring of n links with one message in flight, started
// at the first.
func newChain(b *testing.B, r *rig, n int) *flock {
	f := &flock{r: r}
	f.pids = f.spawn(b, "link", n, func(i int) actor.Actor { return &link{self: i, f: f} })
	f.run(f.pids[:1], 1)
	return f
}

// BenchmarkChain passes one message around a ring of chainLength actors:
// each delivery waits for the one before, so the rate is one over the
// latency of a delivery. One op is one message delivered.
func BenchmarkChain(b *testing.B) {
	benchWorkload(b, "msgs", func(b *testing.B, r *rig) workload { return newChain(b, r, chainLength) })
}

// --- Dense bank ---

// denseTransfer is the dense bank's transfer. From, the sender's index,
// is read only by the floorCounts row (the actors of the other rows count
// nothing): every row sends the same message.
type denseTransfer struct {
	Amount int64
	From   int32
}

// tellerReport tells the teller of a transfer received.
type tellerReport struct {
	Amount int64
	From   int32 // the account's index, for floorCounts
}

// tellerAck is the teller's answer to a report.
type tellerAck struct{}

// denseAccount reports each transfer it receives to the teller and, at
// the teller's answer, pays a random part of its balance to a random other
// account. A chain is thus transfer, report, answer, transfer: the answer
// is the flow control that keeps the teller's mailbox bounded (reports
// sent beside the transfers would pile up there, as the teller, one
// actor, takes one per transfer).
type denseAccount struct {
	Balance int64
	self    int         `msgpack:"-"`
	f       *flock      `msgpack:"-"`
	teller  *actor.PID  `msgpack:"-"`
	rng     *rand.Rand  `msgpack:"-"`
	counts  *chanCounts `msgpack:"-"` // counting floor rows only
}

func (a *denseAccount) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *denseTransfer:
		a.counts.received(m.From)
		a.Balance += m.Amount
		if a.f.load.arrive() {
			a.counts.sent(tellerIndex)
			ctx.Request(a.teller, &tellerReport{Amount: m.Amount, From: int32(a.self)})
		}
	case *tellerAck:
		a.counts.received(tellerIndex)
		a.pay(ctx)
	case *kick:
		for range m.n {
			a.pay(ctx)
		}
	case *touch:
		m.visit(a)
	}
}

func (a *denseAccount) pay(ctx actor.Context) {
	amount := int64(0)
	if a.Balance > 0 {
		amount = a.rng.Int64N(a.Balance + 1)
	}
	a.Balance -= amount
	to := a.rng.IntN(len(a.f.pids) - 1)
	if to >= a.self {
		to++ // anyone but itself
	}
	a.counts.sent(int32(to))
	ctx.Send(a.f.pids[to], &denseTransfer{Amount: amount, From: int32(a.self)})
}

// teller keeps the books of every transfer and answers each report.
type teller struct {
	Reports, Volume int64
	counts          *chanCounts `msgpack:"-"` // counting floor rows only
}

// theAck is every answer of the teller: it carries nothing.
var theAck = &tellerAck{}

func (t *teller) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *tellerReport:
		t.counts.received(m.From)
		t.Reports++
		t.Volume += m.Amount
		t.counts.sent(m.From)
		ctx.Respond(theAck)
	case *touch:
		m.visit(t)
	}
}

// newDenseBank spawns a teller and n accounts, chainsPerAccount chains
// each (as newBank). The load counts transfers.
func newDenseBank(b *testing.B, r *rig, n int, seed uint64) *flock {
	rng := rand.New(rand.NewPCG(seed, 11))
	f := &flock{r: r}
	t := f.spawn(b, "teller", 1, func(int) actor.Actor { return &teller{counts: newChanCounts(r.v.counts)} })
	f.pids = f.spawn(b, "account", n, func(i int) actor.Actor {
		return &denseAccount{Balance: accountOpening, self: i, f: f, teller: t[0], rng: rand.New(rand.NewPCG(rng.Uint64(), 1)), counts: newChanCounts(r.v.counts)}
	})
	f.run(f.pids, chainsPerAccount)
	return f
}

// tellerIndex stands for the teller in an account's chanCounts.
const tellerIndex = -1

// chanCounts is what an actor of a counting floor row keeps: the
// messages it sent to each peer, by the peer's index, and those it
// received, from each peer (floorCounts) or in total (floorSenderCounts),
// in maps that hold no pointer (the garbage collector does not scan
// them); or only the two totals (floorTotalCounts). Its methods do
// nothing on a nil chanCounts, the other rows'.
type chanCounts struct {
	out, in          map[int32]uint64 // nil when only the total is kept
	sentN, receivedN uint64           // the totals
}

func newChanCounts(k countKind) *chanCounts {
	switch k {
	case countChannels:
		return &chanCounts{out: make(map[int32]uint64), in: make(map[int32]uint64)}
	case countSenders:
		return &chanCounts{out: make(map[int32]uint64)}
	case countTotals:
		return &chanCounts{}
	}
	return nil
}

func (c *chanCounts) sent(to int32) {
	switch {
	case c == nil:
	case c.out == nil:
		c.sentN++
	default:
		c.out[to]++
	}
}

func (c *chanCounts) received(from int32) {
	switch {
	case c == nil:
	case c.in == nil:
		c.receivedN++
	default:
		c.in[from]++
	}
}

// floorCounts is bare Proto.Actor with the actors counting their
// messages per channel at both ends, the sender's index carried in the
// message: the least that any snapshot whose completion counts messages
// per channel pays on every message, whatever its plumbing. A new pair
// of accounts costs a map entry at each end, as the dense bank makes
// pairs at every transfer for its first seconds.
var floorCounts = variant{name: "floor-channel-counts", counts: countChannels}

// floorSenderCounts counts each channel at its sender only, and one
// total at each receiver: the least that a snapshot judged per receiver
// (the epoch mode's Ledger) would pay if its receivers kept no count per
// sender. A new pair costs one map entry, at the sender.
var floorSenderCounts = variant{name: "floor-sender-counts", counts: countSenders}

// floorTotalCounts counts one total of messages sent and one of messages
// received at each actor: the least that a snapshot pays whose
// completion compares the sums over all processes (Mattern's sum
// counters), with no entry per pair at either end.
var floorTotalCounts = variant{name: "floor-total-counts", counts: countTotals}

// BenchmarkDenseBank runs denseAccounts accounts paying random others,
// each transfer reported to one teller. One op is one transfer delivered.
// Beside the rows of every workload it runs the three counting floors.
func BenchmarkDenseBank(b *testing.B) {
	benchWorkload(b, "transfers", func(b *testing.B, r *rig) workload { return newDenseBank(b, r, denseAccounts, 1) }, floorCounts, floorSenderCounts, floorTotalCounts)
}

// --- Running a workload ---

// benchWorkload runs a workload on bare Proto.Actor and on each actorsnap
// variant in each mode of workloadModes (as sub-benchmarks mode=NAME),
// and after bare each of floors (bare Proto.Actor rows that bound what
// any snapshot costs). It reports unit/s and, while snapshotting,
// snapshots/s and their p50-ms and p99-ms. The middleware row, a cost of
// bare Proto.Actor that the bank and ping-pong measure already, is left
// out.
func benchWorkload(b *testing.B, unit string, start func(*testing.B, *rig) workload, floors ...variant) {
	for _, v := range variants {
		switch {
		case v.name == "bare":
			b.Run(v.name, func(b *testing.B) { runWorkload(b, v, unit, start) })
			for _, f := range floors {
				b.Run(f.name, func(b *testing.B) { runWorkload(b, f, unit, start) })
			}
		case v.snap:
			b.Run(v.name, func(b *testing.B) {
				for _, m := range workloadModes {
					b.Run("mode="+m.name, func(b *testing.B) { runWorkload(b, inMode(v, m), unit, start) })
				}
			})
		}
	}
}

// inMode is v with its snapshots taken in mode m.
func inMode(v variant, m benchMode) variant {
	v.opts = append(slices.Clip(v.opts), m.opts...)
	return v
}

// runWorkload runs b.N ops of the workload on v's plumbing, then drains it.
func runWorkload(b *testing.B, v variant, unit string, start func(*testing.B, *rig) workload) {
	r := newRig(b, v)
	defer r.shutdown(b)
	w := start(b, r)
	l := w.traffic()
	g := newGoal(int64(b.N), true)
	l.goal.Store(g)
	b.ReportAllocs()
	b.ResetTimer()
	r.startSnapshots()
	w.kick()
	await(b, g.done, unit)
	b.StopTimer()
	r.stopSnapshots(b)
	reportLatency(b, r.times)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
	await(b, l.drained, "the traffic to drain")
}

// --- Snapshot latency by shape ---

// shape is a workload whose snapshots BenchmarkSnapshotLatencyByShape
// times.
type shape struct {
	name  string
	unit  string // what its load counts
	total int64  // the money a snapshot holds, states and transfers in flight; 0: none
	start func(*testing.B, *rig) workload
}

// BenchmarkSnapshotLatencyByShape takes one snapshot per op of three
// workloads under load, in each mode: the ring bank (newBank) and the
// dense bank, both of 1,000 accounts with chainsPerAccount chains each
// (the dense bank's teller makes 1,001 participants, and a chain of its
// in flight is a transfer, a report or an answer), and all-to-all. The
// banks have the same participants and messages in flight on different
// channel graphs: a ring with chords, about 3 channels per account, and
// random pairs, whose channels in use grow with the traffic (towards a
// million; shapeWarmup transfers use about 200,000). It reports p50-ms
// and p99-ms, the channels of the last snapshot, and the workload's rate
// during the snapshots. Each bank snapshot is checked to conserve the
// money, outside the time measured. Beside the modes, floor-capture-drain
// runs floorCaptureDrain's rounds on each shape instead of snapshots: the
// least a snapshot that records the messages in flight at their
// receivers waits, on that shape (the dense bank's teller, which every
// chain passes, drains its queue).
func BenchmarkSnapshotLatencyByShape(b *testing.B) {
	const n = denseAccounts // in both banks
	shapes := []shape{
		{"ring-bank", "transfers", accountOpening * n, func(b *testing.B, r *rig) workload {
			return newBank(b, r, n, 1)
		}},
		{"dense-bank", "transfers", accountOpening * n, func(b *testing.B, r *rig) workload {
			return newDenseBank(b, r, n, 1)
		}},
		{"all-to-all", "msgs", 0, func(b *testing.B, r *rig) workload {
			return newAllToAll(b, r, allToAllActors)
		}},
	}
	idle := variants[slices.IndexFunc(variants, func(v variant) bool { return v.name == "actorsnap" })]
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			for _, m := range workloadModes {
				b.Run("mode="+m.name, func(b *testing.B) { benchShape(b, inMode(idle, m), s, noFloor) })
			}
			b.Run("floor-capture-drain", func(b *testing.B) { benchShape(b, idle, s, floorCaptureDrain) })
		})
	}
}

// benchShape times snapshots of shape s on v's plumbing, or the rounds of
// floor instead if set.
func benchShape(b *testing.B, v variant, s shape, floor floorKind) {
	r := newRig(b, v)
	defer r.shutdown(b)
	w := s.start(b, r)
	l := w.traffic()
	defer l.drain(b)
	w.kick()
	l.wait(b, shapeWarmup)
	take := func() *snapshot.Global {
		// Each bounded by the System's timeout (newRig: benchDeadline).
		g, err := r.snap.Snapshot(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	if floor != noFloor {
		take = func() *snapshot.Global {
			if err := w.floorRound(floor, nil); err != nil {
				b.Fatal(err)
			}
			return nil
		}
	}
	take() // shows the guardian the channels: the aligned mode waits only on those

	b.ReportAllocs()
	var times []time.Duration
	var c0 int64
	var t0 time.Time
	channels := -1
	for b.Loop() {
		if times == nil { // the timer starts at the first b.Loop
			c0, t0 = l.transfers.Load(), time.Now()
		}
		start := time.Now()
		g := take()
		times = append(times, time.Since(start))
		if g == nil {
			continue // a floor round
		}
		channels = len(g.Channels)
		if s.total != 0 {
			b.StopTimer()
			if err := snapshottest.CheckConservation(g, s.total, stateBalance, transferAmount); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(l.transfers.Load()-c0)/time.Since(t0).Seconds(), s.unit+"/s")
	reportLatency(b, times)
	if channels >= 0 {
		b.ReportMetric(float64(channels), "channels")
	}
}

// stateBalance is the balance in an account's state (ring or dense); a
// teller's state holds none.
func stateBalance(state []byte) (int64, error) {
	var a struct{ Balance int64 }
	err := msgpack.Unmarshal(state, &a)
	return a.Balance, err
}

// transferAmount is the money in a recorded message: a transfer's amount;
// a report or an answer holds none.
func transferAmount(payload any) (int64, error) {
	rm, ok := payload.(actors.RecordedMessage)
	if !ok {
		return 0, fmt.Errorf("payload %T is not a RecordedMessage", payload)
	}
	switch rm.Type { // a transfer is never a request: no envelope
	case "bench.transfer":
		t, err := actors.DecodeAs[*benchTransfer](rm)
		if err != nil {
			return 0, err
		}
		return t.Amount, nil
	case "bench.dense.transfer":
		t, err := actors.DecodeAs[*denseTransfer](rm)
		if err != nil {
			return 0, err
		}
		return t.Amount, nil
	}
	return 0, nil
}
