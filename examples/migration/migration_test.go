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
		store := persistence.NewMemory()
		restore(t, func() persistence.Store { return store })
	})
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		restore(t, func() persistence.Store {
			store, err := persistence.Open(context.Background(), dir)
			require.NoError(t, err)
			return store
		})
	})
}

func restore(t *testing.T, open func() persistence.Store) {
	ctx := deadline(t)
	sys, err := after.Start(afterCfg, actors.WithStore(open()))
	require.NoError(t, err)

	// Snapshot until one catches messages in flight (the first nearly
	// always does), before the last round.
	var g *snapshot.Global
	var coord struct{ Round int } // the coordinator's state
	for g == nil {
		s, err := sys.Snapshot(ctx)
		require.NoError(t, err)
		require.NoError(t, s.Verify())
		state, ok := s.State("coordinator")
		require.True(t, ok)
		require.NoError(t, msgpack.Unmarshal(state, &coord))
		require.LessOrEqual(t, coord.Round, cfg.Rounds, "the run ended before a snapshot caught it")
		if s.TotalInFlight() > 0 {
			g = s
		}
	}
	t.Logf("snapshot %d: coordinator in round %d of %d, %d messages in flight", g.ID, coord.Round, cfg.Rounds, g.TotalInFlight())
	require.NoError(t, sys.Shutdown(ctx))

	restored, err := actors.Restore(ctx, open(), g.ID, after.Options...)
	require.NoError(t, err)
	defer func() { require.NoError(t, restored.Shutdown(ctx)) }()
	got, err := after.Wait(ctx, restored.ActorSystem())
	require.NoError(t, err)
	require.Equal(t, expected(), map[string]int(got))
}
