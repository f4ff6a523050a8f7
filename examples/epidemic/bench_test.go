package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// benchTicks is how many ticks of the default grid a benchmark runs: some
// seconds, so that snapshots every second happen.
const benchTicks = 200

// newSystem returns a file store in a new directory (the caller closes
// it), a tally, and a system of configuration c saving into the store and
// telling the tally, not started.
func newSystem(b *testing.B, c config) (persistence.Store, *tally, *actors.System) {
	b.Helper()
	store, err := persistence.OpenURL(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	t := newTally(c.Side * c.Side)
	sys, err := actors.NewSystem(options(c, store, t)...)
	if err != nil {
		closeStore(store)
		b.Fatal(err)
	}
	return store, t, sys
}

// runFor runs c afresh, saving into a new file store, and returns how long
// the regions took to reach the end, how many snapshots completed and the
// state bytes of the last.
func runFor(b *testing.B, c config, alongside func(stop <-chan struct{})) (took time.Duration, snapshots, stateBytes int) {
	b.Helper()
	ctx := context.Background()
	store, t, sys := newSystem(b, c)
	defer closeStore(store)
	var mu sync.Mutex
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actors.SnapshotCompleted); ok {
			mu.Lock()
			snapshots, stateBytes = snapshots+1, e.Global.TotalStateBytes()
			mu.Unlock()
		}
	})
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		if alongside != nil {
			alongside(stop)
		}
	}()
	began := time.Now()
	if err := start(sys); err != nil {
		b.Fatal(err)
	}
	<-t.done
	took = time.Since(began)
	close(stop)
	<-stopped
	if _, err := t.output(); err != nil {
		b.Fatal(err)
	}
	_ = sys.Shutdown(ctx) // aborts a snapshot in progress
	mu.Lock()
	defer mu.Unlock()
	return took, snapshots, stateBytes
}

// writeEvery writes size bytes to a new file in dir every interval,
// fsync'd, until stop: the least a snapshot of that size every interval
// costs in any design, its bytes made durable, with no capture, no
// encoding and no protocol.
func writeEvery(b *testing.B, dir string, size int, interval time.Duration) func(stop <-chan struct{}) {
	data := make([]byte, size)
	return func(stop <-chan struct{}) {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("floor-%d", n%4)))
			if err == nil {
				_, err = f.Write(data)
				if err == nil {
					err = f.Sync()
				}
				err = errors.Join(err, f.Close())
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	}
}

// BenchmarkSnapshotCost runs the default grid for benchTicks ticks without
// snapshots (none), with one every second into a file store (every-1s),
// and with the floor of that (floor-write-every-1s): the bytes of such a
// snapshot written and fsync'd every second beside a run without
// snapshots. Each iteration is a round of the three, in an order that
// rotates from round to round, so that a machine whose speed drifts
// (shared cores) weighs on all three alike; the ratios are taken within a
// round. It reports the median over rounds of none's ticks/s and of each
// other's ratio to none in its round (of-none).
func BenchmarkSnapshotCost(b *testing.B) {
	rows := []struct {
		name     string
		interval time.Duration
		floor    bool
	}{{"none", 0, false}, {"every-1s", time.Second, false}, {"floor-write-every-1s", 0, true}}
	size := 32 << 20 // until the every-1s row measures it
	rates := make([][]float64, len(rows))
	snapshots := 0
	round := 0
	for b.Loop() {
		for j := range rows {
			i := (round + j) % len(rows)
			row := rows[i]
			c := defaults
			c.Ticks, c.Interval = benchTicks, row.interval
			var alongside func(<-chan struct{})
			if row.floor {
				alongside = writeEvery(b, b.TempDir(), size, time.Second)
			}
			took, n, bytes := runFor(b, c, alongside)
			rates[i] = append(rates[i], float64(c.Ticks)/took.Seconds())
			if n > 0 {
				snapshots += n
				size = bytes
			}
		}
		round++
	}
	b.ReportMetric(testenv.Median(rates[0]), "ticks/s")
	for i := 1; i < len(rows); i++ {
		ratios := make([]float64, len(rates[i]))
		for k := range ratios {
			ratios[k] = rates[i][k] / rates[0][k]
		}
		b.ReportMetric(testenv.Median(ratios), rows[i].name+"-of-none")
	}
	b.ReportMetric(float64(snapshots)/float64(round), "snapshots/round")
	b.ReportMetric(float64(size)/1e6, "MB-state")
}

// BenchmarkRestore restores the default grid from a snapshot taken at
// tick 20: until Restore returns, which is once the restored system's
// first snapshot is stored.
func BenchmarkRestore(b *testing.B) {
	ctx := context.Background()
	c := defaults
	store, t, sys := newSystem(b, c)
	defer closeStore(store)
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
