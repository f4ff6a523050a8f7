package snapshot_test

import (
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

var (
	seeds = flag.Int("seeds", 10000, "number of seeds for the randomized property tests")
	seed  = flag.Uint64("seed", 0, "run only this seed of the randomized property tests")
)

// randomRun derives a whole bank run from one seed: graph shape and size,
// declarations, delays, traffic, and how snapshots start.
func randomRun(s uint64) snapshottest.BankRun {
	r := rand.New(rand.NewPCG(s, 0x5eed))
	n := 2 + r.IntN(49)
	strong := r.IntN(2) == 0
	run := snapshottest.BankRun{
		Config: snapshottest.Config{
			Seed:     s,
			Graph:    snapshottest.RandomGraph(r, n, strong),
			MaxDelay: 1 + r.IntN(8),
			Declare:  snapshottest.Declare(r.IntN(3)),
		},
		Initial:   100,
		Rate:      1 + r.IntN(4),
		Ticks:     20 + r.IntN(60),
		Snapshots: 1 + r.IntN(5),
		Broadcast: []float64{0, 0.5, 1}[r.IntN(3)],
	}
	// Flooding reaches only what the initiator's channels lead to; the
	// coordinator sweeps up the rest.
	run.SweepAfter = 4 * run.MaxDelay
	return run
}

// TestRandomized runs the bank over thousands of random graphs with cycles,
// strongly connected and not, with concurrent snapshots started by random
// processes or by broadcast, and checks every invariant on every snapshot.
func TestRandomized(t *testing.T) {
	t.Parallel()
	first, count := uint64(1), uint64(*seeds)
	if *seed != 0 {
		first, count = *seed, 1
	}
	if testing.Short() && *seed == 0 {
		count = 1000
	}
	for s := first; s < first+count; s++ {
		run := randomRun(s)
		if _, err := run.Run(); err != nil {
			t.Fatalf("seed %d (%d processes, %d edges, declare %d, %d snapshots): %v\nreplay: go test ./snapshot -run 'TestRandomized$' -seed %d -v",
				s, run.Graph.Len(), len(run.Graph.Edges), run.Declare, run.Snapshots, err, s)
		}
	}
}
