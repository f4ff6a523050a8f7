package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/snapshot"
)

// GateHeld returns the frames from other members that the aligned mode's
// start gate holds (startGate), for the tests of package actors_test.
func GateHeld(s *System) int {
	if s.gate == nil {
		return 0
	}
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	n := 0
	for _, fs := range s.gate.held {
		n += len(fs)
	}
	return n
}

// WithDeltaMin sets the participants' snapshot.Config.DeltaMin: positive,
// records of every counter on fewer channels, or when more than a quarter
// changed.
func WithDeltaMin(n int) Option { return withDeltaMin(n) }

// TellRecord hands s's guardian rec as a participant's record report, as
// if the participant had sent it: a test forges one that follows a record
// lost on its way.
func TellRecord(s *System, rec snapshot.LocalRecord) {
	s.tell(newRecordReport(rec.Snapshot, rec, nil))
}

// NewFlaky returns a probe whose state cannot be encoded while failing
// is set (lifecycle_test.go), for the tests of package actors_test.
func NewFlaky(failing *atomic.Bool) actor.Actor { return &flaky{failing: failing} }
