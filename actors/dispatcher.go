package actors

import (
	"runtime"
	"sync"
	"sync/atomic"
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
// cannot starve the queue, a watchdog adds a worker whenever turns wait and
// none started for a tick; those extra workers end after being idle a
// while. If the queue is ever full, a turn runs on a goroutine of its own.
type pool struct {
	throughput int
	idleFor    time.Duration
	queue      chan func()
	taken      atomic.Uint64 // turns started, for the watchdog
	done       sync.WaitGroup
	quit       chan struct{}
}

var _ actor.Dispatcher = (*pool)(nil)

const (
	// watchdogTick is how long the queue may stand still before a worker
	// is added.
	watchdogTick = 2 * time.Millisecond
	// queueSize bounds the turns waiting in the queue.
	queueSize = 1 << 16
)

func newPool(throughput int, idle time.Duration) *pool {
	d := &pool{throughput: throughput, idleFor: idle, queue: make(chan func(), queueSize), quit: make(chan struct{})}
	for range max(2, runtime.GOMAXPROCS(0)) {
		d.done.Add(1)
		go d.worker(false)
	}
	d.done.Add(1)
	go d.watchdog()
	return d
}

// Schedule implements actor.Dispatcher.
func (d *pool) Schedule(fn func()) {
	select {
	case d.queue <- fn:
	default:
		go fn()
	}
}

// Throughput implements actor.Dispatcher.
func (d *pool) Throughput() int { return d.throughput }

// worker runs turns; an extra one ends when idle for idleFor.
func (d *pool) worker(extra bool) {
	defer d.done.Done()
	var idle <-chan time.Time
	var t *time.Timer
	if extra {
		t = time.NewTimer(d.idleFor)
		defer t.Stop()
		idle = t.C
	}
	for {
		select {
		case fn := <-d.queue:
			d.taken.Add(1)
			fn()
			if extra {
				t.Reset(d.idleFor)
			}
		case <-idle:
			return
		case <-d.quit:
			return
		}
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
		taken := d.taken.Load()
		if len(d.queue) > 0 && taken == last {
			d.done.Add(1)
			go d.worker(true)
		}
		last = taken
	}
}

// stop ends the workers and the watchdog. Nothing may be scheduled
// afterwards.
func (d *pool) stop() {
	close(d.quit)
	d.done.Wait()
}
