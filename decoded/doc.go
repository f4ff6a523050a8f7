// Package decoded shows what a snapshot holds without the application's
// Go types: participants' states and in-flight messages as plain values
// that a command line, a web page or a test can print, compare and
// query.
//
// # Why no types are needed
//
// actors encodes an actor's state as msgpack (its exported fields as a
// map keyed by field name, in declaration order) unless the actor
// implements MarshalState, and records an in-flight message as a
// persistence.RecordedMessage: its registered type name and its msgpack
// encoding, within an envelope when it was sent with a sender or headers.
// msgpack is self-describing, so Decode reads any of it as a tree of
// plain values; State and Messages apply it to a snapshot's parts.
//
// # The value model
//
// A decoded value is one of these, so that callers can type-switch:
//
//	nil, bool, int64, uint64, float64, string
//	[]byte     a msgpack bin
//	[]any      a msgpack array
//	*Map       a msgpack map, its entries in stored order
//	time.Time  the msgpack timestamp extension, in UTC
//	Ext        any other extension: its type and bytes
//	Undecoded  bytes that are not exactly one msgpack value
//
// An integer is an int64 when it fits and a uint64 only above, whatever
// width the encoder chose, so that a field compares equal however it was
// written. A Map keeps the stored order, which for a struct is its
// fields' order: a Go map would lose it and show fields shuffled.
//
// # Undecoded
//
// A state that MarshalState wrote in another format (JSON, protobuf, a
// format of the application's own) is not msgpack, and neither is a
// protobuf message's encoding. Decode does not guess at such bytes: it
// returns Undecoded with their size, the bytes themselves, and a reason
// beginning "not msgpack:". Format labels it <58 bytes, not msgpack>,
// JSON as {"$undecoded": reason, "size": 58}, so that it is never taken
// for a value. Bytes that begin with a msgpack value and go on are
// Undecoded too: a state is exactly one value.
//
// # Bounds
//
// Snapshots come from a store, so Decode treats its input as untrusted:
// every length and count is checked against the bytes left before
// anything is made for it, and nesting is at most 64 deep; bytes beyond
// either bound are Undecoded. What Decode allocates is
// proportional to the size of its input (FuzzDecode checks it).
//
// # Showing, comparing, selecting
//
// Format writes a value on one line for a terminal, truncated to a
// number of runes; JSON returns it in a form encoding/json writes
// faithfully. Diff lists field-level changes between two values, with
// paths such as "Owner.Name" and "Items[3]" that Lookup follows. Query
// selects values by one comparison of a field, as in `Balance < 0`.
package decoded
