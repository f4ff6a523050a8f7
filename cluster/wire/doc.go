// Package wire is what cluster members say to each other over Proto.Actor
// remote, which carries only protobuf messages: link frames and
// acknowledgements (package link), and the Hello a member sends a peer
// before anything else. Each travels as a protobuf Any whose type URL
// names it and whose value is msgpack; Decode trusts nothing it is given
// (sizes bounded before anything is allocated, unknown types refused).
//
// Hello carries what two members must agree on to exchange participants'
// messages: the wire version and the registered message and kind names.
// CheckHello refuses a peer that differs, naming the difference, rather
// than let a message it cannot decode crash it later.
package wire
