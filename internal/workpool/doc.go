// Package workpool holds the Proto.Actor dispatchers package actors runs
// its actors on: Pool, a few workers taking mailbox turns from one FIFO
// queue, for the participants (every actor gets its turn within one pass
// over the queue, which a snapshot needs); and Loop, one goroutine for one
// actor, for the guardian.
package workpool
