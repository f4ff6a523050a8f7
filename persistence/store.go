package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Errors returned by stores.
var (
	// ErrNotFound is returned when no snapshot has the requested id, or when
	// the store holds none for Latest.
	ErrNotFound = errors.New("persistence: snapshot not found")
	// ErrExists is returned by Save for an id already stored.
	ErrExists = errors.New("persistence: snapshot already stored")
)

// RecordedMessage is the stored form of a message recorded as channel
// state: a registered type name and the message's encoding. Stores keep
// snapshot.Message payloads of this type; package actors makes them.
type RecordedMessage struct {
	Type string
	Data []byte
}

// Store keeps complete global snapshots.
//
// Every method may be called from any goroutine, concurrently. A Global
// passed to Save belongs to the store afterwards and must not be changed;
// a Global returned by Load or Latest is the caller's, but its byte slices
// may be shared with the store and must not be changed either.
type Store interface {
	// Save stores g atomically: it is wholly visible, or absent if Save
	// fails. g must pass Verify.
	Save(ctx context.Context, g *snapshot.Global) error
	// Load returns the snapshot id, or ErrNotFound.
	Load(ctx context.Context, id snapshot.SnapshotID) (*snapshot.Global, error)
	// Latest returns the complete snapshot with the highest id, or
	// ErrNotFound.
	Latest(ctx context.Context) (*snapshot.Global, error)
	// List returns the stored ids in increasing order.
	List(ctx context.Context) ([]snapshot.SnapshotID, error)
	// Delete removes the snapshot id; deleting a missing id is not an error.
	Delete(ctx context.Context, id snapshot.SnapshotID) error
	// Retain deletes all but the newest n snapshots.
	Retain(ctx context.Context, n int) error
}

// Memory is an in-memory Store, for tests and for systems that only need
// their snapshots while they run. The zero value is ready to use.
type Memory struct {
	mu    sync.Mutex
	snaps map[snapshot.SnapshotID]*snapshot.Global
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{} }

// Save implements Store.
func (m *Memory) Save(ctx context.Context, g *snapshot.Global) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.Verify(); err != nil {
		return fmt.Errorf("persistence: refusing to save: %w", err)
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
	return g, nil
}

// Latest implements Store.
func (m *Memory) Latest(ctx context.Context) (*snapshot.Global, error) {
	ids, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, ErrNotFound
	}
	return m.Load(ctx, ids[len(ids)-1])
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
	if n < 0 {
		return fmt.Errorf("persistence: retain %d: must be >= 0", n)
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
