package migration_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/examples/migration/after"
	"github.com/actorsnap/actorsnap/examples/migration/before"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

var (
	cfg      = before.Config{Shards: 4, Rounds: 300, Words: 12, Seed: 7}
	afterCfg = after.Config(cfg)
)

// expected is cfg's word count, computed without actors.
func expected() map[string]int {
	want := map[string]int{}
	for i := range cfg.Shards {
		for round := 1; round <= cfg.Rounds; round++ {
			for _, w := range before.Line(cfg.Seed+uint64(i), round, cfg.Words) {
				want[w]++
			}
		}
	}
	return want
}

func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestBefore(t *testing.T) {
	got, err := before.Run(deadline(t), cfg)
	require.NoError(t, err)
	require.Equal(t, expected(), map[string]int(got))
}

func TestAfterWithoutSnapshot(t *testing.T) {
	want, err := before.Run(deadline(t), cfg)
	require.NoError(t, err)
	got, err := after.Run(deadline(t), afterCfg)
	require.NoError(t, err)
	require.Equal(t, map[string]int(want), map[string]int(got))
}

// TestAfterRestore snapshots a run while messages are in flight, stops
// it, restores the snapshot into a new system and lets the run finish
// there: the count is the uninterrupted run's. The file store is opened
// again for the restore, as a new process would.
func TestAfterRestore(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		restore(t, func() func() persistence.Store {
			store := persistence.NewMemory()
			return func() persistence.Store { return store }
		})
	})
	t.Run("file", func(t *testing.T) {
		restore(t, func() func() persistence.Store {
			dir := t.TempDir()
			return func() persistence.Store {
				store, err := persistence.Open(context.Background(), dir)
				require.NoError(t, err)
				return store
			}
		})
	})
}

// restore runs the word count on a store fresh() gives (each call to the
// function it returns opens that store), snapshots it until a snapshot
// catches messages in flight, and restores that snapshot. A run that
// ends before any snapshot caught one (a snapshot that falls between
// two messages holds none) is begun again on a fresh store, a few times.
func restore(t *testing.T, fresh func() func() persistence.Store) {
	ctx := deadline(t)
	var g *snapshot.Global
	var coord struct{ Round int } // the coordinator's state
	var open func() persistence.Store
	for attempt := 1; g == nil; attempt++ {
		require.LessOrEqual(t, attempt, 5, "no snapshot caught messages in flight in 5 runs")
		open = fresh()
		sys, err := after.Start(afterCfg, actors.WithStore(open()))
		require.NoError(t, err)
		for g == nil {
			s, err := sys.Snapshot(ctx)
			require.NoError(t, err)
			require.NoError(t, s.Verify())
			state, ok := s.State("coordinator")
			require.True(t, ok)
			require.NoError(t, msgpack.Unmarshal(state, &coord))
			if coord.Round > cfg.Rounds {
				t.Logf("run %d ended before a snapshot caught messages in flight", attempt)
				break
			}
			if s.TotalInFlight() > 0 {
				g = s
			}
		}
		require.NoError(t, sys.Shutdown(ctx))
	}
	t.Logf("snapshot %d: coordinator in round %d of %d, %d messages in flight", g.ID, coord.Round, cfg.Rounds, g.TotalInFlight())

	restored, err := actors.Restore(ctx, open(), g.ID, after.Options...)
	require.NoError(t, err)
	defer func() { require.NoError(t, restored.Shutdown(ctx)) }()
	got, err := after.Wait(ctx, restored.ActorSystem())
	require.NoError(t, err)
	require.Equal(t, expected(), map[string]int(got))
}
