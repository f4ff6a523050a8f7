package persistence_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

func openFile(t testing.TB, dir string, opts ...persistence.FileOption) *persistence.FileStore {
	t.Helper()
	s, err := persistence.Open(context.Background(), dir, opts...)
	require.NoError(t, err)
	return s
}

func snapName(id snapshot.SnapshotID) string { return fmt.Sprintf("snap-%020d", id) }

// entries returns the names in dir of fsys.
func entries(t testing.TB, fsys persistence.FS, dir string) []string {
	t.Helper()
	es, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestFileStoreLayout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openFile(t, "file://"+dir)
	assert.Equal(t, dir, s.Dir())
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(42, storetest.Small)))
	assert.Equal(t, []string{snapName(42)}, entries(t, persistence.OS(), dir), "no temporary directory is left")
	assert.Equal(t, []string{persistence.ManifestName, persistence.DataName}, entries(t, persistence.OS(), filepath.Join(dir, snapName(42))))
	data, err := os.ReadFile(filepath.Join(dir, snapName(42), persistence.DataName))
	require.NoError(t, err)
	assert.Equal(t, "ASNAPGLB\x00"+string(rune(persistence.FormatVersion)), string(data[:persistence.HeaderSize]))
	g, err := persistence.DecodeGlobal(data)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(storetest.NewGlobal(42, storetest.Small), g))
}

// corruptible saves snapshots 1 to 3 and returns the store and the paths
// of snapshot 3's files.
func corruptible(t *testing.T) (s *persistence.FileStore, data, man string) {
	t.Helper()
	dir := t.TempDir()
	s = openFile(t, dir)
	for id := snapshot.SnapshotID(1); id <= 3; id++ {
		require.NoError(t, s.Save(context.Background(), storetest.NewGlobal(id, storetest.Small)))
	}
	return s, filepath.Join(dir, snapName(3), persistence.DataName), filepath.Join(dir, snapName(3), persistence.ManifestName)
}

func requireCorrupt(t *testing.T, err error, file string) *persistence.CorruptError {
	t.Helper()
	require.ErrorIs(t, err, persistence.ErrCorrupt)
	var ce *persistence.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, file, ce.File)
	assert.Contains(t, err.Error(), file)
	return ce
}

func TestFileStoreCorruptData(t *testing.T) {
	ctx := context.Background()
	_, data, _ := corruptible(t)
	size := fileSize(t, data)
	for _, off := range []int64{0, 9, persistence.HeaderSize, size / 2, size - 5, size - 1} {
		t.Run(fmt.Sprintf("flip@%d", off), func(t *testing.T) {
			s, data, _ := corruptible(t)
			flip(t, data, off)
			_, err := s.Load(ctx, 3)
			requireCorrupt(t, err, data)
			// The manifest is valid: Latest reports the damage rather than
			// going back to snapshot 2.
			_, err = s.Latest(ctx)
			requireCorrupt(t, err, data)
			assert.Equal(t, []snapshot.SnapshotID{1, 2, 3}, ids(t, s))
			g, err := s.Load(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, storetest.Equal(storetest.NewGlobal(2, storetest.Small), g))
		})
	}
	t.Run("truncated", func(t *testing.T) {
		s, data, _ := corruptible(t)
		require.NoError(t, os.Truncate(data, size-100))
		_, err := s.Load(ctx, 3)
		ce := requireCorrupt(t, err, data)
		assert.Equal(t, size-100, ce.Offset)
	})
	t.Run("extended", func(t *testing.T) {
		s, data, _ := corruptible(t)
		f, err := os.OpenFile(data, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.Write([]byte("more"))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = s.Load(ctx, 3)
		ce := requireCorrupt(t, err, data)
		assert.Equal(t, size, ce.Offset)
	})
	t.Run("missing", func(t *testing.T) {
		s, data, _ := corruptible(t)
		require.NoError(t, os.Remove(data))
		_, err := s.Load(ctx, 3)
		requireCorrupt(t, err, data)
	})
	t.Run("retain", func(t *testing.T) {
		// A damaged snapshot is neither counted as complete nor deleted.
		s, data, _ := corruptible(t)
		flip(t, data, size/2)
		require.NoError(t, s.Retain(ctx, 1))
		assert.Equal(t, []snapshot.SnapshotID{2, 3}, ids(t, s))
		_, err := s.Load(ctx, 2)
		require.NoError(t, err)
	})
}

// TestFileStoreMalformedData damages the data of a snapshot and rewrites
// its checksums to match, as a buggy writer might: the decoder still
// refuses it, naming the file and the offset of the fault.
func TestFileStoreMalformedData(t *testing.T) {
	s, data, man := corruptible(t)
	b, err := os.ReadFile(data)
	require.NoError(t, err)
	const at = persistence.HeaderSize + 1 // the snapshot id
	b[at] = 0xc0                          // nil, not an integer
	b = persistence.FixChecksum(b)
	require.NoError(t, os.WriteFile(data, b, 0o644))
	m, err := persistence.EncodeManifest(persistence.Manifest{ID: 3, Files: []persistence.ManifestFile{{Name: persistence.DataName, Size: int64(len(b)), CRC: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(man, m, 0o644))
	_, err = s.Load(context.Background(), 3)
	ce := requireCorrupt(t, err, data)
	assert.Equal(t, int64(at), ce.Offset)
	assert.Contains(t, ce.Reason, "snapshot id")
}

func TestFileStoreCorruptManifest(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"flip", "truncate", "remove", "empty"} {
		t.Run(damage, func(t *testing.T) {
			s, _, man := corruptible(t)
			switch damage {
			case "flip":
				flip(t, man, fileSize(t, man)/2)
			case "truncate":
				require.NoError(t, os.Truncate(man, fileSize(t, man)-1))
			case "remove":
				require.NoError(t, os.Remove(man))
			case "empty":
				require.NoError(t, os.Truncate(man, 0))
			}
			// Without a valid manifest the directory is not a snapshot:
			// Latest and List skip it, Load reports it.
			g, err := s.Latest(ctx)
			require.NoError(t, err)
			assert.Equal(t, snapshot.SnapshotID(2), g.ID)
			assert.Equal(t, []snapshot.SnapshotID{1, 2}, ids(t, s))
			_, err = s.Load(ctx, 3)
			requireCorrupt(t, err, man)
			require.ErrorIs(t, s.Save(ctx, storetest.NewGlobal(3, storetest.Small)), persistence.ErrExists, "a damaged snapshot is left for the operator")
			require.NoError(t, s.Retain(ctx, 1))
			assert.Equal(t, []snapshot.SnapshotID{2}, ids(t, s))
			require.NoError(t, s.Delete(ctx, 3))
			require.NoError(t, s.Save(ctx, storetest.NewGlobal(3, storetest.Small)))
		})
	}
	t.Run("swapped", func(t *testing.T) {
		// A manifest copied from another snapshot does not vouch for this one.
		s, _, man := corruptible(t)
		other, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(man)), snapName(2), persistence.ManifestName))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(man, other, 0o644))
		_, err = s.Load(ctx, 3)
		requireCorrupt(t, err, man)
	})
}

func TestFileStoreFormatVersion(t *testing.T) {
	ctx := context.Background()
	s, data, man := corruptible(t)
	const next = persistence.FormatVersion + 1
	b, err := os.ReadFile(data)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(data, persistence.Reseal(b, next), 0o644))
	_, err = persistence.DecodeGlobal(persistence.Reseal(b, next))
	require.ErrorIs(t, err, persistence.ErrFormatVersion)
	_, err = s.Load(ctx, 3)
	require.Error(t, err) // the manifest's checksum no longer matches
	m, err := os.ReadFile(man)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(man, persistence.Reseal(m, next), 0o644))
	_, err = s.Load(ctx, 3)
	require.ErrorIs(t, err, persistence.ErrFormatVersion)
	_, err = s.Latest(ctx)
	require.ErrorIs(t, err, persistence.ErrFormatVersion, "a snapshot this build cannot read is not skipped")
	assert.Equal(t, []snapshot.SnapshotID{1, 2, 3}, ids(t, s))
	require.NoError(t, s.Retain(ctx, 1))
	assert.Equal(t, []snapshot.SnapshotID{2, 3}, ids(t, s))
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[off] ^= 0x40
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func ids(t testing.TB, s persistence.Store) []snapshot.SnapshotID {
	t.Helper()
	ids, err := s.List(context.Background())
	require.NoError(t, err)
	return ids
}

func TestOpenCleansUp(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openFile(t, dir)
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
	mk := func(name string, age time.Duration) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, persistence.DataName), []byte("partial"), 0o644))
		at := time.Now().Add(-age)
		require.NoError(t, os.Chtimes(filepath.Join(dir, name), at, at))
	}
	mk(".tmp-00000000000000000002-old", 2*time.Hour)
	mk(".tmp-00000000000000000003-fresh", time.Minute)
	mk(".del-snap-00000000000000000004-x", 0)
	mk(snapName(5), 0) // no manifest: not a snapshot, and not Open's to remove
	openFile(t, dir)
	assert.Equal(t, []string{".tmp-00000000000000000003-fresh", snapName(1), snapName(5)}, entries(t, persistence.OS(), dir))
	openFile(t, dir, persistence.WithTempGrace(30*time.Second))
	assert.Equal(t, []string{snapName(1), snapName(5)}, entries(t, persistence.OS(), dir))

	_, err := persistence.Open(ctx, dir, persistence.WithTempGrace(-time.Second))
	require.ErrorContains(t, err, ">= 0")
}

// pauseFS holds renames of temporary directories until released.
type pauseFS struct {
	persistence.FS
	reached chan struct{}
	release chan struct{}
}

func (p *pauseFS) Rename(oldname, newname string) error {
	if strings.Contains(oldname, ".tmp-") && strings.Contains(newname, "snap-") {
		close(p.reached)
		<-p.release
	}
	return p.FS.Rename(oldname, newname)
}

// TestOpenSparesLiveSave opens a second store on a directory while a save
// into it is between writing its files and renaming them into place: the
// second Open must leave the save's temporary directory alone.
func TestOpenSparesLiveSave(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := &pauseFS{FS: persistence.OS(), reached: make(chan struct{}), release: make(chan struct{})}
	a := openFile(t, dir, persistence.WithFS(p))
	saved := make(chan error)
	go func() { saved <- a.Save(ctx, storetest.NewGlobal(1, storetest.Small)) }()
	select {
	case <-p.reached:
	case <-time.After(time.Minute):
		t.Fatal("save never reached its rename")
	}
	b := openFile(t, dir)
	close(p.release)
	require.NoError(t, <-saved)
	g, err := b.Latest(ctx)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(storetest.NewGlobal(1, storetest.Small), g))
}

// TestTwoStoresOneDir saves the same ids from two stores on one directory
// at once: each id is saved exactly once, by one of them, and whole.
func TestTwoStoresOneDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	shapes := []storetest.Shape{storetest.Small, {Participants: 3, StateSize: 7, Channels: 2, InFlight: 1, MessageSize: 1}}
	stores := []*persistence.FileStore{openFile(t, dir), openFile(t, dir)}
	const n = 30
	won := make([][]snapshot.SnapshotID, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, s := range stores {
		wg.Go(func() {
			<-start
			for id := snapshot.SnapshotID(1); id <= n; id++ {
				err := s.Save(ctx, storetest.NewGlobal(id, shapes[i]))
				switch {
				case err == nil:
					won[i] = append(won[i], id)
				case !errors.Is(err, persistence.ErrExists):
					errs[i] = err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	checkWinners(t, stores[0], n, won, shapes)
}

// checkWinners checks that ids 1 to n were each saved by exactly one
// writer, and hold what that writer saved.
func checkWinners(t *testing.T, s persistence.Store, n int, won [][]snapshot.SnapshotID, shapes []storetest.Shape) {
	t.Helper()
	all := slices.Concat(won...)
	slices.Sort(all)
	require.Len(t, all, n, "every id saved once: %v", won)
	require.Equal(t, ids(t, s), all)
	for w, list := range won {
		for _, id := range list {
			g, err := s.Load(context.Background(), id)
			require.NoError(t, err)
			require.NoError(t, storetest.Equal(storetest.NewGlobal(id, shapes[w]), g), "snapshot %d saved by writer %d", id, w)
		}
	}
}

const childEnv = "ACTORSNAP_PERSISTENCE_CHILD_DIR"

var childShape = storetest.Shape{Participants: 3, StateSize: 7, Channels: 2, InFlight: 1, MessageSize: 1}

// childMain is the other process of TestTwoProcessesOneDir: it waits for a
// line on stdin, saves ids 1 to n into the directory it is given, and
// prints the ids it won.
func childMain() int {
	ctx := context.Background()
	n, _ := strconv.Atoi(os.Getenv(childEnv + "_N"))
	s, err := persistence.Open(ctx, os.Getenv(childEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for id := snapshot.SnapshotID(1); id <= snapshot.SnapshotID(n); id++ {
		err := s.Save(ctx, storetest.NewGlobal(id, childShape))
		switch {
		case err == nil:
			fmt.Println(id)
		case !errors.Is(err, persistence.ErrExists):
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// TestTwoProcessesOneDir is TestTwoStoresOneDir with the second store in
// a child process.
func TestTwoProcessesOneDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const n = 40
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childEnv+"_N="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	s := openFile(t, dir)
	_, err = io.WriteString(stdin, "go\n")
	require.NoError(t, err)
	var mine []snapshot.SnapshotID
	for id := snapshot.SnapshotID(1); id <= n; id++ {
		err := s.Save(ctx, storetest.NewGlobal(id, storetest.Small))
		if err == nil {
			mine = append(mine, id)
		} else {
			require.ErrorIs(t, err, persistence.ErrExists)
		}
	}
	require.NoError(t, cmd.Wait(), "child: %s", stderr.String())
	var theirs []snapshot.SnapshotID
	for _, line := range strings.Fields(stdout.String()) {
		id, err := strconv.ParseUint(line, 10, 64)
		require.NoError(t, err, "child printed %q", stdout.String())
		theirs = append(theirs, snapshot.SnapshotID(id))
	}
	t.Logf("this process saved %d snapshots, the child %d", len(mine), len(theirs))
	checkWinners(t, s, n, [][]snapshot.SnapshotID{mine, theirs}, []storetest.Shape{storetest.Small, childShape})
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{dir, "file://" + dir, "FILE://" + dir} {
		s, err := persistence.OpenURL(ctx, url)
		require.NoError(t, err, url)
		require.IsType(t, &persistence.FileStore{}, s)
		assert.Equal(t, dir, s.(*persistence.FileStore).Dir())
	}
	_, err := persistence.OpenURL(ctx, "nosuch://host/db")
	require.ErrorIs(t, err, persistence.ErrUnsupportedScheme)
	assert.Contains(t, err.Error(), "nosuch")
	_, err = persistence.Open(ctx, "postgres://host/db")
	require.ErrorIs(t, err, persistence.ErrUnsupportedScheme)

	registerFake.Do(func() {
		persistence.RegisterScheme("Fake-Scheme", func(ctx context.Context, url string, _ persistence.OpenOptions) (persistence.Store, error) {
			if url != "fake-scheme://x" {
				return nil, fmt.Errorf("opener got %q", url)
			}
			return persistence.NewMemory(), nil
		})
	})
	s, err := persistence.OpenURL(ctx, "fake-scheme://x")
	require.NoError(t, err)
	require.IsType(t, &persistence.Memory{}, s)
	assert.Panics(t, func() { persistence.RegisterScheme("fake-scheme", nil) })
	assert.Panics(t, func() {
		persistence.RegisterScheme("fake-scheme", func(context.Context, string, persistence.OpenOptions) (persistence.Store, error) { return nil, nil })
	})
	assert.Panics(t, func() {
		persistence.RegisterScheme("file", func(context.Context, string, persistence.OpenOptions) (persistence.Store, error) { return nil, nil })
	})
	assert.Panics(t, func() {
		persistence.RegisterScheme("1x", func(context.Context, string, persistence.OpenOptions) (persistence.Store, error) { return nil, nil })
	})
}

var registerFake sync.Once

// TestFileStoreRefusedLeavesNothing: Save checks a snapshot while it
// creates its temporary directory; a refused one is reported as refused,
// even when its id is taken, and leaves nothing behind.
func TestFileStoreRefusedLeavesNothing(t *testing.T) {
	ctx := context.Background()
	mem := withOld(t)
	s := openFile(t, storeDir, persistence.WithFS(mem))
	for _, id := range []snapshot.SnapshotID{2, 3} {
		g := storetest.NewGlobal(id, storetest.Small)
		g.Channels[0].Sent++
		err := s.Save(ctx, g)
		require.ErrorIs(t, err, snapshot.ErrImbalance, "snapshot %d", id)
		require.NotErrorIs(t, err, persistence.ErrExists)
	}
	require.False(t, requireOld(t, s))
	requireTidy(t, mem)
}

// TestFileStoreEmptyDataFile: a manifest that vouches for an empty data
// file (a valid checksum over nothing) gets a CorruptError from Load, not
// a panic.
func TestFileStoreEmptyDataFile(t *testing.T) {
	s, data, man := corruptible(t)
	require.NoError(t, os.Truncate(data, 0))
	m, err := persistence.EncodeManifest(persistence.Manifest{ID: 3, Files: []persistence.ManifestFile{{Name: persistence.DataName, Size: 0, CRC: 0}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(man, m, 0o644))
	_, err = s.Load(context.Background(), 3)
	requireCorrupt(t, err, data)
}
