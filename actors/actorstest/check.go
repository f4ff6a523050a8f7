package actorstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Simulation is how Check builds and runs a system.
type Simulation struct {
	// Options returns the options of one system of the simulation, its
	// snapshots saved in store: the kinds, the message types, the mode.
	// Check calls it for every system it builds, the fresh one and each
	// restored one, and adds nothing but the store.
	Options func(store persistence.Store) []actors.Option
	// Start spawns a fresh run's participants on sys.
	Start func(sys *actors.System) error
	// Done returns once the run sys carries has reached its end, or ctx's
	// error. sys may be a restored system. Nil waits until the system has
	// terminated (actors.System.AwaitQuiescence): every participant idle
	// and nothing in flight.
	Done func(ctx context.Context, sys *actors.System) error
}

// Config says how Check interrupts the second run.
type Config struct {
	// Seed draws the moments of the interruptions.
	Seed uint64
	// Restores is how many times the second run is interrupted and
	// restored; default 3.
	Restores int
	// Timeout bounds each run; default 5 minutes.
	Timeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Restores == 0 {
		c.Restores = 3
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
	}
	return c
}

// Report is what Compare did.
type Report struct {
	// Uninterrupted is how long the first run took to its end.
	Uninterrupted time.Duration
	// Restored are the snapshots the second run was restored from, in
	// order.
	Restored []*snapshot.Global
	// Final is the uninterrupted run's final snapshot.
	Final *snapshot.Global
	// Late counts the interrupted runs Check began again because their
	// first interruption came after the end (its snapshot already equal
	// to Final): each new attempt interrupts twice as early.
	Late int
}

// lateAttempts bounds how many times the interrupted run is begun again
// because it outran its interruptions.
const lateAttempts = 6

// errLate is run's answer when its first interruption found the run
// already ended.
var errLate = errors.New("the first interruption came after the end")

func (r *Report) restoredIDs() []snapshot.SnapshotID {
	ids := make([]snapshot.SnapshotID, len(r.Restored))
	for i, g := range r.Restored {
		ids[i] = g.ID
	}
	return ids
}

// Check runs sim uninterrupted and then interrupted and restored as cfg
// says (see the package documentation), and fails t with the first
// participant whose final state differs, naming cfg.Seed so that the run
// can be repeated.
func Check(t testing.TB, sim Simulation, cfg Config) *Report {
	t.Helper()
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 2*cfg.Timeout)
	defer cancel()
	r, err := Compare(ctx, sim, cfg)
	if err != nil {
		t.Fatalf("actorstest (seed %d): %v", cfg.Seed, err)
	}
	return r
}

// Compare does Check's work and returns its finding as an error: a
// *Mismatch when the runs end differently, or the error that stopped a
// run.
func Compare(ctx context.Context, sim Simulation, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if sim.Options == nil || sim.Start == nil {
		return nil, errors.New("a Simulation needs Options and Start")
	}
	if cfg.Restores < 0 {
		return nil, fmt.Errorf("%d restores", cfg.Restores)
	}
	r := &Report{}
	began := time.Now()
	want, err := run(ctx, sim, cfg, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("the uninterrupted run: %w", err)
	}
	r.Uninterrupted, r.Final = time.Since(began), want
	// The moments are shares of the uninterrupted run's time; a second
	// run that goes faster (a warm cache, a quieter machine) can end
	// before the first interruption, which then checks nothing.
	span := r.Uninterrupted
	got, err := run(ctx, sim, cfg, r, span)
	for errors.Is(err, errLate) && r.Late < lateAttempts {
		r.Late++
		r.Restored = nil
		span /= 2
		got, err = run(ctx, sim, cfg, r, span)
	}
	if err != nil {
		return r, fmt.Errorf("the interrupted run (restored from snapshots %v): %w", r.restoredIDs(), err)
	}
	if m := compare(want, got); m != nil {
		m.Seed, m.Restored = cfg.Seed, r.restoredIDs()
		return r, m
	}
	return r, nil
}

// run runs sim to its end and returns its final snapshot. With r set it
// interrupts the run cfg.Restores times, spreading the moments over span,
// and notes the snapshots it restored in r; it returns errLate if the
// first interruption's snapshot is r.Final.
func run(ctx context.Context, sim Simulation, cfg Config, r *Report, span time.Duration) (*snapshot.Global, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	store := persistence.NewMemory()
	sys, err := actors.NewSystem(sim.Options(store)...)
	if err != nil {
		return nil, err
	}
	// sys is the system running now: each restore replaces it.
	defer func() { _ = sys.Shutdown(context.Background()) }()
	if err := sim.Start(sys); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	if r != nil {
		rng := rand.New(rand.NewPCG(cfg.Seed, 0x61637473))
		// Each interruption snapshots after a share of the uninterrupted
		// run's time and crashes after a little more: the restored system
		// does that work again.
		share := span / time.Duration(cfg.Restores+1)
		for i := range cfg.Restores {
			if err := pause(ctx, time.Duration((0.25+0.75*rng.Float64())*float64(share))); err != nil {
				return nil, err
			}
			g, err := sys.Snapshot(ctx)
			if err != nil {
				return nil, fmt.Errorf("snapshot: %w", err)
			}
			if i == 0 && compare(r.Final, g) == nil {
				return nil, errLate
			}
			if err := pause(ctx, time.Duration(rng.Float64()*float64(share)/2)); err != nil {
				return nil, err
			}
			if err := sys.Shutdown(ctx); err != nil && !errors.Is(err, actors.ErrShutdown) {
				return nil, fmt.Errorf("shutdown before restoring snapshot %d: %w", g.ID, err)
			}
			restored, err := actors.Restore(ctx, store, g.ID, sim.Options(store)...)
			if err != nil {
				return nil, fmt.Errorf("restoring snapshot %d: %w", g.ID, err)
			}
			sys = restored
			r.Restored = append(r.Restored, g)
		}
	}
	done := sim.Done
	if done == nil {
		done = func(ctx context.Context, sys *actors.System) error { return sys.AwaitQuiescence(ctx) }
	}
	if err := done(ctx, sys); err != nil {
		return nil, fmt.Errorf("waiting for the end: %w", err)
	}
	g, err := sys.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("final snapshot: %w", err)
	}
	return g, nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Mismatch is how the interrupted run ended differently from the
// uninterrupted one.
type Mismatch struct {
	// Participant is the first participant, by id, whose state or
	// incoming messages differ; Kind is its kind.
	Participant snapshot.ProcessID
	Kind        string
	// Differences say what differs, one line each: a field path and the
	// two values (uninterrupted first), or the participant or the message
	// present in one run only.
	Differences []string
	// Seed and Restored repeat the interruptions: Config.Seed, and the
	// snapshots the interrupted run was restored from.
	Seed     uint64
	Restored []snapshot.SnapshotID
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("participant %s (%s) ends differently after restores from snapshots %v (seed %d):\n\t%s",
		m.Participant, m.Kind, m.Restored, m.Seed, strings.Join(m.Differences, "\n\t"))
}

// compare returns the first participant whose state or incoming channels
// differ between want and got, or nil.
func compare(want, got *snapshot.Global) *Mismatch {
	ids := make(map[snapshot.ProcessID]bool)
	for _, g := range []*snapshot.Global{want, got} {
		for _, p := range g.Participants {
			ids[p.ID] = true
		}
	}
	sorted := make([]snapshot.ProcessID, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	slices.Sort(sorted)
	for _, id := range sorted {
		w, wok := want.Participant(id)
		g, gok := got.Participant(id)
		m := &Mismatch{Participant: id, Kind: w.Kind}
		switch {
		case !wok:
			m.Kind = g.Kind
			m.Differences = []string{"present only in the interrupted run"}
		case !gok:
			m.Differences = []string{"missing from the interrupted run"}
		case w.Departed != g.Departed:
			m.Differences = []string{fmt.Sprintf("departed: %v != %v", w.Departed, g.Departed)}
		case w.Kind != g.Kind:
			m.Differences = []string{fmt.Sprintf("kind: %q != %q", w.Kind, g.Kind)}
		case !bytes.Equal(w.State, g.State):
			m.Differences = stateDiff(w.State, g.State)
		default:
			m.Differences = inboxDiff(want, got, id)
		}
		if len(m.Differences) > 0 {
			return m
		}
	}
	return nil
}
