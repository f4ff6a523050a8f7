package postgres

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/actorsnap/actorsnap/persistence"
)

// migrations are the schema's versions: applying migrations[i] takes the
// schema from version i to i+1. A migration is never changed once
// released; a change of layout is a new one. "{schema}" stands for the
// quoted schema name.
var migrations = []string{
	// 1: the tables of row format 1. No foreign keys: a Save writes the
	// rows of one snapshot in one transaction and a Delete removes them in
	// one statement, and per-row key checks would slow COPY down.
	`CREATE TABLE {schema}.snapshots (
		id           bigint      PRIMARY KEY CHECK (id > 0),
		format       smallint    NOT NULL,
		mode         smallint    NOT NULL,
		start_sec    bigint      NOT NULL,
		start_nsec   integer     NOT NULL,
		end_sec      bigint      NOT NULL,
		end_nsec     integer     NOT NULL,
		participants integer     NOT NULL,
		channels     integer     NOT NULL,
		messages     integer     NOT NULL,
		checksum     bigint      NOT NULL,
		complete     boolean     NOT NULL DEFAULT false,
		saved_at     timestamptz NOT NULL DEFAULT now()
	);
	CREATE TABLE {schema}.participants (
		snapshot_id bigint  NOT NULL,
		ord         integer NOT NULL,
		process     bytea   NOT NULL,
		kind        bytea   NOT NULL,
		state       bytea,
		departed    boolean NOT NULL,
		crc         bigint  NOT NULL,
		PRIMARY KEY (snapshot_id, ord)
	);
	CREATE TABLE {schema}.channels (
		snapshot_id bigint  NOT NULL,
		ord         integer NOT NULL,
		sender      bytea   NOT NULL,
		receiver    bytea   NOT NULL,
		sent        bigint  NOT NULL,
		received    bigint  NOT NULL,
		crc         bigint  NOT NULL,
		PRIMARY KEY (snapshot_id, ord)
	);
	CREATE TABLE {schema}.messages (
		snapshot_id bigint  NOT NULL,
		channel_ord integer NOT NULL,
		ord         integer NOT NULL,
		type        bytea   NOT NULL,
		data        bytea,
		crc         bigint  NOT NULL,
		PRIMARY KEY (snapshot_id, channel_ord, ord)
	);`,
	// 2: the owner: the system that claimed the schema last, and the
	// highest snapshot id it has held (kept when the newest is deleted).
	`CREATE TABLE {schema}.owner (
		singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
		system     text        NOT NULL,
		generation bigint      NOT NULL,
		host       text        NOT NULL,
		pid        integer     NOT NULL,
		since      timestamptz NOT NULL,
		high       bigint      NOT NULL DEFAULT 0
	);`,
	// 3: row format 2, which keeps each participant's waits (its flags in
	// participants, its wait-for edges in waits) and the snapshot's
	// violations. The rows of format 1 stay as they are: their counts of
	// waits and violations are 0, and their flags NULL.
	`ALTER TABLE {schema}.snapshots
		ADD COLUMN waits      integer NOT NULL DEFAULT 0,
		ADD COLUMN violations integer NOT NULL DEFAULT 0;
	ALTER TABLE {schema}.participants
		ADD COLUMN wait_any   boolean,
		ADD COLUMN wait_timer boolean;
	CREATE TABLE {schema}.waits (
		snapshot_id     bigint  NOT NULL,
		participant_ord integer NOT NULL,
		ord             integer NOT NULL,
		target          bytea   NOT NULL,
		request         bigint  NOT NULL,
		type            bytea   NOT NULL,
		since_sec       bigint  NOT NULL,
		since_nsec      integer NOT NULL,
		crc             bigint  NOT NULL,
		PRIMARY KEY (snapshot_id, participant_ord, ord)
	);
	CREATE TABLE {schema}.violations (
		snapshot_id bigint  NOT NULL,
		ord         integer NOT NULL,
		invariant   bytea   NOT NULL,
		err         bytea   NOT NULL,
		crc         bigint  NOT NULL,
		PRIMARY KEY (snapshot_id, ord)
	);`,
	// 4: the MAC of a signed snapshot and the id of its key, both NULL
	// for a snapshot saved without a Keyring.
	`ALTER TABLE {schema}.snapshots
		ADD COLUMN mac_key text,
		ADD COLUMN mac     bytea;`,
	// 5: row format 3, which keeps the receiver counts of a snapshot that
	// has them (Global.ReceiverCounts): the flag in snapshots, each
	// participant's SentTo and Received, as the bits of a uint64, in
	// participants. The rows of formats 1 and 2 stay as they are: the
	// defaults are what they hold, no counts.
	`ALTER TABLE {schema}.snapshots
		ADD COLUMN receiver_counts boolean NOT NULL DEFAULT false;
	ALTER TABLE {schema}.participants
		ADD COLUMN sent_to  bigint NOT NULL DEFAULT 0,
		ADD COLUMN received bigint NOT NULL DEFAULT 0;`,
	// 6: row format 4, which keeps the sums of a snapshot counted in sums
	// (Global.Sums), Sent and Received as the bits of a uint64, in
	// snapshots: both NULL for a snapshot without them. The rows of
	// formats 1 to 3 stay as they are: NULL is what they hold, no sums.
	`ALTER TABLE {schema}.snapshots
		ADD COLUMN sum_sent     bigint,
		ADD COLUMN sum_received bigint;`,
}

// SchemaVersion is the version of the database schema this build
// migrates to.
const SchemaVersion = 6

// migrate brings the schema up to SchemaVersion in one transaction, under
// a transaction-scoped advisory lock of the schema's own: processes
// opening stores at once take turns, the first migrates, the others find
// the schema up to date. A migration that fails leaves the schema as it
// was. Nothing is created when the schema is up to date already, so a
// role without the CREATE privilege can open a migrated schema.
func (s *Store) migrate(c *call) error {
	tx, release, err := c.begin(pgx.TxOptions{})
	if err != nil {
		return c.fail(err)
	}
	defer release()
	if err := s.migrateTx(c, tx); err != nil {
		return c.failAs("migrate", err)
	}
	ctx, cancel := c.stmt()
	defer cancel()
	if err := tx.Commit(ctx); err != nil {
		return c.failAs("migrate", err)
	}
	return nil
}

func (s *Store) migrateTx(c *call, tx pgx.Tx) error {
	// Each statement is bounded on its own (c.stmt).
	exec := func(sql string, args ...any) error {
		ctx, cancel := c.stmt()
		defer cancel()
		_, err := tx.Exec(ctx, sql, args...)
		return err
	}
	scan := func(dst any, sql string, args ...any) error {
		ctx, cancel := c.stmt()
		defer cancel()
		return tx.QueryRow(ctx, sql, args...).Scan(dst)
	}
	if err := exec(`SELECT pg_advisory_xact_lock($1)`, lockKey(s.schema)); err != nil {
		return err
	}
	var exists bool
	if err := scan(&exists, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, s.schema); err != nil {
		return err
	}
	if !exists && s.mustExist {
		return fmt.Errorf("%w: no schema %s", persistence.ErrNoStore, s.schema)
	}
	if s.mustExist {
		// Only read: an older schema is read as it is, and migrated by the
		// next writer. Its version says which tables and columns it has.
		var found bool
		if err := scan(&found, `SELECT to_regclass($1) IS NOT NULL`, s.t.qMigrations); err != nil {
			return err
		}
		if found {
			return scan(&s.version, `SELECT coalesce(max(version), 0) FROM `+s.t.qMigrations)
		}
		return nil
	}
	if !exists {
		if err := exec(`CREATE SCHEMA ` + pgx.Identifier{s.schema}.Sanitize()); err != nil {
			return err
		}
	}
	if err := exec(`CREATE TABLE IF NOT EXISTS ` + s.t.qMigrations + ` (
		version    integer     PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return err
	}
	var version int
	if err := scan(&version, `SELECT coalesce(max(version), 0) FROM `+s.t.qMigrations); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("%w: schema %s is at version %d, this build knows up to %d", ErrSchemaVersion, s.schema, version, len(migrations))
	}
	s.version = len(migrations)
	quoted := pgx.Identifier{s.schema}.Sanitize()
	for v := version; v < len(migrations); v++ {
		// Without arguments pgx sends the simple protocol, which runs
		// several statements in one Exec.
		if err := exec(strings.ReplaceAll(migrations[v], "{schema}", quoted)); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if err := exec(`INSERT INTO `+s.t.qMigrations+` (version) VALUES ($1)`, v+1); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	return nil
}

// lockKey is the advisory lock key of migrations of schema: the package's
// name and the schema's, hashed, so that stores of different schemas do
// not wait for each other.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("github.com/actorsnap/actorsnap/persistence/postgres migrate\x00"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}
