package workpool

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPoolQueueStaysBoundedUnderSteadyLoad runs turns that each schedule
// the next, so that the pool's queue never empties: its buffer must stay
// the size of the turns waiting, not grow with every turn ever scheduled
// (it did: 200 MB in a 10-second benchmark of 10,000 busy actors).
func TestPoolQueueStaysBoundedUnderSteadyLoad(t *testing.T) {
	d := New(10, time.Minute)
	defer d.Stop()
	const waiting, turns = 64, 200_000
	done := make(chan struct{})
	left := turns
	var turn func()
	turn = func() {
		// Turns run on two workers; left is shared.
		d.mu.Lock()
		left--
		n := left
		d.mu.Unlock()
		switch {
		case n >= waiting:
			d.Schedule(turn)
		case n == 0:
			close(done)
		}
	}
	for range waiting {
		d.Schedule(turn)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("turns did not finish")
	}
	d.mu.Lock()
	c := cap(d.queue)
	d.mu.Unlock()
	require.Positive(t, c)
	assert.LessOrEqual(t, c, 4*waiting, "queue buffer grew with the turns scheduled")
}

// TestPoolAddsWorkersOnlyForStuckTurns drives the watchdog's checks by
// hand. With every worker in a turn and a turn waiting, no worker is added
// until the turns have been the same for stuckTicks checks (the watchdog
// used to add one at the second check: a worker preempted or in a long
// turn did that under load, and the extra workers, never idle, stayed: 24
// on 2 cores after ten snapshots of 10,000 busy actors); then one is, the
// waiting turn runs, and the extra worker ends once the stuck turns are
// over.
func TestPoolAddsWorkersOnlyForStuckTurns(t *testing.T) {
	d := newTick(10, time.Minute, time.Hour) // no tick: checks by hand
	defer d.Stop()
	workers := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.workers
	}
	release := make(chan struct{})
	var blocked sync.WaitGroup
	blocked.Add(d.base)
	for range d.base {
		d.Schedule(func() { blocked.Done(); <-release })
	}
	blocked.Wait()
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	for range stuckTicks - 1 {
		d.check()
	}
	assert.Equal(t, d.base, workers(), "a worker added before the turns were stuck")
	select {
	case <-ran:
		t.Fatal("a turn ran with every worker blocked")
	default:
	}
	d.check()
	assert.Equal(t, d.base+1, workers())
	select {
	case <-ran:
	case <-time.After(time.Minute):
		t.Fatal("the turn waiting behind stuck ones did not run")
	}
	close(release)
	// Once a check has seen the stuck turns over, the extra worker ends
	// after its next turn, or when idle.
	require.Eventually(t, func() bool {
		d.check()
		done := make(chan struct{})
		d.Schedule(func() { close(done) })
		<-done
		return workers() == d.base
	}, time.Minute, time.Millisecond)
}

// Urgent work runs before every turn queued, in the order it came.
func TestPoolRunsUrgentWorkFirst(t *testing.T) {
	d := New(10, time.Minute)
	defer d.Stop()
	var mu sync.Mutex
	var order []string
	note := func(s string) func() {
		return func() {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
	}
	// Hold both workers so that what follows queues up; then let one go,
	// which takes the rest alone, in the pool's order.
	release, hold := make(chan struct{}), make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	d.Schedule(func() { started.Done(); <-release })
	d.Schedule(func() { started.Done(); <-hold })
	defer close(hold)
	started.Wait()
	for i := range 3 {
		d.Schedule(note(fmt.Sprint("turn", i)))
	}
	for i := range 3 {
		d.ScheduleUrgent(note(fmt.Sprint("urgent", i)))
	}
	done := make(chan struct{})
	d.Schedule(func() { close(done) })
	close(release)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("work did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"urgent0", "urgent1", "urgent2", "turn0", "turn1", "turn2"}, order)
}

// TestPoolScheduleAfterStopStartsNoWorker schedules turns while the pool
// stops and after: a worker started then was one Stop did not wait for
// (its WaitGroup.Add raced Stop's Wait; seen under -race when a cluster
// member delivered a message to a system shutting down). A turn
// scheduled after Stop returned never runs.
func TestPoolScheduleAfterStopStartsNoWorker(t *testing.T) {
	d := New(10, time.Minute)
	// A bounded stream: Stop waits for the queue to empty, so an
	// endless one would hold it.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20_000 {
			d.Schedule(func() {})
		}
	}()
	d.Schedule(func() {})
	d.Stop()
	wg.Wait()

	ran := make(chan string, 2)
	d.Schedule(func() { ran <- "turn" })
	d.ScheduleUrgent(func() { ran <- "urgent turn" })
	d.mu.Lock()
	workers := d.workers
	d.mu.Unlock()
	assert.Zero(t, workers, "workers started after Stop")
	select {
	case what := <-ran:
		t.Fatalf("a %s scheduled after Stop ran", what)
	default:
	}
}
