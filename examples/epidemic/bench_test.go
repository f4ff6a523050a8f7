package main

import (
	"context"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// benchTicks is how many ticks of the default grid a benchmark runs: some
// seconds, so that snapshots every second happen.
const benchTicks = 200

// runFor runs c afresh, saving into a new file store, and returns how long
// the regions took to reach the end and how many snapshots completed.
func runFor(b *testing.B, c config) (time.Duration, int) {
	b.Helper()
	ctx := context.Background()
	store, err := persistence.OpenURL(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer closeStore(store)
	t := newTally(c.Side * c.Side)
	sys, err := actors.NewSystem(options(c, store, t)...)
	if err != nil {
		b.Fatal(err)
	}
	completed := make(chan struct{}, 1024)
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		if _, ok := evt.(*actors.SnapshotCompleted); ok {
			completed <- struct{}{}
		}
	})
	began := time.Now()
	if err := start(sys); err != nil {
		b.Fatal(err)
	}
	<-t.done
	took := time.Since(began)
	if _, err := t.output(); err != nil {
		b.Fatal(err)
	}
	_ = sys.Shutdown(ctx) // aborts a snapshot in progress
	return took, len(completed)
}

// BenchmarkSnapshotCost runs the default grid for benchTicks ticks without
// snapshots and with one every second into a file store: the ratio of
// their ticks/s is what the snapshots cost.
func BenchmarkSnapshotCost(b *testing.B) {
	for _, bc := range []struct {
		name     string
		interval time.Duration
	}{{"none", 0}, {"every-1s", time.Second}} {
		b.Run(bc.name, func(b *testing.B) {
			c := defaults
			c.Ticks, c.Interval = benchTicks, bc.interval
			var took time.Duration
			var ticks, snapshots int
			for b.Loop() {
				d, n := runFor(b, c)
				took += d
				ticks += c.Ticks
				snapshots += n
			}
			b.ReportMetric(float64(ticks)/took.Seconds(), "ticks/s")
			b.ReportMetric(float64(snapshots)/float64(b.N), "snapshots/op")
		})
	}
}

// BenchmarkRestore restores the default grid from a snapshot taken at
// tick 20: until Restore returns, which is once the restored system's
// first snapshot is stored.
func BenchmarkRestore(b *testing.B) {
	ctx := context.Background()
	c := defaults
	store, err := persistence.OpenURL(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer closeStore(store)
	t := newTally(c.Side * c.Side)
	sys, err := actors.NewSystem(options(c, store, t)...)
	if err != nil {
		b.Fatal(err)
	}
	taken := make(chan *snapshot.Global, 1)
	t.when(20, func() {
		go func() {
			g, err := sys.Snapshot(ctx)
			if err != nil {
				b.Error(err)
			}
			taken <- g
		}()
	})
	if err := start(sys); err != nil {
		b.Fatal(err)
	}
	g := <-taken
	if err := sys.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	if g == nil {
		b.FailNow()
	}
	size := 0
	for _, p := range g.Participants {
		size += len(p.State)
	}
	for b.Loop() {
		sys, err := actors.Restore(ctx, store, g.ID, options(c, store, newTally(c.Side*c.Side))...)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = sys.Shutdown(ctx) // the regions run on meanwhile
		b.StartTimer()
	}
	b.ReportMetric(float64(size)/1e6, "MB-state")
}
