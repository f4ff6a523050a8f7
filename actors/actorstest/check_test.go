package actorstest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/actors/actorstest"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.ProtoActorTimers) }

var seedFlag = flag.Uint64("seed", 0, "seed of the interruptions (default: from the clock)")

// seed is the seed a test interrupts with, logged so that a failure can be
// repeated with -seed.
func seed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d", s)
	return s
}

// A token ring of cells, each a participant: a cell that receives the
// token folds the value it carries into its own, plus a random draw, and
// passes its value on; c00 sends the token first and stops it at its last
// tick. The draws come from a generator in the cell's state, so a
// restored cell draws what it would have drawn.
type cell struct {
	Cell
	RNG *rand.PCG
}

// leaky is a cell whose generator is not part of its state: a restored
// leaky cell starts drawing from its seed again.
type leaky struct {
	Cell
	rng *rand.PCG `msgpack:"-"`
}

// Cell is the state of a cell but its generator.
type Cell struct {
	Index, Cells, Ticks int
	Tick                int
	Value               uint64
	Began               bool
}

type step struct {
	Tick  int
	Value uint64
}

func cellName(i int) string { return fmt.Sprintf("c%02d", i) }

func (c *cell) Receive(ctx actor.Context) { c.step(ctx, &c.RNG) }

// Receive seeds the generator whenever the cell starts, as a cell whose
// author forgot restores would: the restored cell draws from its seed
// again.
func (c *leaky) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		c.rng = rand.NewPCG(uint64(c.Index), 7)
	}
	c.step(ctx, &c.rng)
}

// step is a cell's work: on its first start it takes its index from its
// name and seeds *rng from it (c00, spawned last, sends the token), then
// for each token it takes a step and passes its value on.
func (c *Cell) step(ctx actor.Context, rng **rand.PCG) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if !c.Began {
			c.Began = true
			_, err := fmt.Sscanf(ctx.Self().Id, "c%d", &c.Index)
			if err != nil {
				panic(err)
			}
			*rng = rand.NewPCG(uint64(c.Index), 7)
			if c.Index == 0 {
				ctx.Send(c.next(ctx), &step{Tick: 0, Value: c.Value})
			}
		}
	case *step:
		if m.Tick != c.Tick {
			panic(fmt.Sprintf("cell %d at tick %d got tick %d", c.Index, c.Tick, m.Tick))
		}
		c.Value = c.Value*31 + m.Value + (*rng).Uint64()%1000
		c.Tick++
		// The token carries the tick its receiver is at: c00 is a
		// tick ahead of the cells after it.
		switch {
		case c.Index != 0:
			ctx.Send(c.next(ctx), &step{Tick: m.Tick, Value: c.Value})
		case c.Tick < c.Ticks:
			ctx.Send(c.next(ctx), &step{Tick: c.Tick, Value: c.Value})
		}
	}
}

func (c *Cell) next(ctx actor.Context) *actor.PID {
	return ctx.ActorSystem().NewLocalPID(cellName((c.Index + 1) % c.Cells))
}

// ring is a Simulation of n cells for ticks ticks in mode; leak makes its
// cells keep their generators out of their state.
func ring(n, ticks int, mode snapshot.Mode, leak bool) actorstest.Simulation {
	return actorstest.Simulation{
		Options: func(store persistence.Store) []actors.Option {
			produce := func() actor.Actor {
				c := Cell{Cells: n, Ticks: ticks}
				if leak {
					return &leaky{Cell: c}
				}
				return &cell{Cell: c}
			}
			return []actors.Option{
				actors.WithStore(store),
				actors.WithMode(mode),
				actors.WithMessage[*step]("ring.step"),
				actors.WithKind("cell", produce),
			}
		},
		Start: func(sys *actors.System) error {
			for i := range n {
				if _, err := sys.Spawn("cell", cellName(n-1-i)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func TestResumableRingPassesInEveryMode(t *testing.T) {
	for _, mode := range []snapshot.Mode{snapshot.Unaligned, snapshot.Aligned, snapshot.Epochs} {
		t.Run(mode.String(), func(t *testing.T) {
			r := actorstest.Check(t, ring(6, 3000, mode, false), actorstest.Config{Seed: seed(t), Restores: 4})
			require.Len(t, r.Restored, 4)
			require.Len(t, r.Final.Participants, 6)
			// The interruptions fall inside the run, not after its end.
			var ticks []int
			for _, g := range r.Restored {
				c, err := actors.DecodeState[cell](g, snapshot.ProcessID(cellName(0)))
				require.NoError(t, err)
				ticks = append(ticks, c.Tick)
			}
			require.Less(t, ticks[0], 3000, "the first interruption came after the end")
			t.Logf("uninterrupted run %v; restored from snapshots at ticks %v; %d late attempts", r.Uninterrupted, ticks, r.Late)
		})
	}
}

// A second run that ends before its first interruption checks nothing:
// Check begins it again with earlier moments. Here the first interrupted
// run is made to end inside its start, so it is late whatever the
// machine's speed.
func TestLateInterruptionsBeginAgain(t *testing.T) {
	sim := ring(6, 3000, snapshot.Epochs, false)
	start, starts := sim.Start, 0
	sim.Start = func(sys *actors.System) error {
		starts++
		if err := start(sys); err != nil || starts != 2 {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return sys.AwaitQuiescence(ctx)
	}
	r := actorstest.Check(t, sim, actorstest.Config{Seed: seed(t), Restores: 2})
	require.Positive(t, r.Late)
	require.Len(t, r.Restored, 2)
	t.Logf("%d late attempts", r.Late)
}

// A generator kept out of the state is the classic way to make a
// simulation non-resumable: the check names the first cell that ends
// differently and the field that differs.
func TestGeneratorOutsideTheStateIsFound(t *testing.T) {
	s := seed(t)
	_, err := actorstest.Compare(context.Background(), ring(6, 3000, snapshot.Unaligned, true), actorstest.Config{Seed: s, Restores: 3})
	var m *actorstest.Mismatch
	require.ErrorAs(t, err, &m, "a non-resumable ring passed")
	t.Log(err)
	require.True(t, strings.HasPrefix(string(m.Participant), "c"), "participant %s", m.Participant)
	require.Equal(t, "cell", m.Kind)
	require.Equal(t, s, m.Seed)
	require.Len(t, m.Restored, 3)
	require.Contains(t, strings.Join(m.Differences, "\n"), "state.Value: ")
}

func TestCompareRefusesAnIncompleteSimulation(t *testing.T) {
	_, err := actorstest.Compare(context.Background(), actorstest.Simulation{}, actorstest.Config{})
	require.Error(t, err)
	sim := ring(2, 10, snapshot.Unaligned, false)
	sim.Start = func(*actors.System) error { return errors.New("no room") }
	_, err = actorstest.Compare(context.Background(), sim, actorstest.Config{})
	require.ErrorContains(t, err, "no room")
}

// A restore that fails ends the check with its error, the snapshot named.
func TestCompareReportsAFailedRestore(t *testing.T) {
	sim := ring(4, 2000, snapshot.Unaligned, false)
	options, started := sim.Options, map[persistence.Store]bool{}
	sim.Options = func(store persistence.Store) []actors.Option {
		// Each run has a store of its own: the systems that come after
		// the first on a store are restored ones, which get no kind to
		// rebuild the cells from. (Counting calls would miscount an
		// interrupted run begun again.)
		if started[store] {
			return []actors.Option{actors.WithStore(store), actors.WithMessage[*step]("ring.step")}
		}
		started[store] = true
		return options(store)
	}
	_, err := actorstest.Compare(context.Background(), sim, actorstest.Config{Seed: 1, Restores: 1})
	require.ErrorIs(t, err, actors.ErrRestore)
	require.ErrorContains(t, err, "restoring snapshot")
}
