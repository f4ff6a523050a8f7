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
// snapshotting window's rate over the idle window's (the figure the 5%
// target is read from); the idle windows' median rate; the snapshots'
// rate in their windows and their latency p50 and p99.
//
// The workloads are those of BenchmarkBank (its 1,000 accounts in a ring
// with chords), BenchmarkAllToAll, BenchmarkFanIn, BenchmarkChain and
// BenchmarkDenseBank, in every mode of workloadModes.
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
					benchPaired(b, inMode(idle, m), w.unit, w.start)
				})
			}
		})
	}
}

// benchPaired runs BenchmarkSnapshotCost's pairs of windows on one
// workload on v's plumbing.
func benchPaired(b *testing.B, v variant, unit string, start func(*testing.B, *rig) workload) {
	r := newRig(b, v)
	defer r.shutdown(b)
	w := start(b, r)
	l := w.traffic()
	defer l.drain(b)
	w.kick()
	l.wait(b, shapeWarmup)
	// Three snapshots first: the first shows the guardian the channels
	// (the aligned mode waits only on those) and its records list every
	// counter; the Ledger takes every counter in at the first records of
	// changes after it (the dense bank's first snapshots are its slowest).
	for range 3 {
		if _, err := r.snap.Snapshot(context.Background()); err != nil {
			b.Fatal(err)
		}
	}

	snaps := 0
	var snapping time.Duration
	window := func(snapshotting bool) float64 {
		var s *snapshotter
		c0, t0 := l.transfers.Load(), time.Now()
		if snapshotting {
			s = r.timedRounds(100 * time.Millisecond) // r.times written until halt
		}
		// A window of the traffic, timed: not an outcome awaited.
		<-time.After(pairedWindow)
		if s != nil {
			n, err := s.halt() // waits for the snapshot in progress
			if err != nil {
				b.Fatalf("snapshot %d: %v", n+1, err)
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
	b.ReportMetric(float64(snaps)/snapping.Seconds(), "snapshots/s")
	reportLatency(b, r.times)
}
