package main

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Messages between philosophers and forks. Their fields are exported, so
// that a snapshot can record them in flight.
type (
	// Take asks a fork for the philosopher By. A fork in use queues it.
	Take struct{ By string }
	// Granted tells a philosopher that Fork is its own until it puts it
	// down.
	Granted struct{ Fork string }
	// Put gives the fork back: By has done eating.
	Put struct{ By string }
)

// messages registers the message types that go between participants.
var messages = []actors.Option{
	actors.WithMessage[*Take]("philosophers.Take"),
	actors.WithMessage[*Granted]("philosophers.Granted"),
	actors.WithMessage[*Put]("philosophers.Put"),
}

// wake ends a philosopher's thinking or eating. A timer sends it from
// outside every participant, so it is never in a snapshot: the
// philosopher's Waiter says a timer will wake it instead.
type wake struct{}

// Participant names: philosopher i sits between fork i, on its left, and
// fork i+1 (mod n), on its right.
func philosopherName(i int) string { return fmt.Sprintf("p%d", i) }
func forkName(i int) string        { return fmt.Sprintf("f%d", i) }

// What a philosopher does.
const (
	thinking = "thinking"
	hungry   = "hungry"   // waiting for the fork it asked for
	reaching = "reaching" // holding its first fork, about to ask for the second
	eating   = "eating"
)

// Philosopher thinks, gets hungry, takes its first fork, reaches for the
// second, eats, puts them down, and thinks again. Its exported fields are
// its state in a snapshot.
type Philosopher struct {
	Seat              int
	First, Second     string // the forks in the order it takes them
	Think, Reach, Eat time.Duration
	Doing             string // thinking, hungry, reaching or eating
	Holds             int    // forks granted for the coming meal: 0, 1 or 2
	Asked             time.Time
	Meals             int

	rng   *rand.Rand  `msgpack:"-"` // the think and eat times, from the seed
	timer *time.Timer `msgpack:"-"`
	table *table      `msgpack:"-"`
}

// newPhilosopher seats philosopher i of n. Naive, it takes its left fork
// first; ordered, the lower-numbered of its two, so that no cycle of
// waits can form (the last philosopher takes fork 0 first).
func newPhilosopher(i, n int, c config, tb *table) *Philosopher {
	left, right := i, (i+1)%n
	if c.Ordered && right < left {
		left, right = right, left
	}
	return &Philosopher{
		Seat: i, First: forkName(left), Second: forkName(right), Think: c.Think, Reach: c.Reach, Eat: c.Eat,
		rng:   rand.New(rand.NewPCG(c.Seed, uint64(i))),
		table: tb,
	}
}

// Receive implements actor.Actor.
func (p *Philosopher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.think(ctx)
	case *actor.Stopping:
		if p.timer != nil {
			p.timer.Stop()
		}
	case wake:
		switch p.Doing {
		case thinking:
			p.Doing, p.Asked = hungry, time.Now()
			ctx.Send(p.fork(ctx, p.First), &Take{By: ctx.Self().Id})
		case reaching:
			p.Doing, p.Asked = hungry, time.Now()
			ctx.Send(p.fork(ctx, p.Second), &Take{By: ctx.Self().Id})
		case eating:
			p.Meals++
			p.table.ate(p.Seat, p.Meals)
			p.Holds = 0
			ctx.Send(p.fork(ctx, p.First), &Put{By: ctx.Self().Id})
			ctx.Send(p.fork(ctx, p.Second), &Put{By: ctx.Self().Id})
			p.think(ctx)
		}
	case *Granted:
		if p.Doing != hungry || m.Fork != p.waitingFor() {
			p.table.broke(fmt.Errorf("%s, %s with %d forks, was granted %s", ctx.Self().Id, p.Doing, p.Holds, m.Fork))
			return
		}
		p.Holds++
		if p.Holds == 1 {
			// The naive protocol's flaw: it holds one fork while it
			// reaches for, and then waits for, the other.
			p.Doing = reaching
			p.after(ctx, p.Reach)
			return
		}
		p.Doing = eating
		p.after(ctx, p.Eat)
	}
}

// Waiting implements actors.Waiter: a hungry philosopher waits for the
// fork it asked for; one thinking, reaching or eating for its timer.
func (p *Philosopher) Waiting() snapshot.Waits {
	if p.Doing != hungry {
		return snapshot.Waits{Timer: true}
	}
	return snapshot.Waits{Edges: []snapshot.Wait{{To: snapshot.ProcessID(p.waitingFor()), Type: "fork", Since: p.Asked}}}
}

// waitingFor is the fork a hungry philosopher has asked for.
func (p *Philosopher) waitingFor() string {
	if p.Holds == 0 {
		return p.First
	}
	return p.Second
}

func (p *Philosopher) think(ctx actor.Context) {
	p.Doing = thinking
	p.after(ctx, p.Think)
}

// after wakes the philosopher after a random time of mean mean,
// exponentially distributed.
func (p *Philosopher) after(ctx actor.Context, mean time.Duration) {
	d := time.Duration(p.rng.ExpFloat64() * float64(mean))
	root, self := actors.SystemOf(ctx).Root(), ctx.Self()
	p.timer = time.AfterFunc(d, func() { root.Send(self, wake{}) })
}

func (p *Philosopher) fork(ctx actor.Context, name string) *actor.PID {
	return actors.SystemOf(ctx).PID(name)
}

// Fork is held by one philosopher at a time and hands itself to those
// who asked, first come first served.
type Fork struct {
	Holder  string    // "" when on the table
	Granted time.Time // when Holder got it
	Queue   []Asked   // those waiting for it, in order
	table   *table    `msgpack:"-"`
}

// Asked is a philosopher waiting for a fork, since At.
type Asked struct {
	By string
	At time.Time
}

// Receive implements actor.Actor.
func (f *Fork) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Take:
		if f.Holder == "" {
			f.grant(ctx, m.By)
			return
		}
		f.Queue = append(f.Queue, Asked{By: m.By, At: time.Now()})
	case *Put:
		if m.By != f.Holder {
			f.table.broke(fmt.Errorf("%s, held by %q, was put down by %s", ctx.Self().Id, f.Holder, m.By))
			return
		}
		f.Holder = ""
		if len(f.Queue) > 0 {
			next := f.Queue[0]
			f.Queue = f.Queue[1:]
			f.grant(ctx, next.By)
		}
	}
}

func (f *Fork) grant(ctx actor.Context, to string) {
	f.Holder, f.Granted = to, time.Now()
	ctx.Send(actors.SystemOf(ctx).PID(to), &Granted{Fork: ctx.Self().Id})
}

// Waiting implements actors.Waiter: a fork someone waits for waits in
// turn for its holder to put it down, since it was both held and asked
// for. With the philosophers' waits for forks this is the resource
// allocation graph: a cycle in it is a deadlock.
func (f *Fork) Waiting() snapshot.Waits {
	if f.Holder == "" || len(f.Queue) == 0 {
		return snapshot.Waits{}
	}
	since := f.Granted
	if f.Queue[0].At.After(since) {
		since = f.Queue[0].At
	}
	return snapshot.Waits{Edges: []snapshot.Wait{{To: snapshot.ProcessID(f.Holder), Type: "release", Since: since}}}
}

// table is the program's view of the dinner: meals eaten, and any break
// of the protocol. Philosophers and forks write it; it is not their state.
type table struct {
	meals    []atomic.Int64
	target   int64        // meals each philosopher is to eat; 0 for no target
	short    atomic.Int64 // philosophers still short of target
	full     chan struct{}
	lastMeal atomic.Int64 // when the latest meal ended, in Unix nanoseconds
	broken   chan error
}

func newTable(n, target int) *table {
	tb := &table{meals: make([]atomic.Int64, n), target: int64(target), full: make(chan struct{}), broken: make(chan error, 1)}
	tb.short.Store(int64(n))
	return tb
}

// ate notes that philosopher seat has eaten its meals-th meal.
func (tb *table) ate(seat, meals int) {
	tb.meals[seat].Store(int64(meals))
	tb.lastMeal.Store(time.Now().UnixNano())
	if int64(meals) == tb.target && tb.short.Add(-1) == 0 {
		close(tb.full)
	}
}

// broke reports a broken protocol, the first one only.
func (tb *table) broke(err error) {
	select {
	case tb.broken <- err:
	default:
	}
}

// counts returns the meals each philosopher has eaten.
func (tb *table) counts() []int {
	out := make([]int, len(tb.meals))
	for i := range tb.meals {
		out[i] = int(tb.meals[i].Load())
	}
	return out
}
