package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/actors"
)

// Every message and state type of the bank comes back from a snapshot
// whole.
func TestTypesRoundTrip(t *testing.T) {
	for _, v := range []any{&Transfer{Amount: 5}, &Open{Next: "b"}, &Account{Balance: 7, Next: "c"}} {
		require.NoError(t, actors.RoundTrip(v))
	}
}
