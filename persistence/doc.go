// Package persistence stores complete global snapshots. A Store saves a
// snapshot atomically (wholly visible or absent), loads it by id or the
// latest, lists, deletes and keeps only the newest N.
//
// This first version holds the Store contract and the in-memory store; the
// file store (the embedded default) and the PostgreSQL store follow.
package persistence
