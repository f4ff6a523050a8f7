package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// dropSchema removes a test's schema from the server at url.
func dropSchema(t *testing.T, url, schema string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("dropping schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("dropping schema %s: %v", schema, err)
	}
}
