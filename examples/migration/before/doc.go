// Package before is a plain Proto.Actor program: a word count spread over
// shards. A coordinator spawns the shards as its children and runs rounds;
// in each round every shard reads a line, counts the words it owns and asks
// their owners to count the others. At the end the coordinator asks every
// shard for its counts and adds them up.
package before
