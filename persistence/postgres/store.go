package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	neturl "net/url"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

func init() {
	open := func(ctx context.Context, url string, o persistence.OpenOptions) (persistence.Store, error) {
		s, err := Open(ctx, url, openOptions(o)...)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	persistence.RegisterScheme("postgres", open)
	persistence.RegisterScheme("postgresql", open)
}

// DefaultSchema is the schema a Store keeps its tables in unless
// WithSchema or the URL's schema parameter names another.
const DefaultSchema = "actorsnap"

// maxIdentifier is PostgreSQL's limit on an identifier, in bytes
// (NAMEDATALEN-1): a longer one is silently truncated by the server.
const maxIdentifier = 63

// ErrSchemaVersion is returned by Open when the database's schema was
// migrated by a newer build, to a version this build does not know.
var ErrSchemaVersion = errors.New("postgres: database schema is newer than this build")

// Option configures a Store.
type Option func(*config)

type config struct {
	schema    string
	namespace string // persistence.OpenOptions.Namespace
	mustExist bool   // persistence.OpenOptions.MustExist
	keys      *persistence.Keyring
}

// WithSchema makes the Store keep its tables in the schema name, which is
// created if missing. Empty means the URL's schema parameter, or else
// DefaultSchema. It takes precedence over the URL's schema parameter. A
// name longer than 63 bytes, or not valid UTF-8, or holding a NUL byte,
// is refused by Open.
func WithSchema(name string) Option { return func(c *config) { c.schema = name } }

// WithKeyring makes the Store sign every snapshot it saves with k's
// signing key, and check the MAC of every snapshot it loads (see
// persistence.Keyring and the package documentation). Nil means none:
// MACs are neither written nor checked.
func WithKeyring(k *persistence.Keyring) Option { return func(c *config) { c.keys = k } }

// Store is a persistence.Store in a PostgreSQL database, for systems whose
// members share storage. See the package documentation for the tables and
// the guarantees. It is safe for concurrent use, and several Stores, in one
// process or several, may share one schema.
type Store struct {
	pool      *pgxpool.Pool
	schema    string
	t         tables
	timeouts  timeouts
	mustExist bool // Open creates nothing (persistence.OpenOptions.MustExist)
	keys      *persistence.Keyring
	// version is the schema's version: SchemaVersion, unless the Store
	// was opened with MustExist on a schema not yet migrated, whose
	// tables it reads as they are.
	version int
	leaseMu sync.Mutex
	lease   *lease // held by this Store, if any
	// hook, set by tests only, runs at each stage of a Save; an error
	// aborts the Save there.
	hook func(ctx context.Context, stage string, tx pgx.Tx) error
}

var _ persistence.Store = (*Store)(nil)

// tables holds the schema-qualified names of the store's tables.
type tables struct {
	snapshots, participants, channels, messages, waits, violations, migrations pgx.Identifier
	// The same, quoted for SQL text; and the owner table's.
	qSnapshots, qParticipants, qChannels, qMessages, qWaits, qViolations, qMigrations, qOwner string
}

func newTables(schema string) tables {
	id := func(name string) pgx.Identifier { return pgx.Identifier{schema, name} }
	t := tables{
		snapshots:    id("snapshots"),
		participants: id("participants"),
		channels:     id("channels"),
		messages:     id("messages"),
		waits:        id("waits"),
		violations:   id("violations"),
		migrations:   id("schema_migrations"),
	}
	t.qSnapshots = t.snapshots.Sanitize()
	t.qParticipants = t.participants.Sanitize()
	t.qChannels = t.channels.Sanitize()
	t.qMessages = t.messages.Sanitize()
	t.qWaits = t.waits.Sanitize()
	t.qViolations = t.violations.Sanitize()
	t.qMigrations = t.migrations.Sanitize()
	t.qOwner = id("owner").Sanitize()
	return t
}

// Open connects to the PostgreSQL database url names and prepares it: it
// creates the schema and its tables, or brings them up to date, if needed.
// url is a postgres:// or postgresql:// URL, or a key=value connection
// string, as pgx reads them (pool settings such as pool_max_conns
// included); a URL may also carry schema=NAME, which the Store takes for
// its own (see WithSchema) and does not pass on. Unless url sets them,
// connect_timeout is DefaultConnectTimeout and statement_timeout is
// DefaultStatementTimeout (see the package documentation). The Store
// holds a pool of connections until Close.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkUserinfo(url); err != nil {
		return nil, err
	}
	connString, schema := splitSchema(url)
	cfg := config{schema: schema}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.schema == "" {
		cfg.schema = DefaultSchema
	}
	if cfg.namespace != "" {
		cfg.schema += namespaceSep + cfg.namespace
	}
	if err := checkSchema(cfg.schema); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	t, err := applyTimeouts(&pcfg.ConnConfig.Config)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	s := &Store{pool: pool, schema: cfg.schema, t: newTables(cfg.schema), timeouts: t, mustExist: cfg.mustExist, keys: cfg.keys}
	if err := s.migrate(s.call(ctx, "open")); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			// Closing a connection whose server stopped answering takes
			// pgx up to 15 s (it asks the server to cancel the statement
			// and waits for it to hang up); the caller need not wait.
			go pool.Close()
		} else {
			pool.Close()
		}
		return nil, err
	}
	return s, nil
}

// splitSchema takes the schema parameter out of a postgres:// URL. Any
// other string, or a URL without the parameter, is returned unchanged.
// The rest of the query is kept as written: pgx reads a URL as libpq
// does, where a + is a plus sign, not an encoded space, so re-encoding
// it would change values such as options=-c%20name=value.
func splitSchema(url string) (connString, schema string) {
	lower := strings.ToLower(url)
	if !strings.HasPrefix(lower, "postgres://") && !strings.HasPrefix(lower, "postgresql://") {
		return url, ""
	}
	base, query, ok := strings.Cut(url, "?")
	if !ok {
		return url, ""
	}
	var kept []string
	found := false
	for _, param := range strings.Split(query, "&") {
		key, value, _ := strings.Cut(param, "=")
		if k, err := neturl.PathUnescape(key); err != nil || k != "schema" {
			kept = append(kept, param)
			continue
		}
		if !found {
			schema, found = value, true
			if v, err := neturl.PathUnescape(value); err == nil {
				schema = v
			}
		}
	}
	if !found {
		return url, ""
	}
	if len(kept) == 0 {
		return base, schema
	}
	return base + "?" + strings.Join(kept, "&"), schema
}

// checkUserinfo refuses a postgres:// URL with more than one '@' before
// its path or query. libpq, and pgx after it, end the user information at
// the first '@' and would take the rest of what is most likely a password
// holding an '@' for the host name, which errors show.
func checkUserinfo(url string) error {
	lower := strings.ToLower(url)
	if !strings.HasPrefix(lower, "postgres://") && !strings.HasPrefix(lower, "postgresql://") {
		return nil
	}
	_, rest, _ := strings.Cut(url, "://")
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if strings.Count(rest, "@") > 1 {
		return errors.New("postgres: open: the URL holds '@' more than once before its path: percent-encode an '@' in the user name or password as %40")
	}
	return nil
}

func checkSchema(name string) error {
	switch {
	case len(name) > maxIdentifier:
		return fmt.Errorf("postgres: schema name %q is %d bytes, more than %d", name, len(name), maxIdentifier)
	case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return fmt.Errorf("postgres: schema name %q: must be valid UTF-8 without NUL bytes", name)
	}
	return nil
}

// Schema returns the schema the Store keeps its tables in.
func (s *Store) Schema() string { return s.schema }

// Close closes the Store's connections, waiting for those in use to be
// released. Calls after Close fail. It returns nil; the error is there so
// that a Store opened through persistence.OpenURL is an io.Closer.
func (s *Store) Close() error {
	// The pool waits for every connection taken from it, the lease's too.
	if l := s.held(); l != nil {
		_ = l.Release(context.Background())
	}
	s.pool.Close()
	return nil
}

// storable reports whether id fits the bigint id column. Ids are
// allocated densely from 1, so this only refuses the absurd.
func storable(id snapshot.SnapshotID) bool { return id <= math.MaxInt64 }

// Save implements persistence.Store. It writes the snapshot in one
// transaction: the header row, unmarked; the participants, channels and
// messages with COPY, streamed from g; then the header's checksum and
// complete mark. Other sessions see all of it or nothing. Two Saves of
// one id, from any processes, meet at the header's primary key: the
// second waits for the first to finish and, if it committed, returns
// ErrExists.
func (s *Store) Save(ctx context.Context, g *snapshot.Global) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSave(g); err != nil {
		return err
	}
	c := s.call(ctx, fmt.Sprintf("save %d", g.ID))
	tx, release, err := s.write(c, pgx.TxOptions{}, false)
	if err != nil {
		return c.fail(err)
	}
	defer release()
	if err := s.save(c, tx, g); err != nil {
		return c.fail(err)
	}
	// A Save that returns ctx's error must have changed nothing.
	if err := ctx.Err(); err != nil {
		return c.fail(err)
	}
	cctx, cancel := c.finish()
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return c.failCommit(err)
	}
	return nil
}

func (s *Store) save(c *call, tx pgx.Tx, g *snapshot.Global) error {
	if s.version < SchemaVersion {
		return fmt.Errorf("schema %s is at version %d, opened without migrating it (MustExist); this build saves to version %d", s.schema, s.version, SchemaVersion)
	}
	h := newHeader(g)
	sumSent, sumReceived := h.sumColumns()
	ctx, cancel := c.stmt()
	defer cancel()
	tag, err := tx.Exec(ctx, `INSERT INTO `+s.t.qSnapshots+`
		(id, format, mode, start_sec, start_nsec, end_sec, end_nsec, participants, channels, messages, waits, violations, receiver_counts, sum_sent, sum_received, checksum, complete)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 0, false)
		ON CONFLICT (id) DO NOTHING`,
		h.id, h.format, h.mode, h.startSec, h.startNsec, h.endSec, h.endNsec, h.participants, h.channels, h.messages, h.waits, h.violations, h.receiverCounts, sumSent, sumReceived)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %d", persistence.ErrExists, g.ID)
	}
	if err := s.step(c.ctx, "header", tx); err != nil {
		return err
	}
	sum := newHeaderSum(h)
	// The MAC, if the Store signs, covers the header's columns and then
	// every row's, as the row hashers give them (see hasher.mac).
	mac := s.keys.Sign(pgLayout, g.ID)
	if mac != nil {
		mac.Write(h.appendColumns(nil))
	}
	if len(g.Participants) > 0 {
		src := &participantRows{g: g, sum: sum, h: hasher{mac: mac}}
		ctx, cancel := c.stmt()
		defer cancel()
		if _, err := tx.CopyFrom(ctx, s.t.participants, participantColumns, src); err != nil {
			return fmt.Errorf("copy participants: %w", err)
		}
	}
	if err := s.step(c.ctx, "participants", tx); err != nil {
		return err
	}
	if len(g.Channels) > 0 {
		src := &channelRows{g: g, sum: sum, h: hasher{mac: mac}}
		ctx, cancel := c.stmt()
		defer cancel()
		if _, err := tx.CopyFrom(ctx, s.t.channels, channelColumns, src); err != nil {
			return fmt.Errorf("copy channels: %w", err)
		}
	}
	if err := s.step(c.ctx, "channels", tx); err != nil {
		return err
	}
	if h.messages > 0 {
		src := &messageRows{g: g, sum: sum, h: hasher{mac: mac}}
		ctx, cancel := c.stmt()
		defer cancel()
		if _, err := tx.CopyFrom(ctx, s.t.messages, messageColumns, src); err != nil {
			return fmt.Errorf("copy messages: %w", err)
		}
	}
	if err := s.step(c.ctx, "messages", tx); err != nil {
		return err
	}
	if h.waits > 0 {
		src := &waitRows{g: g, sum: sum, h: hasher{mac: mac}}
		ctx, cancel := c.stmt()
		defer cancel()
		if _, err := tx.CopyFrom(ctx, s.t.waits, waitColumns, src); err != nil {
			return fmt.Errorf("copy waits: %w", err)
		}
	}
	if err := s.step(c.ctx, "waits", tx); err != nil {
		return err
	}
	if h.violations > 0 {
		src := &violationRows{g: g, sum: sum, h: hasher{mac: mac}}
		ctx, cancel := c.stmt()
		defer cancel()
		if _, err := tx.CopyFrom(ctx, s.t.violations, violationColumns, src); err != nil {
			return fmt.Errorf("copy violations: %w", err)
		}
	}
	if err := s.step(c.ctx, "violations", tx); err != nil {
		return err
	}
	ctx, cancel = c.stmt()
	defer cancel()
	var (
		macKey *string
		macSum []byte
	)
	if mac != nil {
		k := mac.KeyID()
		macKey, macSum = &k, mac.Sum()
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.t.qSnapshots+` SET checksum = $2, mac_key = $3, mac = $4, complete = true WHERE id = $1`,
		h.id, int64(sum.sum()), macKey, macSum); err != nil {
		return err
	}
	return s.step(c.ctx, "complete", tx)
}

func (s *Store) step(ctx context.Context, stage string, tx pgx.Tx) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(ctx, stage, tx)
}

// read runs fn in a read-only transaction that sees one snapshot of the
// database, so that a snapshot being saved or deleted meanwhile is seen
// wholly or not at all. fn bounds each of its statements with c.stmt.
func (s *Store) read(ctx context.Context, op string, fn func(c *call, tx pgx.Tx) error) error {
	c := s.call(ctx, op)
	tx, release, err := c.begin(pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return c.fail(err)
	}
	defer release()
	if err := fn(c, tx); err != nil {
		return c.fail(err)
	}
	return nil
}

// Load implements persistence.Store. A row whose checksum does not match,
// a row missing or out of place, or a header whose checksum over the
// rows does not match, is reported as a *persistence.CorruptError naming
// the table and the row.
func (s *Store) Load(ctx context.Context, id snapshot.SnapshotID) (*snapshot.Global, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if id == 0 || !storable(id) {
		return nil, fmt.Errorf("%w: %d", persistence.ErrNotFound, id)
	}
	var g *snapshot.Global
	err := s.read(ctx, fmt.Sprintf("load %d", id), func(c *call, tx pgx.Tx) error {
		var err error
		g, err = s.load(c, tx, id)
		return err
	})
	return g, err
}

// Latest implements persistence.Store. The newest complete snapshot is
// chosen and read in one transaction, so a concurrent Delete cannot make
// it vanish in between.
func (s *Store) Latest(ctx context.Context) (*snapshot.Global, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var g *snapshot.Global
	err := s.read(ctx, "latest", func(c *call, tx pgx.Tx) error {
		var id int64
		ctx, cancel := c.stmt()
		defer cancel()
		err := tx.QueryRow(ctx, `SELECT id FROM `+s.t.qSnapshots+` WHERE complete ORDER BY id DESC LIMIT 1`).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return persistence.ErrNotFound
		}
		if err != nil {
			return err
		}
		g, err = s.load(c, tx, snapshot.SnapshotID(id))
		return err
	})
	return g, err
}

// List implements persistence.Store. A complete snapshot of another row
// format is listed: it is complete, though this build cannot load it.
func (s *Store) List(ctx context.Context) ([]snapshot.SnapshotID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := s.call(ctx, "list")
	conn, err := c.acquire()
	if err != nil {
		return nil, c.fail(err)
	}
	defer conn.Release()
	qctx, cancel := c.stmt()
	defer cancel()
	rows, err := conn.Query(qctx, `SELECT id FROM `+s.t.qSnapshots+` WHERE complete ORDER BY id`)
	if err != nil {
		return nil, c.fail(err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (snapshot.SnapshotID, error) {
		var id int64
		err := r.Scan(&id)
		return snapshot.SnapshotID(id), err
	})
	if err != nil {
		return nil, c.fail(err)
	}
	return ids, nil
}

// deleteSQL deletes the rows of the snapshots whose id matches cond (in
// which $1 is a parameter) in one statement: the statement sees one
// snapshot of the database, so it deletes a snapshot wholly or, if its
// Save commits meanwhile, not at all. A schema not yet migrated to version
// 3 has no waits or violations to delete.
func (s *Store) deleteSQL(cond string) string {
	with := `WITH `
	if s.version >= 3 {
		with += `w AS (DELETE FROM ` + s.t.qWaits + ` WHERE snapshot_id ` + cond + `),
		v AS (DELETE FROM ` + s.t.qViolations + ` WHERE snapshot_id ` + cond + `),
		`
	}
	return with + `m AS (DELETE FROM ` + s.t.qMessages + ` WHERE snapshot_id ` + cond + `),
		c AS (DELETE FROM ` + s.t.qChannels + ` WHERE snapshot_id ` + cond + `),
		p AS (DELETE FROM ` + s.t.qParticipants + ` WHERE snapshot_id ` + cond + `)
		DELETE FROM ` + s.t.qSnapshots + ` WHERE id ` + cond
}

// Delete implements persistence.Store. The snapshot's rows in every table
// are deleted by one statement, so the snapshot disappears wholly and at
// once.
func (s *Store) Delete(ctx context.Context, id snapshot.SnapshotID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !storable(id) {
		return nil
	}
	c := s.call(ctx, fmt.Sprintf("delete %d", id))
	tx, release, err := s.write(c, pgx.TxOptions{}, true)
	if err != nil {
		return c.fail(err)
	}
	defer release()
	if err := s.keepHigh(c, tx, id); err != nil {
		return c.fail(err)
	}
	ectx, cancel := c.stmt()
	defer cancel()
	if _, err := tx.Exec(ectx, s.deleteSQL("= $1"), int64(id)); err != nil {
		return c.fail(err)
	}
	cctx, ccancel := c.finish()
	defer ccancel()
	if err := tx.Commit(cctx); err != nil {
		return c.failCommit(err)
	}
	return nil
}

// retainAttempts bounds how often Retain starts over when a concurrent
// change makes its transaction fail to serialize.
const retainAttempts = 3

// Retain implements persistence.Store. In one transaction that sees one
// snapshot of the database it walks the complete snapshots from the
// newest down, reading and checking each (every row checksum, the
// header's checksum, Verify) until n have passed; it locks those n, so
// that a concurrent Delete of one of them waits or makes Retain start
// over, and deletes every snapshot older than them. A damaged snapshot is
// neither counted nor deleted. With fewer than n that pass, nothing is
// deleted.
func (s *Store) Retain(ctx context.Context, n int) error {
	if n < 1 {
		return fmt.Errorf("postgres: retain %d: n must be at least 1", n)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := s.call(ctx, "retain")
	for attempt := 1; ; attempt++ {
		err := s.retain(c, n)
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || pe.Code != "40001" || attempt == retainAttempts {
			if err != nil {
				return c.fail(err)
			}
			return nil
		}
	}
}

func (s *Store) retain(c *call, n int) error {
	tx, release, err := s.write(c, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, false)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := c.stmt()
	defer cancel()
	rows, err := tx.Query(ctx, `SELECT id FROM `+s.t.qSnapshots+` WHERE complete ORDER BY id DESC`)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	var kept []int64
	for _, id := range ids {
		if len(kept) == n {
			break
		}
		if err := c.ctx.Err(); err != nil {
			return err
		}
		_, err := s.load(c, tx, snapshot.SnapshotID(id))
		var ce *persistence.CorruptError
		switch {
		case err == nil:
			kept = append(kept, id)
		case errors.As(err, &ce), errors.Is(err, persistence.ErrFormatVersion), errors.Is(err, persistence.ErrUnauthentic):
			// Not counted, and not deleted.
		default:
			return err
		}
	}
	if len(kept) < n {
		return nil
	}
	lctx, cancel := c.stmt()
	defer cancel()
	if _, err := tx.Exec(lctx, `SELECT FROM `+s.t.qSnapshots+` WHERE id = ANY($1) FOR SHARE`, kept); err != nil {
		return err
	}
	dctx, cancel := c.stmt()
	defer cancel()
	if _, err := tx.Exec(dctx, s.deleteSQL("< $1"), kept[n-1]); err != nil {
		return err
	}
	cctx, cancel := c.stmt()
	defer cancel()
	return tx.Commit(cctx)
}

// checkSave returns why g must not be saved, or nil: the checks of
// persistence.EncodeGlobal, except the bound on the encoded size, which a
// store of rows does not have. The id must also fit PostgreSQL's bigint.
func checkSave(g *snapshot.Global) error {
	if g == nil {
		return errors.New("postgres: refusing to save a nil snapshot")
	}
	if g.ID == 0 {
		return fmt.Errorf("postgres: refusing to save: %w", snapshot.ErrInvalidID)
	}
	if err := g.Verify(); err != nil {
		return fmt.Errorf("postgres: refusing to save: %w", err)
	}
	tooLarge := func(what string, n, limit uint64) error {
		return fmt.Errorf("%w: snapshot %d: %s is %d, more than %d", persistence.ErrTooLarge, g.ID, what, n, limit)
	}
	if !storable(g.ID) {
		return tooLarge("id", uint64(g.ID), math.MaxInt64)
	}
	if len(g.Participants) > persistence.MaxParticipants {
		return tooLarge("participant count", uint64(len(g.Participants)), persistence.MaxParticipants)
	}
	if len(g.Channels) > persistence.MaxChannels {
		return tooLarge("channel count", uint64(len(g.Channels)), persistence.MaxChannels)
	}
	name := func(what, s string) error {
		if len(s) > persistence.MaxNameSize {
			return tooLarge(what+" size", uint64(len(s)), persistence.MaxNameSize)
		}
		return nil
	}
	waits := 0
	for _, p := range g.Participants {
		if err := errors.Join(name("process id", string(p.ID)), name("kind", p.Kind)); err != nil {
			return err
		}
		if len(p.State) > persistence.MaxStateSize {
			return tooLarge(fmt.Sprintf("state size of %s", p.ID), uint64(len(p.State)), persistence.MaxStateSize)
		}
		if p.Waits == nil {
			continue
		}
		if len(p.Waits.Edges) > persistence.MaxWaits {
			return tooLarge(fmt.Sprintf("wait-for edges of %s", p.ID), uint64(len(p.Waits.Edges)), persistence.MaxWaits)
		}
		if waits += len(p.Waits.Edges); waits > persistence.MaxWaitsTotal {
			return tooLarge("wait-for edge count", uint64(waits), persistence.MaxWaitsTotal)
		}
		for _, e := range p.Waits.Edges {
			if err := errors.Join(name("wait target", string(e.To)), name("wait type", e.Type)); err != nil {
				return err
			}
		}
	}
	if len(g.Violations) > persistence.MaxViolations {
		return tooLarge("violation count", uint64(len(g.Violations)), persistence.MaxViolations)
	}
	for _, v := range g.Violations {
		if err := name("invariant name", v.Invariant); err != nil {
			return err
		}
		if len(v.Err) > persistence.MaxViolationSize {
			return tooLarge(fmt.Sprintf("error size of violation %q", v.Invariant), uint64(len(v.Err)), persistence.MaxViolationSize)
		}
	}
	messages := 0
	for _, c := range g.Channels {
		if err := errors.Join(name("process id", string(c.Channel.From)), name("process id", string(c.Channel.To))); err != nil {
			return err
		}
		messages += len(c.Messages)
		if messages > persistence.MaxMessages {
			return tooLarge("in-flight message count", uint64(messages), persistence.MaxMessages)
		}
		for j, m := range c.Messages {
			rm, ok := m.Payload.(persistence.RecordedMessage)
			if !ok {
				return fmt.Errorf("%w: snapshot %d: channel %s: message %d has payload type %T", persistence.ErrPayloadType, g.ID, c.Channel, j, m.Payload)
			}
			if err := name("message type", rm.Type); err != nil {
				return err
			}
			if len(rm.Data) > persistence.MaxMessageSize {
				return tooLarge("message size", uint64(len(rm.Data)), persistence.MaxMessageSize)
			}
		}
	}
	return nil
}
