package actors

import "time"

// clock is the time the guardian reads and sets its timers by: the
// machine's, unless a test gives one it moves by hand (withClock), so that
// no test depends on a real-time timeout being long enough.
type clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) timer
}

// timer is a timer of a clock.
type timer interface {
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// realClock is the machine's clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }

// withClock makes the system's guardian read c instead of the machine's
// clock: for tests.
func withClock(c clock) Option { return func(cfg *config) { cfg.clock = c } }

// withDeltaMin sets the participants' snapshot.Config.DeltaMin: tests of
// records of every counter that follow the last set it positive.
func withDeltaMin(n int) Option { return func(cfg *config) { cfg.deltaMin = n } }
