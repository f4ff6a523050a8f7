package main

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// tally is what the regions tell the program as they run: the tick each
// has reached with its infected agents there, and each one's final state.
// The producers hand it to the actors in a field tagged msgpack:"-", so
// it is in no snapshot; a restore hands the restored actors a fresh one.
// Its methods may be called from any goroutine, and on a nil tally do
// nothing (a system run by a test harness that waits by other means).
type tally struct {
	ticks    []atomic.Int64 // by region: the tick reached
	infected []atomic.Int64 // by region: its infected agents at that tick

	at     int    // the tick onTick waits for
	onTick func() // if set, called once, by the first region to reach at
	fired  atomic.Bool

	mu     sync.Mutex
	finals []*final // by region
	left   int      // regions not finished
	err    error
	done   chan struct{} // closed once every region finished, or on failure
}

// final is a region's state at the end of the run.
type final struct {
	Tick   int
	Counts Counts
	Digest [sha256.Size]byte
}

func newTally(regions int) *tally {
	return &tally{
		ticks:    make([]atomic.Int64, regions),
		infected: make([]atomic.Int64, regions),
		finals:   make([]*final, regions),
		left:     regions,
		done:     make(chan struct{}),
	}
}

func (t *tally) reached(region, tick, infected int) {
	if t == nil || region >= len(t.ticks) {
		return
	}
	t.ticks[region].Store(int64(tick))
	t.infected[region].Store(int64(infected))
	if tick == t.at && t.onTick != nil && t.fired.CompareAndSwap(false, true) {
		t.onTick()
	}
}

// when makes the first region to reach tick call f, on its goroutine:
// tests take a snapshot there. Call it before the regions start.
func (t *tally) when(tick int, f func()) { t.at, t.onTick = tick, f }

func (t *tally) finished(region int, f final) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if region >= len(t.finals) || t.finals[region] != nil || t.left == 0 {
		return
	}
	t.finals[region] = &f
	if t.left--; t.left == 0 {
		close(t.done)
	}
}

// fail ends the wait with err.
func (t *tally) fail(err error) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.left > 0 {
		t.err, t.left = err, 0
		close(t.done)
	}
}

// progress returns the lowest tick any region is at, and the infected
// agents of every region at the tick it has reached.
func (t *tally) progress() (tick, infected int) {
	for i := range t.ticks {
		r := int(t.ticks[i].Load())
		if i == 0 || r < tick {
			tick = r
		}
		infected += int(t.infected[i].Load())
	}
	return tick, infected
}

// Output is the end of a run: the final tick, the counts there, and the
// SHA-256 of every region's final state in the order of the regions.
type Output struct {
	Tick   int
	Counts Counts
	Hash   [sha256.Size]byte
}

// output returns the run's Output, once done is closed.
func (t *tally) output() (Output, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return Output{}, t.err
	}
	var o Output
	h := sha256.New()
	for _, f := range t.finals {
		o.Tick = f.Tick
		o.Counts.S += f.Counts.S
		o.Counts.I += f.Counts.I
		o.Counts.R += f.Counts.R
		h.Write(f.Digest[:])
	}
	o.Hash = [sha256.Size]byte(h.Sum(nil))
	return o, nil
}
