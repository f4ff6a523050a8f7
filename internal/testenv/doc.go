// Package testenv gives tests the servers CI starts on loopback, a buffer
// that goroutines write at once (SyncBuffer), and the goroutines of
// Proto.Actor goleak is to ignore. The servers: a
// PostgreSQL server (.ci/postgres.sh sets ACTORSNAP_TEST_POSTGRES) and
// an etcd server (.ci/etcd.sh sets ACTORSNAP_TEST_ETCD). Without one a
// test that needs it skips, saying how to start it, unless
// ACTORSNAP_REQUIRE_POSTGRES or ACTORSNAP_REQUIRE_ETCD says the tests
// must run (CI sets both): then it fails.
package testenv
