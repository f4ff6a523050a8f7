package actors

import (
	"runtime"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// pool is the dispatcher of participants: a few worker goroutines take
// mailbox turns from one FIFO queue, in the order they were scheduled.
//
// Proto.Actor's default dispatcher starts a goroutine per turn. With
// thousands of busy actors that means thousands of runnable goroutines, and
// Go's scheduler, which favours the newest, leaves some of them waiting for
// hundreds of milliseconds: a snapshot, which needs a turn of every actor,
// waits for the slowest. A FIFO queue gives every actor its turn within one
// pass over the queue, and the workers' stacks are already grown.
//
// An actor may block in its turn (on a future, say). So that blocked turns
// cannot starve the queue, a watchdog adds a worker whenever the queue has
// not moved for a tick; workers beyond the base number end after being idle
// for a while.
type pool struct {
	throughput int
	base       int
	idleFor    time.Duration

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []func()
	head    int
	idle    int // workers waiting for a turn
	workers int
	taken   uint64 // turns started, for the watchdog
	stopped bool

	done sync.WaitGroup
	quit chan struct{}
}

var _ actor.Dispatcher = (*pool)(nil)

// watchdogTick is how long the queue may stand still before a worker is
// added.
const watchdogTick = 2 * time.Millisecond

func newPool(throughput int, idle time.Duration) *pool {
	d := &pool{throughput: throughput, base: max(2, runtime.GOMAXPROCS(0)), idleFor: idle, quit: make(chan struct{})}
	d.wake = sync.NewCond(&d.mu)
	d.done.Add(1)
	go d.watchdog()
	return d
}

// Schedule implements actor.Dispatcher.
func (d *pool) Schedule(fn func()) {
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
	wake := d.idle > 0
	if !wake && d.workers < d.base {
		d.spawnLocked()
	}
	d.mu.Unlock()
	if wake {
		d.wake.Signal()
	}
}

// Throughput implements actor.Dispatcher.
func (d *pool) Throughput() int { return d.throughput }

func (d *pool) spawnLocked() {
	d.workers++
	d.done.Add(1)
	go d.worker()
}

func (d *pool) worker() {
	defer d.done.Done()
	d.mu.Lock()
	for {
		for d.head == len(d.queue) {
			if d.stopped || (d.workers > d.base && d.idle > 0) {
				d.workers--
				d.mu.Unlock()
				return
			}
			d.idle++
			d.wake.Wait()
			d.idle--
		}
		fn := d.queue[d.head]
		d.queue[d.head] = nil
		d.head++
		if d.head == len(d.queue) {
			d.queue, d.head = d.queue[:0], 0
		}
		d.taken++
		d.mu.Unlock()
		fn()
		d.mu.Lock()
	}
}

// watchdog adds a worker when turns are waiting and none started for a
// tick: every worker is busy with a long or blocked turn.
func (d *pool) watchdog() {
	defer d.done.Done()
	t := time.NewTicker(watchdogTick)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-d.quit:
			return
		case <-t.C:
		}
		d.mu.Lock()
		if d.head < len(d.queue) && d.taken == last && d.idle == 0 {
			d.spawnLocked()
		}
		last = d.taken
		d.mu.Unlock()
	}
}

// stop ends the workers once the queue is empty, and the watchdog. Nothing
// may be scheduled afterwards.
func (d *pool) stop() {
	close(d.quit)
	d.mu.Lock()
	d.stopped = true
	d.wake.Broadcast()
	d.mu.Unlock()
	d.done.Wait()
}

// loop is the guardian's dispatcher: one goroutine of its own, for the
// life of the system. Proto.Actor's default dispatcher starts a goroutine
// per turn, which grows its stack again every time (measured: 3% of the
// CPU of back-to-back snapshots of two actors went to copying stacks).
// A mailbox schedules at most one turn at a time, so a buffer of one
// never blocks.
type loop struct {
	throughput int
	turns      chan func()
	quit       chan struct{}
	done       chan struct{}
}

var _ actor.Dispatcher = (*loop)(nil)

func newLoop(throughput int) *loop {
	l := &loop{throughput: throughput, turns: make(chan func(), 1), quit: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *loop) run() {
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

// Schedule implements actor.Dispatcher. After stop, turns are dropped:
// only a dead actor's mailbox can still ask for one.
func (l *loop) Schedule(fn func()) {
	select {
	case l.turns <- fn:
	case <-l.quit:
	}
}

// Throughput implements actor.Dispatcher.
func (l *loop) Throughput() int { return l.throughput }

// stop ends the goroutine once the turn in hand, if any, is over.
func (l *loop) stop() {
	close(l.quit)
	<-l.done
}
