package actors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolQueueStaysBoundedUnderSteadyLoad runs turns that each schedule
// the next, so that the pool's queue never empties: its buffer must stay
// the size of the turns waiting, not grow with every turn ever scheduled
// (it did: 200 MB in a 10-second benchmark of 10,000 busy actors).
func TestPoolQueueStaysBoundedUnderSteadyLoad(t *testing.T) {
	d := newPool(10, time.Minute)
	defer d.stop()
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
