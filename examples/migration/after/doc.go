// Package after is package before with snapshots: the same word count,
// whose coordinator and shards are participants of actorsnap's snapshots
// and can be restored mid-run. docs/migration.md walks through the diff.
package after
