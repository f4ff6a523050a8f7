package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/actorsnap/actorsnap/snapshot"
)

// progress shows how far the run is: on a terminal a live bar with the
// tick, ticks per second, time left, infected agents and the last
// snapshot's id and age; elsewhere a plain line every plainEvery, and one
// for each snapshot stored. It reads the wall clock, which the model
// never does.
type progress struct {
	w      io.Writer // serialized
	t      *tally
	ticks  int // the last tick
	first  int // the lowest tick at the start
	began  time.Time
	bar    *progressbar.ProgressBar // on a terminal; nil otherwise
	stop   chan struct{}
	ended  chan struct{}
	mu     sync.Mutex
	lastID snapshot.SnapshotID
	lastAt time.Time
}

// plainEvery is the time between two plain progress lines.
const plainEvery = 2 * time.Second

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newProgress starts showing t's progress from tick first to ticks on w.
func newProgress(w io.Writer, tty bool, t *tally, first, ticks int) *progress {
	p := &progress{w: w, t: t, ticks: ticks, first: first, began: time.Now(), stop: make(chan struct{}), ended: make(chan struct{})}
	every := plainEvery
	if tty {
		// The bar counts the ticks of this run only, so that its rate
		// and time left hold after a restore.
		p.bar = progressbar.NewOptions(max(ticks-first, 1),
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(24),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("ticks"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetDescription(p.describe()))
		every = 200 * time.Millisecond
	}
	go p.loop(every)
	return p
}

func (p *progress) loop(every time.Duration) {
	defer close(p.ended)
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tk.C:
			p.show()
		}
	}
}

// describe is the bar's text: the tick, infected agents, last snapshot.
func (p *progress) describe() string {
	tick, infected := p.t.progress()
	return fmt.Sprintf("tick %d/%d  I=%d  %s", tick, p.ticks, infected, p.snapshot())
}

// snapshot says which snapshot was stored last, and how long ago.
func (p *progress) snapshot() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastID == 0 {
		return "no snapshot yet"
	}
	return fmt.Sprintf("snapshot %d %v ago", p.lastID, time.Since(p.lastAt).Round(100*time.Millisecond))
}

func (p *progress) show() {
	tick, infected := p.t.progress()
	if p.bar != nil {
		p.bar.Describe(p.describe())
		_ = p.bar.Set(tick - p.first)
		return
	}
	elapsed := time.Since(p.began)
	rate := float64(tick-p.first) / elapsed.Seconds()
	left := "?"
	if rate > 0 {
		left = (time.Duration(float64(p.ticks-tick) / rate * float64(time.Second))).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "tick %d/%d  %.1f ticks/s  %s left  I=%d  %s\n", tick, p.ticks, rate, left, infected, p.snapshot())
}

// stored notes a snapshot stored, and on a plain output says so.
func (p *progress) stored(g *snapshot.Global, took time.Duration) {
	p.mu.Lock()
	p.lastID, p.lastAt = g.ID, time.Now()
	p.mu.Unlock()
	if p.bar == nil {
		size := 0
		for _, pt := range g.Participants {
			size += len(pt.State)
		}
		fmt.Fprintf(p.w, "snapshot %d stored: %s, %d participants, %d moves in flight, %.1f MB of state, %v\n",
			g.ID, g.Mode, len(g.Participants), g.TotalInFlight(), float64(size)/1e6, took.Round(100*time.Microsecond))
	}
}

// println prints a line, above the bar if there is one.
func (p *progress) println(s string) {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintln(p.w, s)
}

// end stops the display and clears the bar.
func (p *progress) end() {
	close(p.stop)
	<-p.ended
	if p.bar != nil {
		_ = p.bar.Finish()
		_ = p.bar.Clear()
	}
}
