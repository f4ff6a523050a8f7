package actors

import (
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/snapshot"
)

// GateHeld returns the frames from other members that the start gate
// holds (startGate), for the tests of package actors_test.
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

// StartedHere returns the last snapshot s heard started, or took as
// started at its gate's timeout (System.startedHere).
func StartedHere(s *System) snapshot.SnapshotID { return s.startedHere() }

// WithInitiator makes a flooding start's initiator the participant
// pick names among the live ones (withInitiator).
func WithInitiator(pick func(live []snapshot.ProcessID) snapshot.ProcessID) Option {
	return withInitiator(pick)
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

// Churn is the churn workload (churn_test.go) for the tests of package
// actors_test: hubs on one or several members pass tokens through
// couriers, which stop after one hop, their names taken from a pool.
type Churn struct{ c *churn }

// NewChurn returns a workload of tokens tokens whose hubs name couriers
// from a pool of names names each.
func NewChurn(names, tokens int, seed uint64) *Churn {
	return &Churn{c: newChurn(names, int64(tokens), seed)}
}

// ChurnMessages registers the workload's messages.
var ChurnMessages = withOptions(WithMessage[*churnToken]("test.churn.token"), WithMessage[*churnStart]("test.churn.start"))

// Register gives sys the kinds "hub", each holding held tokens at first,
// and "courier".
func (w *Churn) Register(sys *System, held int) error { return w.c.register(sys, held) }

// SetHubs names the hubs couriers pass tokens to.
func (w *Churn) SetHubs(pids []*actor.PID) { w.c.hubs = pids }

// Start is the message that makes a hub send off its tokens.
func (w *Churn) Start() interface{} { return &churnStart{} }

// Couriers returns how many couriers were spawned, and how many of them
// under the name of one that stopped.
func (w *Churn) Couriers() (spawned, reused int64) { return w.c.couriers.Load(), w.c.reused.Load() }

// Held counts the tokens g holds: kept by hubs, and in flight.
func (w *Churn) Held(t *testing.T, g *snapshot.Global) int {
	held, _ := w.c.held(t, g)
	return held
}
