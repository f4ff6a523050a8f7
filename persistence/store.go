package persistence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Errors returned by stores and the codec. Each is wrapped with the detail
// of the case; test with errors.Is.
var (
	// ErrNotFound is returned when no snapshot has the requested id, or when
	// the store holds none for Latest.
	ErrNotFound = errors.New("persistence: snapshot not found")
	// ErrExists is returned by Save for an id already stored.
	ErrExists = errors.New("persistence: snapshot already stored")
	// ErrCorrupt is wrapped by every CorruptError: it is returned when
	// stored bytes are truncated, fail a checksum, are malformed or exceed a
	// format limit, or decode to a snapshot that fails Verify.
	ErrCorrupt = errors.New("persistence: corrupt snapshot")
	// ErrFormatVersion is returned when stored bytes carry a format version
	// this build cannot read (see FormatVersion).
	ErrFormatVersion = errors.New("persistence: unsupported format version")
	// ErrTooLarge is returned by Save and EncodeGlobal for a snapshot that
	// exceeds one of the format limits (MaxParticipants and the others).
	ErrTooLarge = errors.New("persistence: snapshot exceeds a format limit")
	// ErrPayloadType is returned by Save and EncodeGlobal for a snapshot
	// holding a message whose payload is not a RecordedMessage.
	ErrPayloadType = errors.New("persistence: message payload is not a persistence.RecordedMessage")
	// ErrUnsupportedScheme is returned by OpenURL and Open for a URL whose
	// scheme has no registered store, or a string that looks like a URL
	// but is not one.
	ErrUnsupportedScheme = errors.New("persistence: unsupported URL scheme")
	// ErrNoStore is returned by Open and OpenURL with MustExist for a
	// store that does not exist.
	ErrNoStore = errors.New("persistence: no store")
	// ErrNotRegular is the Damage of an entry, and the error of a read,
	// where a snapshot file or directory is something else (a FIFO, a
	// device, a directory where a file should be): it is never read.
	ErrNotRegular = errors.New("persistence: not a regular file")
	// ErrForeign is the Damage of an entry whose name the store does not
	// use for anything: it was put there by something else.
	ErrForeign = errors.New("persistence: not a snapshot of this store")
	// ErrWritableByOthers is returned by Open, Claim, Save, Delete and
	// Retain of a FileStore whose directory users other than its owner
	// may write to, unless it was opened WithWritableByOthers: they could
	// replace or change its snapshots.
	ErrWritableByOthers = errors.New("persistence: store directory is writable by others")
)

// CorruptError reports stored bytes that cannot be a snapshot: truncated,
// failing a checksum, malformed, or decoding to a snapshot that fails
// Verify. Such a snapshot is never loaded. It wraps ErrCorrupt.
type CorruptError struct {
	// File is the path of the file at fault, or empty for bytes passed to
	// DecodeGlobal.
	File string
	// Offset is the byte offset in the file (or bytes) where the fault was
	// found.
	Offset int64
	// Reason says what is wrong.
	Reason string
}

func (e *CorruptError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("persistence: corrupt snapshot at offset %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("persistence: corrupt snapshot: %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// RecordedMessage is the stored form of a message recorded as channel
// state: a registered type name and the message's encoding. Stores keep
// snapshot.Message payloads of this type; package actors makes them. In
// Type, package actors marks a message sent with a sender or headers
// (a request) with a leading "@", its Data then holding the envelope, and
// the pointer or value form other than the one registered with "~".
type RecordedMessage struct {
	Type string
	Data []byte
}

// Store keeps complete global snapshots.
//
// Concurrency: every method may be called from any goroutine, concurrently
// with any other method, on one Store or on several that share storage (two
// FileStores on one directory, in one process or in several). Two Saves of
// one id race safely: exactly one succeeds and the others return ErrExists.
// Load, Latest and List see a snapshot being saved wholly or not at all, and
// one being deleted wholly or not at all (ErrNotFound).
//
// Ownership: a Global passed to Save must not be changed during the call or
// afterwards, since a store may keep it (Memory does). A Global returned by
// Load or Latest is the caller's, but its byte slices (states, message
// data) may be shared with the store and with each other and must not be
// changed.
//
// Cancellation: every method checks its context; one that returns ctx's
// error has changed nothing visible, except that Delete and Retain may have
// deleted some of the snapshots they were asked to.
type Store interface {
	// Save stores g atomically: it is wholly visible, or absent if Save
	// fails. g must have a non-zero ID, pass Verify, and hold only
	// RecordedMessage payloads; a Global that does not is refused with an
	// error and nothing is stored. An id already stored is refused with
	// ErrExists and the stored snapshot is left untouched.
	Save(ctx context.Context, g *snapshot.Global) error
	// Load returns the snapshot id, or ErrNotFound. A snapshot whose stored
	// form is damaged is reported with an error wrapping ErrCorrupt, never
	// returned.
	Load(ctx context.Context, id snapshot.SnapshotID) (*snapshot.Global, error)
	// Latest returns the complete snapshot with the highest id, or
	// ErrNotFound if there is none. Incomplete snapshots (a save cut short)
	// are skipped; a complete one whose data is damaged is reported as by
	// Load, not skipped, so that a restore never silently goes back further
	// than asked.
	Latest(ctx context.Context) (*snapshot.Global, error)
	// List returns the ids of the complete snapshots in increasing order.
	List(ctx context.Context) ([]snapshot.SnapshotID, error)
	// Delete removes the snapshot id; deleting a missing id is not an error.
	Delete(ctx context.Context, id snapshot.SnapshotID) error
	// Retain keeps the newest n complete snapshots and deletes every
	// snapshot older than them: it never deletes a snapshot unless n newer
	// ones are complete. n must be at least 1.
	Retain(ctx context.Context, n int) error

	// Claim makes the caller the store's one writer, for the system named
	// system, until the Lease is released; see ClaimMode for when a claim
	// is refused (with an *OwnerError). The claim is recorded in the store
	// (Ownership shows it) and outlives the lease.
	Claim(ctx context.Context, system string, mode ClaimMode) (Lease, error)
	// Ownership returns the store's owner, the highest id it has held and
	// whether a writer holds it now. It changes nothing.
	Ownership(ctx context.Context) (Ownership, error)
	// Entries returns every entry in the store's place for snapshots, in
	// increasing id order (entries without an id last, by name): complete
	// snapshots and, with their Damage, whatever is there that is not one.
	// One damaged or unreadable entry never fails the call.
	Entries(ctx context.Context) ([]Entry, error)
	// SetAside moves entry e, as Entries returned it, out of the store's
	// way, keeping it for inspection where the store documents: it is no
	// longer listed, and its id is never used again.
	SetAside(ctx context.Context, e Entry) error
}

// checkSave returns why g must not be saved, or nil.
func checkSave(g *snapshot.Global) error {
	if g == nil {
		return errors.New("persistence: refusing to save a nil snapshot")
	}
	if g.ID == 0 {
		return fmt.Errorf("persistence: refusing to save: %w", snapshot.ErrInvalidID)
	}
	if err := g.Verify(); err != nil {
		return fmt.Errorf("persistence: refusing to save: %w", err)
	}
	for _, c := range g.Channels {
		for j, m := range c.Messages {
			if _, ok := m.Payload.(RecordedMessage); !ok {
				return fmt.Errorf("%w: snapshot %d: channel %s: message %d has payload type %T", ErrPayloadType, g.ID, c.Channel, j, m.Payload)
			}
		}
	}
	return nil
}

// checkID refuses an id past maxID: a store's ids never come near
// wrapping around.
func checkID(g *snapshot.Global) error {
	if g != nil && g.ID > maxID {
		return fmt.Errorf("%w: snapshot id %d, more than %d", ErrTooLarge, g.ID, uint64(maxID))
	}
	return nil
}

func checkRetain(n int) error {
	if n < 1 {
		return fmt.Errorf("persistence: retain %d: n must be at least 1", n)
	}
	return nil
}

// Memory is an in-memory Store, for tests and for systems that only need
// their snapshots while they run. It keeps the Globals it is given, the
// DefaultMemoryKeep newest unless made with NewMemoryKeep; Load returns a
// copy whose slices are the caller's but whose byte slices are shared.
// The zero value is ready to use.
type Memory struct {
	mu    sync.Mutex
	snaps map[snapshot.SnapshotID]*snapshot.Global
	high  snapshot.SnapshotID // the highest id saved
	owner Owner
	lease *memLease // the lease held, if any
	keep  int       // snapshots kept: 0 for DefaultMemoryKeep, -1 for all
}

var _ Store = (*Memory)(nil)

// DefaultMemoryKeep is how many snapshots a Memory keeps, the newest:
// each save past it drops the oldest, so that a system taking periodic
// snapshots into memory does not grow without bound.
const DefaultMemoryKeep = 16

// NewMemory returns an empty in-memory store that keeps the
// DefaultMemoryKeep newest snapshots.
func NewMemory() *Memory { return &Memory{} }

// NewMemoryKeep returns an empty in-memory store that keeps the n newest
// snapshots, or every one if n is 0 or less.
func NewMemoryKeep(n int) *Memory {
	if n <= 0 {
		n = -1
	}
	return &Memory{keep: n}
}

// Save implements Store.
func (m *Memory) Save(ctx context.Context, g *snapshot.Global) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := errors.Join(checkSave(g), checkID(g)); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.snaps[g.ID]; ok {
		return fmt.Errorf("%w: %d", ErrExists, g.ID)
	}
	if m.snaps == nil {
		m.snaps = make(map[snapshot.SnapshotID]*snapshot.Global)
	}
	m.snaps[g.ID] = g
	m.high = max(m.high, g.ID)
	keep := m.keep
	if keep == 0 {
		keep = DefaultMemoryKeep
	}
	if keep > 0 && len(m.snaps) > keep {
		ids := slices.Sorted(maps.Keys(m.snaps))
		for _, id := range ids[:len(ids)-keep] {
			delete(m.snaps, id)
		}
	}
	return nil
}

// Load implements Store.
func (m *Memory) Load(ctx context.Context, id snapshot.SnapshotID) (*snapshot.Global, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.snaps[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return shallowCopy(g), nil
}

// Latest implements Store.
func (m *Memory) Latest(ctx context.Context) (*snapshot.Global, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var latest *snapshot.Global
	for id, g := range m.snaps {
		if latest == nil || id > latest.ID {
			latest = g
		}
	}
	if latest == nil {
		return nil, ErrNotFound
	}
	return shallowCopy(latest), nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context) ([]snapshot.SnapshotID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]snapshot.SnapshotID, 0, len(m.snaps))
	for id := range m.snaps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, id snapshot.SnapshotID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.snaps, id)
	return nil
}

// Retain implements Store.
func (m *Memory) Retain(ctx context.Context, n int) error {
	if err := checkRetain(n); err != nil {
		return err
	}
	ids, err := m.List(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids[:max(0, len(ids)-n)] {
		if err := m.Delete(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// shallowCopy returns a copy of g whose slices and waits can be changed
// without changing g; byte slices and payloads are shared.
func shallowCopy(g *snapshot.Global) *snapshot.Global {
	c := *g
	c.Participants = slices.Clone(g.Participants)
	for i := range c.Participants {
		if w := c.Participants[i].Waits; w != nil {
			cw := *w
			cw.Edges = slices.Clone(w.Edges)
			c.Participants[i].Waits = &cw
		}
	}
	c.Channels = slices.Clone(g.Channels)
	for i := range c.Channels {
		c.Channels[i].Messages = slices.Clone(c.Channels[i].Messages)
	}
	c.Violations = slices.Clone(g.Violations)
	return &c
}

// Claim implements Store. A Memory has one writer at a time: a second
// claim before the first lease's Release is refused with ErrLocked.
func (m *Memory) Claim(ctx context.Context, system string, mode ClaimMode) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := DecideClaim("in-memory store", mode, system, m.ownership()); err != nil {
		return nil, err
	}
	m.owner = NewOwner(system, m.owner, time.Now())
	m.lease = &memLease{m: m, owner: m.owner, high: m.high}
	return m.lease, nil
}

func (m *Memory) ownership() Ownership {
	return Ownership{Owner: m.owner, High: m.high, Live: m.lease != nil}
}

// Ownership implements Store.
func (m *Memory) Ownership(ctx context.Context) (Ownership, error) {
	if err := ctx.Err(); err != nil {
		return Ownership{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ownership(), nil
}

// Entries implements Store: a Memory holds complete snapshots only.
func (m *Memory) Entries(ctx context.Context) ([]Entry, error) {
	ids, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	es := make([]Entry, len(ids))
	for i, id := range ids {
		es[i] = Entry{ID: id, Name: fmt.Sprint(id)}
	}
	return es, nil
}

// SetAside implements Store. A Memory holds nothing damaged, so setting a
// snapshot aside deletes it; its id is not used again.
func (m *Memory) SetAside(ctx context.Context, e Entry) error { return m.Delete(ctx, e.ID) }

type memLease struct {
	m     *Memory
	owner Owner
	high  snapshot.SnapshotID
}

func (l *memLease) Owner() Owner              { return l.owner }
func (l *memLease) High() snapshot.SnapshotID { return l.high }

func (l *memLease) Release(context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.m.lease == l {
		l.m.lease = nil
	}
	return nil
}
