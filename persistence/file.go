package persistence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Names in a FileStore directory. See the package documentation for the
// layout.
const (
	manifestName = "MANIFEST"
	dataName     = "global.dat"
	macName      = "MAC"
	snapPrefix   = "snap-"
	tmpPrefix    = ".tmp-"
	delPrefix    = ".del-"
	idDigits     = 20 // enough for any uint64, so names sort as ids do
)

// DefaultTempGrace is how old a temporary directory left by a save must be
// before Open removes it, unless WithTempGrace says otherwise.
const DefaultTempGrace = time.Hour

// FileOption configures a FileStore.
type FileOption func(*fileConfig)

type fileConfig struct {
	fs        FS
	grace     time.Duration
	now       func() time.Time
	log       *slog.Logger
	namespace string
	mustExist bool
	perm      fs.FileMode
	shared    bool // WithWritableByOthers
	keys      *Keyring
}

// DefaultPermissions are the permissions of the files a FileStore
// creates unless WithPermissions says otherwise: read and write for their
// owner only, since a snapshot holds whatever its actors hold (balances,
// user data, credentials). Its directories have the same plus search:
// 0700.
const DefaultPermissions fs.FileMode = 0o600

// WithPermissions sets the permissions of the files the store creates
// (snapshots, manifests, MACs, OWNER), to let others read them: perm is
// 0600 plus, if wanted, read for the group (0040) or for others (0004),
// at most 0644. Its directories get perm plus search (x) wherever perm
// gives read: 0750 for 0640. Zero means DefaultPermissions; other values
// are refused by Open. The process's umask still applies, and what exists
// keeps its permissions (chmod it).
func WithPermissions(perm fs.FileMode) FileOption { return func(c *fileConfig) { c.perm = perm } }

// WithWritableByOthers lets the store write into a directory that users
// other than its owner may write to (group or world writable), which Open
// and every write otherwise refuse with ErrWritableByOthers: anyone who
// may write there may replace, remove or change the store's snapshots.
// Use it only where those users are trusted, and with a Keyring.
func WithWritableByOthers() FileOption { return func(c *fileConfig) { c.shared = true } }

// WithKeyring makes the store sign every snapshot it saves with k's
// signing key, and check the MAC of every snapshot it loads (see Keyring
// and the package documentation). Nil means none: MACs are neither
// written nor checked.
func WithKeyring(k *Keyring) FileOption { return func(c *fileConfig) { c.keys = k } }

// WithNamespace opens the namespace name of the store instead of the
// store itself: a store of its own, with its own owner, in the directory
// namespaces/name under the store's (see CheckNamespace for the names
// allowed). A second system shares a store this way.
func WithNamespace(name string) FileOption { return func(c *fileConfig) { c.namespace = name } }

// WithMustExist makes Open fail with ErrNoStore where the directory does
// not exist, and change nothing on disk: no directory is created and no
// leftover removed. Commands that only read a store use it.
func WithMustExist() FileOption { return func(c *fileConfig) { c.mustExist = true } }

// WithFS makes the store work through fsys instead of the operating
// system's file system; tests pass a MemFS or an ErrorFS.
func WithFS(fsys FS) FileOption { return func(c *fileConfig) { c.fs = fsys } }

// WithTempGrace sets how old a temporary directory must be before Open
// treats it as left by a crashed save and removes it. It must be longer
// than any save takes: a save whose directory is removed fails (cleanly).
// Zero means DefaultTempGrace; negative values are refused.
func WithTempGrace(d time.Duration) FileOption { return func(c *fileConfig) { c.grace = d } }

// WithClock sets the clock Open compares temporary directories' times
// with. Nil means time.Now.
func WithClock(now func() time.Time) FileOption { return func(c *fileConfig) { c.now = now } }

// WithLogger sets where the store reports what it could not clean up (it
// retries at the next Open). Nil means discard.
func WithLogger(l *slog.Logger) FileOption { return func(c *fileConfig) { c.log = l } }

// FileStore is the embedded default Store: one directory per snapshot under
// a root directory, written under a temporary name, checksummed, fsynced and
// renamed into place. See the package documentation for the layout and the
// guarantees. Several FileStores, in one process or several, may share a
// root directory.
type FileStore struct {
	root  string // the store's directory
	dir   string // the namespace's: root, or root/namespaces/NAME
	fs    FS
	grace time.Duration
	now   func() time.Time
	log   *slog.Logger
	// filePerm and dirPerm are the permissions of the files and
	// directories it creates.
	filePerm, dirPerm fs.FileMode
	shared            bool // may write where others may (WithWritableByOthers)
	keys              *Keyring
	// bufs holds *[2][]byte buffers that Save encodes into (encodeSplit):
	// a snapshot's encoding is garbage once written (File.Write must not
	// retain it), and reusing the buffers spares the collector a
	// snapshot's size per Save.
	bufs sync.Pool

	leaseMu sync.Mutex
	lease   *fileLease // held by this store, if any
}

var _ Store = (*FileStore)(nil)

// Open opens the file store in dir, a path or a file:// URL (file:// followed
// by the path: file:///var/lib/snaps, file://./snaps), creating the
// directory if needed, private to its owner (see WithPermissions). It
// refuses a directory that users other than its owner may write to (see
// WithWritableByOthers). It removes what crashed saves and deletes left
// behind: temporary directories older than the grace period (see
// WithTempGrace) and directories of deleted snapshots. With
// WithMustExist it changes nothing, and checks neither.
func Open(ctx context.Context, dir string, opts ...FileOption) (*FileStore, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := filePath(dir)
	if err != nil {
		return nil, err
	}
	cfg := fileConfig{fs: OS(), grace: DefaultTempGrace, now: time.Now, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.fs == nil:
		return nil, errors.New("persistence: WithFS(nil)")
	case cfg.grace < 0:
		return nil, fmt.Errorf("persistence: temporary directory grace %v: must be >= 0", cfg.grace)
	case cfg.grace == 0:
		cfg.grace = DefaultTempGrace
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.perm == 0 {
		cfg.perm = DefaultPermissions
	}
	if cfg.perm&^0o644 != 0 || cfg.perm&0o600 != 0o600 {
		return nil, fmt.Errorf("persistence: permissions %04o: want 0600, plus read for the group (0040) or others (0004): at most 0644", uint32(cfg.perm))
	}
	s := &FileStore{root: path, dir: path, fs: cfg.fs, grace: cfg.grace, now: cfg.now, log: cfg.log,
		filePerm: cfg.perm, dirPerm: cfg.perm | cfg.perm&0o444>>2, shared: cfg.shared, keys: cfg.keys}
	if cfg.namespace != "" {
		if err := CheckNamespace(cfg.namespace); err != nil {
			return nil, err
		}
		s.dir = filepath.Join(path, namespacesName, cfg.namespace)
	}
	// A path is shown as Redact shows it: one given where a key=value
	// connection string was meant keeps its password= to itself.
	shown := Redact(s.dir)
	if cfg.mustExist {
		info, err := s.fs.Stat(s.dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w at %s", ErrNoStore, shown)
		case err != nil:
			return nil, fmt.Errorf("persistence: open %s: %w", shown, err)
		case !info.IsDir():
			return nil, fmt.Errorf("%w at %s: not a directory", ErrNoStore, shown)
		}
		return s, nil
	}
	if err := s.mkdirAll(); err != nil {
		return nil, fmt.Errorf("persistence: open %s: %w", shown, err)
	}
	if err := s.checkWritable(); err != nil {
		return nil, err
	}
	if err := s.cleanup(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// mkdirAll creates the store's directory and any missing parent, and makes
// each one it created durable by syncing the directory holding it.
func (s *FileStore) mkdirAll() error {
	var missing []string
	for p := s.dir; ; {
		if _, err := s.fs.Stat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	if len(missing) == 0 {
		return nil
	}
	if err := s.fs.MkdirAll(s.dir, s.dirPerm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := s.fs.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// filePath returns the directory named by a path or file:// URL.
func filePath(dir string) (string, error) {
	if scheme, rest, ok := splitScheme(dir); ok {
		if scheme != "file" {
			return "", fmt.Errorf("%w: %q", ErrUnsupportedScheme, scheme)
		}
		dir = rest
	} else if strings.Contains(dir, "://") {
		return "", fmt.Errorf("%w: %q is neither a path nor a URL with a scheme", ErrUnsupportedScheme, Redact(dir))
	}
	if dir == "" {
		return "", errors.New("persistence: empty directory name")
	}
	return filepath.Clean(dir), nil
}

// Dir returns the directory the store keeps its snapshots in: the store's
// root, or its namespace's directory under it.
func (s *FileStore) Dir() string { return s.dir }

func (s *FileStore) snapDir(id snapshot.SnapshotID) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s%0*d", snapPrefix, idDigits, uint64(id)))
}

// parseSnapDir returns the id of a snapshot directory name.
func parseSnapDir(name string) (snapshot.SnapshotID, bool) {
	digits, ok := strings.CutPrefix(name, snapPrefix)
	if !ok || len(digits) != idDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == 0 {
		return 0, false
	}
	return snapshot.SnapshotID(n), true
}

func randomSuffix() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// cleanup removes leftovers: directories already renamed for deletion,
// and temporary directories older than the grace period. A temporary
// directory is claimed by renaming it before it is removed, so that a save
// still running and renaming it into place at that moment either wins (the
// snapshot is complete) or finds it gone (the save fails): never a
// half-removed snapshot.
func (s *FileStore) cleanup(ctx context.Context) error {
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("persistence: open %s: %w", s.dir, err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		path := filepath.Join(s.dir, name)
		switch {
		case strings.HasPrefix(name, delPrefix):
			s.removeAll(path)
		case strings.HasPrefix(name, tmpPrefix):
			info, err := s.fs.Stat(path)
			if err != nil || s.now().Sub(info.ModTime()) < s.grace {
				continue
			}
			del := filepath.Join(s.dir, delPrefix+strings.TrimPrefix(name, ".")+"-"+randomSuffix())
			if err := s.fs.Rename(path, del); err != nil {
				continue // committed or claimed by another process meanwhile
			}
			s.removeAll(del)
		}
	}
	return nil
}

// removeAll removes a directory that no longer holds a snapshot. A failure
// is only logged: the next Open retries.
func (s *FileStore) removeAll(path string) {
	if err := s.fs.RemoveAll(path); err != nil {
		s.log.Warn("persistence: could not remove leftover directory", slog.String("path", path), slog.Any("error", err))
	}
}

// Save implements Store. It writes the snapshot's data file, its MAC file
// if the store has a Keyring, and then its manifest into a new temporary
// directory, fsyncing each file and the directory, renames the directory
// into place and fsyncs the root directory. The rename is the commit: it fails if the id exists, so that
// of two Saves of one id, in one process or two, exactly one succeeds.
//
// The snapshot is checked and encoded on two other goroutines while the
// directory and files are created: checking and encoding wait on the CPU,
// creating files on the file system's journal, and the three overlap. A
// snapshot that fails the check is refused before anything is written to
// the files, and the temporary directory is removed.
func (s *FileStore) Save(ctx context.Context, g *snapshot.Global) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if g == nil {
		return checkSave(g)
	}
	if err := checkID(g); err != nil {
		return err
	}
	var (
		data     encoding
		encErr   error
		encoded  = make(chan struct{})
		checkErr error
		checked  = make(chan struct{})
	)
	go func() {
		defer close(encoded)
		var bufs [2][]byte
		if p, ok := s.bufs.Get().(*[2][]byte); ok {
			bufs = *p
		}
		data, encErr = encodeSplit(g, bufs, true)
	}()
	go func() {
		defer close(checked)
		checkErr = checkSave(g)
	}()
	defer func() {
		<-encoded
		if data.segs != nil {
			s.bufs.Put(&data.bufs)
		}
	}()
	err := s.save(ctx, g.ID, func() (*encoding, error) {
		<-checked
		if checkErr != nil {
			return nil, checkErr
		}
		<-encoded
		return &data, encErr
	})
	if err != nil {
		// A refusal comes first, whatever else went wrong meanwhile.
		if <-checked; checkErr != nil {
			return checkErr
		}
	}
	return err
}

// save does Save's work; encoded waits for the encoding, whose segments
// the data file holds one after the other.
func (s *FileStore) save(ctx context.Context, id snapshot.SnapshotID, encoded func() (*encoding, error)) error {
	done, err := s.writing(ctx)
	if err != nil {
		return err
	}
	defer done()
	final := s.snapDir(id)
	if _, err := s.fs.Stat(final); err == nil {
		return fmt.Errorf("%w: %d", ErrExists, id)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("persistence: save %d: %w", id, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp, err := s.mkTemp(id)
	if err != nil {
		return fmt.Errorf("persistence: save %d: %w", id, err)
	}
	committed := false
	var dataFile, manFile, macFile File
	defer func() {
		for _, f := range []File{dataFile, manFile, macFile} {
			if f != nil {
				f.Close()
			}
		}
		if !committed {
			s.removeAll(tmp)
		}
	}()
	if dataFile, err = s.fs.Create(filepath.Join(tmp, dataName), s.filePerm); err != nil {
		return fmt.Errorf("persistence: save %d: %w", id, err)
	}
	// The manifest (and the MAC, if the store signs) are created now,
	// empty, and written last.
	if manFile, err = s.fs.Create(filepath.Join(tmp, manifestName), s.filePerm); err != nil {
		return fmt.Errorf("persistence: save %d: %w", id, err)
	}
	mac := s.keys.Sign(fileLayout, id)
	if mac != nil {
		if macFile, err = s.fs.Create(filepath.Join(tmp, macName), s.filePerm); err != nil {
			return fmt.Errorf("persistence: save %d: %w", id, err)
		}
	}
	data, err := encoded()
	if err != nil {
		return err
	}
	// The checksum of the file continues the one its trailer holds, over
	// the trailer: no second pass over the data.
	trailer := data.trailer()
	sum := crc32.Update(binary.BigEndian.Uint32(trailer), castagnoli, trailer)
	size := int64(data.size())
	// The MAC is computed while the data file is written.
	var macced sync.WaitGroup
	if mac != nil {
		macced.Go(func() {
			writeMACEntry(mac, dataName, size)
			for _, seg := range data.segs {
				mac.Write(seg)
			}
		})
	}
	// The data file is written, then the MAC's and the manifest, then the
	// files and the temporary directory are synced, all at once: the file
	// system commits its journal once for them rather than once each. The
	// order of durability among them does not matter: nothing in the
	// temporary directory is visible until the rename, which comes after
	// all the syncs have returned.
	werr := data.writeTo(dataFile)
	macced.Wait()
	if werr != nil {
		return fmt.Errorf("persistence: save %d: %w", id, werr)
	}
	files := []manifestFile{{Name: dataName, Size: size, CRC: sum}}
	var macData []byte
	if mac != nil {
		if macData, err = encodeMACFile(macRecord{ID: id, KeyID: mac.KeyID(), Sum: mac.Sum()}); err != nil {
			return fmt.Errorf("persistence: save %d: %w", id, err)
		}
		files = append(files, manifestFile{Name: macName, Size: int64(len(macData)), CRC: crc32.Checksum(macData, castagnoli)})
	}
	man, err := encodeManifest(manifest{ID: id, Files: files})
	if err != nil {
		return fmt.Errorf("persistence: save %d: %w", id, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if macFile != nil {
		if _, err := macFile.Write(macData); err != nil {
			return fmt.Errorf("persistence: save %d: %w", id, err)
		}
	}
	if _, err := manFile.Write(man); err != nil {
		return fmt.Errorf("persistence: save %d: %w", id, err)
	}
	var (
		errs   [4]error // data file, manifest, temporary directory, MAC
		synced sync.WaitGroup
	)
	synced.Go(func() { errs[1] = syncClose(manFile) })
	synced.Go(func() { errs[2] = s.fs.SyncDir(tmp) })
	if macFile != nil {
		synced.Go(func() { errs[3] = syncClose(macFile) })
	}
	errs[0] = syncClose(dataFile)
	synced.Wait()
	dataFile, manFile, macFile = nil, nil, nil
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("persistence: save %d: %w", id, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.fs.Rename(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %d", ErrExists, id)
		}
		return fmt.Errorf("persistence: save %d: %w", id, err)
	}
	committed = true
	if err := s.fs.SyncDir(s.dir); err != nil {
		// The snapshot is visible but might not survive a crash. Take it
		// back, so that a failed Save leaves nothing.
		del := filepath.Join(s.dir, delPrefix+filepath.Base(final)+"-"+randomSuffix())
		if rerr := s.fs.Rename(final, del); rerr != nil {
			return fmt.Errorf("persistence: save %d: %w (and the snapshot, already visible, could not be taken back: %v)", id, err, rerr)
		}
		s.removeAll(del)
		return fmt.Errorf("persistence: save %d: %w", id, err)
	}
	return nil
}

// syncClose syncs and closes f, and returns the first error.
func syncClose(f File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkTemp creates a temporary directory for saving id. Its name is unique
// to this call, so concurrent saves never share one.
func (s *FileStore) mkTemp(id snapshot.SnapshotID) (string, error) {
	for {
		tmp := filepath.Join(s.dir, fmt.Sprintf("%s%0*d-%s", tmpPrefix, idDigits, uint64(id), randomSuffix()))
		err := s.fs.Mkdir(tmp, s.dirPerm)
		if err == nil {
			return tmp, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
}

// Load implements Store.
func (s *FileStore) Load(ctx context.Context, id snapshot.SnapshotID) (*snapshot.Global, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := s.readManifest(id)
	if err != nil {
		return nil, err
	}
	return s.load(ctx, id, m)
}

// loadAttempts bounds how often load starts over.
const loadAttempts = 3

// load reads snapshot id, whose manifest is m. A fault (damage, or a MAC
// that does not match) found while another process deletes the snapshot,
// or deletes and saves it again, says nothing of the snapshot: before
// reporting one, load reads the manifest again, and starts over or
// reports ErrNotFound if the snapshot has gone meanwhile.
func (s *FileStore) load(ctx context.Context, id snapshot.SnapshotID, m manifest) (*snapshot.Global, error) {
	for attempt := 1; ; attempt++ {
		g, err := s.loadOnce(ctx, id, m)
		if err == nil || !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnauthentic) || attempt == loadAttempts {
			return g, err
		}
		again, merr := s.readManifest(id)
		if errors.Is(merr, ErrNotFound) {
			return nil, merr
		}
		if merr != nil {
			return nil, err
		}
		m = again
	}
}

// loadOnce reads and decodes snapshot id. The data file's checksum is
// computed on another goroutine, a chunk behind the reading (readFile),
// and the file is decoded while the checksum catches up: the decoder
// trusts nothing, so decoding bytes not yet known to be intact is safe,
// and its result is used only once they are.
func (s *FileStore) loadOnce(ctx context.Context, id snapshot.SnapshotID, m manifest) (*snapshot.Global, error) {
	dir := s.snapDir(id)
	path := filepath.Join(dir, dataName)
	mac, stored, err := s.readMAC(id, m)
	if err != nil {
		return nil, err
	}
	var (
		data    []byte
		dataSum func() error
	)
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.keys != nil && f.Name == macName {
			continue // read by readMAC
		}
		if mac != nil && dataSum != nil {
			// The MAC takes the files one after the other: the data
			// file's is finished first.
			err := dataSum()
			dataSum = func() error { return err }
		}
		if mac != nil {
			writeMACEntry(mac, f.Name, f.Size)
		}
		b, sum, err := s.readFile(id, f, mac)
		if err != nil {
			return nil, err
		}
		if f.Name == dataName {
			data, dataSum = b, sum
			continue
		}
		if err := sum(); err != nil {
			return nil, err
		}
	}
	if data == nil {
		return nil, &CorruptError{File: filepath.Join(dir, manifestName), Offset: headerSize, Reason: "manifest does not list " + dataName}
	}
	// data is this call's alone, so the Global's strings may share it.
	g, _, err := decodeGlobal(data, false, true)
	sumErr := dataSum()
	var macErr error
	if mac != nil && sumErr == nil {
		macErr = mac.Verify(stored)
	}
	switch {
	case sumErr != nil:
		return nil, sumErr
	case macErr != nil:
		return nil, macErr
	case err != nil:
		return nil, inFile(err, path)
	case g.ID != id:
		return nil, &CorruptError{File: path, Offset: headerSize, Reason: fmt.Sprintf("holds snapshot %d, not %d", g.ID, id)}
	}
	return g, nil
}

// readMAC reads the MAC file of snapshot id, whose manifest is m, and
// returns the MAC that checks the snapshot's data files and the MAC the
// file holds, or an *AuthError if the store's Keyring refuses the
// snapshot. It returns a nil MAC where there is nothing to check: the
// store has no Keyring, or the snapshot has no MAC and the Keyring does
// not require one.
func (s *FileStore) readMAC(id snapshot.SnapshotID, m manifest) (*MAC, []byte, error) {
	if s.keys == nil {
		return nil, nil, nil
	}
	i := slices.IndexFunc(m.Files, func(f manifestFile) bool { return f.Name == macName })
	if i < 0 {
		mac, err := s.keys.Check(fileLayout, id, "")
		return mac, nil, err
	}
	path := filepath.Join(s.snapDir(id), macName)
	if m.Files[i].Size > macFileSize {
		return nil, nil, &CorruptError{File: filepath.Join(s.snapDir(id), manifestName), Offset: headerSize,
			Reason: fmt.Sprintf("%s of %d bytes, more than %d", macName, m.Files[i].Size, macFileSize)}
	}
	b, sum, err := s.readFile(id, m.Files[i], nil)
	if err != nil {
		return nil, nil, err
	}
	if err := sum(); err != nil {
		return nil, nil, err
	}
	r, err := decodeMACFile(b)
	if err != nil {
		return nil, nil, inFile(err, path)
	}
	if r.ID != id {
		// Intact, so not an accident: moved from another snapshot.
		return nil, nil, &AuthError{ID: id, KeyID: r.KeyID, Reason: fmt.Sprintf("its MAC (key %q) is snapshot %d's", r.KeyID, r.ID)}
	}
	mac, err := s.keys.Check(fileLayout, id, r.KeyID)
	if err != nil {
		return nil, nil, err
	}
	return mac, r.Sum, nil
}

// inFile names path in err if it is a CorruptError.
func inFile(err error, path string) error {
	var ce *CorruptError
	if errors.As(err, &ce) {
		c := *ce
		c.File = path
		return &c
	}
	return fmt.Errorf("persistence: %s: %w", path, err)
}

// gone returns the error for a file of snapshot id that does not exist:
// ErrNotFound if its directory is gone too (deleted meanwhile), else a
// CorruptError.
func (s *FileStore) gone(id snapshot.SnapshotID, path string) error {
	if _, err := s.fs.Stat(s.snapDir(id)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return &CorruptError{File: path, Reason: "missing"}
}

// readManifest reads and checks the manifest of snapshot id. The
// snapshot's directory must be one: a file, or a symbolic link, in its
// place is reported with ErrNotRegular.
func (s *FileStore) readManifest(id snapshot.SnapshotID) (manifest, error) {
	if info, err := s.fs.Lstat(s.snapDir(id)); err == nil && !info.IsDir() {
		return manifest{}, fmt.Errorf("%w: %s is %v, not a snapshot directory", ErrNotRegular, s.snapDir(id), info.Mode().Type())
	}
	path := filepath.Join(s.snapDir(id), manifestName)
	f, err := s.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if gerr := s.gone(id, path); !errors.Is(gerr, ErrCorrupt) {
			return manifest{}, gerr
		}
		// The snapshot may have been committed between the two looks.
		if f, err = s.fs.Open(path); errors.Is(err, fs.ErrNotExist) {
			return manifest{}, s.gone(id, path)
		}
	}
	if err != nil {
		return manifest{}, fmt.Errorf("persistence: load %d: %w", id, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifestSize+1))
	if err != nil {
		return manifest{}, fmt.Errorf("persistence: load %d: %w", id, err)
	}
	m, err := decodeManifest(b)
	if err != nil {
		return manifest{}, inFile(err, path)
	}
	if m.ID != id {
		return manifest{}, &CorruptError{File: path, Offset: headerSize, Reason: fmt.Sprintf("manifest of snapshot %d, not %d", m.ID, id)}
	}
	return m, nil
}

// A file larger than pipelineMin is read in pieces of readChunk, each
// checksummed while the next is read; a smaller one is read whole and
// checksummed while it is decoded (handing pieces to another goroutine
// saved nothing there, and cost in some runs: 1.5 MB loads of 0.5 ms
// against 0.37 in one comparison).
const (
	readChunk   = 1 << 20
	pipelineMin = 8 << 20
)

// readFile reads a data file of snapshot id, into one buffer of the size
// its manifest entry gives, and checks that it has that size. Its CRC-32C
// is computed on another goroutine, one chunk behind the reading, so that
// reading (a copy in the kernel) and checksumming run on two cores; sum
// waits for it and returns a CorruptError if it is not the manifest's.
// sum must be called once the buffer is read, and only then. The file's
// bytes are also written to mac, unless it is nil, on that goroutine:
// mac must not be written to again before sum is called.
func (s *FileStore) readFile(id snapshot.SnapshotID, mf manifestFile, mac *MAC) (b []byte, sum func() error, err error) {
	path := filepath.Join(s.snapDir(id), mf.Name)
	f, err := s.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, s.gone(id, path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("persistence: load %d: %w", id, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("persistence: load %d: %w", id, err)
	}
	if err := checkSize(path, info.Size(), mf.Size); err != nil {
		return nil, nil, err
	}
	// The size is bounded by the manifest's check, so this allocation is.
	b = make([]byte, mf.Size)
	chunk := max(len(b), 1) // an empty file (a manifest may claim one) is one empty read
	if chunk > pipelineMin {
		chunk = readChunk
	}
	var (
		chunks = make(chan []byte, (len(b)+chunk-1)/chunk)
		summed = make(chan uint32, 1)
	)
	go func() {
		var crc uint32
		for c := range chunks {
			crc = crc32.Update(crc, castagnoli, c)
			if mac != nil {
				mac.Write(c)
			}
		}
		summed <- crc
	}()
	for off := 0; off < len(b); {
		end := min(off+chunk, len(b))
		n, err := io.ReadFull(f, b[off:end])
		if err != nil {
			close(chunks)
			<-summed
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, nil, &CorruptError{File: path, Offset: int64(off + n), Reason: fmt.Sprintf("truncated: manifest says %d bytes", mf.Size)}
			}
			return nil, nil, fmt.Errorf("persistence: load %d: %w", id, err)
		}
		chunks <- b[off:end]
		off = end
	}
	close(chunks)
	if n, _ := f.Read(make([]byte, 1)); n > 0 {
		<-summed
		return nil, nil, &CorruptError{File: path, Offset: mf.Size, Reason: "longer than the manifest says"}
	}
	return b, func() error { return sumError(path, <-summed, mf.CRC) }, nil
}

// sumError returns the error for a file at path whose checksum is sum
// where its manifest says want, or nil if they are equal.
func sumError(path string, sum, want uint32) error {
	if sum != want {
		return &CorruptError{File: path, Offset: 0, Reason: fmt.Sprintf("checksum mismatch: manifest says %08x, file has %08x", want, sum)}
	}
	return nil
}

func checkSize(path string, got, want int64) error {
	switch {
	case got < want:
		return &CorruptError{File: path, Offset: got, Reason: fmt.Sprintf("truncated: %d bytes, manifest says %d", got, want)}
	case got > want:
		return &CorruptError{File: path, Offset: want, Reason: fmt.Sprintf("%d bytes, manifest says %d", got, want)}
	}
	return nil
}

// verifyData checks the data files of snapshot id against its manifest,
// and against its MAC if the store has a Keyring, without decoding them or
// holding them in memory.
func (s *FileStore) verifyData(id snapshot.SnapshotID, m manifest) error {
	mac, stored, err := s.readMAC(id, m)
	if err != nil {
		return err
	}
	for _, mf := range m.Files {
		if s.keys != nil && mf.Name == macName {
			continue // checked by readMAC
		}
		path := filepath.Join(s.snapDir(id), mf.Name)
		f, err := s.fs.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return s.gone(id, path)
		}
		if err != nil {
			return err
		}
		h := crc32.New(castagnoli)
		var w io.Writer = h
		if mac != nil {
			writeMACEntry(mac, mf.Name, mf.Size)
			w = io.MultiWriter(h, mac)
		}
		n, err := io.Copy(w, io.LimitReader(f, mf.Size+1))
		f.Close()
		if err != nil {
			return err
		}
		if err := checkSize(path, n, mf.Size); err != nil {
			return err
		}
		if err := sumError(path, h.Sum32(), mf.CRC); err != nil {
			return err
		}
	}
	if mac != nil {
		return mac.Verify(stored)
	}
	return nil
}

// Latest implements Store. Walking down from the highest id, it skips the
// entries that are not complete snapshots (Entries says why) and loads the
// first complete one: damage found in its data is reported, not skipped.
func (s *FileStore) Latest(ctx context.Context) (*snapshot.Global, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ids, err := s.snapIDs()
	if err != nil {
		return nil, err
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := s.readManifest(ids[i])
		if err != nil {
			if isDamage(err) && !errors.Is(err, ErrFormatVersion) {
				continue // not a complete snapshot, or deleted meanwhile
			}
			return nil, err
		}
		g, err := s.load(ctx, ids[i], m)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since its manifest was read
		}
		if err != nil {
			return nil, fmt.Errorf("persistence: latest is snapshot %d: %w", ids[i], err)
		}
		return g, nil
	}
	return nil, ErrNotFound
}

// snapIDs returns the ids that snap- names in the directory carry, in
// increasing order, whatever the entries are.
func (s *FileStore) snapIDs() ([]snapshot.SnapshotID, error) {
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("persistence: %w", err)
	}
	var ids []snapshot.SnapshotID
	for _, e := range entries { // sorted by name, so by id
		if id, ok := parseSnapDir(e.Name()); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// List implements Store. A snapshot whose manifest is of another format
// version is listed: it is complete, though this build cannot load it.
func (s *FileStore) List(ctx context.Context) ([]snapshot.SnapshotID, error) {
	es, err := s.Entries(ctx)
	if err != nil {
		return nil, err
	}
	var ids []snapshot.SnapshotID
	for _, e := range es {
		if e.ID != 0 && (e.Damage == nil || errors.Is(e.Damage, ErrFormatVersion)) {
			ids = append(ids, e.ID)
		}
	}
	return ids, nil
}

// Delete implements Store. The snapshot directory is first renamed to a
// name no reader looks at, so the snapshot disappears at once and wholly;
// its files are removed after. Deleting the snapshot with the highest id
// records that id in OWNER first, so that it is never used again.
func (s *FileStore) Delete(ctx context.Context, id snapshot.SnapshotID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done, err := s.writing(ctx)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.fs.Stat(s.snapDir(id)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := s.keepHigh(id); err != nil {
		return fmt.Errorf("persistence: delete %d: %w", id, err)
	}
	return s.delete(id)
}

// delete removes snapshot id; the caller fences it.
func (s *FileStore) delete(id snapshot.SnapshotID) error {
	dir := s.snapDir(id)
	del := filepath.Join(s.dir, delPrefix+filepath.Base(dir)+"-"+randomSuffix())
	if err := s.fs.Rename(dir, del); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("persistence: delete %d: %w", id, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		// Until the rename is durable the files must stay: after a crash
		// the snapshot may be back, and must be whole. Open removes them
		// otherwise.
		return fmt.Errorf("persistence: delete %d: %w", id, err)
	}
	s.removeAll(del)
	return nil
}

// Retain implements Store. Walking from the newest snapshot down, it
// counts those whose manifest and data checksums verify; once it has
// counted n, it deletes every older snapshot directory. An entry newer
// than that which is damaged, unreadable or incomplete is neither counted
// nor deleted, and never stops the walk.
func (s *FileStore) Retain(ctx context.Context, n int) error {
	if err := checkRetain(n); err != nil {
		return err
	}
	es, err := s.Entries(ctx)
	if err != nil {
		return err
	}
	done, err := s.writing(ctx)
	if err != nil {
		return err
	}
	defer done()
	kept := 0
	for i := len(es) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := es[i]
		if e.ID == 0 {
			continue
		}
		if kept >= n {
			if err := s.delete(e.ID); err != nil {
				return err
			}
			continue
		}
		err := e.Damage
		if err == nil {
			var m manifest
			if m, err = s.readManifest(e.ID); err == nil {
				err = s.verifyData(e.ID, m)
			}
		}
		switch {
		case err == nil:
			kept++
		case !isDamage(err):
			return fmt.Errorf("persistence: retain: %w", err)
		}
		// A damaged entry is not counted, and not deleted: only entries
		// older than n complete snapshots are.
	}
	return nil
}

// IsDamage reports whether err, met reading a stored snapshot, says what
// the snapshot is (damaged, incomplete, gone, unreadable, not a regular
// file, foreign, of another format, refused by the Keyring) rather than
// that reading failed (a
// timeout, an I/O error, a cancelled context). A store passes over such
// an entry, while another error stops the operation; a tool sets aside
// only what is damaged (not ErrNotFound: gone; not ErrFormatVersion:
// another build's).
func IsDamage(err error) bool { return isDamage(err) }

func isDamage(err error) bool {
	if err == nil {
		return false
	}
	for _, target := range []error{ErrCorrupt, ErrUnauthentic, ErrNotFound, ErrNotRegular, ErrForeign, ErrFormatVersion, fs.ErrPermission} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
