package persistence_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

func TestMemoryStore(t *testing.T) {
	ctx := context.Background()
	m := persistence.NewMemory()
	_, err := m.Latest(ctx)
	require.ErrorIs(t, err, persistence.ErrNotFound)
	for id := snapshot.SnapshotID(1); id <= 4; id++ {
		require.NoError(t, m.Save(ctx, &snapshot.Global{ID: id}))
	}
	require.ErrorIs(t, m.Save(ctx, &snapshot.Global{ID: 2}), persistence.ErrExists)
	bad := &snapshot.Global{ID: 9, Channels: []snapshot.ChannelState{{Channel: snapshot.Channel{From: "a", To: "b"}, Sent: 1}}}
	require.ErrorIs(t, m.Save(ctx, bad), snapshot.ErrImbalance)
	g, err := m.Latest(ctx)
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(4), g.ID)
	require.NoError(t, m.Retain(ctx, 2))
	ids, _ := m.List(ctx)
	assert.Equal(t, []snapshot.SnapshotID{3, 4}, ids)
	_, err = m.Load(ctx, 1)
	require.ErrorIs(t, err, persistence.ErrNotFound)
	require.NoError(t, m.Delete(ctx, 1))
}
