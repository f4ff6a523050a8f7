package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows what a long command is doing, on a terminal only: a
// spinner with the elapsed time (progressbar animates it) until the
// command writes its first output, then a line saying how long it took.
type progress struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	what  string
	start time.Time
	bar   *progressbar.ProgressBar // while a step is shown
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
	p.mu.Lock()
	defer p.mu.Unlock()
	p.what, p.start = what, time.Now()
	p.bar = progressbar.NewOptions(-1,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(what+"…"),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish())
}

// end replaces the spinner with how long the step took.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	_ = p.bar.Finish()
	p.bar = nil
	fmt.Fprintf(p.w, "%s: done in %v\n", p.what, time.Since(p.start).Round(time.Millisecond))
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
