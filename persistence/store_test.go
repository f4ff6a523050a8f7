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
