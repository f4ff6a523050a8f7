package persistence_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store { return persistence.NewMemoryKeep(0) })
}

// A Memory keeps the DefaultMemoryKeep newest snapshots unless told
// otherwise: periodic snapshots into memory do not grow without bound.
func TestMemoryKeepsTheNewest(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		store *persistence.Memory
		kept  int
	}{
		{persistence.NewMemory(), persistence.DefaultMemoryKeep},
		{&persistence.Memory{}, persistence.DefaultMemoryKeep},
		{persistence.NewMemoryKeep(3), 3},
		{persistence.NewMemoryKeep(0), 40},
	} {
		for id := range 40 {
			require.NoError(t, tc.store.Save(ctx, storetest.NewGlobal(snapshot.SnapshotID(id+1), storetest.Small)))
		}
		ids, err := tc.store.List(ctx)
		require.NoError(t, err)
		require.Len(t, ids, tc.kept)
		assert.Equal(t, snapshot.SnapshotID(40), ids[len(ids)-1], "the newest kept")
		assert.Equal(t, snapshot.SnapshotID(40-tc.kept+1), ids[0])
	}
}

func TestFileStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, err := persistence.Open(context.Background(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestFileStoreConformanceMemFS(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store {
		s, err := persistence.Open(context.Background(), "/snaps", persistence.WithFS(persistence.NewMemFS()))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemoryOwnership(t *testing.T) {
	storetest.RunPair(t, func(t *testing.T) (persistence.Store, persistence.Store) {
		m := persistence.NewMemory()
		return m, m
	})
}

func TestFileStoreOwnership(t *testing.T) {
	storetest.RunPair(t, func(t *testing.T) (persistence.Store, persistence.Store) {
		dir := t.TempDir()
		return openFile(t, dir), openFile(t, dir)
	})
}

func TestFileStoreOwnershipMemFS(t *testing.T) {
	storetest.RunPair(t, func(t *testing.T) (persistence.Store, persistence.Store) {
		mem := persistence.NewMemFS()
		return openFile(t, "/snaps", persistence.WithFS(mem)), openFile(t, "/snaps", persistence.WithFS(mem))
	})
}
