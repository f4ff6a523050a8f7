package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/postgres"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.ProtoActorTimers) }

// envURL names the environment variable holding the test server's URL.
const envURL = "ACTORSNAP_TEST_POSTGRES"

// serverURL returns the test server's URL, or skips the test; where
// ACTORSNAP_REQUIRE_POSTGRES is set (CI), a missing server fails it.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(envURL)
	if u == "" && os.Getenv("ACTORSNAP_REQUIRE_POSTGRES") != "" {
		t.Fatal(envURL + " is not set, and ACTORSNAP_REQUIRE_POSTGRES says the PostgreSQL tests must run")
	}
	if u == "" {
		t.Skip(envURL + ` is not set, so there is no PostgreSQL server to test against. ` +
			`From the module root, run: eval "$(bash .ci/postgres.sh)" && go test -race ./persistence/postgres/ ` +
			`(the script starts a local server, as root installing PostgreSQL if needed, and prints ` +
			`export ` + envURL + `=postgres://postgres@127.0.0.1:5432/actorsnap_test?sslmode=disable)`)
	}
	return u
}

// exec runs sql on the test server in a connection of its own.
func exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, serverURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err, sql)
}

// query returns the single column of the rows sql selects.
func query[T any](t testing.TB, sql string, args ...any) []T {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, serverURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql, args...)
	require.NoError(t, err, sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	require.NoError(t, err, sql)
	return out
}

// withParams returns base with the query parameters params set.
func withParams(t testing.TB, base string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	// pgx does not read + as a space in a URL's query.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

// freshSchema returns the name of a schema no test uses, dropped with
// everything in it when the test ends.
func freshSchema(t testing.TB) string {
	t.Helper()
	serverURL(t)
	name := fmt.Sprintf("test_%016x", rand.Uint64())
	t.Cleanup(func() { exec(t, `DROP SCHEMA IF EXISTS `+name+` CASCADE`) })
	return name
}

// open opens a Store on schema, closed when the test ends (before its
// schema is dropped).
func open(t testing.TB, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), serverURL(t), postgres.WithSchema(schema))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	serverURL(t)
	t.Parallel()
	storetest.Run(t, func(t *testing.T) persistence.Store { return open(t, freshSchema(t)) })
}

// TestTwoStores saves through two Stores on one schema at once, as two
// cluster members would: distinct ids all succeed, of the Saves racing for
// one id exactly one does, and both stores read the same.
func TestTwoStores(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	stores := []*postgres.Store{open(t, schema), open(t, schema)}
	shape := storetest.Shape{Participants: 200, StateSize: 100, Channels: 100, InFlight: 2, MessageSize: 32}
	const workers, each, contested = 6, 4, snapshot.SnapshotID(1000)
	start := make(chan struct{})
	errs := make([]error, workers)
	won := make([]bool, workers)
	var wg sync.WaitGroup
	for w := range workers {
		s := stores[w%2]
		wg.Go(func() {
			<-start
			for i := range each {
				if err := s.Save(ctx, storetest.NewGlobal(snapshot.SnapshotID(1+w*each+i), shape)); err != nil {
					errs[w] = err
					return
				}
			}
			err := s.Save(ctx, storetest.NewGlobal(contested, storetest.Shape{Participants: 2 + w, StateSize: 10}))
			switch {
			case err == nil:
				won[w] = true
			case !errors.Is(err, persistence.ErrExists):
				errs[w] = err
			}
		})
	}
	close(start)
	wg.Wait()
	for w, err := range errs {
		require.NoError(t, err, "worker %d", w)
	}
	require.Equal(t, 1, countTrue(won), "exactly one Save of the contested id succeeds: %v", won)
	winner := slices.Index(won, true)
	var want []snapshot.SnapshotID
	for id := snapshot.SnapshotID(1); id <= workers*each; id++ {
		want = append(want, id)
	}
	want = append(want, contested)
	for i, s := range stores {
		ids, err := s.List(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, ids, "store %d", i)
		for _, id := range want {
			g, err := s.Load(ctx, id)
			require.NoError(t, err, "store %d, snapshot %d", i, id)
			wantG := storetest.NewGlobal(id, shape)
			if id == contested {
				wantG = storetest.NewGlobal(contested, storetest.Shape{Participants: 2 + winner, StateSize: 10})
			}
			require.NoError(t, storetest.Equal(wantG, g), "store %d, snapshot %d", i, id)
		}
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// TestCorrupt damages one stored snapshot in SQL, as a faulty disk, a
// careless operator or a bug elsewhere might, and checks that the damage
// is reported, naming the table and row, never loaded, and not skipped by
// Latest; and that Retain neither counts nor deletes the damaged snapshot.
func TestCorrupt(t *testing.T) {
	serverURL(t)
	t.Parallel()
	// storetest.WithWaits: 12 participants, the last departed, the first 8
	// with 3 wait-for edges each, so edge (participant p, j) is row 3p+j;
	// 16 channels of 3 messages each, so message (channel c, j) is row
	// 3c+j; 2 violations.
	type damage struct {
		name   string
		sql    string // %[1]s is the schema
		table  string
		offset int64
		reason string
	}
	tests := []damage{
		{"state byte",
			`UPDATE %[1]s.participants SET state = set_byte(state, 7, get_byte(state, 7) # 1) WHERE snapshot_id = 5 AND ord = 3`,
			"participants", 3, "participant 3: checksum mismatch"},
		{"kind",
			`UPDATE %[1]s.participants SET kind = 'auditor' WHERE snapshot_id = 5 AND ord = 0`,
			"participants", 0, "participant 0: checksum mismatch"},
		{"departed flag",
			`UPDATE %[1]s.participants SET departed = false WHERE snapshot_id = 5 AND ord = 11`,
			"participants", 11, "checksum mismatch"},
		{"row copied from another snapshot with its checksum",
			`UPDATE %[1]s.participants p SET state = q.state, crc = q.crc FROM %[1]s.participants q
			 WHERE p.snapshot_id = 5 AND p.ord = 2 AND q.snapshot_id = 4 AND q.ord = 2`,
			"participants", 2, "checksum mismatch"},
		{"participant missing",
			`DELETE FROM %[1]s.participants WHERE snapshot_id = 5 AND ord = 11`,
			"participants", 11, "11 participant rows, the header counts 12"},
		{"channel counters",
			`UPDATE %[1]s.channels SET sent = sent + 1, received = received + 1 WHERE snapshot_id = 5 AND ord = 4`,
			"channels", 4, "channel 4: checksum mismatch"},
		{"message data byte",
			`UPDATE %[1]s.messages SET data = set_byte(data, 0, get_byte(data, 0) # 128) WHERE snapshot_id = 5 AND channel_ord = 2 AND ord = 1`,
			"messages", 7, "message (channel 2, 1): checksum mismatch"},
		{"message missing",
			`DELETE FROM %[1]s.messages WHERE snapshot_id = 5 AND channel_ord = 0 AND ord = 2`,
			"messages", 2, "out of place"},
		{"message added",
			`INSERT INTO %[1]s.messages SELECT snapshot_id, channel_ord, 3, type, data, crc FROM %[1]s.messages
			 WHERE snapshot_id = 5 AND channel_ord = 15 AND ord = 2`,
			"messages", 48, "out of place"},
		{"header mode",
			`UPDATE %[1]s.snapshots SET mode = 1 WHERE id = 5`,
			"snapshots", 0, "header checksum mismatch"},
		{"header time",
			`UPDATE %[1]s.snapshots SET end_nsec = end_nsec + 1 WHERE id = 5`,
			"snapshots", 0, "header checksum mismatch"},
		{"header checksum",
			`UPDATE %[1]s.snapshots SET checksum = checksum # 1 WHERE id = 5`,
			"snapshots", 0, "header checksum mismatch"},
		{"rows swapped with their checksums",
			`UPDATE %[1]s.participants SET ord = -1 WHERE snapshot_id = 5 AND ord = 0;
			 UPDATE %[1]s.participants SET ord = 0 WHERE snapshot_id = 5 AND ord = 1;
			 UPDATE %[1]s.participants SET ord = 1 WHERE snapshot_id = 5 AND ord = -1`,
			"participants", 0, "checksum mismatch"},
		{"wait flag",
			`UPDATE %[1]s.participants SET wait_timer = NOT wait_timer WHERE snapshot_id = 5 AND ord = 2`,
			"participants", 2, "participant 2: checksum mismatch"},
		{"waits taken away",
			`UPDATE %[1]s.participants SET wait_any = NULL, wait_timer = NULL WHERE snapshot_id = 5 AND ord = 5`,
			"participants", 5, "checksum mismatch"},
		{"half the wait flags",
			`UPDATE %[1]s.participants SET wait_any = NULL WHERE snapshot_id = 5 AND ord = 1`,
			"participants", 1, "must both be NULL, or neither"},
		{"wait type",
			`UPDATE %[1]s.waits SET type = 'x' WHERE snapshot_id = 5 AND participant_ord = 1 AND ord = 0`,
			"waits", 3, "wait (participant 1, 0): checksum mismatch"},
		{"wait since",
			`UPDATE %[1]s.waits SET since_nsec = since_nsec + 1 WHERE snapshot_id = 5 AND participant_ord = 7 AND ord = 2`,
			"waits", 23, "checksum mismatch"},
		{"wait missing",
			`DELETE FROM %[1]s.waits WHERE snapshot_id = 5 AND participant_ord = 0 AND ord = 1`,
			"waits", 1, "out of place"},
		{"wait moved to a participant without waits",
			`UPDATE %[1]s.waits SET participant_ord = 10 WHERE snapshot_id = 5 AND participant_ord = 7`,
			"waits", 21, "out of place"},
		{"wait rows the header does not count",
			`UPDATE %[1]s.snapshots SET waits = 0 WHERE id = 5`,
			"waits", 0, "the header counts none"},
		{"violation error",
			`UPDATE %[1]s.violations SET err = 'x' WHERE snapshot_id = 5 AND ord = 1`,
			"violations", 1, "violation 1: checksum mismatch"},
		{"violation missing",
			`DELETE FROM %[1]s.violations WHERE snapshot_id = 5 AND ord = 1`,
			"violations", 1, "1 violation rows, the header counts 2"},
		{"header violation count",
			`UPDATE %[1]s.snapshots SET violations = 3 WHERE id = 5`,
			"violations", 2, "2 violation rows, the header counts 3"},
		{"receiver counts claimed",
			`UPDATE %[1]s.snapshots SET receiver_counts = true WHERE id = 5`,
			"snapshots", 0, "header checksum mismatch"},
		{"sums claimed",
			`UPDATE %[1]s.snapshots SET sum_sent = 48, sum_received = 0 WHERE id = 5`,
			"snapshots", 0, "header checksum mismatch"},
	}
	// The same shape keeping receiver counts: participant p's received
	// count is p<<33 + 7, its sent count that plus the messages in flight
	// to it; the departed one's are 0.
	counted := storetest.WithWaits
	counted.ReceiverCounts = true
	countedTests := []damage{
		{"sent count",
			`UPDATE %[1]s.participants SET sent_to = sent_to + 1 WHERE snapshot_id = 5 AND ord = 3`,
			"participants", 3, "participant 3: checksum mismatch"},
		{"received count's high bit",
			`UPDATE %[1]s.participants SET received = received # (1::bigint << 63) WHERE snapshot_id = 5 AND ord = 6`,
			"participants", 6, "participant 6: checksum mismatch"},
		{"counts given to the departed",
			`UPDATE %[1]s.participants SET sent_to = 1, received = 1 WHERE snapshot_id = 5 AND ord = 11`,
			"participants", 11, "participant 11: checksum mismatch"},
		{"receiver counts disowned",
			`UPDATE %[1]s.snapshots SET receiver_counts = false WHERE id = 5`,
			"participants", 0, "participant 0: sent_to 10 and received 7, but the snapshot keeps no receiver counts"},
	}
	// The same shape counted in sums: received 5<<40 + 12 before the
	// records, and that plus the 48 messages in flight sent.
	summed := storetest.WithWaits
	summed.Sums = true
	summedTests := []damage{
		{"sum sent",
			`UPDATE %[1]s.snapshots SET sum_sent = sum_sent + 1 WHERE id = 5`,
			"snapshots", 0, "header checksum mismatch"},
		{"sum received's high bit",
			`UPDATE %[1]s.snapshots SET sum_received = sum_received # (1::bigint << 63) WHERE id = 5`,
			"snapshots", 0, "header checksum mismatch"},
		{"sums taken away",
			`UPDATE %[1]s.snapshots SET sum_sent = NULL, sum_received = NULL WHERE id = 5`,
			"snapshots", 0, "header checksum mismatch"},
		{"half the sums",
			`UPDATE %[1]s.snapshots SET sum_received = NULL WHERE id = 5`,
			"snapshots", 0, "sum_sent and sum_received must both be NULL, or neither"},
	}
	for _, set := range []struct {
		shape storetest.Shape
		tests []damage
	}{{storetest.WithWaits, tests}, {counted, countedTests}, {summed, summedTests}} {
		for _, tt := range set.tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				schema := freshSchema(t)
				s := open(t, schema)
				require.NoError(t, s.Save(ctx, storetest.NewGlobal(4, set.shape)))
				require.NoError(t, s.Save(ctx, storetest.NewGlobal(5, set.shape)))
				exec(t, fmt.Sprintf(tt.sql, schema))

				_, err := s.Load(ctx, 5)
				requireCorrupt(t, err, 5, schema+"."+tt.table, tt.offset, tt.reason)
				_, err = s.Latest(ctx)
				requireCorrupt(t, err, 5, schema+"."+tt.table, tt.offset, tt.reason)

				g, err := s.Load(ctx, 4)
				require.NoError(t, err)
				require.NoError(t, storetest.Equal(storetest.NewGlobal(4, set.shape), g))
				require.NoError(t, s.Retain(ctx, 1))
				ids, err := s.List(ctx)
				require.NoError(t, err)
				assert.Equal(t, []snapshot.SnapshotID{4, 5}, ids, "Retain neither counts nor deletes the damaged snapshot")
			})
		}
	}
}

// requireCorrupt requires err to report damage to snapshot id, at the
// row offset of table.
func requireCorrupt(t *testing.T, err error, id snapshot.SnapshotID, table string, offset int64, reason string) {
	t.Helper()
	require.ErrorIs(t, err, persistence.ErrCorrupt)
	var ce *persistence.CorruptError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, table, ce.File, "the error names the table: %v", err)
	assert.Equal(t, offset, ce.Offset, "the error names the row: %v", err)
	assert.Contains(t, ce.Reason, reason)
	assert.Contains(t, ce.Reason, fmt.Sprintf("snapshot %d:", id))
}

// TestSaveCutShort stops a Save at each stage of its transaction, by an
// error, by cancelling its context, or by killing its server session, and
// checks that nothing of it is visible and that the id can be saved after.
func TestSaveCutShort(t *testing.T) {
	serverURL(t)
	t.Parallel()
	errInjected := errors.New("injected")
	for _, stage := range postgres.SaveStages {
		for _, how := range []string{"error", "cancel", "kill"} {
			t.Run(stage+"/"+how, func(t *testing.T) {
				t.Parallel()
				s := open(t, freshSchema(t))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.WithWaits)))
				postgres.SetSaveHook(s, func(ctx context.Context, at string, tx pgx.Tx) error {
					if at != stage {
						return nil
					}
					switch how {
					case "error":
						return errInjected
					case "cancel":
						cancel()
						return nil
					default:
						_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
						return err
					}
				})
				err := s.Save(ctx, storetest.NewGlobal(2, storetest.WithWaits))
				require.Error(t, err)
				switch how {
				case "error":
					require.ErrorIs(t, err, errInjected)
				case "cancel":
					require.ErrorIs(t, err, context.Canceled)
				}
				postgres.SetSaveHook(s, nil)

				bg := context.Background()
				ids, err := s.List(bg)
				require.NoError(t, err)
				assert.Equal(t, []snapshot.SnapshotID{1}, ids)
				_, err = s.Load(bg, 2)
				require.ErrorIs(t, err, persistence.ErrNotFound)
				g, err := s.Latest(bg)
				require.NoError(t, err)
				require.NoError(t, storetest.Equal(storetest.NewGlobal(1, storetest.WithWaits), g))
				require.NoError(t, s.Save(bg, storetest.NewGlobal(2, storetest.WithWaits)))
				g, err = s.Load(bg, 2)
				require.NoError(t, err)
				require.NoError(t, storetest.Equal(storetest.NewGlobal(2, storetest.WithWaits), g))
			})
		}
	}
}

// TestMigrationsConcurrent opens several Stores on one new schema at once,
// as processes starting together would: all succeed, the migrations are
// applied once, and opening again changes nothing.
func TestMigrationsConcurrent(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	const openers = 8
	start := make(chan struct{})
	stores := make([]*postgres.Store, openers)
	errs := make([]error, openers)
	var wg sync.WaitGroup
	for i := range openers {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = postgres.Open(ctx, serverURL(t), postgres.WithSchema(schema))
		})
	}
	close(start)
	wg.Wait()
	for i, s := range stores {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
		require.NoError(t, errs[i], "opener %d", i)
	}
	var want []int32
	for v := int32(1); v <= postgres.SchemaVersion; v++ {
		want = append(want, v)
	}
	assert.Equal(t, want, migrations(t, schema))
	require.NoError(t, stores[0].Save(ctx, storetest.NewGlobal(1, storetest.Small)))

	again := open(t, schema)
	assert.Equal(t, want, migrations(t, schema), "opening a migrated schema applies nothing")
	g, err := again.Load(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(storetest.NewGlobal(1, storetest.Small), g))
}

// schemaV2 returns a fresh schema holding testdata/schema-v2.sql: a
// store of schema version 2 with one snapshot, as an earlier build left
// it.
func schemaV2(t *testing.T) string { return schemaFrom(t, "testdata/schema-v2.sql") }

// schemaV4 returns a fresh schema holding testdata/schema-v4.sql: a
// store of schema version 4 with two snapshots in row format 2, as the
// build before version 5 left it.
func schemaV4(t *testing.T) string { return schemaFrom(t, "testdata/schema-v4.sql") }

// schemaV5 returns a fresh schema holding testdata/schema-v5.sql: a
// store of schema version 5 with two snapshots in row format 3, as the
// build before version 6 left it.
func schemaV5(t *testing.T) string { return schemaFrom(t, "testdata/schema-v5.sql") }

// schemaFrom returns a fresh schema made by the SQL of fixture, in which
// {schema} stands for the schema's quoted name.
func schemaFrom(t *testing.T, fixture string) string {
	t.Helper()
	schema := freshSchema(t)
	sql, err := os.ReadFile(fixture)
	require.NoError(t, err)
	exec(t, strings.ReplaceAll(string(sql), "{schema}", pgx.Identifier{schema}.Sanitize()))
	return schema
}

// TestSchemaVersion2 opens a schema of version 2 holding a snapshot in
// row format 1, as the build before version 3 left it
// (testdata/schema-v2.sql, kept as written): with MustExist it is read as
// it is, and changes nothing; opened to write, it is migrated, and its
// snapshot lives alongside those with waits.
func TestSchemaVersion2(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := schemaV2(t)
	old := storetest.NewGlobal(7, storetest.Small)

	u := withParams(t, serverURL(t), map[string]string{"schema": schema})
	ro, err := persistence.OpenURL(ctx, u, persistence.MustExist())
	require.NoError(t, err)
	defer ro.(*postgres.Store).Close()
	g, err := ro.Load(ctx, 7)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(old, g))
	g, err = ro.Latest(ctx)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(old, g))
	require.ErrorContains(t, ro.Save(ctx, storetest.NewGlobal(8, storetest.WithWaits)), "version 2")
	assert.Equal(t, []int32{1, 2}, migrations(t, schema), "MustExist migrates nothing")

	s := open(t, schema)
	assert.Equal(t, []int32{1, 2, 3, 4, 5, 6}, migrations(t, schema))
	g, err = s.Load(ctx, 7)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(old, g))
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(8, storetest.WithWaits)))
	g, err = s.Latest(ctx)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(storetest.NewGlobal(8, storetest.WithWaits), g))
	requireRetained(t, s, 2, 7, 8)
	requireRetained(t, s, 1, 8)

	// The store opened before the migration reads the schema as it was
	// then: a snapshot saved since is of a format it cannot read.
	_, err = ro.Load(ctx, 8)
	require.ErrorIs(t, err, persistence.ErrFormatVersion)
}

// schemaV4Globals returns the snapshots of testdata/schema-v4.sql: 7,
// with waits and violations, and 8, of mode Epochs and signed with k1;
// neither keeps receiver counts.
func schemaV4Globals() (waiting, epochs *snapshot.Global) {
	epochs = storetest.NewGlobal(8, storetest.Small)
	epochs.Mode = snapshot.Epochs
	return storetest.NewGlobal(7, storetest.WithWaits), epochs
}

// TestSchemaVersion4 opens a schema of version 4 holding snapshots in row
// format 2, as the build before version 5 left it
// (testdata/schema-v4.sql, kept as written): with MustExist it is read as
// it is, and changes nothing; opened to write, it is migrated, and its
// snapshots load as they were saved, keeping no receiver counts (the
// signed one's MAC still matches), alongside snapshots that keep them.
func TestSchemaVersion4(t *testing.T) {
	serverURL(t)
	t.Parallel()
	waiting, epochs := schemaV4Globals()
	shape := storetest.WithWaits
	shape.ReceiverCounts = true
	counted := storetest.NewGlobal(9, shape)
	schema := schemaV4(t)
	ro, s := migratesFrom(t, schema, 4, []*snapshot.Global{waiting, epochs}, counted, nil)
	assert.Equal(t, []int16{2, 2, 4}, query[int16](t, `SELECT format FROM `+schema+`.snapshots ORDER BY id`))
	assert.Equal(t, []bool{false, false, true}, query[bool](t, `SELECT receiver_counts FROM `+schema+`.snapshots ORDER BY id`))
	requireRetained(t, s, 3, 7, 8, 9)
	requireRetained(t, s, 1, 9)

	// The store opened before the migration reads the schema as it was
	// then: a snapshot saved since is of a format it cannot read.
	_, err := ro.Load(context.Background(), 9)
	require.ErrorIs(t, err, persistence.ErrFormatVersion)
}

// migratesFrom opens schema, a fixture of schema version version that
// holds olds (signed with k1, if at all). Read only (MustExist), the store
// loads each as it was saved (check, if set, looks at each loaded too),
// refuses to save newer, a format its schema does not hold, and migrates
// nothing. Opened to write, the schema is migrated to SchemaVersion; the
// store loads olds again, and saves newer, which is then the latest as
// saved. It returns both stores.
func migratesFrom(t *testing.T, schema string, version int32, olds []*snapshot.Global, newer *snapshot.Global, check func(*snapshot.Global)) (ro, s *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	keys := keyring(t, "k1")
	loads := func(s persistence.Store) {
		t.Helper()
		for _, want := range olds {
			g, err := s.Load(ctx, want.ID)
			require.NoError(t, err, "snapshot %d", want.ID)
			require.NoError(t, storetest.Equal(want, g), "snapshot %d", want.ID)
			if check != nil {
				check(g)
			}
		}
	}
	upTo := func(n int32) []int32 {
		var v []int32
		for i := int32(1); i <= n; i++ {
			v = append(v, i)
		}
		return v
	}

	u := withParams(t, serverURL(t), map[string]string{"schema": schema})
	opened, err := persistence.OpenURL(ctx, u, persistence.MustExist(), persistence.Authenticate(keys))
	require.NoError(t, err)
	ro = opened.(*postgres.Store)
	t.Cleanup(func() { _ = ro.Close() })
	loads(ro)
	require.ErrorContains(t, ro.Save(ctx, newer), fmt.Sprintf("version %d", version))
	assert.Equal(t, upTo(version), migrations(t, schema), "MustExist migrates nothing")

	s = openWith(t, schema, postgres.WithKeyring(keys))
	assert.Equal(t, upTo(postgres.SchemaVersion), migrations(t, schema))
	loads(s)
	require.NoError(t, s.Save(ctx, newer))
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(newer, g))
	return ro, s
}

// TestRowFormat2Damage: the checksums of row format 2 cover no receiver
// counts, so counts found in a snapshot of that format, in a participant
// row or as the header's flag, are reported as damage, not loaded.
func TestRowFormat2Damage(t *testing.T) {
	serverURL(t)
	t.Parallel()
	tests := []struct {
		name   string
		sql    string // %[1]s is the schema
		table  string
		offset int64
		reason string
	}{
		{"participant counts",
			`UPDATE %[1]s.participants SET received = 5 WHERE snapshot_id = 7 AND ord = 2`,
			"participants", 2, "participant 2: sent_to 0 and received 5, but the snapshot keeps no receiver counts (row format 2)"},
		{"receiver counts claimed",
			`UPDATE %[1]s.snapshots SET receiver_counts = true WHERE id = 7`,
			"snapshots", 0, "row format 2 keeps no receiver counts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, epochs := schemaV4Globals()
			requireDamageOf7(t, schemaV4(t), tt.sql, tt.table, tt.offset, tt.reason, epochs)
		})
	}
}

// TestCountsOnlyWithReceiverCounts: a participant's counts are kept only
// when the snapshot keeps receiver counts, as Global documents; without,
// they are stored as 0, which is what Load requires of them.
func TestCountsOnlyWithReceiverCounts(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	s := open(t, schema)
	g := storetest.NewGlobal(1, storetest.Small)
	g.Participants[0].SentTo, g.Participants[0].Received = 5, 2
	require.NoError(t, s.Save(ctx, g))
	got, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(storetest.NewGlobal(1, storetest.Small), got))
	assert.Equal(t, []int64{0}, query[int64](t, `SELECT DISTINCT sent_to | received FROM `+schema+`.participants`))
}

// schemaV5Globals returns the snapshots of testdata/schema-v5.sql: 7,
// with waits and violations, and 8, of mode Epochs, keeping receiver
// counts and signed with k1; neither has sums.
func schemaV5Globals() (waiting, counted *snapshot.Global) {
	shape := storetest.Small
	shape.ReceiverCounts = true
	return storetest.NewGlobal(7, storetest.WithWaits), storetest.NewGlobal(8, shape)
}

// TestSchemaVersion5 opens a schema of version 5 holding snapshots in row
// format 3, as the build before version 6 left it
// (testdata/schema-v5.sql, kept as written): with MustExist it is read as
// it is, and changes nothing; opened to write, it is migrated, and its
// snapshots load as they were saved, without sums (the signed one's MAC
// still matches), alongside snapshots counted in sums, which the Store
// opened before the migration refuses as of a format its schema does not
// hold.
func TestSchemaVersion5(t *testing.T) {
	serverURL(t)
	t.Parallel()
	waiting, counted := schemaV5Globals()
	shape := storetest.WithWaits
	shape.Sums = true
	summed := storetest.NewGlobal(9, shape)
	schema := schemaV5(t)
	ro, s := migratesFrom(t, schema, 5, []*snapshot.Global{waiting, counted}, summed, func(g *snapshot.Global) {
		assert.Nil(t, g.Sums, "snapshot %d", g.ID)
	})
	assert.Equal(t, []int16{3, 3, 4}, query[int16](t, `SELECT format FROM `+schema+`.snapshots ORDER BY id`))
	assert.Equal(t, []bool{true, true, false}, query[bool](t, `SELECT sum_sent IS NULL AND sum_received IS NULL FROM `+schema+`.snapshots ORDER BY id`))
	requireRetained(t, s, 3, 7, 8, 9)
	requireRetained(t, s, 1, 9)

	// The store opened before the migration reads the schema as it was
	// then: a snapshot saved since is of a format it cannot read.
	_, err := ro.Load(context.Background(), 9)
	require.ErrorIs(t, err, persistence.ErrFormatVersion)
	require.ErrorContains(t, err, "row format 4")
}

// TestRowFormat3Damage: the checksums of row format 3 cover no sums, so
// sums found in the header of a snapshot of that format, both or one of
// them, are reported as damage, not loaded.
func TestRowFormat3Damage(t *testing.T) {
	serverURL(t)
	t.Parallel()
	tests := []struct {
		name string
		sql  string // %[1]s is the schema
	}{
		{"sums claimed", `UPDATE %[1]s.snapshots SET sum_sent = 48, sum_received = 0 WHERE id = 7`},
		{"half the sums claimed", `UPDATE %[1]s.snapshots SET sum_received = 0 WHERE id = 7`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, counted := schemaV5Globals()
			requireDamageOf7(t, schemaV5(t), tt.sql, "snapshots", 0, "row format 3 keeps no sums, but the header's sum_sent or sum_received is set", counted)
		})
	}
}

// requireDamageOf7 runs sql (%[1]s is the schema) on a fixture schema
// that holds snapshots 7 and 8, and requires snapshot 7 to load as
// corrupt, in table at offset for reason, and 8 to load whole, as intact.
func requireDamageOf7(t *testing.T, schema, sql, table string, offset int64, reason string, intact *snapshot.Global) {
	t.Helper()
	ctx := context.Background()
	s := open(t, schema)
	exec(t, fmt.Sprintf(sql, schema))
	_, err := s.Load(ctx, 7)
	requireCorrupt(t, err, 7, schema+"."+table, offset, reason)
	g, err := s.Load(ctx, 8)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(intact, g))
}

// TestSumsDoNotBalance: sums stored with their checksums and MAC, but not
// balanced with the messages in flight, as only someone writing the
// database on purpose would leave them (Save refuses them), are refused
// by Load's Verify as damage.
func TestSumsDoNotBalance(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	s := openWith(t, schema, postgres.WithKeyring(keyring(t, "k1")))
	shape := storetest.Small
	shape.Sums = true
	tests := []struct {
		name   string
		change func(g *snapshot.Global)
	}{
		{"sent one more", func(g *snapshot.Global) { g.Sums.Sent++ }},
		{"received more than sent", func(g *snapshot.Global) { g.Sums.Received = g.Sums.Sent + 1 }},
		{"received at the end of its range", func(g *snapshot.Global) { g.Sums.Received = 1<<64 - 1 }},
		{"a message left out", func(g *snapshot.Global) { storetest.DropMessage(g) }},
	}
	for i, tt := range tests {
		id := snapshot.SnapshotID(i + 1)
		g := storetest.NewGlobal(id, shape)
		tt.change(g)
		require.ErrorIs(t, s.Save(ctx, g), snapshot.ErrImbalance, tt.name)
		require.NoError(t, postgres.SaveUnchecked(ctx, s, g), tt.name)
		_, err := s.Load(ctx, id)
		requireCorrupt(t, err, id, schema+".snapshots", 0, "loaded snapshot fails Verify: snapshot "+fmt.Sprint(id)+": sums do not balance")
	}
	balanced := storetest.NewGlobal(9, shape)
	require.NoError(t, postgres.SaveUnchecked(ctx, s, balanced))
	g, err := s.Load(ctx, 9)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(balanced, g))
}

// TestSchemaNewer opens a schema migrated by a newer build.
func TestSchemaNewer(t *testing.T) {
	serverURL(t)
	t.Parallel()
	schema := freshSchema(t)
	open(t, schema)
	exec(t, `INSERT INTO `+schema+`.schema_migrations (version) VALUES ($1)`, postgres.SchemaVersion+1)
	_, err := postgres.Open(context.Background(), serverURL(t), postgres.WithSchema(schema))
	require.ErrorIs(t, err, postgres.ErrSchemaVersion)
}

// TestOpenURL opens stores through persistence.OpenURL, as a program that
// imports this package for its side effect does, with the schema in the
// URL.
func TestOpenURL(t *testing.T) {
	base := serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	u, err := url.Parse(withParams(t, base, map[string]string{"schema": schema}))
	require.NoError(t, err)
	for _, scheme := range []string{"postgres", "postgresql"} {
		u.Scheme = scheme
		s, err := persistence.OpenURL(ctx, u.String())
		require.NoError(t, err, scheme)
		ps, ok := s.(*postgres.Store)
		require.True(t, ok, "OpenURL(%s://...) returns a *postgres.Store, got %T", scheme, s)
		assert.Equal(t, schema, ps.Schema())
		require.Implements(t, (*io.Closer)(nil), s)
		if scheme == "postgres" {
			require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
		} else {
			g, err := s.Load(ctx, 1)
			require.NoError(t, err)
			require.NoError(t, storetest.Equal(storetest.NewGlobal(1, storetest.Small), g))
		}
		require.NoError(t, s.(io.Closer).Close())
	}
}

func TestOpenRefused(t *testing.T) {
	ctx := context.Background()
	_, err := postgres.Open(ctx, "postgres://127.0.0.1:1/x", postgres.WithSchema(strings.Repeat("s", 64)))
	require.ErrorContains(t, err, "more than 63")
	_, err = postgres.Open(ctx, "postgres://127.0.0.1:1/x", postgres.WithSchema("a\x00b"))
	require.ErrorContains(t, err, "NUL")
	_, err = postgres.Open(ctx, "postgres://127.0.0.1:1/x?schema="+strings.Repeat("s", 64))
	require.ErrorContains(t, err, "more than 63")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = postgres.Open(cancelled, "postgres://127.0.0.1:1/x")
	require.ErrorIs(t, err, context.Canceled)
}

// TestLimits saves and loads ids beyond PostgreSQL's bigint.
func TestLimits(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	s := open(t, freshSchema(t))
	huge := snapshot.SnapshotID(1 << 63)
	require.ErrorIs(t, s.Save(ctx, storetest.NewGlobal(huge, storetest.Small)), persistence.ErrTooLarge)
	_, err := s.Load(ctx, huge)
	require.ErrorIs(t, err, persistence.ErrNotFound)
	require.NoError(t, s.Delete(ctx, huge))
	largest := snapshot.SnapshotID(1<<63 - 1)
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(largest, storetest.Small)))
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(storetest.NewGlobal(largest, storetest.Small), g))
}

// TestIncompleteAndFormat covers header rows that a Save of this build
// never leaves visible: one not marked complete (written by hand, or by a
// build that saved across transactions) and one of another row format.
func TestIncompleteAndFormat(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	s := open(t, schema)
	for id := snapshot.SnapshotID(1); id <= 3; id++ {
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(id, storetest.Small)))
	}
	exec(t, `INSERT INTO `+schema+`.snapshots (id, format, mode, start_sec, start_nsec, end_sec, end_nsec, participants, channels, messages, checksum)
		VALUES (9, $1, 0, 0, 0, 0, 0, 0, 0, 0, 0)`, postgres.RowFormat)
	ids, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []snapshot.SnapshotID{1, 2, 3}, ids, "an incomplete snapshot is not listed")
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(3), g.ID, "Latest skips an incomplete snapshot")
	_, err = s.Load(ctx, 9)
	require.ErrorIs(t, err, persistence.ErrCorrupt)

	exec(t, `UPDATE `+schema+`.snapshots SET format = $1 WHERE id = 3`, postgres.RowFormat+1)
	_, err = s.Load(ctx, 3)
	require.ErrorIs(t, err, persistence.ErrFormatVersion)
	_, err = s.Latest(ctx)
	require.ErrorIs(t, err, persistence.ErrFormatVersion, "Latest does not go back past a snapshot it cannot read")
	ids, err = s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []snapshot.SnapshotID{1, 2, 3}, ids, "a snapshot of another format is listed")

	// Retain counts neither; the incomplete one, newer than those kept,
	// stays too.
	require.NoError(t, s.Retain(ctx, 1))
	ids, err = s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []snapshot.SnapshotID{2, 3}, ids)
	assert.Equal(t, []int64{2, 3, 9}, query[int64](t, `SELECT id FROM `+schema+`.snapshots ORDER BY id`))
}

// TestDeleteLeavesNothing checks that Delete and Retain remove every row
// of a snapshot, in every table.
func TestDeleteLeavesNothing(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	s := open(t, schema)
	for id := snapshot.SnapshotID(1); id <= 4; id++ {
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(id, storetest.WithWaits)))
	}
	require.NoError(t, s.Delete(ctx, 2))
	require.NoError(t, s.Retain(ctx, 1))
	for _, table := range []string{"participants", "channels", "messages", "waits", "violations"} {
		assert.Equal(t, []int64{4}, query[int64](t, `SELECT DISTINCT snapshot_id FROM `+schema+`.`+table), table)
	}
	assert.Equal(t, []int64{4}, query[int64](t, `SELECT id FROM `+schema+`.snapshots`))
}

// TestExecModes round-trips snapshots under each of pgx's query exec
// modes, which a URL may choose (default_query_exec_mode): the simple
// protocol, for one, sends and receives every value as text.
func TestExecModes(t *testing.T) {
	base := serverURL(t)
	t.Parallel()
	edge := &snapshot.Global{
		ID: 3,
		Participants: []snapshot.Participant{
			{ID: "", Kind: "", State: []byte{}, Waits: &snapshot.Waits{}},
			{ID: "a", Kind: "k\x00\xff", State: nil, Waits: &snapshot.Waits{Any: true, Timer: true, Edges: []snapshot.Wait{
				{To: "b", Request: 1<<64 - 1, Type: "\x00\xff", Since: time.Unix(-1<<40, 999999999)},
				{To: "\x00not a participant", Since: time.Unix(1<<40, 1)},
			}}},
			{ID: "b", Kind: "k", State: bytes.Repeat([]byte{0, 0xff}, 40000)},
			{ID: "c/\u00e9\x00", Departed: true, Waits: &snapshot.Waits{Timer: true}},
		},
		Channels: []snapshot.ChannelState{
			{Channel: snapshot.Channel{From: "a", To: "b"}, Sent: 1 << 63, Received: 1<<63 - 2, Messages: []snapshot.Message{
				{Seq: 1<<63 - 1, Payload: persistence.RecordedMessage{Type: "\x00", Data: nil}},
				{Seq: 1 << 63, Payload: persistence.RecordedMessage{Type: "", Data: []byte{}}},
			}},
		},
		Violations: []snapshot.Violation{{Invariant: "\x00", Err: "\xff"}, {}},
	}
	// edge keeping receiver counts at the ends of their range.
	counted := *edge
	counted.ID, counted.Mode, counted.ReceiverCounts = 4, snapshot.Epochs, true
	counted.Participants = slices.Clone(edge.Participants)
	counted.Participants[1].SentTo, counted.Participants[1].Received = 1<<64-1, 1<<64-1
	counted.Participants[2].SentTo, counted.Participants[2].Received = 1<<63+1, 1<<63-1
	// edge counted in sums at the end of their range, stored as their
	// bits.
	summed := *edge
	summed.ID, summed.Mode = 2, snapshot.Epochs
	summed.Sums = &snapshot.SumCounts{Sent: 1<<64 - 1, Received: 1<<64 - 3}
	sumsShape := storetest.WithWaits
	sumsShape.Sums = true
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			schema := freshSchema(t)
			s, err := postgres.Open(ctx, withParams(t, base, map[string]string{"default_query_exec_mode": mode, "schema": schema}))
			require.NoError(t, err)
			defer s.Close()
			for _, g := range []*snapshot.Global{storetest.NewGlobal(1, sumsShape), &summed, edge, &counted, storetest.NewGlobal(5, storetest.WithWaits)} {
				require.NoError(t, s.Save(ctx, g))
				got, err := s.Load(ctx, g.ID)
				require.NoError(t, err)
				require.NoError(t, storetest.Equal(g, got))
			}
			assert.Equal(t, []int64{-1, -3}, query[int64](t, `SELECT unnest(ARRAY[sum_sent, sum_received]) FROM `+schema+`.snapshots WHERE id = 2`))
			got, err := s.Load(ctx, 3)
			require.NoError(t, err)
			assert.Nil(t, got.Participants[1].State, "a nil state stays nil")
			assert.NotNil(t, got.Participants[0].State, "an empty state stays empty, not nil")
			assert.Nil(t, got.Channels[0].Messages[0].Payload.(persistence.RecordedMessage).Data)
			assert.NotNil(t, got.Channels[0].Messages[1].Payload.(persistence.RecordedMessage).Data)
			require.NoError(t, s.Retain(ctx, 1))
			require.NoError(t, s.Delete(ctx, 5))
			ids, err := s.List(ctx)
			require.NoError(t, err)
			assert.Empty(t, ids)
		})
	}
}

func TestOwnership(t *testing.T) {
	serverURL(t)
	t.Parallel()
	storetest.RunPair(t, func(t *testing.T) (persistence.Store, persistence.Store) {
		schema := freshSchema(t)
		return open(t, schema), open(t, schema)
	})
}

// leased returns two Stores on a fresh schema, the first holding a lease
// (system "bank") and snapshot 1.
func leased(t *testing.T) (a, b *postgres.Store, la persistence.Lease) {
	t.Helper()
	ctx := context.Background()
	schema := freshSchema(t)
	a, b = open(t, schema), open(t, schema)
	la, err := a.Claim(ctx, "bank", persistence.ClaimNew)
	require.NoError(t, err)
	require.NoError(t, a.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
	return a, b, la
}

// cutLeaseConnection ends the session that holds a lease's owner lock, as
// a lost connection would: the lock goes with it.
func cutLeaseConnection(t *testing.T) {
	t.Helper()
	exec(t, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND pid <> pg_backend_pid()`)
}

// TestFencedByGeneration: a lease whose lock went with its connection
// (as when the connection to the server is lost) is superseded by the
// next claim, and its Saves fail with ErrFenced rather than interleave
// with the new writer's.
func TestFencedByGeneration(t *testing.T) {
	ctx := context.Background()
	a, b, la := leased(t)
	cutLeaseConnection(t)
	lb, err := b.Claim(ctx, "bank", persistence.ClaimRestore)
	require.NoError(t, err, "the lock went with the connection")
	assert.Equal(t, uint64(2), lb.Owner().Generation)
	err = a.Save(ctx, storetest.NewGlobal(2, storetest.Small))
	require.ErrorIs(t, err, persistence.ErrFenced)
	require.NoError(t, b.Save(ctx, storetest.NewGlobal(2, storetest.Small)))
	require.NoError(t, lb.Release(ctx))
	require.NoError(t, la.Release(ctx))
}

// TestNamespacesAndMustExist: a namespace is a schema of its own beside
// the store's, with its own owner; opening with MustExist creates
// nothing.
func TestNamespacesAndMustExist(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	u := withParams(t, serverURL(t), map[string]string{"schema": schema})
	_, err := persistence.OpenURL(ctx, u, persistence.MustExist())
	require.ErrorIs(t, err, persistence.ErrNoStore)
	assert.Empty(t, query[string](t, `SELECT nspname::text FROM pg_namespace WHERE nspname = $1`, schema), "nothing created")

	main, err := persistence.OpenURL(ctx, u)
	require.NoError(t, err)
	defer main.(*postgres.Store).Close()
	t.Cleanup(func() { exec(t, `DROP SCHEMA IF EXISTS "`+schema+`/pipeline" CASCADE`) })
	other, err := persistence.OpenURL(ctx, u, persistence.InNamespace("pipeline"))
	require.NoError(t, err)
	defer other.(*postgres.Store).Close()
	assert.Equal(t, schema+"/pipeline", other.(*postgres.Store).Schema())
	l1, err := main.Claim(ctx, "bank", persistence.ClaimNew)
	require.NoError(t, err)
	require.NoError(t, main.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
	l2, err := other.Claim(ctx, "pipeline", persistence.ClaimNew)
	require.NoError(t, err, "a namespace has an owner of its own")
	require.NoError(t, other.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
	require.NoError(t, l1.Release(ctx))
	require.NoError(t, l2.Release(ctx))
	_, err = persistence.OpenURL(ctx, u, persistence.InNamespace("../x"))
	require.Error(t, err)
}

// TestClaimWaitsForTheWritesItTakesOver: a lease's connection is lost
// while one of its Saves is in flight; the claim that takes the schema
// over waits for that Save to end before it reads how far the schema got,
// so the ids it numbers from never collide with it, and the old lease's
// next write is fenced.
func TestClaimWaitsForTheWritesItTakesOver(t *testing.T) {
	ctx := context.Background()
	a, b, la := leased(t)

	inSave, proceed := make(chan struct{}), make(chan struct{})
	var release sync.Once
	let := func() { release.Do(func() { close(proceed) }) }
	t.Cleanup(let) // before the stores close: the Save holds a connection
	postgres.SetSaveHook(a, func(ctx context.Context, stage string, tx pgx.Tx) error {
		if stage == "header" {
			close(inSave)
			<-proceed
		}
		return nil
	})
	saved := make(chan error, 1)
	go func() { saved <- a.Save(ctx, storetest.NewGlobal(2, storetest.Small)) }()
	<-inSave
	postgres.SetSaveHook(a, nil)
	cutLeaseConnection(t)

	claimed := make(chan persistence.Lease, 1)
	go func() {
		lb, err := b.Claim(ctx, "bank", persistence.ClaimRestore)
		assert.NoError(t, err)
		claimed <- lb
	}()
	// The claim waits for the owner table, which the Save in flight holds.
	deadline := time.After(time.Minute)
	for len(query[bool](t, `SELECT true FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE NOT l.granted AND c.relname = 'owner'`)) == 0 {
		select {
		case <-deadline:
			t.Fatal("the claim never waited for the owner table")
		case lb := <-claimed:
			t.Fatalf("the claim did not wait for the Save in flight: High %d", lb.High())
		default:
		}
	}
	let()
	require.NoError(t, <-saved, "the Save began before the claim")
	lb := <-claimed
	require.NotNil(t, lb)
	assert.Equal(t, snapshot.SnapshotID(2), lb.High(), "the claim counts the Save it waited for")
	require.NoError(t, b.Save(ctx, storetest.NewGlobal(3, storetest.Small)))
	require.ErrorIs(t, a.Save(ctx, storetest.NewGlobal(4, storetest.Small)), persistence.ErrFenced)
	require.NoError(t, lb.Release(ctx))
	require.NoError(t, la.Release(ctx))
}

// TestConcurrentDeletesThroughALease: Deletes through a lease lock the
// owner row to update it, and do not deadlock one another.
func TestConcurrentDeletesThroughALease(t *testing.T) {
	ctx := context.Background()
	s := open(t, freshSchema(t))
	l, err := s.Claim(ctx, "bank", persistence.ClaimNew)
	require.NoError(t, err)
	const n = 40
	for id := snapshot.SnapshotID(1); id <= n; id++ {
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(id, storetest.Shape{Participants: 2})))
	}
	errs := make(chan error, n)
	for id := snapshot.SnapshotID(1); id <= n; id++ {
		go func() { errs <- s.Delete(ctx, id) }()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	o, err := s.Ownership(ctx)
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(n), o.High)
	require.NoError(t, l.Release(ctx))
}

// requireRetained keeps the newest n snapshots of s and requires ids to
// be what is left.
func requireRetained(t *testing.T, s *postgres.Store, n int, ids ...snapshot.SnapshotID) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.Retain(ctx, n))
	got, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, ids, got)
}

// migrations returns the versions of the migrations applied to schema.
func migrations(t *testing.T, schema string) []int32 {
	t.Helper()
	return query[int32](t, `SELECT version FROM `+schema+`.schema_migrations ORDER BY version`)
}
