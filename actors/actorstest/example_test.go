package actorstest_test

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/actors/actorstest"
	"github.com/actorsnap/actorsnap/persistence"
)

// A simulation is given as the options of its systems and the spawns of a
// fresh run; its end here is the default, the system's termination. In a
// test, actorstest.Check(t, sim, cfg) fails t instead of returning the
// mismatch.
func ExampleCompare() {
	sim := actorstest.Simulation{
		Options: func(store persistence.Store) []actors.Option {
			return []actors.Option{
				actors.WithStore(store),
				actors.WithMessage[*step]("ring.step"),
				actors.WithKind("cell", func() actor.Actor { return &cell{Cell: Cell{Cells: 4, Ticks: 2000}} }),
			}
		},
		Start: func(sys *actors.System) error {
			for _, name := range []string{"c03", "c02", "c01", "c00"} { // c00 starts the token
				if _, err := sys.Spawn("cell", name); err != nil {
					return err
				}
			}
			return nil
		},
	}
	r, err := actorstest.Compare(context.Background(), sim, actorstest.Config{Seed: 1, Restores: 2})
	fmt.Println("restores:", len(r.Restored), "mismatch:", err)
	// Output: restores: 2 mismatch: <nil>
}
