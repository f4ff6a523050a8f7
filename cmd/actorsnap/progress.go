package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress shows what a long command is doing, on a terminal only: a
// line that a ticker refreshes with the elapsed time until the command
// writes its first output.
type progress struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	what  string
	start time.Time
	stop  chan struct{}
	done  bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// step starts showing what.
func (p *progress) step(what string) {
	if !p.tty {
		return
	}
	p.what, p.start, p.stop = what, time.Now(), make(chan struct{})
	p.draw()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		fmt.Fprintf(p.w, "\r%s… %v ", p.what, time.Since(p.start).Round(100*time.Millisecond))
	}
}

// end clears the progress line.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && !p.done {
		p.done = true
		close(p.stop)
		fmt.Fprintf(p.w, "\r%s: done in %v\n", p.what, time.Since(p.start).Round(time.Millisecond))
	}
}

// after returns a writer that ends the progress line before its first
// write.
func (p *progress) after(w io.Writer) io.Writer { return &endOnWrite{p: p, w: w} }

type endOnWrite struct {
	p    *progress
	w    io.Writer
	once sync.Once
}

func (e *endOnWrite) Write(b []byte) (int, error) {
	e.once.Do(e.p.end)
	return e.w.Write(b)
}
