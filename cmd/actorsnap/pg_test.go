package main

import (
	"context"
	"os"
	"strings"
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

// postgresURL returns the test server's URL, or skips: without
// ACTORSNAP_TEST_POSTGRES there is no server (.ci/run sets it). Where
// ACTORSNAP_REQUIRE_POSTGRES is set (CI), a missing server fails the test.
func postgresURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("ACTORSNAP_TEST_POSTGRES")
	if url == "" && os.Getenv("ACTORSNAP_REQUIRE_POSTGRES") != "" {
		t.Fatal("ACTORSNAP_TEST_POSTGRES is not set, and ACTORSNAP_REQUIRE_POSTGRES says the PostgreSQL tests must run")
	}
	if url == "" {
		t.Skip("set ACTORSNAP_TEST_POSTGRES to a PostgreSQL URL to run this test; `eval \"$(bash .ci/postgres.sh)\"` starts a server and sets it")
	}
	return url
}

// postgresStore returns the URL of a store in the schema named, on the
// test server (or skips), dropped when the test ends.
func postgresStore(t *testing.T, schema string) (url, store string) {
	t.Helper()
	url = postgresURL(t)
	t.Cleanup(func() { dropSchema(t, url, schema) })
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url, url + sep + "schema=" + schema
}
