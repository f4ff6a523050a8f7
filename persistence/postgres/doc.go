// Package postgres is a persistence.Store in a PostgreSQL database, through
// pgx, for systems whose members share storage (a Proto.Actor cluster).
// It keeps the guarantees of the file store: a snapshot is saved
// atomically (wholly visible or absent), Latest is never torn, damage is
// reported as persistence.ErrCorrupt and never loaded, and Retain only
// deletes snapshots older than n complete ones. Every method may be called
// concurrently, on one Store or on several sharing a database, in one
// process or several.
//
// Open a Store with Open, or, in a program that imports this package
// (a blank import will do), with persistence.OpenURL:
//
//	import _ "github.com/actorsnap/actorsnap/persistence/postgres"
//
//	store, err := persistence.OpenURL(ctx, "postgres://app@db.internal/app?schema=snaps")
//
// Both postgres:// and postgresql:// are registered. The URL is pgx's (so
// pool settings such as pool_max_conns work), plus one parameter of this
// package: schema, the schema the tables live in (DefaultSchema,
// "actorsnap", unless it or WithSchema says otherwise). A Store holds a
// connection pool: Close it when done (a Store from OpenURL is an
// io.Closer).
//
// # Connection security
//
// TLS is set in the URL, as libpq reads it: sslmode (disable, allow,
// prefer (the default, which falls back to plain text), require,
// verify-ca, verify-full), sslrootcert (the CA's certificate), and
// sslcert and sslkey for a client certificate. Between hosts, use
// verify-full, which checks the server's certificate and name:
//
//	postgres://snaps@db.internal:5432/app?sslmode=verify-full&sslrootcert=/etc/actorsnap/db-ca.pem&schema=snaps
//
// Keep the password out of the URL: a URL without one takes it from
// PGPASSWORD, or from the password file (PGPASSFILE, default ~/.pgpass),
// as libpq does. A URL with one still works, but is easily copied into
// shell history and process listings. No error of this package shows a
// password (pgx masks it in its own, and a URL with more than one '@'
// before its path, where a password's '@' needed percent-encoding as %40,
// is refused without showing it), and whatever prints the URL should
// print persistence.Redact of it.
//
// # Authentication
//
// A Store given a persistence.Keyring (WithKeyring, or
// persistence.Authenticate through OpenURL) signs every snapshot it saves:
// the header row's mac is HMAC-SHA256, under the key whose id is in
// mac_key, of the header and rows of the snapshot. Load, Latest and Retain
// check it, and refuse a snapshot whose MAC does not match, or names a key
// the Keyring does not hold, or, if the Keyring requires signatures, is
// missing, with a *persistence.AuthError (errors.Is
// persistence.ErrUnauthentic) naming the snapshot and the key; Retain
// neither counts nor deletes such a snapshot. The MAC's input is, after
// the header persistence.Keyring.Sign writes (layout "postgres"), the
// header row's canonical encoding and then every row's, in the order and
// form of their checksums (see Checksums): every column that defines the
// snapshot, and each row's position. The checksums catch accidents; only
// the MAC catches rows changed with their checksums recomputed. Snapshots
// saved without a Keyring (mac NULL) load unless signatures are required.
//
// # Timeouts
//
// Every wait for the server is bounded, so that a server that accepts
// connections but never answers makes a method fail rather than hang.
// Unless the URL (or key=value string) sets them, Open uses:
//
//	connect_timeout=10     seconds for each connection attempt: the dial,
//	                       TLS and authentication (DefaultConnectTimeout)
//	statement_timeout=30s  the server's statement_timeout for the Store's
//	                       sessions (DefaultStatementTimeout)
//
// connect_timeout is in whole seconds, as libpq reads it; 0 counts as
// unset. statement_timeout is as PostgreSQL reads it: a number of
// milliseconds (5000) or a number and a unit (5s, 2min); 0 disables it.
// It may also be given as options=-c%20statement_timeout=5s. Set in the
// URL, it overrides a statement_timeout set on the role or database,
// and so does the default.
//
// A server that never answers does not enforce its own
// statement_timeout, so the client bounds each statement too, including
// a transaction's begin, commit and rollback: to statement_timeout plus
// 1 s, the time for the server's own cancellation to arrive. The bound
// is per statement, not per method: a Save or Retain of several
// statements may take longer while the server keeps answering. Taking a
// connection from the pool is bounded by connect_timeout plus that
// bound (the pool's connections may all be busy, or connecting). A
// caller's context that ends sooner ends the wait sooner. With
// statement_timeout=0 neither the server nor the client bounds a
// statement.
//
// A timeout gives an error of one line that names the server and the
// setting; errors.Is(err, context.DeadlineExceeded) holds. For example:
//
//	postgres: open: 127.0.0.1:5432 did not answer within 10s (connect_timeout; set connect_timeout in the URL to change it)
//	postgres: save 7: db.internal:5432 did not answer within 31s (statement_timeout 30s + 1s; set statement_timeout in the URL to change it)
//	postgres: save 7: db.internal:5432 cancelled a statement after 30s (statement_timeout; set statement_timeout in the URL to change it)
//
// The last is the server's own statement_timeout, on a statement that
// waited too long for a lock, say. A commit that times out says that
// whether it committed is unknown. No error shows the password. After a
// timeout, pgx asks the server to cancel the statement and closes the
// connection in the background, which takes up to 15 s against a server
// that does not answer; Close waits for it.
//
// # Tables
//
// Open creates the schema and its tables on first use and brings them up
// to date later, by numbered migrations recorded in schema_migrations
// (version, applied_at). They run in one transaction under an advisory
// lock of the schema's own, so processes opening at once take turns and
// the migrations are applied once; a schema already up to date is only
// read, so a role without the CREATE privilege can use it. A schema of a
// newer version than this build knows is refused with ErrSchemaVersion.
// Opened with persistence.MustExist, a schema is not migrated: it is read
// as its version has it, and a Save into one older than this build's
// version is refused.
//
// Version 1 has four tables. Names, kinds and message types are bytea,
// not text: a process id may hold any bytes, NUL included, which text
// cannot. Counters are stored as the bits of a uint64 in a bigint.
//
//	snapshots     one header row per snapshot
//	  id            bigint primary key (snapshot ids must be at most 2^63-1)
//	  format        smallint, the row format (1; 2 from version 3; 3 from
//	                version 5; 4 from version 6)
//	  mode          smallint
//	  start_sec, start_nsec, end_sec, end_nsec   the instants, in Unix
//	                seconds and nanoseconds (timestamptz keeps microseconds)
//	  participants, channels, messages            row counts
//	  checksum      bigint, the CRC-32C of the header and every row's checksum
//	  complete      boolean, set last
//	  saved_at      timestamptz, for people
//	participants  (snapshot_id, ord) primary key; process, kind bytea;
//	              state bytea (NULL for a nil state); departed boolean; crc
//	channels      (snapshot_id, ord) primary key; sender, receiver bytea;
//	              sent, received bigint; crc
//	messages      (snapshot_id, channel_ord, ord) primary key; type bytea;
//	              data bytea (NULL for nil); crc
//
// Version 2 adds the owner table, of at most one row:
//
//	owner         singleton boolean primary key (always true); system,
//	              host text; generation bigint; pid integer; since
//	              timestamptz; high bigint, the highest snapshot id the
//	              schema has held once the newest was deleted
//
// Version 3 keeps what participants waited for and the invariants a
// snapshot broke, in row format 2 (format 1 rows stay as they were, and
// load as before):
//
//	snapshots     + waits, violations   row counts (0 in format 1)
//	participants  + wait_any, wait_timer boolean, both NULL for a
//	              participant without waits (nil Waits), neither otherwise
//	waits         (snapshot_id, participant_ord, ord) primary key; target,
//	              type bytea (the target by name, participant or not);
//	              request bigint; since_sec bigint, since_nsec integer; crc
//	violations    (snapshot_id, ord) primary key; invariant, err bytea; crc
//
// Version 4 adds the MAC of a signed snapshot (see Authentication):
//
//	snapshots     + mac_key text, mac bytea   both NULL for a snapshot
//	              saved without a Keyring
//
// Version 5 keeps the receiver counts of an epoch snapshot
// (Global.ReceiverCounts), in row format 3 (rows of formats 1 and 2 stay
// as they were, keep no counts, and load as before):
//
//	snapshots     + receiver_counts boolean, whether the snapshot keeps
//	              them (false before format 3)
//	participants  + sent_to, received bigint, the participant's SentTo and
//	              Received; 0 in a snapshot that keeps none
//
// Whether it keeps them is the snapshot's, not each row's: a snapshot of
// no participants has it too, and every row of one that keeps none holds
// 0, as Load requires.
//
// Version 6 keeps the sums of a snapshot counted in sums (Global.Sums),
// in row format 4 (rows of formats 1 to 3 stay as they were, keep no
// sums, and load as before):
//
//	snapshots     + sum_sent, sum_received bigint, the sums' Sent and
//	              Received; both NULL for a snapshot without sums (and
//	              in every row before format 4), neither otherwise
//
// ord is a row's position in the Global (participants sorted by id,
// channels by sender then receiver, a channel's messages in FIFO order, a
// participant's wait-for edges and the violations as given):
// the database's collation does not order bytes as Go does, so the order
// is stored, not recomputed. A message's sequence number is not stored:
// Verify holds it to the channel's received count + 1 + its position. No
// foreign keys: each snapshot's rows are written in one transaction and
// deleted in one statement, and per-row key checks would slow COPY down.
//
// # Ownership
//
// A schema belongs to one system (see persistence's Ownership). Claim
// takes the schema's owner lock, a session advisory lock held on a
// connection taken out of the pool for the lease's life, without waiting
// (ErrLocked while another lease holds it), and records the claim in the
// owner row with the next generation. A Save, Delete or Retain through a
// Store holding the lease checks in its transaction that the owner row
// still has the lease's generation, locking the row until it commits: a
// lease whose connection was lost (and the lock with it) is superseded by
// the next claim, and its writes fail with ErrFenced. Through a Store
// without a lease they take the lock shared for their transaction, which
// fails with ErrLocked while a lease is held. The highest id the schema
// has held is the largest of the owner row's high and the snapshots'
// ids; Delete raises high to the id it deletes. A namespace (OpenURL with
// persistence.InNamespace) is the schema SCHEMA/NAME. SetAside marks a
// snapshot's header incomplete: nothing lists or loads it, and Retain
// deletes it with the older snapshots.
//
// # Saving
//
// Save checks the snapshot as persistence.EncodeGlobal does (a non-zero
// id, Verify, RecordedMessage payloads, the format's limits on counts and
// sizes; there is no limit on the total size) and then, in one
// transaction: inserts the header row, not yet complete (ON CONFLICT DO
// NOTHING: an id already stored gives persistence.ErrExists, and a Save
// racing another for one id waits for it at the primary key); copies the
// participants, then the channels, the messages, the wait-for edges and
// the violations with COPY (a table with none to write is skipped); and
// finally sets the header's checksum and complete mark. The rows are
// streamed: each COPY reads the Global one row at a time through a
// pgx.CopyFromSource that computes the row's checksum as it goes, and pgx
// encodes rows into a send buffer of about 64 KiB, sent as it fills. So a
// Save holds no second copy of the states, only the buffer (or one row,
// if larger). A Save whose context is cancelled before it commits rolls
// back; the commit itself is not cut short by the context (a Save that
// returned the context's error would then not know whether it had
// committed), but is bounded as any statement is (see Timeouts).
//
// # Checksums
//
// Each row's crc is the CRC-32C (Castagnoli) of a canonical encoding of
// the row: a tag byte ('p', 'c', 'm', 'w', 'v'), the snapshot id (8
// bytes), the row's position (4 bytes each: ord, or channel_ord or
// participant_ord and ord), then its columns in order: byte strings as a
// 4-byte length and the bytes (length 0xffffffff for NULL), numbers in 8
// bytes (since_nsec in 4), booleans in one; every number is big-endian.
// From format 2 a participant's wait flags are one byte after departed: 0
// for none, else 1 plus 2 for wait_any and 4 for wait_timer; in format 3
// its sent_to and received follow them. The header's checksum is the
// CRC-32C of 'h', the id, format, mode, instants and counts (from format
// 2 the counts of waits and violations too, from format 3
// receiver_counts after them, and in format 4 the sums after that: one
// byte, 0 for none, else 1 and then sum_sent and sum_received), then of
// every row's crc in order: participants, channels, messages, waits,
// violations. A row moved to another snapshot or position, changed,
// added or removed, or the sums changed, therefore fails a check.
//
// # Reading
//
// Load reads the header and then the rows of each table in ord order, in
// one read-only REPEATABLE READ transaction: it sees a snapshot being
// saved or deleted meanwhile wholly or not at all. It checks every row's
// checksum, the rows' positions and counts against the header, that a
// snapshot that keeps no receiver counts has none, that sum_sent and
// sum_received are both NULL or neither (both NULL before format 4), the
// header's checksum, the format's limits, and finally Verify, which holds
// the sums to the messages in flight. A fault is
// reported as a *persistence.CorruptError whose File is the
// schema-qualified table (such as "actorsnap.participants") and whose
// Offset is the row's position among the snapshot's rows of that table
// (0 for the header), with the row named in the Reason. Whether the waits
// and violations tables hold rows of a snapshot that counts none is read
// with the header, at no query of its own. A header of a row format other
// than 1 to 4 is reported with persistence.ErrFormatVersion, and so is
// one of a format that the schema's version, as the Store opened it
// (persistence.MustExist), does not hold: it was saved after another
// Store migrated the schema.
// Names and byte strings are copied from the connection's buffer into a
// few shared blocks, so a Global costs a few allocations beyond one per
// message.
//
// Latest chooses the newest complete snapshot and reads it in one
// transaction; a damaged one is reported, not skipped. List lists the
// complete snapshots. Delete removes a snapshot's rows from every table in
// one statement. Retain reads and checks the newest snapshots, from the
// newest down, until n pass, in one REPEATABLE READ transaction that
// locks those n and deletes every older snapshot: a damaged snapshot is
// neither counted nor deleted.
//
// # Testing
//
// The tests run against a real server named by the environment variable
// ACTORSNAP_TEST_POSTGRES, each in a fresh schema that it drops; without
// it they are skipped. The script below starts a server that also speaks
// TLS with a certificate of a throwaway authority, named by
// ACTORSNAP_TEST_POSTGRES_CA, so that the tests check that sslmode and
// sslrootcert reach every connection. From the module root:
//
//	eval "$(bash .ci/postgres.sh)"    # starts a local server, prints the export line
//	go test -race ./persistence/postgres/
package postgres
