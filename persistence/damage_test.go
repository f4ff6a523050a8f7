package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// within runs fn and fails the test if it has not returned in a minute:
// reading a store must never hang, whatever is in it.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return: it hangs", what)
	}
}

// damage is one way of damaging a snapshot's files, and what the store
// must then say.
type damage struct {
	name string
	// apply damages the snapshot in dir; it may return FileStore options
	// (an ErrorFS that fails reading one file).
	apply func(t *testing.T, dir string) []persistence.FileOption
	// manifest: the damage is in the manifest or the directory, so the
	// entry is not a complete snapshot; otherwise only Load finds it.
	manifest bool
	// class is the sentinel Load's error (and Damage, for manifest
	// damage) satisfies.
	class error
}

func flipAt(file string, off func(size int64) int64) func(*testing.T, string) []persistence.FileOption {
	return func(t *testing.T, dir string) []persistence.FileOption {
		path := filepath.Join(dir, file)
		flip(t, path, off(fileSize(t, path)))
		return nil
	}
}

func truncateTo(file string, n func(size int64) int64) func(*testing.T, string) []persistence.FileOption {
	return func(t *testing.T, dir string) []persistence.FileOption {
		path := filepath.Join(dir, file)
		require.NoError(t, os.Truncate(path, n(fileSize(t, path))))
		return nil
	}
}

func replaceWith(file string, make func(t *testing.T, path string)) func(*testing.T, string) []persistence.FileOption {
	return func(t *testing.T, dir string) []persistence.FileOption {
		path := filepath.Join(dir, file)
		require.NoError(t, os.RemoveAll(path))
		make(t, path)
		return nil
	}
}

func mkdir(t *testing.T, path string)   { require.NoError(t, os.Mkdir(path, 0o755)) }
func mkfifo(t *testing.T, path string)  { require.NoError(t, syscall.Mkfifo(path, 0o644)) }
func devZero(t *testing.T, path string) { require.NoError(t, os.Symlink("/dev/zero", path)) }
func nothing(*testing.T, string)        {}
func garbage(t *testing.T, path string) {
	require.NoError(t, os.WriteFile(path, []byte("not a snapshot at all"), 0o644))
}

// denied fails opening file with a permission error, as a file the
// process may not read does (the tests may run as root, which reads
// anything).
func denied(file string) func(*testing.T, string) []persistence.FileOption {
	return func(t *testing.T, dir string) []persistence.FileOption {
		f := persistence.Fault{Op: persistence.OpOpen, N: 1, Sticky: true, Err: fs.ErrPermission, Name: filepath.Join(dir, file)}
		return []persistence.FileOption{persistence.WithFS(persistence.NewErrorFS(persistence.OS(), f))}
	}
}

func damages() []damage {
	data, man := persistence.DataName, persistence.ManifestName
	first := func(int64) int64 { return 0 }
	version := func(int64) int64 { return 9 }
	body := func(int64) int64 { return persistence.HeaderSize }
	middle := func(n int64) int64 { return n / 2 }
	last := func(n int64) int64 { return n - 1 }
	zero := func(int64) int64 { return 0 }
	ds := []damage{
		{"data/flip-magic", flipAt(data, first), false, persistence.ErrCorrupt},
		{"data/flip-version", flipAt(data, version), false, persistence.ErrCorrupt},
		{"data/flip-body", flipAt(data, body), false, persistence.ErrCorrupt},
		{"data/flip-middle", flipAt(data, middle), false, persistence.ErrCorrupt},
		{"data/flip-checksum", flipAt(data, last), false, persistence.ErrCorrupt},
		{"data/truncate-empty", truncateTo(data, zero), false, persistence.ErrCorrupt},
		{"data/truncate-header", truncateTo(data, body), false, persistence.ErrCorrupt},
		{"data/truncate-half", truncateTo(data, middle), false, persistence.ErrCorrupt},
		{"data/truncate-last-byte", truncateTo(data, last), false, persistence.ErrCorrupt},
		{"data/longer", truncateTo(data, func(n int64) int64 { return n + 1 }), false, persistence.ErrCorrupt},
		{"data/missing", replaceWith(data, nothing), false, persistence.ErrCorrupt},
		{"data/directory", replaceWith(data, mkdir), false, persistence.ErrNotRegular},
		{"data/fifo", replaceWith(data, mkfifo), false, persistence.ErrNotRegular},
		{"data/device", replaceWith(data, devZero), false, persistence.ErrNotRegular},
		{"data/unreadable", denied(data), false, fs.ErrPermission},
		{"manifest/truncate-empty", truncateTo(man, zero), true, persistence.ErrCorrupt},
		{"manifest/truncate-last-byte", truncateTo(man, last), true, persistence.ErrCorrupt},
		{"manifest/garbage", replaceWith(man, garbage), true, persistence.ErrCorrupt},
		{"manifest/missing", replaceWith(man, nothing), true, persistence.ErrCorrupt},
		{"manifest/directory", replaceWith(man, mkdir), true, persistence.ErrNotRegular},
		{"manifest/fifo", replaceWith(man, mkfifo), true, persistence.ErrNotRegular},
		{"manifest/device", replaceWith(man, devZero), true, persistence.ErrNotRegular},
		{"manifest/unreadable", denied(man), true, fs.ErrPermission},
		{"snapshot/file", replaceWith("", garbage), true, persistence.ErrNotRegular},
		{"snapshot/fifo", replaceWith("", mkfifo), true, persistence.ErrNotRegular},
		{"snapshot/symlink", replaceWith("", func(t *testing.T, path string) {
			require.NoError(t, os.Symlink(snapName(1), path))
		}), true, persistence.ErrNotRegular},
	}
	// Every byte of the manifest: each field of its envelope and body.
	for off := int64(0); off < 64; off++ {
		ds = append(ds, damage{fmt.Sprintf("manifest/flip@%d", off), flipAt(man, func(n int64) int64 { return off % n }), true, persistence.ErrCorrupt})
	}
	return ds
}

// TestDamageIsContained damages one snapshot of three in every way of
// damages, first the middle one and then the newest, and checks that the
// store names the damage with its class, still serves the other two,
// never hangs, keeps numbering after the damaged id, and can set the
// damaged entry aside.
func TestDamageIsContained(t *testing.T) {
	ctx := context.Background()
	for _, d := range damages() {
		for _, victim := range []snapshot.SnapshotID{2, 3} {
			t.Run(fmt.Sprintf("%s/snapshot-%d", d.name, victim), func(t *testing.T) {
				root := t.TempDir()
				s := openFile(t, root)
				for id := snapshot.SnapshotID(1); id <= 3; id++ {
					require.NoError(t, s.Save(ctx, storetest.NewGlobal(id, storetest.Small)))
				}
				opts := d.apply(t, filepath.Join(root, snapName(victim)))
				s = openFile(t, root, opts...)
				within(t, "reading the damaged store", func() { checkContained(t, s, d, victim) })
			})
		}
	}
}

func checkContained(t *testing.T, s *persistence.FileStore, d damage, victim snapshot.SnapshotID) {
	ctx := context.Background()
	others := []snapshot.SnapshotID{1, 2, 3}
	others = append(others[:victim-1:victim-1], others[victim:]...)

	es, err := s.Entries(ctx)
	require.NoError(t, err, "one damaged entry never fails the listing")
	require.Len(t, es, 3, "every entry is listed, the damaged one too")
	for _, e := range es {
		if e.ID == victim && d.manifest {
			require.ErrorIs(t, e.Damage, d.class, "the damage of %s", e.Name)
			assert.NotContains(t, e.Damage.Error(), "\n")
		} else {
			require.NoError(t, e.Damage, "entry %s", e.Name)
		}
	}
	_, err = s.Load(ctx, victim)
	require.ErrorIs(t, err, d.class)
	assert.Contains(t, err.Error(), snapName(victim), "the error names the snapshot's place")
	for _, id := range others {
		g, err := s.Load(ctx, id)
		require.NoError(t, err, "snapshot %d is untouched", id)
		require.NoError(t, storetest.Equal(storetest.NewGlobal(id, storetest.Small), g))
	}
	list := ids(t, s)
	if d.manifest {
		assert.Equal(t, others, list)
	} else {
		assert.Equal(t, []snapshot.SnapshotID{1, 2, 3}, list)
	}
	g, err := s.Latest(ctx)
	switch {
	case victim != 3:
		require.NoError(t, err)
		assert.Equal(t, snapshot.SnapshotID(3), g.ID)
	case d.manifest:
		require.NoError(t, err, "an entry that is not a snapshot is passed over")
		assert.Equal(t, snapshot.SnapshotID(2), g.ID)
	default:
		require.ErrorIs(t, err, d.class, "a complete snapshot with damaged data is reported, not passed over")
		assert.Contains(t, err.Error(), "snapshot 3")
	}

	o, err := s.Ownership(ctx)
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(3), o.High, "the damaged id counts")
	require.NoError(t, s.Retain(ctx, 1), "retention passes damage over")
	if d.manifest || victim != 3 {
		for _, id := range others[:len(others)-1] {
			_, err := s.Load(ctx, id)
			require.ErrorIs(t, err, persistence.ErrNotFound, "snapshot %d is older than the newest complete one", id)
		}
	}

	// Set aside, the damaged entry is gone from every listing, and its id
	// is still never used again.
	es, err = s.Entries(ctx)
	require.NoError(t, err)
	for _, e := range es {
		if e.ID == victim {
			require.NoError(t, s.SetAside(ctx, e))
		}
	}
	es, err = s.Entries(ctx)
	require.NoError(t, err)
	for _, e := range es {
		assert.NotEqual(t, victim, e.ID)
	}
	_, err = s.Load(ctx, victim)
	require.Error(t, err)
	l, err := s.Claim(ctx, "sys", persistence.ClaimRestore)
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(3), l.High())
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(4, storetest.Small)))
	require.NoError(t, l.Release(ctx))
}

// TestForeignEntries puts files the store does not write in its
// directory: they are listed as foreign, and hide nothing.
func TestForeignEntries(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := openFile(t, root)
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
	require.NoError(t, os.WriteFile(filepath.Join(root, "notes.txt"), []byte("hi"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(root, "backup"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644))
	within(t, "listing", func() {
		es, err := s.Entries(ctx)
		require.NoError(t, err)
		require.Len(t, es, 4)
		assert.Equal(t, snapshot.SnapshotID(1), es[0].ID)
		require.NoError(t, es[0].Damage)
		for _, e := range es[1:] {
			assert.Zero(t, e.ID)
			require.ErrorIs(t, e.Damage, persistence.ErrForeign, e.Name)
		}
		assert.Equal(t, []snapshot.SnapshotID{1}, ids(t, s))
		g, err := s.Latest(ctx)
		require.NoError(t, err)
		assert.Equal(t, snapshot.SnapshotID(1), g.ID)
		require.NoError(t, s.SetAside(ctx, es[1]))
	})
}

// TestDamagedOwner damages OWNER: the store still says how far it got
// (from its entries), a new system is still refused, and a restore
// writes a new owner record.
func TestDamagedOwner(t *testing.T) {
	ctx := context.Background()
	for _, d := range []struct {
		name  string
		apply func(t *testing.T, path string)
	}{
		{"flip", func(t *testing.T, path string) { flip(t, path, 12) }},
		{"truncate", func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 5)) }},
		{"directory", func(t *testing.T, path string) { require.NoError(t, os.Remove(path)); mkdir(t, path) }},
		{"fifo", func(t *testing.T, path string) { require.NoError(t, os.Remove(path)); mkfifo(t, path) }},
	} {
		t.Run(d.name, func(t *testing.T) {
			root := t.TempDir()
			s := openFile(t, root)
			l, err := s.Claim(ctx, "bank", persistence.ClaimNew)
			require.NoError(t, err)
			require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
			require.NoError(t, l.Release(ctx))
			d.apply(t, filepath.Join(root, "OWNER"))
			within(t, "reading the store", func() {
				o, err := s.Ownership(ctx)
				if err != nil {
					require.ErrorIs(t, err, persistence.ErrNotRegular)
					return
				}
				assert.Equal(t, snapshot.SnapshotID(1), o.High)
				_, err = s.Claim(ctx, "other", persistence.ClaimNew)
				require.ErrorIs(t, err, persistence.ErrOwned)
			})
		})
	}
}

// TestIDsNearTheLimit: a store whose highest id leaves none for another
// snapshot refuses a claim, with a clear error, rather than wrapping
// around; a name carrying an id no store writes (past 2^63-1), or a name
// the store does not write, counts for nothing and blocks nothing.
func TestIDsNearTheLimit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := openFile(t, root)
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(1<<63-1, storetest.Small)))
	_, err := s.Claim(ctx, "sys", persistence.ClaimRestore)
	require.ErrorIs(t, err, persistence.ErrIDsExhausted)
	require.ErrorIs(t, s.Save(ctx, storetest.NewGlobal(1<<63, storetest.Small)), persistence.ErrTooLarge)
	require.ErrorIs(t, persistence.NewMemory().Save(ctx, storetest.NewGlobal(1<<63, storetest.Small)), persistence.ErrTooLarge)

	root = t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, fmt.Sprintf("snap-%020d", uint64(1<<64-1))), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "18000000000000000000-notes.txt"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, ".tmp-18000000000000000000"), nil, 0o644))
	s = openFile(t, root)
	o, err := s.Ownership(ctx)
	require.NoError(t, err)
	assert.Zero(t, o.High, "names the store does not write carry no id")
	es, err := s.Entries(ctx)
	require.NoError(t, err)
	require.Len(t, es, 2)
	for _, e := range es {
		require.ErrorIs(t, e.Damage, persistence.ErrForeign, e.Name)
		require.NoError(t, s.SetAside(ctx, e))
	}
	l, err := s.Claim(ctx, "sys", persistence.ClaimNew)
	require.NoError(t, err, "set aside, nothing of theirs blocks a new system")
	assert.Zero(t, l.High())
	require.NoError(t, l.Release(ctx))
}

// TestLeaseHoldsWhateverIsDeleted: the lease is a lock on the store's
// directory, not on a file in it that someone could delete as a stale
// lock: deleting files does not let a second writer in.
func TestLeaseHoldsWhateverIsDeleted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := openFile(t, dir), openFile(t, dir)
	l, err := a.Claim(ctx, "a", persistence.ClaimNew)
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "OWNER")))
	_, err = b.Claim(ctx, "b", persistence.ClaimRestore)
	require.ErrorIs(t, err, persistence.ErrLocked)
	require.ErrorIs(t, b.Save(ctx, storetest.NewGlobal(1, storetest.Small)), persistence.ErrLocked)
	require.NoError(t, l.Release(ctx))
}

// TestEveryFieldOfTheData changes every byte of a small snapshot's data
// file (waits and violations included), each time sealing it again (envelope checksum and manifest) so
// that the change reaches the decoder's check of the field it falls in:
// the load either fails with ErrCorrupt or ErrFormatVersion (the version
// field), or yields a snapshot that passes Verify. Snapshots 1 and 3
// stay whole throughout.
func TestEveryFieldOfTheData(t *testing.T) {
	ctx := context.Background()
	shape := storetest.Shape{Participants: 3, StateSize: 4, Channels: 2, InFlight: 2, MessageSize: 3, Waiting: 2, Edges: 2, Violations: 1}
	root := t.TempDir()
	s := openFile(t, root)
	for id := snapshot.SnapshotID(1); id <= 3; id++ {
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(id, shape)))
	}
	dir := filepath.Join(root, snapName(2))
	data, err := os.ReadFile(filepath.Join(dir, persistence.DataName))
	require.NoError(t, err)
	outcomes := map[string]int{}
	for off := range len(data) - 4 { // the trailer is the checksum, resealed
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			b := append([]byte(nil), data...)
			b[off] ^= mask
			b = persistence.FixChecksum(b)
			writeSealed(t, dir, b)
			g, err := s.Load(ctx, 2)
			switch {
			case err == nil:
				require.NoError(t, g.Verify(), "offset %d mask %#x: a loaded snapshot passes Verify", off, mask)
				outcomes["loaded"]++
			case errors.Is(err, persistence.ErrFormatVersion):
				require.True(t, off == 8 || off == 9, "offset %d: only the version field gives ErrFormatVersion", off)
				outcomes["version"]++
			default:
				require.ErrorIs(t, err, persistence.ErrCorrupt, "offset %d mask %#x", off, mask)
				outcomes["corrupt"]++
			}
		}
	}
	for _, id := range []snapshot.SnapshotID{1, 3} {
		g, err := s.Load(ctx, id)
		require.NoError(t, err)
		require.NoError(t, storetest.Equal(storetest.NewGlobal(id, shape), g))
	}
	t.Logf("%d bytes x 3 masks: %v", len(data)-4, outcomes)
	assert.NotZero(t, outcomes["corrupt"])
}

// writeSealed replaces the data file of the snapshot in dir with b and
// writes a manifest that vouches for it.
func writeSealed(t *testing.T, dir string, b []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, persistence.DataName), b, 0o644))
	old, err := os.ReadFile(filepath.Join(dir, persistence.ManifestName))
	require.NoError(t, err)
	m, err := persistence.DecodeManifest(old)
	require.NoError(t, err)
	m.Files = []persistence.ManifestFile{{Name: persistence.DataName, Size: int64(len(b)), CRC: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))}}
	man, err := persistence.EncodeManifest(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, persistence.ManifestName), man, 0o644))
}
