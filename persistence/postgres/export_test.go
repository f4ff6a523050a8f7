package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Internals for the external tests.

// SetSaveHook makes f run at each stage of every Save of s ("header",
// "participants", "channels", "messages", "waits", "violations",
// "complete"), inside its transaction; an error from f aborts the Save
// there.
func SetSaveHook(s *Store, f func(ctx context.Context, stage string, tx pgx.Tx) error) { s.hook = f }

// SaveStages are the stages a save hook sees, in order.
var SaveStages = []string{"header", "participants", "channels", "messages", "waits", "violations", "complete"}

const RowFormat = rowFormat

// SaveUnchecked saves g as Save does, rows, checksums and MAC included,
// but without the checks Save makes of g first (Verify among them): it
// stores what only someone writing the database on purpose would, so
// that a test reaches the checks Load makes behind the checksums.
func SaveUnchecked(ctx context.Context, s *Store, g *snapshot.Global) error {
	c := s.call(ctx, "save unchecked")
	tx, release, err := s.write(c, pgx.TxOptions{}, false)
	if err != nil {
		return err
	}
	defer release()
	if err := s.save(c, tx, g); err != nil {
		return err
	}
	ctx, cancel := c.finish()
	defer cancel()
	return tx.Commit(ctx)
}

// Timeouts returns the timeouts s works under.
func Timeouts(s *Store) (connect, statement time.Duration) {
	return s.timeouts.connect, s.timeouts.statement
}

// ServerStatementTimeout returns the statement_timeout of s's sessions,
// as the server shows it.
func ServerStatementTimeout(ctx context.Context, s *Store) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SHOW statement_timeout`).Scan(&v)
	return v, err
}

var ParseMillis = parseMillis
