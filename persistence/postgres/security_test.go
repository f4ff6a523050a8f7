package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/devca"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/postgres"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// keyring returns a keyring of the keys named, each with a secret of 32
// bytes of its id's first byte; the first signs.
func keyring(t testing.TB, ids ...string) *persistence.Keyring {
	t.Helper()
	var keys []persistence.Key
	for _, id := range ids {
		keys = append(keys, persistence.Key{ID: id, Secret: bytes.Repeat([]byte(id[:1]+id[len(id)-1:]), 16)})
	}
	k, err := persistence.NewKeyring(keys...)
	require.NoError(t, err)
	return k
}

// openWith opens a Store on schema with opts, closed when the test ends.
func openWith(t testing.TB, schema string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), serverURL(t), append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// forge replaces the rows of snapshot id in schema with those of the same
// id in schema from, header counts and checksums included, and leaves the
// MAC and its key id as they were: someone who can write the database
// recomputes every checksum, as the Store that saved the rows in from did.
func forge(t *testing.T, schema, from string, id snapshot.SnapshotID) {
	t.Helper()
	q := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	var sql strings.Builder
	for _, table := range []string{"participants", "channels", "messages", "waits", "violations"} {
		fmt.Fprintf(&sql, `DELETE FROM %[1]s.%[3]s WHERE snapshot_id = %[4]d;
			INSERT INTO %[1]s.%[3]s SELECT * FROM %[2]s.%[3]s WHERE snapshot_id = %[4]d;`, q(schema), q(from), table, id)
	}
	fmt.Fprintf(&sql, `UPDATE %[1]s.snapshots a SET (format, mode, start_sec, start_nsec, end_sec, end_nsec,
			participants, channels, messages, waits, violations, receiver_counts, sum_sent, sum_received, checksum) =
		(b.format, b.mode, b.start_sec, b.start_nsec, b.end_sec, b.end_nsec,
			b.participants, b.channels, b.messages, b.waits, b.violations, b.receiver_counts, b.sum_sent, b.sum_received, b.checksum)
		FROM %[2]s.snapshots b WHERE a.id = %[3]d AND b.id = %[3]d`, q(schema), q(from), id)
	exec(t, sql.String())
}

// TestTamperedSnapshotRefused: a snapshot whose rows were changed with
// every checksum recomputed (a message removed, its channel's sent count
// and the header's message count adjusted) passes every checksum and
// Verify, so a Store without a key loads it: checksums catch accidents,
// not changes made on purpose. With the key that signed it, the Store
// refuses it, naming the snapshot and the key.
func TestTamperedSnapshotRefused(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema, other := freshSchema(t), freshSchema(t)
	keys := keyring(t, "k1")
	s := openWith(t, schema, postgres.WithKeyring(keys))
	want := storetest.NewGlobal(5, storetest.Small)
	for _, id := range []snapshot.SnapshotID{4, 5, 6} {
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(id, storetest.Small)))
	}
	g, err := s.Load(ctx, 5)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(want, g))

	require.NoError(t, open(t, other).Save(ctx, storetest.DropMessage(storetest.NewGlobal(5, storetest.Small))))
	forge(t, schema, other, 5)

	g, err = open(t, schema).Load(ctx, 5)
	require.NoError(t, err, "without a key the forgery loads")
	assert.Equal(t, want.TotalInFlight()-1, g.TotalInFlight())

	_, err = s.Load(ctx, 5)
	storetest.RequireUnauthentic(t, err, 5, "k1")
	require.NoError(t, s.Retain(ctx, 2))
	ids, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []snapshot.SnapshotID{4, 5, 6}, ids, "Retain neither counts nor deletes the forgery")
	require.NoError(t, s.Delete(ctx, 6))
	_, err = s.Latest(ctx)
	storetest.RequireUnauthentic(t, err, 5, "k1")

	// Only the key id changed: the MAC is of another key.
	exec(t, `UPDATE `+schema+`.snapshots SET mac_key = 'k2' WHERE id = 4`)
	_, err = openWith(t, schema, postgres.WithKeyring(keyring(t, "k2", "k1"))).Load(ctx, 4)
	storetest.RequireUnauthentic(t, err, 4, "k2")
}

// TestTamperedSumsRefused: sums changed on purpose, kept balanced (sent
// and received both one more) and with every checksum recomputed, pass
// every checksum and Verify, so a Store without a key loads them; the MAC
// covers the sums, and the Store with the key that signed the snapshot
// refuses it.
func TestTamperedSumsRefused(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema, other := freshSchema(t), freshSchema(t)
	s := openWith(t, schema, postgres.WithKeyring(keyring(t, "k1")))
	shape := storetest.Small
	shape.Sums = true
	want := storetest.NewGlobal(5, shape)
	require.NoError(t, s.Save(ctx, want))

	forged := storetest.NewGlobal(5, shape)
	storetest.BalanceSums(forged, want.Sums.Received+1)
	require.NoError(t, open(t, other).Save(ctx, forged))
	forge(t, schema, other, 5)

	g, err := open(t, schema).Load(ctx, 5)
	require.NoError(t, err, "without a key the forgery loads")
	require.NoError(t, storetest.Equal(forged, g))

	_, err = s.Load(ctx, 5)
	storetest.RequireUnauthentic(t, err, 5, "k1")
}

// TestKeysRotateAndSignaturesRequired checks what a keyring accepts: a
// snapshot signed with an older key it still holds, not one signed with a
// key it does not hold, and one without a MAC (saved before the store had
// keys, or stripped of its MAC) only where signatures are not required.
func TestKeysRotateAndSignaturesRequired(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	require.NoError(t, open(t, schema).Save(ctx, storetest.NewGlobal(1, storetest.Small)))
	require.NoError(t, openWith(t, schema, postgres.WithKeyring(keyring(t, "k1"))).Save(ctx, storetest.NewGlobal(2, storetest.WithWaits)))
	require.NoError(t, openWith(t, schema, postgres.WithKeyring(keyring(t, "k1"))).Save(ctx, storetest.NewGlobal(3, storetest.Small)))
	rotated := openWith(t, schema, postgres.WithKeyring(keyring(t, "k2", "k1")))
	require.NoError(t, rotated.Save(ctx, storetest.NewGlobal(4, storetest.Small)))
	for id := snapshot.SnapshotID(1); id <= 4; id++ {
		_, err := rotated.Load(ctx, id)
		require.NoError(t, err, "snapshot %d", id)
	}
	assert.Equal(t, []string{"k1", "k1", "k2"}, query[string](t, `SELECT mac_key FROM `+schema+`.snapshots WHERE id > 1 ORDER BY id`))

	_, err := openWith(t, schema, postgres.WithKeyring(keyring(t, "k2"))).Load(ctx, 2)
	storetest.RequireUnauthentic(t, err, 2, "k1")
	assert.ErrorContains(t, err, "does not hold")

	exec(t, `UPDATE `+schema+`.snapshots SET mac = NULL, mac_key = NULL WHERE id = 3`)
	required := openWith(t, schema, postgres.WithKeyring(keyring(t, "k2", "k1").RequireSigned()))
	for _, id := range []snapshot.SnapshotID{1, 3} {
		_, err := rotated.Load(ctx, id)
		require.NoError(t, err, "snapshot %d has no MAC, and none is required", id)
		_, err = required.Load(ctx, id)
		storetest.RequireUnauthentic(t, err, id, "")
	}
	_, err = required.Load(ctx, 4)
	require.NoError(t, err)
}

// TestSchemaVersion2Unsigned reads the snapshot of a schema of version 2,
// as an earlier build left it, with a keyring: it has no MAC, and loads
// unless signatures are required.
func TestSchemaVersion2Unsigned(t *testing.T) {
	serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := schemaV2(t)
	keys := keyring(t, "k1")
	for _, migrate := range []bool{false, true} {
		opts := []postgres.Option{postgres.WithSchema(schema)}
		if !migrate {
			u := withParams(t, serverURL(t), map[string]string{"schema": schema})
			s, err := persistence.OpenURL(ctx, u, persistence.MustExist(), persistence.Authenticate(keys.RequireSigned()))
			require.NoError(t, err)
			_, err = s.Load(ctx, 7)
			storetest.RequireUnauthentic(t, err, 7, "")
			require.NoError(t, s.(*postgres.Store).Close())
		}
		s, err := postgres.Open(ctx, serverURL(t), append(opts, postgres.WithKeyring(keys))...)
		require.NoError(t, err)
		g, err := s.Load(ctx, 7)
		require.NoError(t, err)
		require.NoError(t, storetest.Equal(storetest.NewGlobal(7, storetest.Small), g))
		s.Close()
	}
}

func TestSignedConformance(t *testing.T) {
	serverURL(t)
	t.Parallel()
	keys := keyring(t, "k1").RequireSigned()
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return openWith(t, freshSchema(t), postgres.WithKeyring(keys))
	})
}

// TestTLSFromURL checks that sslmode and sslrootcert in the URL reach
// every connection of a Store, against the test server, which speaks TLS
// with a certificate of its own authority (.ci/postgres.sh names it in
// ACTORSNAP_TEST_POSTGRES_CA): with sslmode=verify-full and that
// authority, the Store's connections are encrypted, as the server itself
// reports (pg_stat_ssl); with another authority's certificate, or a root
// certificate that does not exist, Open fails; with sslmode=disable they
// are plain. No error shows the URL's password.
func TestTLSFromURL(t *testing.T) {
	base := serverURL(t)
	t.Parallel()
	ctx := context.Background()
	const pw = "s3cretpw"
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), pw)
	with := func(params url.Values) string {
		v := *u
		v.RawQuery = params.Encode()
		return v.String()
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-ca.pem")
	for _, mode := range []string{"verify-full", "verify-ca"} {
		_, err := postgres.Open(ctx, with(url.Values{"sslmode": {mode}, "sslrootcert": {missing}}), postgres.WithSchema(freshSchema(t)))
		require.ErrorContains(t, err, "no-such-ca.pem", mode)
		assert.NotContains(t, err.Error(), pw)
	}

	// encrypted saves a snapshot through a Store opened with params and
	// returns, of the server's connections from that Store (told apart by
	// their application name), how many there are and how many use TLS.
	encrypted := func(t *testing.T, params url.Values) (conns, tls int) {
		name := fmt.Sprintf("actorsnap-tls-test-%d", time.Now().UnixNano())
		params.Set("application_name", name)
		s, err := postgres.Open(ctx, with(params), postgres.WithSchema(freshSchema(t)))
		require.NoError(t, err, params.Get("sslmode"))
		defer s.Close()
		require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
		for _, ssl := range query[bool](t, `SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
			WHERE a.application_name = $1`, name) {
			conns++
			if ssl {
				tls++
			}
		}
		return conns, tls
	}
	conns, tls := encrypted(t, url.Values{"sslmode": {"disable"}, "password": {pw}})
	require.Positive(t, conns)
	require.Zero(t, tls, "sslmode=disable: the connections are plain")

	ca := os.Getenv("ACTORSNAP_TEST_POSTGRES_CA")
	if ca == "" {
		require.Empty(t, os.Getenv("ACTORSNAP_REQUIRE_POSTGRES"),
			"ACTORSNAP_TEST_POSTGRES_CA is not set: .ci/postgres.sh sets it, with a server that speaks TLS")
		t.Log("ACTORSNAP_TEST_POSTGRES_CA is not set: the server's TLS is not tested (eval \"$(bash .ci/postgres.sh)\" starts one that has it)")
		return
	}
	for _, mode := range []string{"require", "verify-ca", "verify-full"} {
		conns, tls := encrypted(t, url.Values{"sslmode": {mode}, "sslrootcert": {ca}})
		require.Positive(t, conns, mode)
		require.Equal(t, conns, tls, "sslmode=%s: every connection of the Store uses TLS", mode)
	}
	other, err := devca.New("another authority")
	require.NoError(t, err)
	stranger := filepath.Join(dir, "other-ca.pem")
	require.NoError(t, os.WriteFile(stranger, other.CertPEM(), 0o600))
	_, err = postgres.Open(ctx, with(url.Values{"sslmode": {"verify-full"}, "sslrootcert": {stranger}}), postgres.WithSchema(freshSchema(t)))
	require.ErrorContains(t, err, "unknown authority", "a server whose certificate the given authority did not sign is refused")
	assert.NotContains(t, err.Error(), pw)

	for _, conn := range []string{
		"postgres://alice:" + pw + "@127.0.0.1:1/x?connect_timeout=5",
		"postgres://alice@127.0.0.1:1/x?password=" + pw,
		"host=127.0.0.1 port=1 user=alice password=" + pw + " connect_timeout=5",
		"host=127.0.0.1 port=1 user=alice password='" + pw + "' sslmode=bogus",
		"postgres://alice:" + pw + "@127.0.0.1:1/x?sslmode=bogus",
	} {
		_, err := postgres.Open(ctx, conn)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), pw, conn)
	}
}

// TestNoPasswordInLogs runs a system on a store whose URL holds a
// password, makes its saves fail, and finds the password in none of the
// logs nor errors.
func TestNoPasswordInLogs(t *testing.T) {
	base := serverURL(t)
	ctx := context.Background()
	const pw = "s3cretpw"
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), pw)
	schema := freshSchema(t)
	store, err := persistence.OpenURL(ctx, withParams(t, u.String(), map[string]string{"schema": schema}), persistence.Authenticate(keyring(t, "k1")))
	require.NoError(t, err)
	defer store.(*postgres.Store).Close()

	var logs testenv.SyncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sys, err := actors.NewSystem(actors.WithStore(store), actors.WithLogger(logger), actors.WithTimeout(10*time.Second),
		actors.WithKind("k", func() actor.Actor { return nopActor{} }))
	require.NoError(t, err)
	_, err = sys.Root().SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return nopActor{} }, sys.Snapshotted("k")), "a")
	require.NoError(t, err)
	_, err = sys.Snapshot(ctx)
	require.NoError(t, err)
	exec(t, `DROP SCHEMA `+schema+` CASCADE`)
	_, err = sys.Snapshot(ctx)
	require.Error(t, err, "the store's tables are gone")
	errs := []string{err.Error()}
	if err := sys.Shutdown(ctx); err != nil {
		errs = append(errs, err.Error())
	}
	out := logs.String()
	assert.Contains(t, out, "snapshot aborted", "the failure is logged")
	assert.NotContains(t, out, pw)
	for _, e := range errs {
		assert.NotContains(t, e, pw)
	}
}

type nopActor struct{ actors.Stateless }

func (nopActor) Receive(actor.Context) {}
