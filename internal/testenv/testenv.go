package testenv

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Postgres returns the test server's URL, or skips.
func Postgres(t testing.TB) string {
	t.Helper()
	return need(t, "ACTORSNAP_TEST_POSTGRES", "ACTORSNAP_REQUIRE_POSTGRES", "a PostgreSQL URL", ".ci/postgres.sh")
}

// PostgresStore returns the test server's URL and the URL of a store in
// the schema named on it (or skips); the schema is dropped when the test
// ends.
func PostgresStore(t testing.TB, schema string) (url, store string) {
	t.Helper()
	url = Postgres(t)
	t.Cleanup(func() { DropSchema(t, url, schema) })
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url, url + sep + "schema=" + schema
}

// DropSchema removes a test's schema from the server at url.
func DropSchema(t testing.TB, url, schema string) {
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

// Etcd returns the test etcd server's client endpoint (host:port), or
// skips.
func Etcd(t testing.TB) string {
	t.Helper()
	return need(t, "ACTORSNAP_TEST_ETCD", "ACTORSNAP_REQUIRE_ETCD", "an etcd host:port", ".ci/etcd.sh")
}

func need(t testing.TB, env, require, what, script string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	msg := env + " is not set: set it to " + what + " to run this test (`eval \"$(bash " + script + ")\"` starts a server and sets it)"
	if os.Getenv(require) != "" {
		t.Fatal(msg + ", and " + require + " says the test must run")
	}
	t.Skip(msg)
	return ""
}

// Graphviz returns the path of Graphviz's dot. Without it the test is
// skipped, or fails if ACTORSNAP_REQUIRE_GRAPHVIZ is set (CI installs
// Graphviz and sets it).
func Graphviz(t testing.TB) string {
	t.Helper()
	return program(t, []string{"dot"}, "Graphviz's dot is not installed (apt-get install graphviz)", "ACTORSNAP_REQUIRE_GRAPHVIZ")
}

// program returns the path of the first of names found on the PATH. With
// none, the test is skipped with msg, or fails if the variable require is
// set.
func program(t testing.TB, names []string, msg, require string) string {
	t.Helper()
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv(require) != "" {
		t.Fatal(msg + ", and " + require + " says the test must run")
	}
	t.Skip(msg)
	return ""
}

// Median returns the median of xs (the mean of the middle two when their
// number is even), or 0 when there are none; xs is left as it was.
// Benchmarks quote medians: the machines they run on are noisy.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
