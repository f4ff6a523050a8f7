package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
)

// The computation: item i has a parameter a_i and a value x_i, and each
// round integrates dx/dt = cos(x) + a/4 - x over dt with explicit Euler
// steps. Every item converges to its equilibrium x = cos(x) + a/4; the run
// stops after the first round in which no value moved by tol or more.
// Each item's value depends only on its own inputs and the round, so the
// result is the same bit for bit whatever the interleaving of messages,
// the number of workers, or a restore in the middle.
const (
	dt        = 0.25  // time integrated per round
	tol       = 1e-12 // a round that moves no value by this much ends the run
	maxRounds = 10000 // and the run ends after this many rounds anyway
)

// inputs returns the parameters and starting values of n items.
func inputs(n int, seed uint64) (a, x []float64) {
	r := rand.New(rand.NewPCG(seed, 0))
	a, x = make([]float64, n), make([]float64, n)
	for i := range n {
		a[i], x[i] = r.Float64(), 2*r.Float64()-1
	}
	return a, x
}

// advance runs one round for one item: steps Euler steps of dt/steps.
func advance(x, a float64, steps int) float64 {
	h := dt / float64(steps)
	for range steps {
		x += h * (math.Cos(x) + a/4 - x)
	}
	return x
}

// Output is the result of a run: the values in item order, and the number
// of rounds it took.
type Output struct {
	Rounds int
	Values []float64
	Err    error // the protocol broke: a result for the wrong round
}

// Messages between participants. Their fields are exported, so that msgpack
// can record them in flight.
type (
	// Items is a worker's share of the input, from the source.
	Items struct {
		Index []int
		A, X  []float64
	}
	// Step asks a worker for round Round.
	Step struct{ Round int }
	// Delta is a worker's result of a round: the largest change of its
	// values. Round 0 says it has its items.
	Delta struct {
		Round int
		Max   float64
	}
	// Collect asks a worker for its values.
	Collect struct{}
	// Values are a worker's final values.
	Values struct {
		Index []int
		X     []float64
	}
)

// messages registers the pipeline's message types.
var messages = []actors.Option{
	actors.WithMessage[*Items]("pipeline.Items"),
	actors.WithMessage[*Step]("pipeline.Step"),
	actors.WithMessage[*Delta]("pipeline.Delta"),
	actors.WithMessage[*Collect]("pipeline.Collect"),
	actors.WithMessage[*Values]("pipeline.Values"),
}

// Participant names.
const aggName, sourceName = "agg", "source"

func workerName(i int) string { return fmt.Sprintf("w%d", i) }

// Each actor's exported fields are its state in a snapshot; a restore
// overwrites what the producer set.

// source deals the items out to the workers, once: on its first start, or
// on a restore from a snapshot taken before it had.
type source struct {
	Items, Workers int
	Seed           uint64
	Sent           bool
}

func (s *source) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); !ok || s.Sent {
		return
	}
	a, x := inputs(s.Items, s.Seed)
	shares := make([]Items, s.Workers)
	for i := range s.Items {
		sh := &shares[i%s.Workers]
		sh.Index, sh.A, sh.X = append(sh.Index, i), append(sh.A, a[i]), append(sh.X, x[i])
	}
	for w := range shares {
		ctx.Send(ctx.ActorSystem().NewLocalPID(workerName(w)), &shares[w])
	}
	s.Sent = true
}

// worker holds its items and computes a round for each Step.
type worker struct {
	Steps int // Euler steps per round: the work of a round
	Index []int
	A, X  []float64

	agg *actor.PID `msgpack:"-"` // looked up by name
}

func (w *worker) Receive(ctx actor.Context) {
	if w.agg == nil {
		w.agg = ctx.ActorSystem().NewLocalPID(aggName)
	}
	switch m := ctx.Message().(type) {
	case *Items:
		w.Index, w.A, w.X = m.Index, m.A, m.X
		ctx.Send(w.agg, &Delta{})
	case *Step:
		var max float64
		for i, x := range w.X {
			w.X[i] = advance(x, w.A[i], w.Steps)
			max = math.Max(max, math.Abs(w.X[i]-x))
		}
		ctx.Send(w.agg, &Delta{Round: m.Round, Max: max})
	case *Collect:
		// A copy: a message must not share memory with the state.
		ctx.Send(w.agg, &Values{Index: w.Index, X: append([]float64(nil), w.X...)})
	}
}

// aggregator runs the rounds: it waits for every worker's Delta of a round,
// then starts the next or, once converged, collects the values and hands
// them to the program on out.
type aggregator struct {
	Items, Workers int
	Round          int     // the round the workers are computing
	Got            int     // Deltas (or Values) of it received
	Max            float64 // the largest change of the round so far
	Collecting     bool
	Values         []float64
	Done           bool

	out     chan<- Output `msgpack:"-"` // buffered, of 1
	workers []*actor.PID  `msgpack:"-"` // looked up by name
}

func (a *aggregator) Receive(ctx actor.Context) {
	if a.workers == nil {
		for i := range a.Workers {
			a.workers = append(a.workers, ctx.ActorSystem().NewLocalPID(workerName(i)))
		}
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if a.Done { // restored from a snapshot of a finished run
			a.report(Output{Rounds: a.Round, Values: append([]float64(nil), a.Values...)})
		}
	case *Delta:
		if m.Round != a.Round || a.Collecting {
			a.report(Output{Err: fmt.Errorf("a Delta of round %d in round %d", m.Round, a.Round)})
			return
		}
		a.Got++
		a.Max = math.Max(a.Max, m.Max)
		if a.Got < a.Workers {
			return
		}
		var next any
		if a.Round > 0 && a.Max < tol || a.Round == maxRounds {
			a.Collecting, a.Values, next = true, make([]float64, a.Items), &Collect{}
		} else {
			a.Round++
			a.Max, next = 0, &Step{Round: a.Round}
		}
		a.Got = 0
		for _, w := range a.workers {
			ctx.Send(w, next)
		}
	case *Values:
		for j, i := range m.Index {
			a.Values[i] = m.X[j]
		}
		if a.Got++; a.Got == a.Workers {
			a.Done = true
			a.report(Output{Rounds: a.Round, Values: append([]float64(nil), a.Values...)})
		}
	}
}

// report hands o to the program unless it already has an output.
func (a *aggregator) report(o Output) {
	select {
	case a.out <- o:
	default:
	}
}
