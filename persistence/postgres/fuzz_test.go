package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// maxLoadAlloc bounds what loading one damaged snapshot of the fixture
// may allocate: a header's counts (up to 2^31-1) must not be taken at
// their word before the rows bear them out (see maxPrealloc).
const maxLoadAlloc = 64 << 20

// How a fuzz input changes its column, as bits of its how byte.
const (
	// howSigned damages snapshot 2, saved and loaded through a Store whose
	// Keyring requires signatures, instead of the unsigned snapshot 1.
	howSigned = 1 << iota
	// howFix recomputes the changed row's checksum and the header's, as
	// someone writing the database on purpose would, so that the change
	// reaches the checks behind the checksums.
	howFix
	// howAlt adds a small signed delta (the value's last byte) to a
	// number instead of setting it, makes a nullable column NULL, and
	// moves a copied row by a delta instead of to a position.
	howAlt
	// howBig lengthens a byte string to one byte over its format limit.
	howBig
)

// columnKind is the SQL type of a column a fuzz input changes, or an
// operation on its whole row.
type columnKind int

const (
	kindBytes     columnKind = iota // bytea NOT NULL
	kindNullBytes                   // bytea
	kindText                        // text (mac_key)
	kindInt16
	kindInt32
	kindInt64
	kindNullInt64 // bigint; an empty value makes it NULL
	kindBool
	kindNullBool
	kindDelete // the row is deleted
	kindCopy   // the row is copied to another position of its last key column
)

// fuzzColumn is a column a fuzz input may change.
type fuzzColumn struct {
	table string
	name  string
	kind  columnKind
	limit int // for howBig: the format's limit on the byte string; 0 for none
}

// fuzzTable is a table of a snapshot's rows, as the fuzz target changes
// and repairs them.
type fuzzTable struct {
	name string
	keys []string // the key after snapshot_id, in ORDER BY order
	cols []string // every column but crc, in the order the row's checksum takes them
	tag  byte
}

var fuzzTables = []fuzzTable{
	{name: "participants", keys: []string{"ord"}, cols: []string{"snapshot_id", "ord", "process", "kind", "state", "departed", "wait_any", "wait_timer", "sent_to", "received"}, tag: tagParticipant},
	{name: "channels", keys: []string{"ord"}, cols: []string{"snapshot_id", "ord", "sender", "receiver", "sent", "received"}, tag: tagChannel},
	{name: "messages", keys: []string{"channel_ord", "ord"}, cols: []string{"snapshot_id", "channel_ord", "ord", "type", "data"}, tag: tagMessage},
	{name: "waits", keys: []string{"participant_ord", "ord"}, cols: []string{"snapshot_id", "participant_ord", "ord", "target", "request", "type", "since_sec", "since_nsec"}, tag: tagWait},
	{name: "violations", keys: []string{"ord"}, cols: []string{"snapshot_id", "ord", "invariant", "err"}, tag: tagViolation},
}

// fuzzColumns are the columns a fuzz input chooses from by its column
// byte: every column of every table, and deleting or copying a row.
var fuzzColumns = func() []fuzzColumn {
	cs := []fuzzColumn{
		{"snapshots", "format", kindInt16, 0},
		{"snapshots", "mode", kindInt16, 0},
		{"snapshots", "start_sec", kindInt64, 0},
		{"snapshots", "start_nsec", kindInt32, 0},
		{"snapshots", "end_sec", kindInt64, 0},
		{"snapshots", "end_nsec", kindInt32, 0},
		{"snapshots", "participants", kindInt32, 0},
		{"snapshots", "channels", kindInt32, 0},
		{"snapshots", "messages", kindInt32, 0},
		{"snapshots", "waits", kindInt32, 0},
		{"snapshots", "violations", kindInt32, 0},
		{"snapshots", "receiver_counts", kindBool, 0},
		{"snapshots", "sum_sent", kindNullInt64, 0},
		{"snapshots", "sum_received", kindNullInt64, 0},
		{"snapshots", "checksum", kindInt64, 0},
		{"snapshots", "complete", kindBool, 0},
		{"snapshots", "id", kindInt64, 0},
		{"snapshots", "mac_key", kindText, 0},
		{"snapshots", "mac", kindNullBytes, 0},
	}
	kinds := map[string]fuzzColumn{
		"process": {kind: kindBytes, limit: persistence.MaxNameSize}, "kind": {kind: kindBytes, limit: persistence.MaxNameSize},
		"state": {kind: kindNullBytes}, "departed": {kind: kindBool}, "wait_any": {kind: kindNullBool}, "wait_timer": {kind: kindNullBool},
		"sender": {kind: kindBytes, limit: persistence.MaxNameSize}, "receiver": {kind: kindBytes, limit: persistence.MaxNameSize},
		"sent": {kind: kindInt64}, "received": {kind: kindInt64}, "sent_to": {kind: kindInt64},
		"type": {kind: kindBytes, limit: persistence.MaxNameSize}, "data": {kind: kindNullBytes},
		"target": {kind: kindBytes, limit: persistence.MaxNameSize}, "request": {kind: kindInt64},
		"since_sec": {kind: kindInt64}, "since_nsec": {kind: kindInt32},
		"invariant": {kind: kindBytes, limit: persistence.MaxNameSize}, "err": {kind: kindBytes, limit: persistence.MaxViolationSize},
		"snapshot_id": {kind: kindInt64}, "ord": {kind: kindInt32}, "channel_ord": {kind: kindInt32}, "participant_ord": {kind: kindInt32},
	}
	for _, t := range fuzzTables {
		for _, name := range append(t.cols, "crc") {
			c := kinds[name]
			if name == "crc" {
				c.kind = kindInt64
			}
			cs = append(cs, fuzzColumn{t.name, name, c.kind, c.limit})
		}
		cs = append(cs, fuzzColumn{t.name, "", kindDelete, 0}, fuzzColumn{t.name, "", kindCopy, 0})
	}
	return cs
}()

// rowsFixture is what FuzzLoadRows sets up once per process: a schema
// holding snapshot 1, unsigned, and snapshot 2, signed; a Store without a
// Keyring and one whose Keyring requires signatures; one connection that
// every input's transaction runs on; and the key of every row.
type rowsFixture struct {
	plain, signed *Store
	conn          *pgxpool.Conn
	want          map[snapshot.SnapshotID]*snapshot.Global
	rows          map[string][][]int32 // of each table, the key after snapshot_id of each row (the same for both snapshots)
}

// fuzzShape is small, and has what every table and check needs: a
// departed participant, participants with and without waits, channels
// with messages, violations, receiver counts and sums.
var fuzzShape = storetest.Shape{Participants: 4, StateSize: 5, Channels: 3, InFlight: 2, MessageSize: 3, Waiting: 2, Edges: 2, Violations: 2, ReceiverCounts: true, Sums: true}

func fuzzGlobal(id snapshot.SnapshotID) *snapshot.Global {
	g := storetest.NewGlobal(id, fuzzShape)
	// An empty state and a nil message: NULL and empty are distinct.
	g.Participants[1].State = []byte{}
	g.Channels[0].Messages[1].Payload = persistence.RecordedMessage{Type: "nil"}
	return g
}

func newRowsFixture(f *testing.F) *rowsFixture {
	ctx := context.Background()
	schema := fmt.Sprintf("fuzz_rows_%d_%08x", os.Getpid(), rand.Uint32())
	_, url := testenv.PostgresStore(f, schema)
	open := func(opts ...Option) *Store {
		s, err := Open(ctx, url, opts...)
		require.NoError(f, err)
		f.Cleanup(func() { s.Close() })
		return s
	}
	keys, err := persistence.NewKeyring(persistence.Key{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")})
	require.NoError(f, err)
	fx := &rowsFixture{plain: open(), signed: open(WithKeyring(keys.RequireSigned())), want: map[snapshot.SnapshotID]*snapshot.Global{}, rows: map[string][][]int32{}}
	for id, s := range map[snapshot.SnapshotID]*Store{1: fx.plain, 2: fx.signed} {
		fx.want[id] = fuzzGlobal(id)
		require.NoError(f, s.Save(ctx, fuzzGlobal(id)))
	}
	for _, t := range fuzzTables {
		rows, err := fx.plain.pool.Query(ctx, `SELECT `+strings.Join(t.keys, ", ")+` FROM `+fx.plain.t.qualified(t.name)+
			` WHERE snapshot_id = 1 ORDER BY `+strings.Join(t.keys, ", "))
		require.NoError(f, err)
		keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]int32, error) {
			k := make([]int32, len(t.keys))
			dest := make([]any, len(k))
			for i := range k {
				dest[i] = &k[i]
			}
			return k, r.Scan(dest...)
		})
		require.NoError(f, err)
		require.NotEmpty(f, keys, t.name)
		fx.rows[t.name] = keys
	}
	fx.conn, err = fx.plain.pool.Acquire(ctx)
	require.NoError(f, err)
	f.Cleanup(fx.conn.Release)
	return fx
}

func (t tables) qualified(name string) string { return pgx.Identifier{t.snapshots[0], name}.Sanitize() }

// FuzzLoadRows damages one column of one row of a stored snapshot (or
// deletes or copies a row), as a faulty disk, a careless operator or
// someone writing the database on purpose might, and loads it, in one
// transaction rolled back after each input. The load returns a snapshot
// that passes Verify and the checks of a Save, or an error of the damage
// classes (ErrCorrupt naming a table of the schema, ErrFormatVersion,
// ErrUnauthentic, ErrNotFound for a header moved away); it never panics,
// and never allocates more than maxLoadAlloc, whatever a header counts.
// What loads is the snapshot saved, unless the checksums were recomputed
// (howFix) of an unsigned snapshot: a signed one must load as signed or
// not at all.
//
// The input is the column changed (an index into fuzzColumns), the row
// (an index into the table's rows of the snapshot), how (the how* bits)
// and the value: a byte string as is, a number from up to 8 bytes,
// big-endian (or a delta from the last byte, with howAlt; a nullable
// number is NULL from none), a boolean from the low bit.
//
//	eval "$(bash .ci/postgres.sh)"
//	go test ./persistence/postgres -run '^$' -fuzz '^FuzzLoadRows$' -fuzztime 3m -fuzzminimizetime 1000x -parallel 1
func FuzzLoadRows(f *testing.F) {
	fx := newRowsFixture(f)
	num := func(v int64) []byte {
		return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
	}
	for i, c := range fuzzColumns {
		var v []byte
		switch c.kind {
		case kindBytes, kindNullBytes, kindText:
			v = []byte("node-1/account-000001")
		case kindBool, kindNullBool, kindNullInt64:
			v = []byte{0}
		default:
			v = []byte{1}
		}
		for _, how := range []byte{0, howFix | howAlt, howSigned | howFix | howAlt} {
			f.Add(byte(i), byte(i), how, v)
		}
		if c.limit > 0 {
			f.Add(byte(i), byte(0), byte(howFix|howBig), v)
		}
	}
	column := func(table, name string) byte {
		for i, c := range fuzzColumns {
			if c.table == table && c.name == name {
				return byte(i)
			}
		}
		panic("no column " + table + "." + name)
	}
	// Headers that claim far more rows than there are, with the header's
	// checksum recomputed, so that only the rows disprove them.
	for _, name := range []string{"participants", "channels", "messages", "waits", "violations"} {
		for _, n := range []int64{math.MaxInt32, persistence.MaxParticipants, persistence.MaxMessages, persistence.MaxViolations} {
			f.Add(column("snapshots", name), byte(0), byte(howFix), num(n))
		}
	}
	for _, format := range []int64{1, 2, 3, rowFormat + 1} {
		f.Add(column("snapshots", "format"), byte(0), byte(howFix), num(format))
	}
	f.Add(column("snapshots", "mac_key"), byte(0), byte(howSigned|howAlt), []byte(nil))
	f.Add(column("snapshots", "mac_key"), byte(0), byte(howSigned), []byte("k2"))
	f.Add(column("channels", "sent"), byte(1), byte(howFix), num(math.MaxInt64))
	f.Add(column("channels", "received"), byte(1), byte(howFix), num(-1))
	f.Add(column("waits", "since_nsec"), byte(2), byte(howFix), num(1e9))
	f.Add(column("waits", "participant_ord"), byte(3), byte(howFix), num(3))
	f.Add(column("participants", "wait_any"), byte(3), byte(howFix), []byte{1})
	f.Add(column("messages", "channel_ord"), byte(5), byte(howFix|howAlt), []byte{0xff})
	// Receiver counts that no longer balance, or that a snapshot claims
	// to keep none of, with the checksums recomputed.
	f.Add(column("participants", "sent_to"), byte(1), byte(howFix|howAlt), []byte{1})
	f.Add(column("participants", "received"), byte(2), byte(howFix), num(-1))
	f.Add(column("snapshots", "receiver_counts"), byte(0), byte(howFix), []byte{0})
	// Sums that no longer balance, one of them NULL, or at the ends of
	// their range, with the checksums recomputed.
	f.Add(column("snapshots", "sum_sent"), byte(0), byte(howFix|howAlt), []byte{1})
	f.Add(column("snapshots", "sum_received"), byte(0), byte(howFix|howAlt), []byte{0xff})
	f.Add(column("snapshots", "sum_received"), byte(0), byte(howFix), []byte(nil))
	f.Add(column("snapshots", "sum_sent"), byte(0), byte(howSigned|howFix), []byte(nil))
	f.Add(column("snapshots", "sum_sent"), byte(0), byte(howFix), num(-1))
	f.Add(column("snapshots", "sum_received"), byte(0), byte(howFix), num(math.MinInt64))

	f.Fuzz(func(t *testing.T, col, row, how byte, value []byte) {
		fx.run(t, fuzzColumns[int(col)%len(fuzzColumns)], int(row), how, value)
	})
}

// run changes c in row (of the snapshot how chooses) as how says, and
// loads the snapshot, in one transaction that it rolls back.
func (fx *rowsFixture) run(t *testing.T, c fuzzColumn, row int, how byte, value []byte) {
	ctx := context.Background()
	id, s := snapshot.SnapshotID(1), fx.plain
	if how&howSigned != 0 {
		id, s = 2, fx.signed
	}
	tx, err := fx.conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	if !fx.change(ctx, tx, id, c, row, how, value) {
		return // a change the database refuses (a key taken, a number out of range)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g, err := s.load(s.call(ctx, "fuzz"), tx, id)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > maxLoadAlloc {
		t.Fatalf("loading allocated %d bytes, more than %d", n, maxLoadAlloc)
	}
	var ce *persistence.CorruptError
	switch {
	case err == nil:
		require.NoError(t, g.Verify())
		require.NoError(t, checkSave(g), "what loads can be saved again")
		if how&howFix == 0 || how&howSigned != 0 {
			require.NoError(t, storetest.Equal(fx.want[id], g), "only the snapshot saved loads")
		}
	case errors.As(err, &ce):
		require.True(t, strings.HasPrefix(ce.File, s.schema+"."), "a damaged row names its table: %v", err)
	case errors.Is(err, persistence.ErrFormatVersion), errors.Is(err, persistence.ErrUnauthentic), errors.Is(err, persistence.ErrNotFound):
	default:
		t.Fatalf("load: an error of no damage class: %v", err)
	}
}

// change makes the change, and with howFix recomputes the checksums it
// broke. It returns false if the database refuses the change.
func (fx *rowsFixture) change(ctx context.Context, tx pgx.Tx, id snapshot.SnapshotID, c fuzzColumn, row int, how byte, value []byte) bool {
	q := fx.plain.t.qualified(c.table)
	if c.table == "snapshots" {
		v, set := columnValue(c, how, value)
		if _, err := tx.Exec(ctx, `UPDATE `+q+` SET `+c.name+` = `+set+` WHERE id = $1`, int64(id), v); err != nil {
			return false
		}
		if how&howFix != 0 && c.name != "checksum" {
			return fx.fixHeader(ctx, tx, id)
		}
		return true
	}
	t := fuzzTables[slices.IndexFunc(fuzzTables, func(t fuzzTable) bool { return t.name == c.table })]
	keys := fx.rows[t.name][row%len(fx.rows[t.name])]
	args := []any{int64(id)}
	where := `snapshot_id = $1`
	for i, k := range t.keys {
		args = append(args, keys[i])
		where += fmt.Sprintf(` AND %s = $%d`, k, len(args))
	}
	returning := ` RETURNING ` + strings.Join(t.cols, ", ")
	var sql string
	switch c.kind {
	case kindDelete:
		sql, returning = `DELETE FROM `+q+` WHERE `+where, ""
	case kindCopy:
		// The copy takes another position of the last key column.
		last := t.keys[len(t.keys)-1]
		v, set := columnValue(fuzzColumn{name: last, kind: kindInt32}, how, value)
		args = append(args, v)
		cols := append(t.cols[:len(t.cols):len(t.cols)], "crc")
		sel := slices.Clone(cols)
		sel[slices.Index(sel, last)] = strings.ReplaceAll(set, "$2", fmt.Sprintf("$%d", len(args)))
		sql = `INSERT INTO ` + q + ` (` + strings.Join(cols, ", ") + `) SELECT ` + strings.Join(sel, ", ") + ` FROM ` + q + ` WHERE ` + where
	default:
		v, set := columnValue(c, how, value)
		args = append(args, v)
		sql = `UPDATE ` + q + ` SET ` + c.name + ` = ` + strings.ReplaceAll(set, "$2", fmt.Sprintf("$%d", len(args))) + ` WHERE ` + where
	}
	if how&howFix == 0 || c.kind == kindDelete || c.name == "crc" {
		if _, err := tx.Exec(ctx, sql+returning, args...); err != nil {
			return false
		}
		if how&howFix != 0 {
			return fx.fixHeader(ctx, tx, id)
		}
		return true
	}
	// The changed row's checksum, computed as the loader does, from the
	// row as the change left it; then the header's.
	rows, err := tx.Query(ctx, sql+returning, args...)
	if err != nil {
		return false
	}
	var (
		newKeys []any
		crc     uint32
		h       hasher
	)
	for rows.Next() {
		crc, newKeys, err = rowSum(&h, t, rows)
		if err != nil {
			return false
		}
	}
	if rows.Close(); rows.Err() != nil {
		return false
	}
	where = `snapshot_id = $2`
	for i, k := range t.keys {
		where += fmt.Sprintf(` AND %s = $%d`, k, i+3)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+q+` SET crc = $1 WHERE `+where, append([]any{int64(crc)}, newKeys...)...); err != nil {
		return false
	}
	return fx.fixHeader(ctx, tx, id)
}

// columnValue returns the argument that sets c as how says, and the SQL
// expression that sets it from $2.
func columnValue(c fuzzColumn, how byte, value []byte) (any, string) {
	var n uint64
	for _, b := range value[:min(8, len(value))] {
		n = n<<8 | uint64(b)
	}
	alt := how&howAlt != 0
	switch c.kind {
	case kindBytes, kindNullBytes:
		if alt && c.kind == kindNullBytes {
			return nil, `$2`
		}
		if how&howBig != 0 && c.limit > 0 && len(value) <= c.limit {
			value = append(value[:len(value):len(value)], make([]byte, c.limit+1-len(value))...)
		}
		if value == nil {
			value = []byte{}
		}
		return value, `$2`
	case kindText:
		if alt {
			return nil, `$2`
		}
		return string(value), `$2`
	case kindBool, kindNullBool:
		if alt && c.kind == kindNullBool {
			return nil, `$2`
		}
		return n&1 != 0, `$2`
	}
	if c.kind == kindNullInt64 && len(value) == 0 {
		return nil, `$2`
	}
	if alt {
		return int64(int8(n)), c.name + ` + $2`
	}
	switch c.kind {
	case kindInt16:
		return int16(n), `$2`
	case kindInt32:
		return int32(n), `$2`
	default:
		return int64(n), `$2`
	}
}

// rowSum scans a row of t, as RETURNING gives t.cols, and returns its
// checksum in row format 4, computed as the loader computes it, and its
// key (snapshot_id and t.keys).
func rowSum(h *hasher, t fuzzTable, rows pgx.Rows) (uint32, []any, error) {
	var (
		id                 int64
		a, b               int32
		x, y, z            pgtype.DriverBytes
		u, v               int64
		flag               bool
		waitAny, waitTimer pgtype.Bool
		nsec               int32
	)
	switch t.tag {
	case tagParticipant:
		if err := rows.Scan(&id, &a, &x, &y, &z, &flag, &waitAny, &waitTimer, &u, &v); err != nil {
			return 0, nil, err
		}
		var f byte
		if waitAny.Valid && waitTimer.Valid {
			f = waitFlags(&snapshot.Waits{Any: waitAny.Bool, Timer: waitTimer.Bool})
		}
		return participantSum(h, rowFormat, id, a, x, y, z, flag, f, uint64(u), uint64(v)), []any{id, a}, nil
	case tagChannel:
		if err := rows.Scan(&id, &a, &x, &y, &u, &v); err != nil {
			return 0, nil, err
		}
		return channelSum(h, id, a, x, y, uint64(u), uint64(v)), []any{id, a}, nil
	case tagMessage:
		if err := rows.Scan(&id, &a, &b, &x, &y); err != nil {
			return 0, nil, err
		}
		return messageSum(h, id, a, b, x, y), []any{id, a, b}, nil
	case tagWait:
		if err := rows.Scan(&id, &a, &b, &x, &u, &y, &v, &nsec); err != nil {
			return 0, nil, err
		}
		return waitSum(h, id, a, b, x, uint64(u), y, v, nsec), []any{id, a, b}, nil
	default:
		if err := rows.Scan(&id, &a, &x, &y); err != nil {
			return 0, nil, err
		}
		return violationSum(h, id, a, x, y), []any{id, a}, nil
	}
}

// fixHeader recomputes the header's checksum of snapshot id from its
// columns and its rows' checksums, in the loader's order. It returns
// false if the snapshot has no header.
func (fx *rowsFixture) fixHeader(ctx context.Context, tx pgx.Tx, id snapshot.SnapshotID) bool {
	t := fx.plain.t
	crcs := func(table, order string) string {
		return `(SELECT coalesce(array_agg(crc ORDER BY ` + order + `), '{}') FROM ` + t.qualified(table) + ` WHERE snapshot_id = $1)`
	}
	h := header{id: int64(id)}
	var (
		sums                 [5][]int64
		sumSent, sumReceived *int64
	)
	err := tx.QueryRow(ctx, `SELECT format, mode, start_sec, start_nsec, end_sec, end_nsec, participants, channels, messages, waits, violations, receiver_counts, sum_sent, sum_received, `+
		crcs("participants", "ord")+`, `+crcs("channels", "ord")+`, `+crcs("messages", "channel_ord, ord")+`, `+
		crcs("waits", "participant_ord, ord")+`, `+crcs("violations", "ord")+`
		FROM `+t.qSnapshots+` WHERE id = $1`, int64(id)).Scan(
		&h.format, &h.mode, &h.startSec, &h.startNsec, &h.endSec, &h.endNsec, &h.participants, &h.channels, &h.messages, &h.waits, &h.violations, &h.receiverCounts,
		&sumSent, &sumReceived, &sums[0], &sums[1], &sums[2], &sums[3], &sums[4])
	if err != nil {
		return false
	}
	// Half the sums (one NULL) are summed as none: Load refuses them
	// before it sums anything.
	if sumSent != nil && sumReceived != nil {
		h.sums = &snapshot.SumCounts{Sent: uint64(*sumSent), Received: uint64(*sumReceived)}
	}
	sum := newHeaderSum(h)
	for _, s := range sums {
		for _, crc := range s {
			sum.add(uint32(crc))
		}
	}
	_, err = tx.Exec(ctx, `UPDATE `+t.qSnapshots+` SET checksum = $2 WHERE id = $1`, int64(id), int64(sum.sum()))
	return err == nil
}
