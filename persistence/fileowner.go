package persistence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Names of a FileStore's ownership. See the package documentation.
const (
	ownerName      = "OWNER"
	namespacesName = "namespaces"
	asidePrefix    = ".damaged-"
	ownerTmpPrefix = tmpPrefix + "owner-"
	maxOwnerSize   = 4096
	maxNamespace   = 64
	// A claim tries the lock claimTries+1 times, claimRetry apart.
	claimTries = 50
	claimRetry = 2 * time.Millisecond
)

var ownerMagic = [8]byte{'A', 'S', 'N', 'A', 'P', 'O', 'W', 'N'}

// ownerRecord is the content of OWNER: the last claim's owner and the
// highest id the store had held when it was last written.
type ownerRecord struct {
	Owner
	High snapshot.SnapshotID
}

// encodeOwner returns the stored form of r: the envelope around the
// msgpack array [system, generation, host, pid, since seconds, since
// nanoseconds, high].
func encodeOwner(r ownerRecord) ([]byte, error) {
	b := appendEnvelopeHeader(make([]byte, 0, 128+len(r.System)+len(r.Host)), ownerMagic)
	b = appendArray(b, 7)
	b = appendString(b, r.System)
	b = appendUint(b, r.Generation)
	b = appendString(b, r.Host)
	b = appendInt(b, int64(r.PID))
	b = appendTime(b, r.Since)
	b = appendUint(b, uint64(r.High))
	return sealEnvelope(b)
}

// decodeOwner decodes what encodeOwner wrote, reporting any fault as a
// *CorruptError.
func decodeOwner(data []byte) (ownerRecord, error) {
	if len(data) > maxOwnerSize {
		return ownerRecord{}, &CorruptError{Offset: maxOwnerSize, Reason: fmt.Sprintf("owner record of %d bytes, more than %d", len(data), maxOwnerSize)}
	}
	d, err := openEnvelope(data, ownerMagic, "owner record", true)
	if err != nil {
		return ownerRecord{}, err
	}
	var r ownerRecord
	if err := d.tuple(7, "owner record"); err != nil {
		return ownerRecord{}, err
	}
	system, err := d.raw("system name", true, MaxSystemName)
	if err != nil {
		return ownerRecord{}, err
	}
	r.System = string(system)
	if r.Generation, err = d.uint("generation"); err != nil {
		return ownerRecord{}, err
	}
	host, err := d.raw("host", true, 255)
	if err != nil {
		return ownerRecord{}, err
	}
	r.Host = string(host)
	pid, err := d.int("pid")
	if err != nil {
		return ownerRecord{}, err
	}
	r.PID = int(pid)
	if r.Since, err = d.time("since"); err != nil {
		return ownerRecord{}, err
	}
	high, err := d.uint("high")
	if err != nil {
		return ownerRecord{}, err
	}
	r.High = snapshot.SnapshotID(high)
	if err := d.done(); err != nil {
		return ownerRecord{}, err
	}
	return r, nil
}

// CheckNamespace returns why name cannot name a namespace, or nil: one to
// 64 ASCII letters, digits, '.', '_' or '-', not starting with '.'.
func CheckNamespace(name string) error {
	if name == "" || len(name) > maxNamespace || name[0] == '.' {
		return fmt.Errorf("persistence: namespace %q: want 1 to %d letters, digits, '.', '_' or '-', not starting with '.'", name, maxNamespace)
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("persistence: namespace %q: %q is not allowed; want letters, digits, '.', '_' or '-'", name, c)
		}
	}
	return nil
}

// fileLease is a FileStore's lease: an exclusive lock on the store's
// directory, held until Release.
type fileLease struct {
	s      *FileStore
	owner  Owner
	high   snapshot.SnapshotID
	mu     sync.Mutex
	unlock func() error // nil once released
}

func (l *fileLease) Owner() Owner              { return l.owner }
func (l *fileLease) High() snapshot.SnapshotID { return l.high }

func (l *fileLease) Release(context.Context) error {
	l.mu.Lock()
	unlock := l.unlock
	l.unlock = nil
	l.mu.Unlock()
	if unlock == nil {
		return nil
	}
	l.s.leaseMu.Lock()
	if l.s.lease == l {
		l.s.lease = nil
	}
	l.s.leaseMu.Unlock()
	return unlock()
}

// held reports whether s holds a lease now.
func (s *FileStore) held() bool {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	return s.lease != nil
}

// writing fences a Save, Delete or Retain: through a store that holds a
// lease it passes; otherwise it takes a shared lock on the store's
// directory for the operation, which fails with ErrLocked while another
// store holds a lease. done releases what it took.
func (s *FileStore) writing(ctx context.Context) (done func(), err error) {
	if s.held() {
		return func() {}, nil
	}
	if err := s.checkWritable(); err != nil {
		return nil, err
	}
	unlock, err := s.fs.Lock(s.dir, LockShared)
	if errors.Is(err, ErrLockHeld) {
		r, _ := s.readOwner()
		return nil, &OwnerError{Store: s.dir, Ownership: Ownership{Owner: r.Owner, High: r.High, Live: true}, Err: ErrLocked}
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: %w", err)
	}
	return func() { _ = unlock() }, nil
}

// checkWritable returns an error wrapping ErrWritableByOthers if users
// other than its owner may write to the store's directory, or to one
// above it up to the store's root (a namespace's root and namespaces
// directory): they could replace what it holds. WithWritableByOthers
// lifts the check. Directories above the root are not checked.
func (s *FileStore) checkWritable() error {
	if s.shared {
		return nil
	}
	for d := s.dir; ; d = filepath.Dir(d) {
		info, err := s.fs.Stat(d)
		if err != nil {
			return fmt.Errorf("persistence: %w", err)
		}
		if perm := info.Mode().Perm(); perm&0o022 != 0 {
			return fmt.Errorf("%w: %s has mode %04o (chmod go-w %s; or, where those users are trusted, open the store WithWritableByOthers)",
				ErrWritableByOthers, d, uint32(perm), d)
		}
		if d == s.root || d == filepath.Dir(d) {
			return nil
		}
	}
}

// Claim implements Store. It takes an exclusive lock on the store's
// directory (a store another lease holds is refused with ErrLocked, once
// a few tries about 0.1 s apart in all have shown the lock held: a reader
// probing Ownership, or a Save without a lease, holds it shared for a
// moment), decides by the OWNER record and the ids the directory holds,
// and writes the new owner to OWNER durably before returning. The lock is
// the operating system's (flock): it is released when the process dies,
// so a crashed writer never blocks a restore.
func (s *FileStore) Claim(ctx context.Context, system string, mode ClaimMode) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := CheckSystemName(system); err != nil {
		return nil, err
	}
	var unlock func() error
	var err error
	for try := 0; ; try++ {
		unlock, err = s.fs.Lock(s.dir, LockExclusive)
		if !errors.Is(err, ErrLockHeld) || try == claimTries {
			break
		}
		time.Sleep(claimRetry)
	}
	if errors.Is(err, ErrLockHeld) {
		r, _ := s.readOwner()
		return nil, &OwnerError{Store: s.dir, Ownership: Ownership{Owner: r.Owner, High: r.High, Live: true}, Err: ErrLocked}
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: claim %s: %w", s.dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = unlock()
		}
	}()
	if err := s.checkWritable(); err != nil {
		return nil, err
	}
	o, err := s.ownership(false)
	if err != nil {
		return nil, err
	}
	if err := DecideClaim(s.dir, mode, system, o); err != nil {
		return nil, err
	}
	rec := ownerRecord{Owner: NewOwner(system, o.Owner, s.now()), High: o.High}
	if err := s.writeOwner(rec); err != nil {
		return nil, fmt.Errorf("persistence: claim %s: %w", s.dir, err)
	}
	l := &fileLease{s: s, owner: rec.Owner, high: rec.High, unlock: unlock}
	s.leaseMu.Lock()
	s.lease = l
	s.leaseMu.Unlock()
	ok = true
	return l, nil
}

// Ownership implements Store.
func (s *FileStore) Ownership(ctx context.Context) (Ownership, error) {
	if err := ctx.Err(); err != nil {
		return Ownership{}, err
	}
	return s.ownership(true)
}

// ownership reads OWNER and the ids in the directory; with probe it also
// checks whether a lease is held, by trying a shared lock.
func (s *FileStore) ownership(probe bool) (Ownership, error) {
	r, err := s.readOwner()
	if err != nil && !isDamage(err) {
		return Ownership{}, err
	}
	if err != nil {
		// A damaged or unreadable OWNER names nobody; the ids in the
		// directory still say how far the store got. A claim writes a new
		// one.
		s.log.Warn("persistence: owner record is damaged", "error", err)
	}
	high, err := s.highest()
	if err != nil {
		return Ownership{}, err
	}
	o := Ownership{Owner: r.Owner, High: max(high, r.High)}
	if probe {
		if s.held() {
			o.Live = true
		} else if unlock, err := s.fs.Lock(s.dir, LockShared); err == nil {
			_ = unlock()
		} else if errors.Is(err, ErrLockHeld) {
			o.Live = true
		}
	}
	return o, nil
}

// readOwner reads OWNER; a store without one has a zero record.
func (s *FileStore) readOwner() (ownerRecord, error) {
	path := filepath.Join(s.dir, ownerName)
	f, err := s.fs.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ownerRecord{}, nil
	}
	if err != nil {
		return ownerRecord{}, fmt.Errorf("persistence: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxOwnerSize+1))
	if err != nil {
		return ownerRecord{}, fmt.Errorf("persistence: %s: %w", path, err)
	}
	r, err := decodeOwner(b)
	if err != nil {
		return ownerRecord{}, inFile(err, path)
	}
	return r, nil
}

// writeOwner replaces OWNER with r durably: written to a temporary file,
// synced, renamed over OWNER, and the directory synced.
func (s *FileStore) writeOwner(r ownerRecord) error {
	b, err := encodeOwner(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, ownerTmpPrefix+randomSuffix())
	f, err := s.fs.Create(tmp, s.filePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		s.removeAll(tmp)
		return err
	}
	if err := syncClose(f); err != nil {
		s.removeAll(tmp)
		return err
	}
	if err := s.fs.Rename(tmp, filepath.Join(s.dir, ownerName)); err != nil {
		s.removeAll(tmp)
		return err
	}
	return s.fs.SyncDir(s.dir)
}

// idInName returns the snapshot id a name the store writes carries: a
// snapshot's (snap-ID), a save's in progress (.tmp-ID-R), a deleted
// snapshot's (.del-snap-ID-R, .del-tmp-ID-R-R) or a set-aside one's
// (.damaged-snap-ID-R). Any other name carries none, and neither does an
// id past the highest a store accepts.
func idInName(name string) (snapshot.SnapshotID, bool) {
	rest, ok := "", false
	for _, p := range []string{snapPrefix, tmpPrefix, delPrefix + snapPrefix, delPrefix + "tmp-", asidePrefix + snapPrefix} {
		if rest, ok = strings.CutPrefix(name, p); ok {
			break
		}
	}
	if !ok || len(rest) < idDigits || len(rest) > idDigits && rest[idDigits] != '-' {
		return 0, false
	}
	if strings.HasPrefix(name, snapPrefix) && len(rest) != idDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(rest[:idDigits], 10, 64)
	if err != nil || n == 0 || n > uint64(maxID) {
		return 0, false
	}
	return snapshot.SnapshotID(n), true
}

// highest returns the highest id any name in the directory carries.
func (s *FileStore) highest() (snapshot.SnapshotID, error) {
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("persistence: %w", err)
	}
	var high snapshot.SnapshotID
	for _, e := range entries {
		if id, ok := idInName(e.Name()); ok {
			high = max(high, id)
		}
	}
	return high, nil
}

// keepHigh records id in OWNER if no other name in the directory carries
// an id as high, so that deleting the newest snapshot does not let its id
// be used again.
func (s *FileStore) keepHigh(id snapshot.SnapshotID) error {
	r, err := s.readOwner()
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if r.High >= id {
		return nil
	}
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if other, ok := idInName(e.Name()); ok && other > id {
			return nil
		}
	}
	r.High = id
	return s.writeOwner(r)
}

// Entries implements Store. It reads each snap- directory's manifest, not
// its data. Names the store keeps for itself (OWNER, namespaces and names
// starting with '.') are not entries. An error reading a manifest that
// says nothing of the entry (an I/O error, too many open files) fails the
// call rather than mark a sound snapshot damaged.
func (s *FileStore) Entries(ctx context.Context) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dirents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("persistence: %w", err)
	}
	var es, foreign []Entry
	for _, de := range dirents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := de.Name()
		switch {
		case name == ownerName, name == namespacesName, strings.HasPrefix(name, "."):
			continue
		}
		id, ok := parseSnapDir(name)
		if !ok || id > maxID {
			foreign = append(foreign, Entry{Name: name, Damage: fmt.Errorf("%w: %s", ErrForeign, filepath.Join(s.dir, name))})
			continue
		}
		e := Entry{ID: id, Name: name}
		if !de.IsDir() {
			e.Damage = fmt.Errorf("%w: %s is %s, not a snapshot directory", ErrNotRegular, filepath.Join(s.dir, name), kindOf(de))
		} else if _, err := s.readManifest(id); isDamage(err) {
			e.Damage = err
		} else if err != nil {
			return nil, err // reading failed: that is not the entry's fault
		}
		es = append(es, e)
	}
	return append(es, foreign...), nil
}

func kindOf(de fs.DirEntry) string {
	switch t := de.Type(); {
	case t.IsRegular():
		return "a file"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	default:
		return fmt.Sprintf("of type %v", t)
	}
}

// SetAside implements Store: it renames the entry to .damaged-NAME-RANDOM
// in the same directory, where it stays for inspection until removed by
// hand. Its id still counts among the ids the store has held.
func (s *FileStore) SetAside(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.Name == "" || e.Name != filepath.Base(e.Name) || e.Name == ownerName || e.Name == namespacesName || strings.HasPrefix(e.Name, ".") {
		return fmt.Errorf("persistence: set aside %q: not an entry of the store", e.Name)
	}
	aside := filepath.Join(s.dir, asidePrefix+e.Name+"-"+randomSuffix())
	if err := s.fs.Rename(filepath.Join(s.dir, e.Name), aside); err != nil {
		return fmt.Errorf("persistence: set aside %s: %w", e.Name, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("persistence: set aside %s: %w", e.Name, err)
	}
	return nil
}

// Namespaces returns the names of the namespaces under the store's root
// directory, sorted.
func (s *FileStore) Namespaces(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := s.fs.ReadDir(filepath.Join(s.root, namespacesName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && CheckNamespace(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}
