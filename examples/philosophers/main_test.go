package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

func TestMain(m *testing.M) {
	// Proto.Actor's dead-letter throttle sleeps for a second after the
	// first dead letter, which a wake-up timer firing as the system shuts
	// down makes.
	goleak.VerifyTestMain(m, testenv.ProtoActorTimers)
}

// deadline bounds every wait for an outcome: generous, for loaded machines.
const deadline = time.Minute

var (
	seeds = flag.Int("philosopher-seeds", 5, "seeded dinners of TestNaiveDeadlocks")
	seed  = flag.Uint64("philosopher-seed", 0, "run TestNaiveDeadlocks with this seed only")
)

// naive is a naive dinner that deadlocks within a second or so: the
// philosophers take twice the program's default time to reach for their
// second fork.
func naive(seed uint64) config {
	return config{N: 5, Think: 4 * time.Millisecond, Reach: 2 * time.Millisecond, Eat: 4 * time.Millisecond,
		Seed: seed, Check: 100 * time.Millisecond, Duration: deadline}
}

// replay is the command that runs c's dinner again.
func replay(c config) string {
	return fmt.Sprintf("go run ./examples/philosophers --seed %d --think %v --reach %v --eat %v --check %v", c.Seed, c.Think, c.Reach, c.Eat, c.Check)
}

// requireRing fails unless d is the naive dinner's deadlock of n
// philosophers: every philosopher holds its left fork and waits for its
// right one, and every fork waits for the philosopher on its right, in
// one cycle through all of them.
func requireRing(t *testing.T, d snapshot.Deadlock, n int, msgs ...any) {
	t.Helper()
	var all []snapshot.ProcessID
	for i := range n {
		all = append(all, snapshot.ProcessID(philosopherName(i)), snapshot.ProcessID(forkName(i)))
	}
	slices.Sort(all)
	require.Equal(t, all, d.Participants, msgs...)
	require.Empty(t, d.Blocked, msgs...)
	require.Equal(t, 2*n, d.Cycle, msgs...)
	require.Len(t, d.Edges, 2*n, msgs...)
	for i, e := range d.Edges {
		next := d.Edges[(i+1)%len(d.Edges)]
		require.Equal(t, e.To, next.From, "%s does not lead on to %s: %v", e, next, msgs)
		require.Zero(t, e.Request, msgs...)
		require.Positive(t, e.Waited, msgs...)
	}
	for i := range n {
		assert.Contains(t, d.String(), fmt.Sprintf("%s waits for %s (fork, ", philosopherName(i), forkName((i+1)%n)), msgs...)
		assert.Contains(t, d.String(), fmt.Sprintf("%s waits for %s (release, ", forkName(i), philosopherName(i)), msgs...)
	}
}

// The naive protocol deadlocks, and the check reports the cycle of every
// philosopher and fork. How long after the deadlock formed it did so is
// logged, not checked: a loaded machine may delay it.
func TestNaiveDeadlocks(t *testing.T) {
	var runs []uint64
	if *seed != 0 {
		runs = []uint64{*seed}
	} else {
		base := uint64(time.Now().UnixNano())
		for i := range *seeds {
			runs = append(runs, base+uint64(i))
		}
	}
	var delays []time.Duration
	for _, s := range runs {
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			c := naive(s)
			how := fmt.Sprintf("seed %d; replay: %s, or go test ./examples/philosophers -run TestNaiveDeadlocks -philosopher-seed=%d", s, replay(c), s)
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			var out bytes.Buffer
			o, err := run(ctx, &out, c)
			require.NoError(t, err, how)
			require.NotNil(t, o.Deadlock, "no deadlock in %v: %s\n%s", c.Duration, how, out.String())
			requireRing(t, *o.Deadlock, c.N, how)
			assert.Contains(t, out.String(), o.Deadlock.String(), how)

			delay := o.Found.Sub(o.Formed)
			delays = append(delays, delay)
			afterMeal := "no meal eaten"
			if !o.LastMeal.IsZero() {
				afterMeal = fmt.Sprintf("%v after the last meal", o.Found.Sub(o.LastMeal).Round(time.Millisecond))
			}
			t.Logf("%d meals; found %v after the deadlock formed (%.2f check intervals), %s",
				sum(o.Meals), delay.Round(time.Millisecond), float64(delay)/float64(c.Check), afterMeal)
		})
	}
	if len(delays) > 0 {
		slices.Sort(delays)
		t.Logf("delay from deadlock to report over %d dinners: min %v, median %v, max %v (check every %v)",
			len(delays), delays[0].Round(time.Millisecond), delays[len(delays)/2].Round(time.Millisecond),
			delays[len(delays)-1].Round(time.Millisecond), naive(0).Check)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// Ordered, the philosophers never deadlock: under their traffic neither
// the check, run every 2 ms, nor any cut taken meanwhile reports one,
// while the cuts do show philosophers waiting for forks and forks for
// philosophers. This is the check for false positives.
func TestOrderedNeverDeadlocks(t *testing.T) {
	c := config{N: 5, Think: 2 * time.Millisecond, Reach: time.Millisecond, Eat: 2 * time.Millisecond,
		Ordered: true, Seed: uint64(time.Now().UnixNano()), Check: 2 * time.Millisecond, Meals: 20}
	tb := newTable(c.N, c.Meals)
	found := make(chan sighting, 1)
	sys, err := start(c, persistence.NewMemory(), tb, found)
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Shutdown(context.Background())) }()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cuts, waiting := 0, 0
	for done := false; !done; {
		select {
		case <-tb.full:
			done = true
		case err := <-tb.broken:
			t.Fatal(err)
		case f := <-found:
			t.Fatalf("seed %d: a deadlock reported: %s", c.Seed, f.deadlock)
		case <-ctx.Done():
			t.Fatalf("seed %d: not every philosopher ate %d meals in %v: %s", c.Seed, c.Meals, deadline, mealList(tb.counts()))
		default:
			g, err := sys.Snapshot(ctx)
			require.NoError(t, err)
			require.Empty(t, snapshot.Deadlocks(g), "seed %d: snapshot %d", c.Seed, g.ID)
			cuts++
			for _, p := range g.Participants {
				if p.Waits != nil && len(p.Waits.Edges) > 0 {
					waiting++
				}
			}
		}
	}
	select {
	case f := <-found:
		t.Fatalf("seed %d: a deadlock reported: %s", c.Seed, f.deadlock)
	default:
	}
	assert.Positive(t, waiting, "no cut showed anyone waiting: the test shows nothing")
	t.Logf("seed %d: %s; %d cuts, with %d waits in all", c.Seed, mealList(tb.counts()), cuts, waiting)
}

// The program's ordered run: it stops once every philosopher has eaten
// its meals, and says there was no deadlock.
func TestOrderedRun(t *testing.T) {
	c := config{N: 4, Think: 2 * time.Millisecond, Reach: time.Millisecond, Eat: 2 * time.Millisecond,
		Ordered: true, Check: 10 * time.Millisecond, Duration: deadline, Meals: 20}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var out bytes.Buffer
	o, err := run(ctx, &out, c)
	require.NoError(t, err)
	require.Nil(t, o.Deadlock, out.String())
	for i, m := range o.Meals {
		assert.GreaterOrEqual(t, m, c.Meals, "%s", philosopherName(i))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	assert.Regexp(t, `^4 philosophers, ordered: lower-numbered fork first; mean think 2ms, reach 1ms, eat 2ms; seed \d+$`, lines[0])
	assert.Regexp(t, `^meals: p0 \d+  p1 \d+  p2 \d+  p3 \d+$`, lines[1])
	assert.Regexp(t, `^no deadlock in `, lines[2])
	t.Log(out.String())
}

// With a store, the program stores a snapshot after the deadlock: the
// latest in the store shows it, for actorsnap analyze.
func TestStoredSnapshotShowsDeadlock(t *testing.T) {
	dir := t.TempDir()
	c := naive(uint64(time.Now().UnixNano()))
	c.Store, c.Interval = dir, 20*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var out bytes.Buffer
	o, err := run(ctx, &out, c)
	require.NoError(t, err, out.String())
	require.NotNil(t, o.Deadlock, "seed %d: no deadlock: %s", c.Seed, replay(c))
	require.NotZero(t, o.Stored)
	assert.Contains(t, out.String(), fmt.Sprintf("stored snapshots show it from %d on: actorsnap analyze latest --store %s\n", o.Stored, dir))

	store, err := persistence.Open(ctx, dir)
	require.NoError(t, err)
	latest, err := store.Latest(ctx)
	require.NoError(t, err)
	stored, err := store.Load(ctx, o.Stored)
	require.NoError(t, err)
	for _, g := range []*snapshot.Global{stored, latest} {
		ds := snapshot.Deadlocks(g)
		require.Len(t, ds, 1, "snapshot %d", g.ID)
		requireRing(t, ds[0], c.N, "seed %d, snapshot %d", c.Seed, g.ID)
	}

	// A second dinner needs a store of its own.
	_, err = run(ctx, &out, c)
	require.ErrorContains(t, err, "give each run an empty directory")
}

func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    config
		want string
	}{
		{"one philosopher", config{N: 1, Check: time.Second}, "at least 2 philosophers"},
		{"negative time", config{N: 2, Think: -time.Millisecond, Check: time.Second}, "--think -1ms"},
		{"check too often", config{N: 2, Check: time.Microsecond}, "deadlock check interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := run(context.Background(), &out, tc.c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
