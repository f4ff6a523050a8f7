package main

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
)

// Every message and state type of the epidemic comes back from a
// snapshot whole, the regions' generators included.
func TestTypesRoundTrip(t *testing.T) {
	agents := Agents{ID: []uint32{1, 70000, 1 << 31}, Health: []Health{Susceptible, Infected, Recovered}}
	params := Params{Infection: 0.25, Recovery: 0.1, Move: 0.01, Vaccination: 0.002}
	rng := rand.NewPCG(3, 4)
	rng.Uint64()
	for _, v := range []any{
		&Setup{Index: 4, Side: 3, First: 1200, Agents: 300, Infected: 2, Ticks: 50, Seed: 9, Params: params},
		&Move{Tick: 7, From: 3, Agents: agents},
		&grid{Side: 4, Agents: 10, Infected: 1, Ticks: 20, Seed: 5, Params: params, Spawned: true},
		&region{
			Index: 4, Side: 3, Ticks: 50, Params: params,
			Forks: []Fork{{Tick: 12, Params: params}},
			Tick:  13, Sent: true, Agents: agents,
			Pending: []Move{{Tick: 13, From: 1, Agents: agents}, {Tick: 14, From: 5}},
			History: History{S: []int32{3, 2}, I: []int32{0, 1}, R: []int32{0, 0}},
			RNG:     rng,
		},
	} {
		require.NoError(t, actors.RoundTrip(v))
	}
}

// A region's generator, encoded as a snapshot encodes the region's
// state, continues where it stopped.
func TestGeneratorSurvivesASnapshot(t *testing.T) {
	r := &region{RNG: rand.NewPCG(1, 2)}
	r.RNG.Uint64()
	state, err := msgpack.Marshal(r)
	require.NoError(t, err)
	var u region
	require.NoError(t, msgpack.Unmarshal(state, &u))
	for range 3 {
		require.Equal(t, r.RNG.Uint64(), u.RNG.Uint64())
	}
}
