package main

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/actors"
)

// Every message and state type of the pipeline comes back from a
// snapshot whole.
func TestTypesRoundTrip(t *testing.T) {
	for _, v := range []any{
		&Items{Index: []int{1, 2}, A: []float64{0.5, 1.5}, X: []float64{2, 3}},
		&Step{Round: 3},
		&Delta{Round: 2, Max: 0.25},
		&Collect{},
		&Values{Index: []int{4}, X: []float64{1.25}},
		&source{Items: 10, Workers: 2, Seed: 7, Sent: true},
		&worker{Steps: 3, Index: []int{1}, A: []float64{2}, X: []float64{3}, agg: actor.NewPID("x", aggName)},
		&aggregator{Items: 4, Workers: 2, Round: 5, Got: 1, Max: 0.5, Collecting: true, Values: []float64{1, 2}, Done: true},
	} {
		require.NoError(t, actors.RoundTrip(v))
	}
}
