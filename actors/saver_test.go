package actors

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// slowStore holds the save of one snapshot until released.
type slowStore struct {
	persistence.Store
	hold    snapshot.SnapshotID
	entered chan struct{}
	release chan struct{}
}

func newSlowStore(hold snapshot.SnapshotID) *slowStore {
	return &slowStore{Store: persistence.NewMemory(), hold: hold, entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *slowStore) Save(ctx context.Context, g *snapshot.Global) error {
	if g.ID == s.hold {
		close(s.entered)
		<-s.release
	}
	return s.Store.Save(ctx, g)
}

// A slow store holds up neither starts nor deadlines: while snapshot 1's
// save hangs, snapshot 2 starts and times out at its deadline; then
// snapshot 1 completes, stored.
func TestSlowStoreDoesNotStallTheGuardian(t *testing.T) {
	clk := newManualClock()
	store := newSlowStore(1)
	sys, pids, _, recorded := probesTraced(t, 2, WithStore(store), WithTimeout(time.Minute), withClock(clk), WithMaxConcurrent(1))
	defer shutdown(t, sys)
	first := startAsync(sys)
	waitFor(t, store.entered)

	release := block(t, sys, pids[1])
	defer release()
	for len(recorded) > 0 {
		<-recorded
	}
	second := startAsync(sys)
	require.Equal(t, snapshot.ProcessID("p0"), waitFor(t, recorded), "snapshot 2 started while 1 was being saved")
	clk.waitArmed(t, time.Minute)
	clk.Advance(time.Minute)
	r := waitFor(t, second)
	require.ErrorIs(t, r.err, snapshot.ErrTimeout, "snapshot 2's deadline fired while 1 was being saved")

	close(store.release)
	r = waitFor(t, first)
	require.NoError(t, r.err)
	assert.Equal(t, snapshot.SnapshotID(1), r.global.ID)
	release()
	ids, err := store.List(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []snapshot.SnapshotID{1}, ids)
}

// Shutdown waits for a save under way: the snapshot is stored and
// answered, not counted as aborted.
func TestShutdownWaitsForTheSave(t *testing.T) {
	store := newSlowStore(1)
	sys, _, _ := probes(t, 2, WithStore(store))
	first := startAsync(sys)
	waitFor(t, store.entered)
	done := make(chan error, 1)
	go func() { done <- sys.Shutdown(context.Background()) }()
	deadline := time.After(10 * time.Second)
	for !sys.down.Load() {
		select {
		case <-deadline:
			t.Fatal("Shutdown did not begin")
		default:
			runtime.Gosched()
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned while a save was under way: %v", err)
	default:
	}
	close(store.release)
	require.NoError(t, waitFor(t, done), "nothing was aborted")
	r := waitFor(t, first)
	require.NoError(t, r.err)
	ids, err := store.List(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []snapshot.SnapshotID{1}, ids)
}

// A store that does not keep up bounds the snapshots waiting for it: with
// WithMaxConcurrent(1), one may be assembled while one is saved, and
// another start is refused (ErrBusy) rather than pile up in memory.
func TestSavesWaitingAreBounded(t *testing.T) {
	store := newSlowStore(1)
	sys, _, _ := probes(t, 2, WithStore(store), WithMaxConcurrent(1))
	defer shutdown(t, sys)
	first := startAsync(sys)
	waitFor(t, store.entered)
	second := startAsync(sys)
	waitComplete(t, sys, 2)
	_, err := sys.Snapshot(context.Background())
	require.ErrorIs(t, err, ErrBusy)
	assert.Contains(t, err.Error(), "wait for the store")
	close(store.release)
	require.NoError(t, waitFor(t, first).err)
	require.NoError(t, waitFor(t, second).err)
	_, err = sys.Snapshot(context.Background())
	require.NoError(t, err, "the store caught up")
}

// waitComplete waits until snapshot id misses nothing: its completion is
// then on its way to the guardian, ahead of anything sent after.
func waitComplete(t *testing.T, sys *System, id snapshot.SnapshotID) {
	t.Helper()
	waitMissing(t, sys, id)
}
