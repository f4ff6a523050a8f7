package snapshot_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

var (
	seeds = flag.Int("seeds", 10000, "number of seeds for the randomized property tests")
	seed  = flag.Uint64("seed", 0, "run only this seed of the randomized property tests")
	// seedsFrom moves every randomized test's seeds, so that a long run
	// can try seeds the default runs never do.
	seedsFrom = flag.Uint64("seeds-from", 1, "first seed of the randomized tests (each runs its count of seeds from it)")
)

// randomRun derives a whole bank run from one seed: graph shape and size,
// declarations, delays, traffic, and how snapshots start.
func randomRun(s uint64) snapshottest.BankRun {
	r := rand.New(rand.NewPCG(s, 0x5eed))
	n := 2 + r.IntN(49)
	strong := r.IntN(2) == 0
	run := bankRun(r, s, snapshottest.RandomGraph(r, n, strong), []float64{0, 0.5, 1})
	// Flooding reaches only what the initiator's channels lead to; the
	// coordinator sweeps up the rest.
	run.SweepAfter = 4 * run.MaxDelay
	withStops(&run, s)
	return run
}

// withStops makes half the runs stop 1 to 3 processes while their traffic
// runs, drawn apart from the rest of the run.
func withStops(run *snapshottest.BankRun, s uint64) {
	r := rand.New(rand.NewPCG(s, 0x5709))
	if r.IntN(2) == 0 {
		run.Stops, run.StopSeed, run.Respawn = 1+r.IntN(3), r.Uint64(), true
	}
}

// stopStats counts what the runs with stops exercised.
type stopStats struct {
	runs, departed, stoppedAfter, aborted, dropped, respawned int
}

func (st *stopStats) add(run snapshottest.BankRun, res *snapshottest.BankResult) {
	if run.Stops == 0 || res == nil {
		return
	}
	st.runs++
	n := res.Network
	st.aborted += len(n.Aborted())
	st.dropped += len(n.DroppedAt())
	for i := range run.Graph.Len() {
		st.respawned += n.Incarnation(i)
		st.dropped += n.Incarnation(i) // dropped, then given again
	}
	for _, g := range n.Completed() {
		for _, p := range g.Participants {
			if i, _ := n.Index(p.ID); p.Departed {
				st.departed++
			} else if n.Stopped(i) {
				st.stoppedAfter++
			}
		}
	}
}

// check logs the counts and fails a long run that did not exercise stops.
func (st *stopStats) check(t *testing.T, count uint64) {
	t.Logf("%d runs with stops: %d departed participants in complete snapshots, %d that recorded and then stopped, %d snapshots aborted by a message lost with a stopped one, %d stopped processes dropped, %d names given again",
		st.runs, st.departed, st.stoppedAfter, st.aborted, st.dropped, st.respawned)
	if count >= 500 && (st.departed == 0 || st.stoppedAfter == 0 || st.dropped == 0 || st.respawned == 0) {
		t.Errorf("stops not exercised")
	}
}

// bankRun draws from r what a randomized bank run on g needs besides its
// graph: delays, declarations, traffic, and how snapshots start (by
// broadcast with a chance drawn from broadcast).
func bankRun(r *rand.Rand, s uint64, g snapshottest.Graph, broadcast []float64) snapshottest.BankRun {
	return snapshottest.BankRun{
		Config: snapshottest.Config{
			Seed:     s,
			Graph:    g,
			MaxDelay: 1 + r.IntN(8),
			Declare:  snapshottest.Declare(r.IntN(3)),
		},
		Initial:   100,
		Rate:      1 + r.IntN(4),
		Ticks:     20 + r.IntN(60),
		Snapshots: 1 + r.IntN(5),
		Broadcast: broadcast[r.IntN(len(broadcast))],
	}
}

// seedRange returns the seeds a randomized test runs: n from -seeds-from
// (1 by default), short under -short, or the one -seed names.
func seedRange(n, short int) (first, count uint64) {
	switch {
	case *seed != 0:
		return *seed, 1
	case testing.Short():
		return *seedsFrom, uint64(short)
	}
	return *seedsFrom, uint64(n)
}

// TestRandomized runs the bank over thousands of random graphs with cycles,
// strongly connected and not, with concurrent snapshots started by random
// processes or by broadcast, and checks every invariant on every snapshot.
func TestRandomized(t *testing.T) {
	t.Parallel()
	randomRuns(t, "TestRandomized", func(run *snapshottest.BankRun) {
		run.StopLag = 0.5 // half the stops come to the coordinator late
		if *seed != 0 {
			run.Log = func(line string) { t.Log(line) }
		}
	}, nil)
}

// TestRandomizedEpochs runs the bank in the Epochs mode over as many
// random graphs as TestRandomized, with stops, drops and names given
// again, and snapshots started by broadcast or lazily: at one process,
// the epoch spreading with the traffic, and the coordinator's sweeps
// starting the processes that stay silent.
func TestRandomizedEpochs(t *testing.T) {
	t.Parallel()
	markers, inFlight, deltas, captured, recaptured, failed := 0, 0, 0, 0, 0, 0
	count := randomRuns(t, "TestRandomizedEpochs", func(run *snapshottest.BankRun) {
		run.Mode = snapshot.Epochs
		run.StopLag = 0.5 // half the stops come to the coordinator late
		// Every fifth seed, some records cannot be handed on whole: each
		// fails its own snapshot only, and the ledger stays in step.
		if run.Seed%5 == 3 {
			run.FailRecords = 0.05
		}
		// Every other seed, a process that records hands over what is
		// queued for it, as actorsnap's participants do.
		run.Capture = run.Seed%2 == 0
		switch run.Seed % 3 {
		case 1: // every record lists every counter (fewer than 64 channels)
			run.DeltaMin = 64
		case 2: // records of every counter when more than a quarter changed
			run.DeltaMin = 2
		}
		run.Log = func(line string) {
			if *seed != 0 {
				t.Log(line)
			}
			if strings.Contains(line, "marker") {
				markers++
			}
			if strings.Contains(line, "changed since") {
				deltas++
			}
		}
	}, func(res *snapshottest.BankResult) {
		for _, g := range res.Network.Completed() {
			for _, c := range g.Channels {
				inFlight += len(c.Messages)
			}
		}
		captured += res.Network.Captured()
		recaptured += res.Network.Recaptured()
		failed += res.Network.Failed()
	})
	t.Logf("%d messages in flight in complete snapshots, %d markers, %d records of what changed, %d queued messages captured, %d of them once every participant recorded, %d records not handed on whole",
		inFlight, markers, deltas, captured, recaptured, failed)
	if markers > 0 || (count >= 500 && (inFlight == 0 || deltas == 0 || captured == 0 || recaptured == 0 || failed == 0)) {
		t.Errorf("want no marker, some channel state, some records of what changed, some captures, before and after the records, and some records not handed on whole")
	}
}

// TestRandomizedSums runs the bank in the Epochs mode counting in sums
// over as many random graphs as TestRandomized, with stops (what is
// still on its way to a stopped process handed over as lost), sends that
// meet a stopped process, drops and names given again, captures,
// snapshots started at one process or broadcast, and records not handed
// on whole.
func TestRandomizedSums(t *testing.T) {
	t.Parallel()
	inFlight, lose, races, captured, recaptured, failed, stops, lagged := 0, 0, 0, 0, 0, 0, 0, 0
	count := randomRuns(t, "TestRandomizedSums", func(run *snapshottest.BankRun) {
		run.Mode = snapshot.Epochs
		run.Sums = true
		run.StopLag = 0.5 // half the stops come to the coordinator late
		if run.Seed%5 == 3 {
			run.FailRecords = 0.05
		}
		run.Capture = run.Seed%2 == 0
		run.Log = func(line string) {
			switch {
			case strings.Contains(line, ": loses "):
				lose++
			case strings.Contains(line, "counted and lost"):
				races++
			case strings.Contains(line, "its stop reaches the coordinator"):
				lagged++
			}
		}
	}, func(res *snapshottest.BankResult) {
		for _, g := range res.Network.Completed() {
			if g.Sums == nil {
				t.Errorf("snapshot %d counted in sums keeps no sums", g.ID)
			}
			for _, c := range g.Channels {
				inFlight += len(c.Messages)
			}
		}
		for _, err := range res.Network.Aborted() {
			if errors.Is(err, snapshot.ErrImbalance) {
				stops++
			}
		}
		captured += res.Network.Captured()
		recaptured += res.Network.Recaptured()
		failed += res.Network.Failed()
	})
	t.Logf("%d messages in flight in complete snapshots, %d stops that lost queued messages, %d sends counted and lost with a stopped process, %d snapshots aborted by them, %d queued messages captured, %d of them once every participant recorded, %d records not handed on whole, %d stops that reached the coordinator late",
		inFlight, lose, races, stops, captured, recaptured, failed, lagged)
	if count >= 500 && (inFlight == 0 || lose == 0 || races == 0 || captured == 0 || recaptured == 0 || failed == 0 || lagged == 0) {
		t.Errorf("want some channel state, some stops with messages queued, some sends that meet a stopped process, some captures, before and after the records, some records not handed on whole, and some stops that come late")
	}
}

// regressions are seeds, by test, that failed once in a long run from
// -seeds-from and are run every time since, ahead of the range:
//
//   - TestRandomizedEpochs 319073: a record that could not be handed on
//     whole (Coordinator.Failed) ended the last snapshot running before
//     its counters reached the Ledger; the participant that had stopped
//     was dropped in between, and the record's count of the channel to
//     it outlived the drop, to be held against the next incarnation
//     under its name.
var regressions = map[string][]uint64{
	"TestRandomizedEpochs": {319073},
}

// randomRuns runs randomRun over the seeds of seedRange, each changed by
// prepare (if set) and its result given to observe (if set), and fails
// with the seed and the command replaying it (test names the test). It
// returns the number of seeds run.
func randomRuns(t *testing.T, test string, prepare func(*snapshottest.BankRun), observe func(*snapshottest.BankResult)) uint64 {
	t.Helper()
	first, count := seedRange(*seeds, 1000)
	var stops stopStats
	defer func() { stops.check(t, count) }()
	list := make([]uint64, 0, count)
	if *seed == 0 {
		list = append(list, regressions[test]...)
	}
	for s := first; s < first+count; s++ {
		list = append(list, s)
	}
	for _, s := range list {
		run := randomRun(s)
		if prepare != nil {
			prepare(&run)
		}
		res, err := run.Run()
		stops.add(run, res)
		if res != nil && observe != nil {
			observe(res)
		}
		if err != nil {
			t.Fatalf("seed %d (%d processes, %d edges, declare %d, %d snapshots): %v\nreplay: go test ./snapshot -run '%s$' -seed %d -v",
				s, run.Graph.Len(), len(run.Graph.Edges), run.Declare, run.Snapshots, err, test, s)
		}
	}
	return count
}

var alignedSeeds = flag.Int("aligned-seeds", 5000, "number of seeds for the randomized aligned-mode test")

// randomAlignedRun derives an aligned-mode bank run from one seed: an
// acyclic graph, a strongly connected one, or one with cycles over part
// of it; back edges found by a depth-first search from the sources.
func randomAlignedRun(s uint64) snapshottest.BankRun {
	r := rand.New(rand.NewPCG(s, 0xa119))
	n := 2 + r.IntN(39)
	var g snapshottest.Graph
	switch r.IntN(3) {
	case 0:
		g = snapshottest.RandomDAG(r, n)
	case 1:
		g = snapshottest.RandomGraph(r, n, true)
	default:
		g = snapshottest.RandomGraph(r, n, false)
	}
	run := bankRun(r, s, g, []float64{0, 0.5, 1, 1})
	run.Mode = snapshot.Aligned
	switch r.IntN(3) {
	case 0:
		run.BackEdges = g.BackEdges(snapshot.BackEdges)
	case 1:
		run.Learn = true // as actorsnap's guardian: awaited sets change as channels are learnt
	} // else ShallowBackEdges of the whole graph
	if run.Broadcast < 1 {
		// Flooding reaches only what the initiator's channels lead to.
		// Broadcast runs have no sweep: they must finish on their own.
		run.SweepAfter = 4 * run.MaxDelay
	}
	withStops(&run, s)
	return run
}

// TestRandomizedAligned runs the bank in the aligned mode over thousands
// of random acyclic and cyclic graphs with concurrent snapshots (in a
// third of the runs with the awaited sets changing as the coordinator
// learns channels, as actorsnap's guardian does), and
// checks every invariant of the unaligned mode on every snapshot, that no
// snapshot is left waiting (a deadlock fails the run: broadcast runs have
// no sweep and no timeout), and, where every channel is declared and
// snapshots are broadcast, that only back edges hold channel state.
func TestRandomizedAligned(t *testing.T) {
	t.Parallel()
	first, count := seedRange(*alignedSeeds, 500)
	heldTotal := 0
	defer func() { t.Logf("%d first messages held behind barriers", heldTotal) }()
	var stops stopStats
	defer func() { stops.check(t, count) }()
	for s := first; s < first+count; s++ {
		run := randomAlignedRun(s)
		fail := func(err error) {
			t.Fatalf("seed %d (%d processes, %d edges, declare %d, broadcast %.1f, %d snapshots): %v\nreplay: go test ./snapshot -run 'TestRandomizedAligned$' -seed %d -v",
				s, run.Graph.Len(), len(run.Graph.Edges), run.Declare, run.Broadcast, run.Snapshots, err, s)
		}
		var held int
		run.Log = func(line string) {
			if strings.Contains(line, ": held seq=") {
				held++
			}
		}
		res, err := run.Run()
		stops.add(run, res)
		if err != nil {
			fail(err)
		}
		heldTotal += held
		if run.Declare != snapshottest.DeclareAll || run.Broadcast < 1 || run.Learn || run.Stops > 0 {
			continue // channels discovered (a process under a dropped one's name declares none) are logged
		}
		backEdges := run.BackEdges
		if backEdges == nil {
			backEdges = run.Graph.BackEdges(snapshot.ShallowBackEdges)
		}
		back := make(map[snapshot.Channel]bool)
		for _, e := range backEdges {
			back[snapshot.Channel{From: run.Graph.Names[e.From], To: run.Graph.Names[e.To]}] = true
		}
		for _, g := range res.Network.Completed() {
			for _, c := range g.Channels {
				if len(c.Messages) > 0 && !back[c.Channel] {
					fail(fmt.Errorf("snapshot %d: channel %s is not a back edge but holds %d messages", g.ID, c.Channel, len(c.Messages)))
				}
			}
		}
	}
}
