// Package boxed holds interfaces that point into a shared block of
// values instead of each at its own copy.
//
// Converting a struct larger than a pointer to an interface copies it
// to the heap, one allocation per conversion. Where many values are
// boxed at once (a snapshot's recorded messages, thousands a snapshot)
// a Boxer makes each interface point at its element of a slice the
// caller allocated once. The interface is built as the compiler builds
// one, a type word and a pointer to an immutable value, so a type
// assertion copies the value out as from any other interface; the one
// rule is that nothing writes to an element once it is boxed.
package boxed
