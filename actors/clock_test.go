package actors

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

// manualClock is a clock that moves only when a test advances it.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	armed  chan struct{} // a signal for each timer set
}

type manualTimer struct {
	c     *manualClock
	at    time.Time
	f     func()
	ended bool // fired or stopped
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), armed: make(chan struct{}, 1)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	select {
	case c.armed <- struct{}{}:
	default:
	}
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	stopped := !t.ended
	t.ended = true
	return stopped
}

// Advance moves the clock by d and fires the timers that came due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*manualTimer
	for _, t := range c.timers {
		if !t.ended && !t.at.After(c.now) {
			t.ended = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		go t.f()
	}
}

// waitArmed waits until a timer due within d from now is set.
func (c *manualClock) waitArmed(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		c.mu.Lock()
		for _, tm := range c.timers {
			if !tm.ended && !tm.at.After(c.now.Add(d)) {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		select {
		case <-c.armed:
		case <-deadline:
			t.Fatalf("no timer due within %v was set", d)
		}
	}
}

// waitMissing waits until snapshot id, in progress, misses the records of
// exactly want: a participant signals its record (System.trace) before
// its report reaches the snapshot.
func waitMissing(t *testing.T, sys *System, id snapshot.SnapshotID, want ...snapshot.ProcessID) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	var got []snapshot.ProcessID
	for {
		reply := make(chan []snapshot.ProcessID, 1)
		sys.tell(&missingRequest{id: id, reply: reply})
		got = <-reply
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("snapshot %d misses %v, want %v", id, got, want)
		}
	}
}
