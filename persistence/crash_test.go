package persistence_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

const storeDir = "/var/lib/snaps"

// far is a clock after every temporary directory's grace period, as a
// reboot long after a crash would see.
func far() time.Time { return time.Now().Add(365 * 24 * time.Hour) }

// withOld returns a MemFS holding a store with complete snapshots 1 and 2.
func withOld(t *testing.T) *persistence.MemFS {
	t.Helper()
	mem := persistence.NewMemFS()
	s := openFile(t, storeDir, persistence.WithFS(mem))
	for id := snapshot.SnapshotID(1); id <= 2; id++ {
		require.NoError(t, s.Save(context.Background(), storetest.NewGlobal(id, storetest.Small)))
	}
	return mem
}

// requireOld checks that s holds snapshots 1 and 2 whole, and 3 either
// whole or not at all; it returns whether 3 is there.
func requireOld(t *testing.T, s persistence.Store) (has3 bool) {
	t.Helper()
	ctx := context.Background()
	list := ids(t, s)
	has3 = len(list) == 3
	if has3 {
		require.Equal(t, []snapshot.SnapshotID{1, 2, 3}, list)
	} else {
		require.Equal(t, []snapshot.SnapshotID{1, 2}, list)
	}
	for _, id := range list {
		g, err := s.Load(ctx, id)
		require.NoError(t, err, "snapshot %d", id)
		require.NoError(t, storetest.Equal(storetest.NewGlobal(id, storetest.Small), g))
	}
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, list[len(list)-1], g.ID, "Latest is the newest complete snapshot")
	if !has3 {
		_, err := s.Load(ctx, 3)
		require.ErrorIs(t, err, persistence.ErrNotFound)
	}
	return has3
}

// requireTidy checks that no temporary or deleted directory is left.
func requireTidy(t *testing.T, fsys persistence.FS) {
	t.Helper()
	for _, name := range entries(t, fsys, storeDir) {
		require.True(t, strings.HasPrefix(name, "snap-"), "leftover %s", name)
	}
}

// saveOps counts the file-system operations of saving snapshot 3.
func saveOps(t *testing.T) int {
	efs := persistence.NewErrorFS(withOld(t), persistence.Fault{})
	s := openFile(t, storeDir, persistence.WithFS(efs))
	efs.SetFault(persistence.Fault{})
	require.NoError(t, s.Save(context.Background(), storetest.NewGlobal(3, storetest.Small)))
	return efs.Count(persistence.OpAny)
}

// TestSaveErrorInjection fails each operation of a save in turn: the save
// fails, the old snapshots stay whole, nothing half-written is visible or
// left behind, and the save then succeeds.
func TestSaveErrorInjection(t *testing.T) {
	ctx := context.Background()
	total := saveOps(t)
	t.Logf("a save takes %d file-system operations", total)
	for n := 1; n <= total; n++ {
		t.Run(fmt.Sprintf("op=%d", n), func(t *testing.T) {
			mem := withOld(t)
			efs := persistence.NewErrorFS(mem, persistence.Fault{})
			s := openFile(t, storeDir, persistence.WithFS(efs))
			efs.SetFault(persistence.Fault{Op: persistence.OpAny, N: n})
			err := s.Save(ctx, storetest.NewGlobal(3, storetest.Small))
			require.True(t, efs.Injected())
			require.ErrorIs(t, err, persistence.ErrInjected)
			fresh := openFile(t, storeDir, persistence.WithFS(mem))
			require.False(t, requireOld(t, fresh), "a failed save left its snapshot")
			requireTidy(t, mem)
			require.NoError(t, fresh.Save(ctx, storetest.NewGlobal(3, storetest.Small)))
			require.True(t, requireOld(t, fresh))
		})
	}
}

// TestSaveErrorInjectionByKind fails the first and last operation of each
// kind of a save, on the operating system's file system.
func TestSaveErrorInjectionByKind(t *testing.T) {
	ctx := context.Background()
	for op := persistence.OpCreate; op <= persistence.OpSyncDir; op++ {
		dir := t.TempDir()
		efs := persistence.NewErrorFS(persistence.OS(), persistence.Fault{})
		s := openFile(t, dir, persistence.WithFS(efs))
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
		efs.SetFault(persistence.Fault{})
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(2, storetest.Small)))
		count := efs.Count(op)
		require.NoError(t, s.Delete(ctx, 2))
		if count == 0 {
			continue // not used by a save
		}
		for _, n := range []int{1, count} {
			t.Run(fmt.Sprintf("%s=%d", op, n), func(t *testing.T) {
				efs.SetFault(persistence.Fault{Op: op, N: n})
				require.ErrorIs(t, s.Save(ctx, storetest.NewGlobal(2, storetest.Small)), persistence.ErrInjected)
				efs.SetFault(persistence.Fault{})
				assert.Equal(t, []snapshot.SnapshotID{1}, ids(t, s))
				// OWNER keeps id 2, deleted as the highest, from being used again.
				assert.Equal(t, []string{"OWNER", snapName(1)}, entries(t, persistence.OS(), dir))
			})
		}
	}
}

// TestSaveCrash crashes the machine after each operation of a save, in
// both crash modes: after the reboot the store holds the old snapshots
// whole and the new one whole or not at all, and whole if the save had
// returned. Open removes what the crashed save left.
func TestSaveCrash(t *testing.T) {
	ctx := context.Background()
	total := saveOps(t)
	for _, mode := range []persistence.CrashMode{persistence.CrashStrict, persistence.CrashKeepMetadata} {
		outcomes := map[bool]int{}
		defer func() {
			// Crashes before the commit lose the snapshot, crashes after
			// keep it: both must have happened, or the test saw nothing.
			assert.Positive(t, outcomes[false], "%s: no crash lost the snapshot", mode)
			assert.Positive(t, outcomes[true], "%s: no crash kept the snapshot", mode)
		}()
		for n := 1; n <= total+1; n++ {
			for seed := uint64(1); seed <= 3; seed++ {
				if mode == persistence.CrashStrict && seed > 1 {
					break // nothing random
				}
				t.Run(fmt.Sprintf("%s/op=%d/seed=%d", mode, n, seed), func(t *testing.T) {
					mem := withOld(t)
					efs := persistence.NewErrorFS(mem, persistence.Fault{})
					s := openFile(t, storeDir, persistence.WithFS(efs))
					efs.SetFault(persistence.Fault{Op: persistence.OpAny, N: n, Sticky: true})
					err := s.Save(ctx, storetest.NewGlobal(3, storetest.Small))
					rebooted := mem.CrashClone(mode, seed)
					after := openFile(t, storeDir, persistence.WithFS(rebooted), persistence.WithClock(far))
					has3 := requireOld(t, after)
					outcomes[has3]++
					if err == nil {
						require.True(t, has3, "a save that returned did not survive the crash")
					}
					requireTidy(t, rebooted)
					if !has3 {
						require.NoError(t, after.Save(ctx, storetest.NewGlobal(3, storetest.Small)))
					}
				})
			}
		}
	}
}

// TestRetainCrash crashes the machine after each operation of a Retain:
// after the reboot every snapshot listed loads whole, and the newest is
// there.
func TestRetainCrash(t *testing.T) {
	ctx := context.Background()
	count := persistence.NewErrorFS(withOld(t), persistence.Fault{})
	s := openFile(t, storeDir, persistence.WithFS(count))
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(3, storetest.Small)))
	count.SetFault(persistence.Fault{})
	require.NoError(t, s.Retain(ctx, 1))
	total := count.Count(persistence.OpAny)
	for _, mode := range []persistence.CrashMode{persistence.CrashStrict, persistence.CrashKeepMetadata} {
		for n := 1; n <= total+1; n++ {
			t.Run(fmt.Sprintf("%s/op=%d", mode, n), func(t *testing.T) {
				mem := withOld(t)
				efs := persistence.NewErrorFS(mem, persistence.Fault{})
				s := openFile(t, storeDir, persistence.WithFS(efs))
				require.NoError(t, s.Save(ctx, storetest.NewGlobal(3, storetest.Small)))
				efs.SetFault(persistence.Fault{Op: persistence.OpAny, N: n, Sticky: true})
				err := s.Retain(ctx, 1)
				after := openFile(t, storeDir, persistence.WithFS(mem.CrashClone(mode, uint64(n))), persistence.WithClock(far))
				list := ids(t, after)
				require.Contains(t, list, snapshot.SnapshotID(3))
				if err == nil {
					require.Equal(t, []snapshot.SnapshotID{3}, list, "a Retain that returned did not survive the crash")
				}
				for _, id := range list {
					g, err := after.Load(ctx, id)
					require.NoError(t, err)
					require.NoError(t, storetest.Equal(storetest.NewGlobal(id, storetest.Small), g))
				}
				g, err := after.Latest(ctx)
				require.NoError(t, err)
				require.Equal(t, snapshot.SnapshotID(3), g.ID)
			})
		}
	}
}

// TestMemFSCrash checks the crash model itself.
func TestMemFSCrash(t *testing.T) {
	mem := persistence.NewMemFS()
	require.NoError(t, mem.MkdirAll("/d", 0o700))
	require.NoError(t, mem.SyncDir("/"))
	write := func(name, data string, sync bool) {
		f, err := mem.Create(name, 0o600)
		require.NoError(t, err)
		_, err = f.Write([]byte(data))
		require.NoError(t, err)
		if sync {
			require.NoError(t, f.Sync())
		}
		require.NoError(t, f.Close())
	}
	write("/d/synced", "durable", true)
	write("/d/unsynced", "volatile", false)
	require.NoError(t, mem.SyncDir("/d"))
	write("/d/unlisted", "lost", true) // its name is not durable

	strict := mem.CrashClone(persistence.CrashStrict, 0)
	assert.Equal(t, []string{"synced", "unsynced"}, entries(t, strict, "/d"))
	assert.Equal(t, "durable", readAll(t, strict, "/d/synced"))
	assert.Equal(t, "", readAll(t, strict, "/d/unsynced"))

	meta := mem.CrashClone(persistence.CrashKeepMetadata, 7)
	assert.Equal(t, []string{"synced", "unlisted", "unsynced"}, entries(t, meta, "/d"))
	assert.Equal(t, "lost", readAll(t, meta, "/d/unlisted"))
	assert.True(t, strings.HasPrefix("volatile", readAll(t, meta, "/d/unsynced")))

	// A rename is durable once its directory is synced.
	require.NoError(t, mem.Mkdir("/d/tmp", 0o700))
	write("/d/tmp/f", "x", true)
	require.NoError(t, mem.SyncDir("/d/tmp"))
	require.NoError(t, mem.SyncDir("/d"))
	require.NoError(t, mem.Rename("/d/tmp", "/d/final"))
	assert.Equal(t, []string{"synced", "tmp", "unlisted", "unsynced"}, entries(t, mem.CrashClone(persistence.CrashStrict, 0), "/d"))
	require.NoError(t, mem.SyncDir("/d"))
	crashed := mem.CrashClone(persistence.CrashStrict, 0)
	assert.Equal(t, []string{"final", "synced", "unlisted", "unsynced"}, entries(t, crashed, "/d"))
	assert.Equal(t, "x", readAll(t, crashed, "/d/final/f"))

	// A directory replaces only an empty one.
	require.NoError(t, mem.Mkdir("/d/other", 0o700))
	require.ErrorIs(t, mem.Rename("/d/other", "/d/final"), fs.ErrExist)
	require.NoError(t, mem.Mkdir("/d/empty", 0o700))
	require.NoError(t, mem.Rename("/d/other", "/d/empty"))
}

func readAll(t *testing.T, fsys persistence.FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	require.NoError(t, err)
	defer f.Close()
	var b strings.Builder
	buf := make([]byte, 3)
	for {
		n, err := f.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}
