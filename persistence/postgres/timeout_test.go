package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence/postgres"
	"github.com/actorsnap/actorsnap/persistence/storetest"
)

// returnsWithin is how long a call that should give up on a silent server
// may take before the test reports it hung. It is generous: it tells a
// hang from an answer, it does not measure the timeouts.
const returnsWithin = 30 * time.Second

// silentServer listens on loopback and accepts connections but never
// writes a byte, as a server that hangs does; with handshake, it first
// completes the startup handshake, as a server that hangs after
// accepting a session does. It returns its address. Its connections are
// closed when the test ends.
func silentServer(t *testing.T, handshake bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				if handshake && !startSession(c) {
					return
				}
				// Read and discard until the test closes the
				// connection, answering nothing.
				_, _ = io.Copy(io.Discard, c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// startSession plays a server's part of the startup handshake on c:
// no TLS, no password.
func startSession(c net.Conn) bool {
	b := pgproto3.NewBackend(c, c)
	for {
		msg, err := b.ReceiveStartupMessage()
		if err != nil {
			return false
		}
		switch msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if _, err := c.Write([]byte{'N'}); err != nil {
				return false
			}
			continue
		}
		break
	}
	b.Send(&pgproto3.AuthenticationOk{})
	b.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return b.Flush() == nil
}

// openAsync runs Open and returns its error, failing the test if Open has
// not returned within returnsWithin.
func openAsync(t *testing.T, ctx context.Context, connString string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		s, err := postgres.Open(ctx, connString)
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(returnsWithin):
		t.Fatalf("Open(%q) did not return within %s", connString, returnsWithin)
		return nil
	}
}

// requireOneLine checks that err is one line and does not give the
// password away.
func requireOneLine(t *testing.T, err error, password string) {
	t.Helper()
	assert.NotContains(t, err.Error(), "\n", "the error is one line")
	if password != "" {
		assert.NotContains(t, err.Error(), password, "the error does not show the password")
	}
}

// TestOpenSilentServer opens a Store on a server that accepts connections
// and never answers, with connect_timeout=1, by URL and by key=value
// string: Open gives up, and says which host did not answer within which
// timeout. No PostgreSQL server is needed.
func TestOpenSilentServer(t *testing.T) {
	t.Parallel()
	addr := silentServer(t, false)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	const password = "s3cret-pw"
	for name, connString := range map[string]string{
		"url":      fmt.Sprintf("postgres://app:%s@%s/db?connect_timeout=1", password, addr),
		"keywords": fmt.Sprintf("host=%s port=%s user=app password=%s dbname=db connect_timeout=1", host, port, password),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := openAsync(t, context.Background(), connString)
			require.Error(t, err)
			t.Log(err)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), "postgres: open: "+addr+" did not answer within 1s (connect_timeout;")
			assert.Contains(t, err.Error(), "set connect_timeout in the URL")
			requireOneLine(t, err, password)
		})
	}
	// A caller's context that ends first is what is reported.
	t.Run("caller-sooner", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := openAsync(t, ctx, "postgres://app@"+addr+"/db?connect_timeout=20")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotContains(t, err.Error(), "connect_timeout", "the caller's deadline fired, not connect_timeout: %v", err)
	})
}

// TestStatementSilentServer opens a Store on a server that completes the
// startup handshake and then answers nothing: the server's own
// statement_timeout cannot help, so the client's bound (statement_timeout
// plus a margin) ends the first statement. No PostgreSQL server is
// needed.
func TestStatementSilentServer(t *testing.T) {
	t.Parallel()
	addr := silentServer(t, true)
	err := openAsync(t, context.Background(), "postgres://app@"+addr+"/db?statement_timeout=200ms&sslmode=disable")
	require.Error(t, err)
	t.Log(err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "postgres: open: "+addr+" did not answer within 1.2s (statement_timeout 200ms + 1s;")
	requireOneLine(t, err, "")
}

// TestParseMillis reads statement_timeout values as PostgreSQL does.
func TestParseMillis(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0":          0,
		"5000":       5 * time.Second,
		" 250 ":      250 * time.Millisecond,
		"5s":         5 * time.Second,
		"5 s":        5 * time.Second,
		"1.5s":       1500 * time.Millisecond,
		"2min":       2 * time.Minute,
		"1h":         time.Hour,
		"1d":         24 * time.Hour,
		"1500us":     2 * time.Millisecond,
		"100ms":      100 * time.Millisecond,
		"1e3ms":      time.Second,
		"0x10":       16 * time.Millisecond,
		"0.4":        0,
		"1.5":        2 * time.Millisecond,
		"2147483647": 2147483647 * time.Millisecond,
	} {
		got, err := postgres.ParseMillis(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "s", "5S", "5 sec", "five", "-1", "2147483648", "25d", "NaN", "Inf"} {
		_, err := postgres.ParseMillis(in)
		assert.Error(t, err, "%q", in)
	}
	_, err := postgres.Open(context.Background(), "postgres://127.0.0.1:1/x?statement_timeout=soon")
	require.ErrorContains(t, err, `statement_timeout="soon"`)
}

// TestTimeoutSettings checks the defaults and the ways to override them,
// and that the server's sessions run under the statement_timeout given.
func TestTimeoutSettings(t *testing.T) {
	base := serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	with := func(params map[string]string) string {
		all := map[string]string{"schema": schema}
		for k, v := range params {
			all[k] = v
		}
		return withParams(t, base, all)
	}
	for _, c := range []struct {
		name            string
		params          map[string]string
		connect, stmt   time.Duration
		serverStatement string
	}{
		{"defaults", nil, postgres.DefaultConnectTimeout, postgres.DefaultStatementTimeout, "30s"},
		{"set", map[string]string{"connect_timeout": "3", "statement_timeout": "5000"}, 3 * time.Second, 5 * time.Second, "5s"},
		{"units", map[string]string{"statement_timeout": "2min"}, postgres.DefaultConnectTimeout, 2 * time.Minute, "2min"},
		{"options", map[string]string{"options": "-c statement_timeout=7s"}, postgres.DefaultConnectTimeout, 7 * time.Second, "7s"},
		{"off", map[string]string{"statement_timeout": "0", "connect_timeout": "0"}, postgres.DefaultConnectTimeout, 0, "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := postgres.Open(ctx, with(c.params))
			require.NoError(t, err)
			defer s.Close()
			connect, stmt := postgres.Timeouts(s)
			assert.Equal(t, c.connect, connect)
			assert.Equal(t, c.stmt, stmt)
			got, err := postgres.ServerStatementTimeout(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, c.serverStatement, got)
		})
	}
}

// TestSaveMeetsLock saves through a Store with statement_timeout=200ms
// while another session holds a lock on the snapshots table: the Save's
// first statement waits for the lock until the server cancels it, and
// the Save returns an error naming statement_timeout instead of hanging.
// The Store works again once the lock is gone.
func TestSaveMeetsLock(t *testing.T) {
	base := serverURL(t)
	t.Parallel()
	ctx := context.Background()
	schema := freshSchema(t)
	u, err := url.Parse(withParams(t, base, map[string]string{"schema": schema, "statement_timeout": "200ms"}))
	require.NoError(t, err)
	s, err := postgres.Open(ctx, u.String())
	require.NoError(t, err)
	defer s.Close()

	locker, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE `+schema+`.snapshots IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- s.Save(ctx, storetest.NewGlobal(1, storetest.Small)) }()
	select {
	case err = <-done:
	case <-time.After(returnsWithin):
		t.Fatalf("Save did not return within %s while the table was locked", returnsWithin)
	}
	require.Error(t, err)
	t.Log(err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "postgres: save 1: "+u.Host+" cancelled a statement after 200ms (statement_timeout;")
	requireOneLine(t, err, "")

	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, s.Save(ctx, storetest.NewGlobal(1, storetest.Small)))
	g, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, storetest.Equal(storetest.NewGlobal(1, storetest.Small), g))
}
