package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Internals for the external tests.

// SetSaveHook makes f run at each stage of every Save of s ("header",
// "participants", "channels", "messages", "complete"), inside its
// transaction; an error from f aborts the Save there.
func SetSaveHook(s *Store, f func(ctx context.Context, stage string, tx pgx.Tx) error) { s.hook = f }

// SaveStages are the stages a save hook sees, in order.
var SaveStages = []string{"header", "participants", "channels", "messages", "complete"}

const RowFormat = rowFormat
