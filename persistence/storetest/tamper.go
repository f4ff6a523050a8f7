package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// DropMessage removes the last message in flight on the first channel of
// g that has one, and takes it off the channel's sent count, as a forger
// would: g still balances and passes Verify. It returns g.
func DropMessage(g *snapshot.Global) *snapshot.Global {
	for i := range g.Channels {
		if c := &g.Channels[i]; len(c.Messages) > 0 {
			c.Messages = c.Messages[:len(c.Messages)-1]
			c.Sent--
			return g
		}
	}
	panic("storetest: no message in flight")
}

// RequireUnauthentic checks that err refuses snapshot id as not authentic
// (persistence.ErrUnauthentic, a *persistence.AuthError) under the key
// keyID ("" for none), naming both, and not as damage: tampering is no
// accident.
func RequireUnauthentic(t testing.TB, err error, id snapshot.SnapshotID, keyID string) {
	t.Helper()
	require.ErrorIs(t, err, persistence.ErrUnauthentic)
	var ae *persistence.AuthError
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, id, ae.ID)
	assert.Equal(t, keyID, ae.KeyID)
	assert.Contains(t, err.Error(), fmt.Sprintf("snapshot %d", id))
	if keyID != "" {
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", keyID))
	}
	assert.False(t, errors.Is(err, persistence.ErrCorrupt), "tampering is not an accident")
}
