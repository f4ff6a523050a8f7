package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/actorsnap/actorsnap/persistence"
	_ "github.com/actorsnap/actorsnap/persistence/postgres" // registers postgres:// for OpenURL
	"github.com/actorsnap/actorsnap/persistence/storetest"
)

// Example opens a PostgreSQL store by URL, as a program whose store is
// configured by URL does, saves a snapshot and reads back the latest. It
// has no Output line, since it needs a server: it is compiled, not run.
func Example() {
	ctx := context.Background()
	store, err := persistence.OpenURL(ctx, "postgres://postgres@127.0.0.1:5432/actorsnap_test?sslmode=disable&schema=example")
	if err != nil {
		log.Fatal(err)
	}
	defer store.(io.Closer).Close()

	if err := store.Save(ctx, storetest.NewGlobal(1, storetest.Small)); err != nil {
		log.Fatal(err)
	}
	g, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.ID, len(g.Participants), g.TotalInFlight())
}
