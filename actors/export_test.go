package actors

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

// WithDeltaMin sets the channels from which participants send records of
// what changed (snapshot.Config.DeltaMin; -1: always).
func WithDeltaMin(n int) Option { return withDeltaMin(n) }
