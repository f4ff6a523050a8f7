package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/actors/actorstest"
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

// small is a run of a few tens of milliseconds: long enough for a
// snapshot started in its first ticks to catch it mid-run.
var small = config{
	Side: 3, Agents: 300, Infected: 10, Ticks: 200, Seed: 7,
	Params: Params{Infection: 0.4, Recovery: 0.1, Move: 0.05},
}

func runOK(t *testing.T, c config) (Output, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var out bytes.Buffer
	o, err := run(ctx, &out, c)
	require.NoError(t, err, out.String())
	return o, out.String()
}

// finalLine is the last line of a run with output o.
func finalLine(o Output) string {
	return fmt.Sprintf("final tick %d: S=%d I=%d R=%d sha256 %x\n", o.Tick, o.Counts.S, o.Counts.I, o.Counts.R, o.Hash)
}

// The library's check of the contract: the epidemic, interrupted at
// seeded moments and restored each time, ends with every region in the
// state an uninterrupted run leaves it in, in every mode.
func TestResumableByActorstest(t *testing.T) {
	for _, mode := range []snapshot.Mode{snapshot.Unaligned, snapshot.Aligned, snapshot.Epochs} {
		t.Run(mode.String(), func(t *testing.T) {
			c := small
			c.Mode, c.ModeSet = mode, true
			seed := uint64(time.Now().UnixNano())
			r := actorstest.Check(t, actorstest.Simulation{
				Options: func(store persistence.Store) []actors.Option { return options(c, store, nil) },
				Start:   start,
			}, actorstest.Config{Seed: seed, Restores: 3})
			t.Logf("seed %d: uninterrupted %v, restored from %d snapshots", seed, r.Uninterrupted, len(r.Restored))
		})
	}
}

// Two runs of one configuration end in the same state, bit for bit,
// whatever the interleaving of their messages; another seed does not.
func TestRunIsDeterministic(t *testing.T) {
	want, out := runOK(t, small)
	assert.Contains(t, out, "3x3 regions of 300 agents, 10 infected, 200 ticks, seed 7")
	assert.Contains(t, out, finalLine(want))
	require.Equal(t, small.Ticks, want.Tick)
	require.Equal(t, 9*300, want.Counts.S+want.Counts.I+want.Counts.R, "agents are neither made nor lost")
	require.Greater(t, want.Counts.R, 0, "the epidemic spread")
	for range 3 {
		got, _ := runOK(t, small)
		require.Equal(t, want, got)
	}
	other := small
	other.Seed++
	got, _ := runOK(t, other)
	require.NotEqual(t, want.Hash, got.Hash)
}

// snapshotAt runs c, saving into a file store in a fresh directory, and
// takes a snapshot as soon as a region reaches tick at, which catches the
// regions mid-run. It returns the directory, the snapshot's id and the
// run's output. The small grid runs its ticks in milliseconds, so on a
// loaded machine the snapshot may complete only after the last tick; such
// a run catches nothing mid-run, and is begun again, a few times.
func snapshotAt(t *testing.T, c config, at int) (string, snapshot.SnapshotID, Output) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		dir, g, o := snapshotOnce(t, c, at)
		r, err := decodeRun(g)
		require.NoError(t, err)
		requireAllRegions(t, g, r, c.Side*c.Side)
		lo, hi := r.ticks()
		if hi < c.Ticks {
			t.Logf("snapshot %d (%s): regions at ticks %d..%d, %d moves in flight", g.ID, g.Mode, lo, hi, g.TotalInFlight())
			return dir, g.ID, o
		}
		require.Less(t, attempt, 5, "in 5 runs, each ended before its snapshot caught it")
		t.Logf("run %d ended before snapshot %d caught it: again", attempt, g.ID)
	}
}

// snapshotOnce is one run of snapshotAt: its directory, its snapshot and
// its output.
func snapshotOnce(t *testing.T, c config, at int) (string, *snapshot.Global, Output) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	dir := t.TempDir()
	store, err := persistence.OpenURL(ctx, dir)
	require.NoError(t, err)
	defer closeStore(store)
	tl := newTally(c.Side * c.Side)
	sys, err := actors.NewSystem(options(c, store, tl)...)
	require.NoError(t, err)
	type result struct {
		g   *snapshot.Global
		err error
	}
	taken := make(chan result, 1)
	tl.when(at, func() {
		go func() {
			g, err := sys.Snapshot(ctx)
			taken <- result{g, err}
		}()
	})
	require.NoError(t, start(sys))
	var res result
	select {
	case res = <-taken:
	case <-ctx.Done():
		t.Fatalf("no snapshot within %v", deadline)
	}
	require.NoError(t, res.err)
	select {
	case <-tl.done:
	case <-ctx.Done():
		t.Fatalf("no output within %v", deadline)
	}
	o, err := tl.output()
	require.NoError(t, err)
	require.NoError(t, sys.Shutdown(context.Background()))
	return dir, res.g, o
}

// requireAllRegions checks that snapshot g, decoded as r, holds all n
// regions: each set up, or with its Setup in flight from the grid. The
// snapshot is taken when the first region reaches its tick, and on a
// loaded machine a region far from it may not have had its Setup yet.
func requireAllRegions(t *testing.T, g *snapshot.Global, r *runState, n int) {
	t.Helper()
	set := make(map[int]bool, len(r.Regions))
	for _, rg := range r.Regions {
		set[rg.Index] = true
	}
	for i := range n {
		id := snapshot.ProcessID(regionID(i))
		_, ok := g.Participant(id)
		require.True(t, ok, "snapshot %d lacks region %s", g.ID, id)
		if set[i] {
			continue
		}
		ms := g.InFlight(snapshot.Channel{From: gridName, To: id})
		require.Len(t, ms, 1, "snapshot %d: region %s is not set up and has no Setup in flight", g.ID, id)
		s, err := actors.DecodeAs[*Setup](ms[0].Payload.(actors.RecordedMessage))
		require.NoError(t, err)
		require.Equal(t, i, s.Index)
	}
}

// A run resumed from a snapshot taken mid-run, in any mode, ends with
// exactly the state of a run never interrupted: the generators are in
// the snapshot, and nothing reads a clock or a map's order.
func TestRestoreMidRunEndsAsUninterrupted(t *testing.T) {
	want, _ := runOK(t, small)
	for _, mode := range []snapshot.Mode{snapshot.Unaligned, snapshot.Aligned, snapshot.Epochs} {
		for _, at := range []int{1, 10} {
			t.Run(fmt.Sprintf("%s/tick=%d", mode, at), func(t *testing.T) {
				c := small
				c.Mode, c.ModeSet = mode, true
				dir, id, o := snapshotAt(t, c, at)
				require.Equal(t, want, o)
				got, out := runOK(t, config{Store: dir, Restore: fmt.Sprint(id)})
				assert.Regexp(t, fmt.Sprintf(`^resuming from snapshot %d: regions at ticks \d+\.\.\d+ of 200, \d+ moves in flight\n`, id), out)
				require.Equal(t, want, got)
			})
		}
	}
}

// The program's flow: a run with periodic snapshots into a file store,
// then a resume from the latest, the finished run's, which ends at once
// with the same output.
func TestRunThenResumeLatest(t *testing.T) {
	c := small
	c.Store, c.Interval = t.TempDir(), time.Millisecond
	want, out := runOK(t, c)
	assert.Regexp(t, `snapshot \d+ stored: epoch, 10 participants, \d+ moves in flight`, out)
	got, out := runOK(t, config{Store: c.Store, Restore: "latest"})
	require.Equal(t, want, got)
	assert.Contains(t, out, "regions at ticks 200..200 of 200")
	assert.Contains(t, out, finalLine(want))
}

// The test harness's way: options and start, and AwaitQuiescence to know
// the run is over. The regions stop sending after the last tick, so the
// system goes quiet.
func TestRunGoesQuiet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	sys, err := actors.NewSystem(options(small, persistence.NewMemory(), nil)...)
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Shutdown(context.Background())) }()
	require.NoError(t, start(sys))
	require.NoError(t, sys.AwaitQuiescence(ctx))
	g, err := sys.Snapshot(ctx)
	require.NoError(t, err)
	r, err := decodeRun(g)
	require.NoError(t, err)
	require.Len(t, r.Regions, 9)
	lo, hi := r.ticks()
	require.Equal(t, [2]int{small.Ticks, small.Ticks}, [2]int{lo, hi})
}

// storeView is what a store shows from outside: its ids and owner.
func storeView(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	s, err := persistence.OpenURL(ctx, dir, persistence.MustExist())
	require.NoError(t, err)
	defer closeStore(s)
	ids, err := s.List(ctx)
	require.NoError(t, err)
	o, err := s.Ownership(ctx)
	require.NoError(t, err)
	return fmt.Sprintf("%v %+v", ids, o)
}

// A fork resumes a stored snapshot with a parameter changed: it leaves
// the source store as it was, agrees with the baseline up to the tick it
// forks at, differs after, and is itself deterministic.
func TestForkChangesOnlyTheFuture(t *testing.T) {
	dir, id, base := snapshotAt(t, small, 10)
	// The source store, as the baseline's latest snapshot holds it.
	_, err := run(context.Background(), io.Discard, config{Store: dir, Restore: fmt.Sprint(id)})
	require.NoError(t, err)
	before := storeView(t, dir)

	fork := func() (Output, string) {
		return runOK(t, config{Store: t.TempDir(), From: dir, Restore: fmt.Sprint(id), Set: []Setting{{Key: "vaccination", Value: 0.2}}})
	}
	got, out := fork()
	assert.Regexp(t, fmt.Sprintf(`^forking %s at snapshot %d: regions at ticks \d+\.\.\d+ of 200, \d+ moves in flight; vaccination=0.2\n`, regexp.QuoteMeta(dir), id), out)
	require.NotEqual(t, base.Hash, got.Hash)
	require.Greater(t, got.Counts.R, base.Counts.R, "vaccination makes agents immune")
	again, _ := fork()
	require.Equal(t, got, again)
	require.Equal(t, before, storeView(t, dir), "the source store changed")

	// The fork's regions remember where they forked, and their histories
	// are the baseline's up to there.
	forked := t.TempDir()
	_, err = run(context.Background(), io.Discard, config{Store: forked, From: dir, Restore: fmt.Sprint(id), Set: []Setting{{Key: "vaccination", Value: 0.2}}})
	require.NoError(t, err)
	b, err := loadRun(context.Background(), dir, "latest")
	require.NoError(t, err)
	f, err := loadRun(context.Background(), forked, "latest")
	require.NoError(t, err)
	at := f.forkTick()
	require.Greater(t, at, 0)
	for i, r := range f.Regions {
		require.Len(t, r.Forks, 1)
		require.Equal(t, 0.2, r.Forks[0].Params.Vaccination)
		// Up to the first tick any region computed with the change.
		n := at + 1
		require.Equal(t, b.Regions[i].History.S[:n], r.History.S[:n], "region %d", i)
		require.Equal(t, b.Regions[i].History.I[:n], r.History.I[:n], "region %d", i)
		require.Equal(t, b.Regions[i].History.R[:n], r.History.R[:n], "region %d", i)
		require.NotEqual(t, b.Regions[i].History.R, r.History.R, "region %d", i)
	}
}

// render draws the grid and the curves of a stored run, and a fork's
// curves beside the baseline's.
func TestRender(t *testing.T) {
	store, id, _ := snapshotAt(t, small, 10)
	runOK(t, config{Store: store, Restore: fmt.Sprint(id)})
	forked := t.TempDir()
	runOK(t, config{Store: forked, From: store, Restore: fmt.Sprint(id), Set: []Setting{{Key: "move", Value: 0}}})

	dir := t.TempDir()
	ctx := context.Background()
	var out bytes.Buffer
	grid, curves, both := filepath.Join(dir, "grid.png"), filepath.Join(dir, "curves.png"), filepath.Join(dir, "fork.png")
	require.NoError(t, render(ctx, &out, []string{"--store", store, "--id", fmt.Sprint(id), "--grid", grid, "--curves", curves}))
	require.NoError(t, render(ctx, &out, []string{"--store", store, "--curves", both, "--compare", forked}))
	for _, path := range []string{grid, curves, both} {
		f, err := os.Open(path)
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, path)
		assert.Greater(t, img.Bounds().Dx(), 400, path)
	}
	for _, args := range [][]string{
		{"--grid", grid},
		{"--store", store},
		{"--store", store, "--grid", grid, "--compare", forked},
		{"--store", store, "--id", "x", "--grid", grid},
		{"--store", t.TempDir() + "/none", "--grid", grid},
	} {
		require.Error(t, render(ctx, io.Discard, args), "%v", args)
	}
}

func TestRunRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		c    config
		want string
	}{
		{"no regions", config{Side: 0}, "--side 0"},
		{"not a probability", config{Side: 1, Params: Params{Infection: 2}}, "infection 2 outside 0..1"},
		{"set without restore", config{Side: 1, Set: []Setting{{Key: "move", Value: 0}}}, "--set changes a restored run"},
		{"bad id", config{Restore: "x"}, `--restore "x"`},
		{"empty store", config{Store: t.TempDir(), Restore: "latest"}, "not found"},
		{"no source store", config{From: t.TempDir() + "/none", Restore: "latest"}, "no store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(ctx, io.Discard, tc.c)
			require.ErrorContains(t, err, tc.want)
		})
	}
	for _, s := range []string{"vaccination", "vaccination=x", "speed=1", "move=1.5"} {
		_, err := parseSetting(s)
		require.Error(t, err, s)
	}
}
