package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// pool is the dispatcher of participants: it runs mailbox turns on
// goroutines that stay alive for a while between turns, instead of starting
// a goroutine per turn as Proto.Actor's default dispatcher does. With
// thousands of actors each handling a few messages per turn, a fresh
// goroutine per turn spends more time growing its stack than handling the
// messages; a worker's stack is already grown.
type pool struct {
	throughput int
	idle       time.Duration
	work       chan func()
	quit       chan struct{}
	workers    sync.WaitGroup
}

var _ actor.Dispatcher = (*pool)(nil)

func newPool(throughput int, idle time.Duration) *pool {
	return &pool{throughput: throughput, idle: idle, work: make(chan func()), quit: make(chan struct{})}
}

// Schedule implements actor.Dispatcher: an idle worker takes fn, or a new
// worker starts with it.
func (d *pool) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		d.workers.Add(1)
		go d.worker(fn)
	}
}

// Throughput implements actor.Dispatcher.
func (d *pool) Throughput() int { return d.throughput }

func (d *pool) worker(fn func()) {
	defer d.workers.Done()
	idle := time.NewTimer(d.idle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(d.idle)
		select {
		case fn = <-d.work:
		case <-idle.C:
			return
		case <-d.quit:
			return
		}
	}
}

// stop ends the idle workers and waits for the busy ones to finish their
// turn. Nothing may be scheduled afterwards.
func (d *pool) stop() {
	close(d.quit)
	d.workers.Wait()
}
