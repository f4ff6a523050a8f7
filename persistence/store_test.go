package persistence_test

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store { return persistence.NewMemory() })
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
