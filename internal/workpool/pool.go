package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Pool is a Proto.Actor dispatcher for many busy actors: a few worker
// goroutines take mailbox turns from one FIFO queue, in the order they
// were scheduled, and before them short urgent work (ScheduleUrgent).
//
// Proto.Actor's default dispatcher starts a goroutine per turn. With
// thousands of busy actors that means thousands of runnable goroutines, and
// Go's scheduler, which favours the newest, leaves some of them waiting for
// hundreds of milliseconds: a snapshot, which needs a turn of every actor,
// waits for the slowest. A FIFO queue gives every actor its turn within one
// pass over the queue, and the workers' stacks are already grown.
//
// An actor may block in its turn (on a future, say). So that blocked turns
// cannot starve the queue, a watchdog counts the workers stuck in one turn
// for stuckTicks ticks and adds workers so that base of them are not
// stuck; a worker beyond that ends after its turn, or when idle. It
// counts stuck turns rather than a queue that stood still for a tick: a
// worker merely preempted, or a garbage collection, stills the queue
// under load, and workers added for that, never idle, would stay (24
// workers on 2 cores at 10,000 busy actors, snapshots 3-5 times slower).
type Pool struct {
	throughput int
	base       int
	idleFor    time.Duration

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []func()
	head    int
	urgent  fifo // taken before queue (ScheduleUrgent)
	idle    int  // workers waiting for a turn
	workers int
	tick    time.Duration
	stuck   int                        // workers stuck in a turn at the last check
	turns   map[*workerTurns]turnsSeen // each worker's turns at the last check
	stopped bool

	done sync.WaitGroup
	quit chan struct{}
}

// workerTurns counts a worker's turns, twice each: odd while in one.
type workerTurns struct{ n atomic.Uint64 }

// turnsSeen is a worker's turn count at the last check, and for how many
// checks it has not changed while in a turn.
type turnsSeen struct {
	n     uint64
	ticks int
}

var _ actor.Dispatcher = (*Pool)(nil)

// The watchdog checks every watchdogTick; a worker in the same turn for
// stuckTicks checks is stuck.
const (
	watchdogTick = 10 * time.Millisecond
	stuckTicks   = 5
)

// New returns a pool whose actors handle throughput messages a turn, and
// whose workers beyond the base number end after idle without a turn.
// Stop it when done.
func New(throughput int, idle time.Duration) *Pool {
	return newTick(throughput, idle, watchdogTick)
}

// newTick is New with the watchdog's tick.
func newTick(throughput int, idle, tick time.Duration) *Pool {
	d := &Pool{throughput: throughput, base: max(2, runtime.GOMAXPROCS(0)), idleFor: idle, tick: tick, quit: make(chan struct{}),
		turns: make(map[*workerTurns]turnsSeen)}
	d.wake = sync.NewCond(&d.mu)
	d.done.Add(1)
	go d.watchdog()
	return d
}

// Schedule implements actor.Dispatcher.
func (d *Pool) Schedule(fn func()) {
	d.mu.Lock()
	if len(d.queue) == cap(d.queue) && d.head >= len(d.queue)/2 {
		// Under steady load the queue never empties (the worker's reset),
		// so taken turns are dropped here instead of growing the buffer
		// for ever: copying at most as many as were taken keeps Schedule
		// amortized O(1).
		n := copy(d.queue, d.queue[d.head:])
		clear(d.queue[n:])
		d.queue, d.head = d.queue[:n], 0
	}
	d.queue = append(d.queue, fn)
	d.addedLocked()
}

// ScheduleUrgent schedules fn ahead of every turn queued by Schedule,
// after the urgent work scheduled before it. It is for short work that
// many actors must do soon (a snapshot's records), which a turn queued
// by Schedule would do only after a pass over every busy actor.
func (d *Pool) ScheduleUrgent(fn func()) {
	d.mu.Lock()
	d.urgent.push(fn)
	d.addedLocked()
}

// addedLocked wakes an idle worker for the work just queued, or starts
// one while fewer than base run, and unlocks d.mu. A stopped pool starts
// none: its work is dropped.
func (d *Pool) addedLocked() {
	wake := d.idle > 0
	if !wake && !d.stopped && d.workers < d.base {
		d.spawnLocked()
	}
	d.mu.Unlock()
	if wake {
		d.wake.Signal()
	}
}

// fifo is a queue of work that reuses its buffer once emptied.
type fifo struct {
	items []func()
	head  int
}

func (q *fifo) len() int { return len(q.items) - q.head }

func (q *fifo) push(fn func()) { q.items = append(q.items, fn) }

func (q *fifo) pop() func() {
	fn := q.items[q.head]
	q.items[q.head] = nil
	if q.head++; q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return fn
}

// Throughput implements actor.Dispatcher.
func (d *Pool) Throughput() int { return d.throughput }

func (d *Pool) spawnLocked() {
	d.workers++
	w := &workerTurns{}
	d.turns[w] = turnsSeen{}
	d.done.Add(1)
	go d.worker(w)
}

// exitLocked ends worker w's loop: the caller returns next. A turn it
// leaves waiting goes to an idle worker: the Schedule that queued it woke
// this one.
func (d *Pool) exitLocked(w *workerTurns) {
	d.workers--
	delete(d.turns, w)
	if (d.head < len(d.queue) || d.urgent.len() > 0) && d.idle > 0 {
		d.wake.Signal()
	}
	d.mu.Unlock()
}

func (d *Pool) worker(w *workerTurns) {
	defer d.done.Done()
	d.mu.Lock()
	for {
		for d.head == len(d.queue) && d.urgent.len() == 0 {
			if d.stopped || (d.workers > d.base && d.idle > 0) {
				d.exitLocked(w)
				return
			}
			d.idle++
			d.wake.Wait()
			d.idle--
		}
		if d.workers-d.stuck > d.base {
			d.exitLocked(w) // added for a stuck turn that is over
			return
		}
		var fn func()
		if d.urgent.len() > 0 {
			fn = d.urgent.pop()
		} else {
			fn = d.queue[d.head]
			d.queue[d.head] = nil
			d.head++
			if d.head == len(d.queue) {
				d.queue, d.head = d.queue[:0], 0
			}
		}
		d.mu.Unlock()
		w.n.Add(1)
		fn()
		w.n.Add(1)
		d.mu.Lock()
	}
}

// watchdog checks the workers every tick.
func (d *Pool) watchdog() {
	defer d.done.Done()
	t := time.NewTicker(d.tick)
	defer t.Stop()
	for {
		select {
		case <-d.quit:
			return
		case <-t.C:
		}
		d.check()
	}
}

// check counts the workers stuck in a turn and adds a worker when turns
// are waiting and fewer than base workers are free of a stuck turn.
func (d *Pool) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stuck = 0
	for w, seen := range d.turns {
		switch n := w.n.Load(); {
		case n%2 == 0:
			seen = turnsSeen{n: n} // between turns
		case n == seen.n:
			seen.ticks++
		default:
			seen = turnsSeen{n: n, ticks: 1} // a new turn
		}
		d.turns[w] = seen
		if seen.ticks >= stuckTicks {
			d.stuck++
		}
	}
	if (d.head < len(d.queue) || d.urgent.len() > 0) && d.idle == 0 && d.workers-d.stuck < d.base {
		d.spawnLocked()
	}
}

// Stop ends the workers once the queue is empty, and the watchdog. Work
// scheduled afterwards is never run: a message that reaches an actor of a
// system shutting down (from another cluster member, say) is lost with
// the system, and starts no worker the Stop would not wait for.
func (d *Pool) Stop() {
	close(d.quit)
	d.mu.Lock()
	d.stopped = true
	d.wake.Broadcast()
	d.mu.Unlock()
	d.done.Wait()
}

// Loop is a Proto.Actor dispatcher for one actor: one goroutine of its
// own, for the actor's life. Proto.Actor's default dispatcher starts a
// goroutine per turn, which grows its stack again every time (3% of the
// CPU of back-to-back snapshots of two actors went to copying stacks). A
// mailbox schedules at most one turn at a time, so a buffer of one never
// blocks.
type Loop struct {
	throughput int
	turns      chan func()
	quit       chan struct{}
	done       chan struct{}
}

var _ actor.Dispatcher = (*Loop)(nil)

// NewLoop returns a loop whose actor handles throughput messages a turn.
// Stop it when done.
func NewLoop(throughput int) *Loop {
	l := &Loop{throughput: throughput, turns: make(chan func(), 1), quit: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *Loop) run() {
	defer close(l.done)
	for {
		select {
		case fn := <-l.turns:
			fn()
		case <-l.quit:
			return
		}
	}
}

// Schedule implements actor.Dispatcher. After Stop, turns are dropped:
// only a dead actor's mailbox can still ask for one.
func (l *Loop) Schedule(fn func()) {
	select {
	case l.turns <- fn:
	case <-l.quit:
	}
}

// Throughput implements actor.Dispatcher.
func (l *Loop) Throughput() int { return l.throughput }

// Stop ends the goroutine once the turn in hand, if any, is over.
func (l *Loop) Stop() {
	close(l.quit)
	<-l.done
}
