package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// ownerKey is the advisory lock key of the schema's writer: a lease holds
// it exclusively on a connection of its own, and a Save through a Store
// without a lease holds it shared for its transaction.
func ownerKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("github.com/actorsnap/actorsnap/persistence/postgres owner\x00"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}

// A claim tries the owner lock claimTries+1 times, claimRetry apart.
const (
	claimTries = 50
	claimRetry = 2 * time.Millisecond
)

// errConnClosed says a claim closed its connection rather than return it
// to the pool holding the owner lock.
var errConnClosed = errors.New("postgres: connection closed to release the owner lock")

// releaseTimeout bounds Release's unlock: a server that does not answer
// then gets its connection closed, which releases the lock as well.
const releaseTimeout = 10 * time.Second

// lease is a Store's lease: the exclusive advisory lock, held on a
// connection taken out of the pool until Release, and the generation its
// claim wrote, which every Save through the lease checks.
type lease struct {
	s     *Store
	owner persistence.Owner
	high  snapshot.SnapshotID
	mu    sync.Mutex
	conn  *pgxpool.Conn // nil once released
}

func (l *lease) Owner() persistence.Owner  { return l.owner }
func (l *lease) High() snapshot.SnapshotID { return l.high }

// Release implements persistence.Lease: it unlocks and returns the
// connection to the pool.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	conn := l.conn
	l.conn = nil
	l.mu.Unlock()
	if conn == nil {
		return nil
	}
	l.s.leaseMu.Lock()
	if l.s.lease == l {
		l.s.lease = nil
	}
	l.s.leaseMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, ownerKey(l.s.schema))
	if err != nil {
		// The lock goes with the session: close it rather than return a
		// connection that may still hold it.
		conn.Hijack().Close(ctx)
		return nil
	}
	conn.Release()
	return nil
}

// held returns the Store's lease, or nil.
func (s *Store) held() *lease {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	return s.lease
}

// fence checks, in a writing transaction, that it may write: through a
// lease, that no later claim superseded it (the owner row's generation is
// the lease's, and stays so until the transaction ends, since the row is
// locked: FOR SHARE, or FOR UPDATE where the transaction updates the row
// itself, so that two such transactions do not deadlock); without one,
// that no lease is held (the shared advisory lock is free, and held until
// the transaction ends). A claim locks the owner table against both
// before it reads how far the schema got.
func (s *Store) fence(ctx context.Context, tx pgx.Tx, update bool) error {
	if l := s.held(); l != nil {
		lock := ` FOR SHARE`
		if update {
			lock = ` FOR UPDATE`
		}
		var gen int64
		err := tx.QueryRow(ctx, `SELECT generation FROM `+s.t.qOwner+lock).Scan(&gen)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if uint64(gen) != l.owner.Generation {
			o, _ := s.readOwnership(ctx, tx)
			return &persistence.OwnerError{Store: s.schema, Ownership: o, Err: persistence.ErrFenced}
		}
		return nil
	}
	var free bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock_shared($1)`, ownerKey(s.schema)).Scan(&free); err != nil {
		return err
	}
	if !free {
		o, _ := s.readOwnership(ctx, tx)
		o.Live = true
		return &persistence.OwnerError{Store: s.schema, Ownership: o, Err: persistence.ErrLocked}
	}
	return nil
}

// write begins a transaction that writes, as c.begin does, and fences it
// (see fence; update says the transaction updates the owner row).
func (s *Store) write(c *call, opts pgx.TxOptions, update bool) (tx pgx.Tx, release func(), err error) {
	tx, release, err = c.begin(opts)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := c.stmt()
	defer cancel()
	if err := s.fence(ctx, tx, update); err != nil {
		release()
		return nil, nil, err
	}
	return tx, release, nil
}

// keepHigh records id as the highest the schema has held if it is, in
// Delete's transaction, so that deleting the newest snapshot does not let
// its id be used again. A schema never claimed gets an owner row naming
// nobody.
func (s *Store) keepHigh(c *call, tx pgx.Tx, id snapshot.SnapshotID) error {
	ctx, cancel := c.stmt()
	defer cancel()
	_, err := tx.Exec(ctx, `INSERT INTO `+s.t.qOwner+` AS o (singleton, system, generation, host, pid, since, high)
		SELECT true, '', 0, '', 0, now(), $1 WHERE EXISTS (SELECT FROM `+s.t.qSnapshots+` WHERE id = $1)
		ON CONFLICT (singleton) DO UPDATE SET high = greatest(o.high, excluded.high)`, int64(id))
	return err
}

// readOwnership reads the owner row and the highest id; Live is left
// false.
func (s *Store) readOwnership(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (persistence.Ownership, error) {
	var (
		o              persistence.Ownership
		gen, high, top int64
		pid            int32
		since          time.Time
	)
	err := q.QueryRow(ctx, `SELECT system, generation, host, pid, since, high FROM `+s.t.qOwner).
		Scan(&o.Owner.System, &gen, &o.Owner.Host, &pid, &since, &high)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case errors.As(err, &pe) && pe.Code == "42P01":
		// A schema of version 1, read without migrating (MustExist): it
		// has no owner table, and no owner.
	case err != nil:
		return persistence.Ownership{}, err
	default:
		o.Owner.Generation, o.Owner.PID, o.Owner.Since = uint64(gen), int(pid), since.UTC()
	}
	if err := q.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+s.t.qSnapshots).Scan(&top); err != nil {
		return persistence.Ownership{}, err
	}
	o.High = snapshot.SnapshotID(max(high, top))
	return o, nil
}

// Claim implements persistence.Store. It takes the schema's owner lock,
// an advisory lock held on a connection of the lease's own, without
// waiting (a schema another lease holds is refused with ErrLocked), then
// decides and records the claim in the owner row in one transaction. If
// the lease's connection is lost, so is the lock; a later claim then
// raises the generation, and the old lease's Saves fail with ErrFenced.
func (s *Store) Claim(ctx context.Context, system string, mode persistence.ClaimMode) (persistence.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := persistence.CheckSystemName(system); err != nil {
		return nil, err
	}
	c := s.call(ctx, "claim")
	conn, err := c.acquire()
	if err != nil {
		return nil, c.fail(err)
	}
	l, err := s.claim(c, conn, system, mode)
	if err != nil {
		if !errors.Is(err, errConnClosed) {
			conn.Release()
		}
		var oe *persistence.OwnerError
		if errors.As(err, &oe) {
			return nil, err
		}
		return nil, c.fail(err)
	}
	return l, nil
}

func (s *Store) claim(c *call, conn *pgxpool.Conn, system string, mode persistence.ClaimMode) (*lease, error) {
	key := ownerKey(s.schema)
	ctx, cancel := c.stmt()
	defer cancel()
	// A Save without a lease holds the lock shared for its transaction:
	// try again for a moment before calling the schema taken.
	var locked bool
	for try := 0; ; try++ {
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&locked); err != nil {
			return nil, err
		}
		if locked || try == claimTries {
			break
		}
		time.Sleep(claimRetry)
	}
	if !locked {
		o, err := s.readOwnership(ctx, conn)
		if err != nil {
			return nil, err
		}
		o.Live = true
		return nil, &persistence.OwnerError{Store: s.schema, Ownership: o, Err: persistence.ErrLocked}
	}
	var rec persistence.Ownership
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Wait for the writing transactions of a lease this claim takes
		// over (they hold the owner row), and keep new ones out until the
		// claim commits: the highest id read below is then final, and they
		// see the new generation.
		if _, err := tx.Exec(ctx, `LOCK TABLE `+s.t.qOwner+` IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		o, err := s.readOwnership(ctx, tx)
		if err != nil {
			return err
		}
		if err := persistence.DecideClaim(s.schema, mode, system, o); err != nil {
			return err
		}
		rec = persistence.Ownership{Owner: persistence.NewOwner(system, o.Owner, time.Now()), High: o.High}
		_, err = tx.Exec(ctx, `INSERT INTO `+s.t.qOwner+` (singleton, system, generation, host, pid, since, high)
			VALUES (true, $1, $2, $3, $4, $5, $6)
			ON CONFLICT (singleton) DO UPDATE SET system = $1, generation = $2, host = $3, pid = $4, since = $5, high = $6`,
			rec.Owner.System, int64(rec.Owner.Generation), rec.Owner.Host, int32(rec.Owner.PID), rec.Owner.Since, int64(rec.High))
		return err
	})
	if err != nil {
		fctx, fcancel := c.finish()
		defer fcancel()
		if _, uerr := conn.Exec(fctx, `SELECT pg_advisory_unlock($1)`, key); uerr != nil {
			// The session may still hold the lock: close it rather than
			// give it back to the pool.
			conn.Hijack().Close(fctx)
			return nil, errors.Join(err, errConnClosed)
		}
		return nil, err
	}
	l := &lease{s: s, owner: rec.Owner, high: rec.High, conn: conn}
	s.leaseMu.Lock()
	s.lease = l
	s.leaseMu.Unlock()
	return l, nil
}

// Ownership implements persistence.Store. Live says whether a session
// holds the owner lock, as pg_locks shows it.
func (s *Store) Ownership(ctx context.Context) (persistence.Ownership, error) {
	if err := ctx.Err(); err != nil {
		return persistence.Ownership{}, err
	}
	var o persistence.Ownership
	err := s.read(ctx, "ownership", func(c *call, tx pgx.Tx) error {
		ctx, cancel := c.stmt()
		defer cancel()
		var err error
		if o, err = s.readOwnership(ctx, tx); err != nil {
			return err
		}
		// Read from pg_locks, without taking the lock: a probe must not
		// make a claim meanwhile fail. An advisory lock on a bigint key
		// shows its high and low halves as classid and objid.
		key := uint64(ownerKey(s.schema))
		return tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1
			AND mode = 'ExclusiveLock' AND granted)`, int64(key>>32), int64(key&0xffffffff)).Scan(&o.Live)
	})
	return o, err
}

// Entries implements persistence.Store: the complete snapshots, by id. A
// Save is one transaction, so no other row is visible; damage in a
// snapshot's rows is found by Load.
func (s *Store) Entries(ctx context.Context) ([]persistence.Entry, error) {
	ids, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	es := make([]persistence.Entry, len(ids))
	for i, id := range ids {
		es[i] = persistence.Entry{ID: id, Name: fmt.Sprintf("snapshot %d", id)}
	}
	return es, nil
}

// SetAside implements persistence.Store: the snapshot's header is marked
// incomplete, so that nothing lists or loads it, and its rows stay for
// inspection until Retain deletes them with the snapshots older than
// those it keeps.
func (s *Store) SetAside(ctx context.Context, e persistence.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(e.ID) || e.ID == 0 {
		return fmt.Errorf("postgres: set aside %q: not an entry of the store", e.Name)
	}
	c := s.call(ctx, fmt.Sprintf("set aside %d", e.ID))
	conn, err := c.acquire()
	if err != nil {
		return c.fail(err)
	}
	defer conn.Release()
	sctx, cancel := c.stmt()
	defer cancel()
	if _, err := conn.Exec(sctx, `UPDATE `+s.t.qSnapshots+` SET complete = false WHERE id = $1`, int64(e.ID)); err != nil {
		return c.fail(err)
	}
	return nil
}

// openOptions are the Options that persistence.OpenURL's options ask for.
func openOptions(o persistence.OpenOptions) []Option {
	var opts []Option
	if o.Namespace != "" {
		opts = append(opts, withNamespace(o.Namespace))
	}
	if o.MustExist {
		opts = append(opts, withMustExist())
	}
	if o.Keyring != nil {
		opts = append(opts, WithKeyring(o.Keyring))
	}
	return opts
}

// namespaceSep joins a schema's name and a namespace's into the name of
// the namespace's schema: namespace bank of schema actorsnap lives in the
// schema "actorsnap/bank".
const namespaceSep = "/"

// withNamespace opens the namespace name of the schema: a schema of its
// own, named schema/name.
func withNamespace(name string) Option { return func(c *config) { c.namespace = name } }

// withMustExist makes Open fail with persistence.ErrNoStore, creating
// nothing, where the schema does not exist.
func withMustExist() Option { return func(c *config) { c.mustExist = true } }
