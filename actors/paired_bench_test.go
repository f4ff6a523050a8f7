package actors_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/internal/testenv"
)

// pairedWindow is how long each window of BenchmarkSnapshotCost lasts.
const pairedWindow = 500 * time.Millisecond

// BenchmarkSnapshotCost measures what a snapshot every 100 ms costs each
// workload's traffic, in windows paired in one running system rather than
// in separate runs: this machine's throughput swings by more than the
// cost measured between runs a few seconds apart (all-to-all read 1.6 M
// and 4.3 M msgs/s in two runs of the same binary), while two windows
// next to each other share the same phase. One op is a pair: a window of
// traffic alone and one with a snapshot started every 100 ms (the last
// one finished inside it), in turn first and second, so that what a
// window leaves to the next (the collector's debt, say) falls as often on
// either kind. It reports of-idle, the median over the pairs of the
// snapshotting window's rate over the idle window's (the figure the
// target of at most 5% is read from); the idle windows' median rate; the
// snapshots' rate in their windows (snapshots/s) and their latency p50
// and p99.
//
// The workloads are those of BenchmarkBank (its 1,000 accounts in a ring
// with chords), BenchmarkAllToAll, BenchmarkFanIn, BenchmarkChain and
// BenchmarkDenseBank, in every mode of workloadModes. Beside the modes,
// each workload has a floor row, floor-capture-in-flight: the same pairs
// of windows on the same actorsnap plumbing, with no snapshot, where a
// floorCaptureInFlight round replaces each snapshot: a message to every
// actor of the workload, on which it encodes its state and its share of
// the messages the workload keeps in flight. That is the least any
// consistent snapshot of the workload encodes, so the row's of-idle is
// what the 5% target is read against in the same run: the part of a
// mode's cost that no snapshot avoids. It reports rounds/s in place of
// snapshots/s, and its p50 and p99 are the rounds' latency.
func BenchmarkSnapshotCost(b *testing.B) {
	workloads := []struct {
		name  string
		unit  string
		start func(*testing.B, *rig) workload
	}{
		{"ring-bank", "transfers", func(b *testing.B, r *rig) workload { return newBank(b, r, 1000, 1) }},
		{"all-to-all", "msgs", func(b *testing.B, r *rig) workload { return newAllToAll(b, r, allToAllActors) }},
		{"fan-in", "msgs", func(b *testing.B, r *rig) workload { return newFanIn(b, r, fanInSenders) }},
		{"chain", "msgs", func(b *testing.B, r *rig) workload { return newChain(b, r, chainLength) }},
		{"dense-bank", "transfers", func(b *testing.B, r *rig) workload { return newDenseBank(b, r, denseAccounts, 1) }},
	}
	idle := variants[slices.IndexFunc(variants, func(v variant) bool { return v.name == "actorsnap" })]
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			for _, m := range workloadModes {
				b.Run("mode="+m.name, func(b *testing.B) {
					benchPaired(b, inMode(idle, m), w.unit, w.start, noFloor)
				})
			}
			b.Run("floor-capture-in-flight", func(b *testing.B) {
				benchPaired(b, idle, w.unit, w.start, floorCaptureInFlight)
			})
		})
	}
}

// benchPaired runs BenchmarkSnapshotCost's pairs of windows on one
// workload on v's plumbing: with a snapshot every 100 ms, or, if floor is
// set, a round of floor instead.
func benchPaired(b *testing.B, v variant, unit string, start func(*testing.B, *rig) workload, floor floorKind) {
	r := newRig(b, v)
	defer r.shutdown(b)
	w := start(b, r)
	l := w.traffic()
	defer l.drain(b)
	// round is what the snapshotting windows run every 100 ms: a
	// snapshot, or a floor round. A floor round ignores quit, so that
	// halt waits for the one in progress, as it does for a snapshot.
	round, per := r.snapshotRound, "snapshots/s"
	if floor != noFloor {
		round = func(context.Context, <-chan struct{}) error { return w.floorRound(floor, nil) }
		per = "rounds/s"
	}
	w.kick()
	l.wait(b, shapeWarmup)
	// Three rounds first: the first snapshot shows the guardian the
	// channels (the aligned mode waits only on those) and its records
	// list every counter; the Ledger takes every counter in at the first
	// records of changes after it (the dense bank's first snapshots are
	// its slowest). A floor row warms up on its own rounds.
	for range 3 {
		if err := round(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
	}

	snaps := 0
	var snapping time.Duration
	window := func(snapshotting bool) float64 {
		var s *snapshotter
		c0, t0 := l.transfers.Load(), time.Now()
		if snapshotting {
			s = r.timedRounds(100*time.Millisecond, round) // r.times written until halt
		}
		// A window of the traffic, timed: not an outcome awaited.
		<-time.After(pairedWindow)
		if s != nil {
			n, err := s.halt() // waits for the round in progress
			if err != nil {
				b.Fatalf("round %d: %v", n+1, err)
			}
			snaps += n
		}
		d := time.Since(t0)
		if snapshotting {
			snapping += d
		}
		return float64(l.transfers.Load()-c0) / d.Seconds()
	}

	var ratios, idles []float64
	for i := 0; b.Loop(); i++ {
		var alone, with float64
		if i%2 == 0 {
			alone = window(false)
			with = window(true)
		} else {
			with = window(true)
			alone = window(false)
		}
		ratios, idles = append(ratios, with/alone), append(idles, alone)
	}
	b.ReportMetric(testenv.Median(ratios), "of-idle")
	b.ReportMetric(testenv.Median(idles), "idle-"+unit+"/s")
	b.ReportMetric(float64(snaps)/snapping.Seconds(), per)
	reportLatency(b, r.times)
}
