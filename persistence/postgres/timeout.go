package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actorsnap/actorsnap/persistence"
)

// DefaultConnectTimeout bounds each connection attempt (the dial, TLS and
// authentication) unless the URL's connect_timeout says otherwise.
const DefaultConnectTimeout = 10 * time.Second

// DefaultStatementTimeout is the server's statement_timeout for the
// Store's sessions unless the URL sets statement_timeout. The client also
// bounds each statement by it plus timeoutMargin.
const DefaultStatementTimeout = 30 * time.Second

// timeoutMargin is added to the statement timeout for the client's own
// bound on a statement: a server that answers cancels the statement
// itself and reports it within this margin, so the client's bound only
// fires for a server that does not answer at all.
const timeoutMargin = time.Second

// timeouts are a Store's bounds on waiting for its server.
type timeouts struct {
	connect   time.Duration // each connection attempt; enforced by pgx
	statement time.Duration // the server's statement_timeout; 0 disables it
}

// stmtBound is the client's bound on one statement, 0 for none.
func (t timeouts) stmtBound() time.Duration {
	if t.statement == 0 {
		return 0
	}
	return t.statement + timeoutMargin
}

// acquireBound is the client's bound on getting a connection from the
// pool: waiting for one to come free (the pool's statements end within a
// statement bound), then connecting. 0 for none.
func (t timeouts) acquireBound() time.Duration {
	if t.statement == 0 {
		return 0
	}
	return t.connect + t.stmtBound()
}

// optionsStatementTimeout finds statement_timeout among the
// command-line options a connection string may pass in its options
// parameter (-c statement_timeout=5s, or --statement-timeout=5s).
var optionsStatementTimeout = regexp.MustCompile(`(?:-c\s*|--)statement[_-]timeout=(\S+)`)

// applyTimeouts sets the defaults for what cfg's connection string left
// unset and returns the timeouts in force. A connect_timeout of 0 (which
// libpq takes for no limit) counts as unset.
func applyTimeouts(cfg *pgconn.Config) (timeouts, error) {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	t := timeouts{connect: cfg.ConnectTimeout}
	value, set := cfg.RuntimeParams["statement_timeout"]
	if !set {
		// A value in options would be overridden by a startup
		// parameter, so none is added then.
		if m := optionsStatementTimeout.FindStringSubmatch(cfg.RuntimeParams["options"]); m != nil {
			value, set = m[1], true
		}
	}
	if !set {
		cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(DefaultStatementTimeout.Milliseconds(), 10)
		t.statement = DefaultStatementTimeout
		return t, nil
	}
	d, err := parseMillis(value)
	if err != nil {
		return t, fmt.Errorf("postgres: open: statement_timeout=%q: %w", value, err)
	}
	t.statement = d
	return t, nil
}

// millisUnits are the units PostgreSQL accepts for a setting counted in
// milliseconds, in milliseconds; unit names are case-sensitive, as there.
// Longer names come first, since "ms" also ends in "s".
var millisUnits = []struct {
	name string
	ms   float64
}{{"min", 60e3}, {"ms", 1}, {"us", 1e-3}, {"s", 1e3}, {"h", 3600e3}, {"d", 86400e3}}

// parseMillis reads the value of a PostgreSQL setting counted in
// milliseconds as the server does: a number (integer, as C's strtol with
// base 0 reads it, or not), optionally followed by a unit (ms without
// one), rounded to a whole millisecond, from 0 to 2^31-1 ms.
func parseMillis(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	v, ok := parseNumber(s)
	for _, u := range millisUnits {
		if ok {
			break
		}
		if num, found := strings.CutSuffix(s, u.name); found {
			if v, ok = parseNumber(strings.TrimSpace(num)); ok {
				v *= u.ms
			}
		}
	}
	if !ok {
		return 0, errors.New("want a number of milliseconds, or a number and a unit (us, ms, s, min, h, d)")
	}
	ms := math.RoundToEven(v)
	if ms < 0 || ms > math.MaxInt32 {
		return 0, fmt.Errorf("out of range: 0 to %d ms", math.MaxInt32)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func parseNumber(s string) (float64, bool) {
	if i, err := strconv.ParseInt(s, 0, 64); err == nil {
		return float64(i), true
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// phase is what a call is waiting for.
type phase int

const (
	acquiring phase = iota // a connection from the pool
	running                // a statement, or the transaction's end
)

// call is one run of a Store method against the server. It bounds each
// wait for the server, a connection from the pool or one statement, by
// the Store's timeouts, unless the caller's context ends sooner, and
// turns a timeout into an error that names the server and the setting.
// The bound is per statement, not per method, so a Save or Retain of
// many statements may take longer than one bound while the server keeps
// answering.
type call struct {
	s     *Store
	ctx   context.Context // the caller's
	name  string          // the operation, for errors: "save 3"
	addr  string          // the server of the connection in use, once acquired
	phase phase
	began time.Time // when the current wait began
}

func (s *Store) call(ctx context.Context, name string) *call {
	return &call{s: s, ctx: ctx, name: name}
}

func withBound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// acquire takes a connection from the pool, connecting if none is idle.
// The caller releases it.
func (c *call) acquire() (*pgxpool.Conn, error) {
	c.phase, c.began = acquiring, time.Now()
	ctx, cancel := withBound(c.ctx, c.s.timeouts.acquireBound())
	defer cancel()
	conn, err := c.s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	c.addr = c.s.addrOf(conn)
	return conn, nil
}

// stmt returns the context of the next statement, and its cancel, to be
// called once the statement's rows are read.
func (c *call) stmt() (context.Context, context.CancelFunc) {
	c.phase, c.began = running, time.Now()
	return withBound(c.ctx, c.s.timeouts.stmtBound())
}

// finish returns the context for ending a transaction: a commit or
// rollback runs to its end even if the caller's context is cancelled (a
// Save that returned the context's error would otherwise not know
// whether it committed), but within the statement bound.
func (c *call) finish() (context.Context, context.CancelFunc) {
	c.phase, c.began = running, time.Now()
	return withBound(context.WithoutCancel(c.ctx), c.s.timeouts.stmtBound())
}

// begin acquires a connection and begins a transaction on it. release
// rolls the transaction back, unless it was committed, and returns the
// connection to the pool.
func (c *call) begin(opts pgx.TxOptions) (tx pgx.Tx, release func(), err error) {
	conn, err := c.acquire()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := c.stmt()
	defer cancel()
	tx, err = conn.BeginTx(ctx, opts)
	if err != nil {
		conn.Release()
		return nil, nil, err
	}
	return tx, func() {
		ctx, cancel := c.finish()
		defer cancel()
		_ = tx.Rollback(ctx)
		conn.Release()
	}, nil
}

// addrOf names the server conn is connected to: host:port as configured
// when there is one host, else the address connected to.
func (s *Store) addrOf(conn *pgxpool.Conn) string {
	cfg := s.pool.Config().ConnConfig
	if len(cfg.Fallbacks) == 0 {
		return s.hosts()
	}
	if nc := conn.Conn().PgConn().Conn(); nc != nil && nc.RemoteAddr() != nil {
		return nc.RemoteAddr().String()
	}
	return s.hosts()
}

// hosts names the servers the connection string lists, as host:port (a
// Unix socket's path for a directory), separated by commas.
func (s *Store) hosts() string {
	cfg := s.pool.Config().ConnConfig
	_, addr := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	names := []string{addr}
	for _, fb := range cfg.Fallbacks {
		_, addr := pgconn.NetworkAddress(fb.Host, fb.Port)
		if !slices.Contains(names, addr) {
			names = append(names, addr)
		}
	}
	return strings.Join(names, ", ")
}

// timeoutError reports a server that did not answer in time, or a
// statement it cancelled at statement_timeout. errors.Is(err,
// context.DeadlineExceeded) holds, and errors.As finds what pgx returned.
type timeoutError struct {
	msg string
	err error
}

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Unwrap() []error { return []error{context.DeadlineExceeded, e.err} }

// fail wraps err, from the call's operation, with its context. If the
// caller's context is done, its error is what is wrapped, since it is why
// the operation failed. A timeout becomes a *timeoutError naming the
// server and the setting that bounded the wait.
func (c *call) fail(err error) error {
	return c.failAs(c.name, err)
}

func (c *call) failAs(name string, err error) error {
	if cerr := c.ctx.Err(); cerr != nil {
		return fmt.Errorf("postgres: %s: %w", name, cerr)
	}
	var ce *persistence.CorruptError
	if errors.As(err, &ce) || errors.Is(err, persistence.ErrNotFound) || errors.Is(err, persistence.ErrFormatVersion) || errors.Is(err, persistence.ErrUnauthentic) {
		return err
	}
	if msg := c.timedOut(err); msg != "" {
		return &timeoutError{msg: "postgres: " + name + ": " + msg, err: err}
	}
	return fmt.Errorf("postgres: %s: %w", name, err)
}

// failCommit wraps an error of a commit run under c.finish: the
// caller's context is not consulted, since the commit ran on regardless
// and a Save that returns that context's error must have changed nothing.
func (c *call) failCommit(err error) error {
	if msg := c.timedOut(err); msg != "" {
		return &timeoutError{msg: "postgres: " + c.name + ": commit: " + msg + "; whether it committed is unknown", err: err}
	}
	return fmt.Errorf("postgres: %s: commit: %w", c.name, err)
}

// timedOut says which server did not answer within which timeout, if err
// is a timeout, and is empty otherwise.
func (c *call) timedOut(err error) string {
	t := c.s.timeouts
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce) && errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%s did not answer within %s (connect_timeout; set connect_timeout in the URL to change it)",
			c.s.hosts(), t.connect)
	case errors.Is(err, context.DeadlineExceeded) && c.phase == acquiring:
		return fmt.Sprintf("no connection to %s was ready within %s (connect_timeout %s + statement_timeout %s + %s; "+
			"the pool's %d connections were busy or their server did not answer)",
			c.s.hosts(), t.acquireBound(), t.connect, t.statement, timeoutMargin, c.s.pool.Config().MaxConns)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%s did not answer within %s (statement_timeout %s + %s; set statement_timeout in the URL to change it)",
			c.addr, t.stmtBound(), t.statement, timeoutMargin)
	case errors.As(err, &pe) && pe.Code == "57014" && t.statement > 0 &&
		(strings.Contains(pe.Message, "statement timeout") || time.Since(c.began) >= t.statement):
		return fmt.Sprintf("%s cancelled a statement after %s (statement_timeout; set statement_timeout in the URL to change it)",
			c.addr, t.statement)
	}
	return ""
}
