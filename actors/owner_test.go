package actors

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// probeKind gives Restore the kind of the probes' participants.
var probeKind = WithKind("probe", func() actor.Actor { return &probe{} })

// openStore opens a file store in dir.
func openStore(t *testing.T, dir string, opts ...persistence.FileOption) *persistence.FileStore {
	t.Helper()
	store, err := persistence.Open(context.Background(), dir, opts...)
	require.NoError(t, err)
	return store
}

// snapshots takes n snapshots of sys and returns their ids.
func snapshots(t *testing.T, sys *System, n int) []snapshot.SnapshotID {
	t.Helper()
	var ids []snapshot.SnapshotID
	for range n {
		g, err := sys.Snapshot(context.Background())
		require.NoError(t, err)
		ids = append(ids, g.ID)
	}
	return ids
}

// ownership returns the store's.
func ownership(t *testing.T, store persistence.Store) persistence.Ownership {
	t.Helper()
	o, err := store.Ownership(context.Background())
	require.NoError(t, err)
	return o
}

// A store that holds a system's snapshots refuses a new system, naming its
// owner, through the Store that system used and through another one.
func TestNewSystemRefusesAnOwnedStore(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	sys, _, _ := probes(t, 2, WithStore(store), WithSystemName("bank-a"), WithTimeout(testTimeout))
	assert.Equal(t, []snapshot.SnapshotID{1, 2}, snapshots(t, sys, 2))
	shutdown(t, sys)
	o := ownership(t, store)
	assert.Equal(t, "bank-a", o.Owner.System)
	assert.False(t, o.Live, "released by Shutdown")

	for _, s := range []persistence.Store{store, openStore(t, dir)} {
		second, err := NewSystem(testMessages, WithStore(s), WithSystemName("bank-b"))
		require.ErrorIs(t, err, persistence.ErrOwned)
		assert.Nil(t, second)
		var oe *persistence.OwnerError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, "bank-a", oe.Ownership.Owner.System)
		assert.Equal(t, snapshot.SnapshotID(2), oe.Ownership.High)
		assert.Contains(t, err.Error(), `system "bank-a"`)
		assert.Contains(t, err.Error(), `claiming the store for system "bank-b"`)
		oneLine(t, err)
	}
	assert.Equal(t, "bank-a", ownership(t, store).Owner.System, "a refused claim changes no owner")
}

// While a system runs, its store refuses a new system and a restore, file
// store and in-memory alike, and the running system keeps saving.
func TestRunningSystemLocksItsStore(t *testing.T) {
	dir := t.TempDir()
	for name, stores := range map[string][2]persistence.Store{
		"file":   {openStore(t, dir), openStore(t, dir)},
		"memory": func() [2]persistence.Store { m := persistence.NewMemory(); return [2]persistence.Store{m, m} }(),
	} {
		t.Run(name, func(t *testing.T) {
			sys, _, _ := probes(t, 2, WithStore(stores[0]), WithSystemName("first"), WithTimeout(testTimeout))
			defer shutdown(t, sys)
			ctx := context.Background()
			// Before any snapshot (nothing owned yet, but held) and after.
			for i := range 2 {
				for _, s := range stores {
					_, err := NewSystem(testMessages, WithStore(s))
					require.ErrorIs(t, err, persistence.ErrLocked)
					assert.Contains(t, err.Error(), `system "first"`)
					oneLine(t, err)

					_, err = Restore(ctx, s, 0, testMessages, probeKind)
					require.ErrorIs(t, err, persistence.ErrLocked)
					require.ErrorIs(t, err, ErrRestore)
					assert.NotErrorIs(t, err, persistence.ErrNotFound, "refused before it loads")
					oneLine(t, err)
				}
				g, err := sys.Snapshot(ctx)
				require.NoError(t, err, "the running system keeps its store")
				assert.Equal(t, snapshot.SnapshotID(i+1), g.ID)
			}
			assert.True(t, ownership(t, stores[1]).Live)
			assert.Equal(t, "first", ownership(t, stores[1]).Owner.System)
		})
	}
}

// A restore continues a store after every id it has held: the newest
// deleted, or a damaged entry newer than every complete snapshot.
func TestRestoreNumbersAfterEveryIDHeld(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	ctx := context.Background()
	sys, _, _ := probes(t, 2, WithStore(store), WithSystemName("bank-a"), WithTimeout(testTimeout))
	require.Equal(t, []snapshot.SnapshotID{1, 2, 3}, snapshots(t, sys, 3))
	shutdown(t, sys)

	// The newest deleted: the store still remembers 3.
	require.NoError(t, store.Delete(ctx, 3))
	restored, err := Restore(ctx, store, 0, testMessages, probeKind, WithTimeout(testTimeout))
	require.NoError(t, err)
	assert.Equal(t, "bank-a", restored.cfg.name, "named as the store's owner")
	o := ownership(t, store)
	assert.True(t, o.Live)
	assert.Equal(t, "bank-a", o.Owner.System)
	ids, err := store.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []snapshot.SnapshotID{1, 2, 4}, ids, "the restored system's first snapshot is 4, after the deleted 3")
	assert.Equal(t, []snapshot.SnapshotID{5}, snapshots(t, restored, 1))
	shutdown(t, restored)

	// A damaged entry newer than every complete snapshot: its id is held.
	damaged := filepath.Join(dir, fmt.Sprintf("snap-%020d", 9))
	require.NoError(t, os.Mkdir(damaged, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(damaged, "MANIFEST"), []byte("not a manifest"), 0o644))
	restored, err = Restore(ctx, openStore(t, dir), 0, testMessages, probeKind, WithTimeout(testTimeout), WithSystemName("bank-a2"))
	require.NoError(t, err)
	defer shutdown(t, restored)
	assert.Equal(t, "bank-a2", restored.cfg.name, "WithSystemName names a restored system")
	assert.Equal(t, "bank-a2", ownership(t, store).Owner.System)
	first, err := store.Latest(ctx)
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(10), first.ID, "after the damaged 9")
	assert.Equal(t, []snapshot.SnapshotID{11}, snapshots(t, restored, 1))
}

// A system that fails to start after it claimed its store gives it up.
func TestFailedStartReleasesTheStore(t *testing.T) {
	store := persistence.NewMemory()
	dup := func() actor.Actor { return &probe{} }
	_, err := NewSystem(testMessages, WithStore(store), WithKind("probe", dup), WithKind("probe", dup))
	require.ErrorIs(t, err, ErrConfig)
	assert.False(t, ownership(t, store).Live)

	sys, _, _ := probes(t, 1, WithStore(store), WithTimeout(testTimeout))
	snapshots(t, sys, 1)
	shutdown(t, sys)
	_, err = Restore(context.Background(), store, 0, testMessages) // no kinds given
	require.ErrorIs(t, err, ErrUnknownKind)
	assert.False(t, ownership(t, store).Live)
	_, err = Restore(context.Background(), store, 0, testMessages, probeKind, WithMode(snapshot.Aligned))
	require.ErrorIs(t, err, ErrRestore)
	assert.Contains(t, err.Error(), "snapshot taken in epoch mode, system in aligned mode")
	assert.False(t, ownership(t, store).Live)
}

// A save that fails aborts its snapshot with ErrSave and the store's
// error, says so on the event stream and in the log, and the next
// snapshot is saved.
func TestFailedSave(t *testing.T) {
	efs := persistence.NewErrorFS(persistence.OS(), persistence.Fault{})
	store := openStore(t, t.TempDir(), persistence.WithFS(efs))
	var logs testenv.SyncBuffer
	sys, _, _ := probes(t, 2, WithStore(store), WithTimeout(testTimeout), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	defer shutdown(t, sys)
	aborted := make(chan *SnapshotAborted, 10)
	sub := sys.ActorSystem().EventStream.Subscribe(func(evt interface{}) {
		if e, ok := evt.(*SnapshotAborted); ok {
			aborted <- e
		}
	})
	defer sys.ActorSystem().EventStream.Unsubscribe(sub)
	ctx := context.Background()

	efs.SetFault(persistence.Fault{Op: persistence.OpRename, N: 1})
	_, err := sys.Snapshot(ctx)
	require.ErrorIs(t, err, ErrSave)
	require.ErrorIs(t, err, snapshot.ErrAborted)
	require.ErrorIs(t, err, persistence.ErrInjected, "the store's error")
	require.True(t, efs.Injected())
	oneLine(t, err)
	e := waitFor(t, aborted)
	assert.Equal(t, snapshot.SnapshotID(1), e.ID)
	require.ErrorIs(t, e.Err, ErrSave)
	require.ErrorIs(t, e.Err, persistence.ErrInjected)
	assert.Contains(t, logs.String(), "level=WARN msg=\"snapshot aborted\"")
	assert.Contains(t, logs.String(), ErrSave.Error())
	ids, err := store.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, ids)

	efs.SetFault(persistence.Fault{})
	g, err := sys.Snapshot(ctx)
	require.NoError(t, err, "a failed save leaves the system snapshotting")
	assert.Equal(t, snapshot.SnapshotID(2), g.ID)
	_, err = store.Load(ctx, g.ID)
	require.NoError(t, err)
}

// sentinelStore fails every Save with err.
type sentinelStore struct {
	*persistence.Memory
	err error
}

func (s sentinelStore) Save(context.Context, *snapshot.Global) error { return s.err }

// The store's sentinel stays visible through ErrSave.
func TestFailedSaveKeepsTheStoresError(t *testing.T) {
	for _, sentinel := range []error{persistence.ErrLocked, persistence.ErrFenced} {
		store := sentinelStore{Memory: persistence.NewMemory(), err: fmt.Errorf("refused: %w", sentinel)}
		sys, _, _ := probes(t, 1, WithStore(store), WithTimeout(testTimeout))
		_, err := sys.Snapshot(context.Background())
		require.ErrorIs(t, err, ErrSave)
		require.ErrorIs(t, err, sentinel)
		shutdown(t, sys)
	}
}

func TestWithSystemName(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"", "empty system name"},
		{strings.Repeat("n", persistence.MaxSystemName+1), "256 bytes, more than 255"},
		{"a\nb", "control character"},
		{"\xff", "not valid UTF-8"},
	} {
		_, err := NewSystem(testMessages, WithSystemName(tc.name))
		require.ErrorIs(t, err, ErrConfig, "%q", tc.name)
		assert.Contains(t, err.Error(), "WithSystemName")
		assert.Contains(t, err.Error(), tc.want)
		oneLine(t, err)
	}
	for _, name := range []string{strings.Repeat("n", persistence.MaxSystemName), "käse", "bank east/1"} {
		store := persistence.NewMemory()
		sys, err := NewSystem(testMessages, WithSystemName(name), WithStore(store))
		require.NoError(t, err, "%q", name)
		assert.Equal(t, name, ownership(t, store).Owner.System)
		shutdown(t, sys)
	}
	store := persistence.NewMemory()
	sys, err := NewSystem(testMessages, WithStore(store))
	require.NoError(t, err)
	assert.Equal(t, DefaultSystemName, ownership(t, store).Owner.System)
	shutdown(t, sys)
}

// No snapshot is numbered past the highest id a store accepts.
func TestSnapshotIDsExhausted(t *testing.T) {
	ctx := context.Background()
	store := persistence.NewMemory()
	require.NoError(t, store.Save(ctx, &snapshot.Global{ID: snapshot.MaxSnapshotID - 1}))
	sys, err := Restore(ctx, store, 0, testMessages, WithTimeout(testTimeout))
	require.NoError(t, err)
	_, err = store.Load(ctx, snapshot.MaxSnapshotID)
	require.NoError(t, err, "the restored system's first snapshot takes the last id")
	_, err = sys.Snapshot(ctx)
	require.ErrorIs(t, err, persistence.ErrIDsExhausted)
	shutdown(t, sys)

	_, err = Restore(ctx, store, 0, testMessages)
	require.ErrorIs(t, err, persistence.ErrIDsExhausted)
	require.ErrorIs(t, err, ErrRestore)
	assert.False(t, ownership(t, store).Live)
}
