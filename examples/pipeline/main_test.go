package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

func TestMain(m *testing.M) {
	// Proto.Actor's dead-letter throttle sleeps for a second after the
	// first dead letter, which a shutdown mid-run makes.
	goleak.VerifyTestMain(m, testenv.ProtoActorTimers)
}

// deadline bounds every wait for an outcome: generous, for loaded machines.
const deadline = time.Minute

// sequential is the computation without actors: all items, round by round.
func sequential(c config) Output {
	a, x := inputs(c.Items, c.Seed)
	for r := 1; ; r++ {
		var m float64
		for i := range x {
			nx := advance(x[i], a[i], c.Work)
			m = math.Max(m, math.Abs(nx-x[i]))
			x[i] = nx
		}
		if m < tol || r == maxRounds {
			return Output{Rounds: r, Values: x}
		}
	}
}

// requireSame fails unless got has want's rounds and every value bit for bit.
func requireSame(t *testing.T, want, got Output) {
	t.Helper()
	require.NoError(t, got.Err)
	require.Equal(t, want.Rounds, got.Rounds, "rounds")
	require.Len(t, got.Values, len(want.Values))
	for i := range want.Values {
		if math.Float64bits(want.Values[i]) != math.Float64bits(got.Values[i]) {
			t.Fatalf("x[%d] = %v, want %v", i, got.Values[i], want.Values[i])
		}
	}
}

func wait(t *testing.T, out <-chan Output) Output {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(deadline):
		t.Fatalf("no output within %v", deadline)
		return Output{}
	}
}

// uninterrupted runs c on actors, without snapshots.
func uninterrupted(t *testing.T, c config) Output {
	t.Helper()
	out := make(chan Output, 1)
	sys, err := start(c, persistence.NewMemory(), out, nil)
	require.NoError(t, err)
	o := wait(t, out)
	require.NoError(t, sys.Shutdown(context.Background()))
	return o
}

// The actors compute what the loop computes, whatever the number of
// workers: each value depends on its own inputs and the round only.
func TestUninterruptedRunIsTheSequentialComputation(t *testing.T) {
	for _, workers := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			c := config{Items: 1000, Workers: workers, Work: 8, Seed: 2}
			want := sequential(c)
			require.Greater(t, want.Rounds, 50)
			requireSame(t, want, uninterrupted(t, c))
		})
	}
}

// channels returns every channel of the pipeline, and which are back edges.
func channels(workers int) (all, back map[snapshot.Channel]bool) {
	all, back = map[snapshot.Channel]bool{}, map[snapshot.Channel]bool{}
	for i := range workers {
		w := snapshot.ProcessID(workerName(i))
		all[snapshot.Channel{From: sourceName, To: w}] = true
		all[snapshot.Channel{From: w, To: aggName}] = true
		all[snapshot.Channel{From: aggName, To: w}] = true
		back[snapshot.Channel{From: aggName, To: w}] = true
	}
	return all, back
}

// snapshots takes snapshots of sys back to back, checking each, until keep
// returns true of one or the computation ends (ok false). A snapshot
// taken once the guardian has seen every channel (its graph comes from
// the snapshots it completed) waits for barriers on all but the back
// edges, so only those may hold messages.
func snapshots(t *testing.T, sys *actors.System, out <-chan Output, workers int, keep func(*snapshot.Global, *aggregator) bool) (kept *snapshot.Global, o Output, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	all, back := channels(workers)
	seen := map[snapshot.Channel]bool{}
	for n := 0; ; n++ {
		select {
		case o := <-out:
			t.Logf("%d snapshots", n)
			return nil, o, false
		default:
		}
		known := true
		for c := range all {
			known = known && seen[c]
		}
		g, err := sys.Snapshot(ctx)
		require.NoError(t, err)
		require.NoError(t, g.Verify())
		require.Equal(t, snapshot.Aligned, g.Mode)
		for _, c := range g.Channels {
			require.True(t, all[c.Channel], "snapshot %d: channel %s", g.ID, c.Channel)
			seen[c.Channel] = true
			if known && len(c.Messages) > 0 {
				require.True(t, back[c.Channel], "snapshot %d: %d messages in flight on %s, not a back edge", g.ID, len(c.Messages), c.Channel)
			}
		}
		agg, err := aggregatorIn(g)
		require.NoError(t, err)
		if known && keep(g, agg) {
			t.Logf("%d snapshots", n+1)
			return g, Output{}, true
		}
	}
}

// A run killed after an aligned snapshot taken mid-run, restored from it
// into a fresh system, ends with exactly the output of a run never
// interrupted.
func TestRestoreFromMidRunSnapshotEndsAsUninterrupted(t *testing.T) {
	c := config{Items: 2000, Workers: 4, Work: 128, Seed: 3}
	want := uninterrupted(t, c)
	requireSame(t, sequential(c), want)

	store, err := persistence.Open(context.Background(), t.TempDir())
	require.NoError(t, err)
	out := make(chan Output, 1)
	sys, err := start(c, store, out, nil)
	require.NoError(t, err)
	kept, _, ok := snapshots(t, sys, out, c.Workers, func(g *snapshot.Global, a *aggregator) bool {
		return a.Round > want.Rounds/3
	})
	require.True(t, ok, "the run ended before a snapshot caught round %d of %d: raise Work", want.Rounds/3+1, want.Rounds)
	require.NoError(t, sys.Shutdown(context.Background()), "the crash")

	agg, err := aggregatorIn(kept)
	require.NoError(t, err)
	require.Greater(t, agg.Round, 1)
	require.Less(t, agg.Round, want.Rounds)
	_, back := channels(c.Workers)
	inFlight := 0
	for _, ch := range kept.Channels {
		if len(ch.Messages) > 0 {
			require.True(t, back[ch.Channel], "channel state on %s", ch.Channel)
			inFlight += len(ch.Messages)
		}
	}
	t.Logf("restoring snapshot %d: round %d of %d, %d messages in flight on back edges", kept.ID, agg.Round, want.Rounds, inFlight)

	// The restored system learns every channel from the snapshot: its
	// snapshots are aligned from the first.
	out = make(chan Output, 1)
	sys, err = resume(context.Background(), io.Discard, config{Restore: fmt.Sprint(kept.ID)}, store, out)
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Shutdown(context.Background())) }()
	_, o, ok := snapshots(t, sys, out, c.Workers, func(*snapshot.Global, *aggregator) bool { return false })
	require.False(t, ok)
	requireSame(t, want, o)
}

// The program's flow: a run with periodic snapshots into a file store,
// then a resume from the latest, both printing the same result.
func TestRunThenResumeLatest(t *testing.T) {
	dir := t.TempDir()
	c := config{Items: 200, Workers: 3, Work: 256, Seed: 5, Store: dir, Interval: time.Millisecond}
	want := sequential(c)
	result := fmt.Sprintf("converged after %d rounds: 200 values, sha256 %x\n", want.Rounds, digest(want.Values))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	var first bytes.Buffer
	o, err := run(ctx, &first, c)
	require.NoError(t, err, first.String())
	requireSame(t, want, o)
	assert.Contains(t, first.String(), "200 items on 3 workers, seed 5, 256 steps a round\n")
	assert.Regexp(t, `snapshot +\d+  aligned  5 participants +\d+ in flight +\d+ B channel state`, first.String())
	assert.Contains(t, first.String(), result)

	var again bytes.Buffer
	o, err = run(ctx, &again, config{Store: dir, Restore: "latest"})
	require.NoError(t, err, again.String())
	requireSame(t, want, o)
	assert.Regexp(t, `^resuming from snapshot \d+: round \d+, \d+ messages in flight\n`, again.String())
	assert.Contains(t, again.String(), result)
	t.Logf("first run:\n%s\nresumed:\n%s", first.String(), again.String())
}

func TestRunRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		c    config
		want string
	}{
		{"no items", config{Workers: 1, Work: 1}, "at least 1 item"},
		{"bad id", config{Restore: "x"}, `--restore "x"`},
		{"empty store", config{Store: t.TempDir(), Restore: "latest"}, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(ctx, io.Discard, tc.c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
