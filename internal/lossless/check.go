package lossless

import (
	"fmt"
	"reflect"
	"strings"
)

// DefaultMarshalerHint names the interfaces an Error suggests implementing
// when the caller gives no WithMarshalerHint.
const DefaultMarshalerHint = "msgpack.CustomEncoder+CustomDecoder or encoding.BinaryMarshaler+BinaryUnmarshaler"

// Reason says what msgpack does wrong with a field. The first four lose
// data without an error; the others make encoding or decoding fail or
// panic.
type Reason int

const (
	// Unexported is a field msgpack skips because it is unexported.
	Unexported Reason = iota + 1
	// NoExportedFields is a struct msgpack encodes as an empty map because
	// it encodes none of its fields.
	NoExportedFields
	// Shadowed is a field whose msgpack name another field also uses, so
	// that msgpack decodes the name into the other field.
	Shadowed
	// PromotedMarshaler is a field that msgpack drops because its struct
	// gets a marshaler method from another, embedded, field.
	PromotedMarshaler
	// Unsupported is a value of a kind msgpack cannot encode.
	Unsupported
	// HalfMarshaler is a type msgpack encodes and decodes in two
	// different ways.
	HalfMarshaler
	// Unaddressable is a marshaler with a pointer receiver that msgpack
	// reaches through a value it cannot take the address of.
	Unaddressable
	// Panics is a field layout on which msgpack panics.
	Panics
)

var reasonNames = [...]string{
	Unexported:        "unexported field",
	NoExportedFields:  "no exported fields",
	Shadowed:          "shadowed msgpack name",
	PromotedMarshaler: "promoted marshaler",
	Unsupported:       "unsupported kind",
	HalfMarshaler:     "encoder and decoder differ",
	Unaddressable:     "pointer-receiver marshaler on an unaddressable value",
	Panics:            "msgpack panics",
}

func (r Reason) String() string {
	if r > 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// loses reports whether msgpack drops the data silently, rather than
// failing.
func (r Reason) loses() bool { return r <= PromotedMarshaler }

// Error describes the first field, in depth-first field order, that keeps
// values of Type from going through msgpack unchanged.
type Error struct {
	// Type is the type given to Check.
	Type reflect.Type
	// Path locates the field: the name of the root type (pointers
	// removed), then the Go field names, dot separated, with [] after a
	// slice, array or map for its element and [key] after a map for its
	// key; "Ledger.Entries[].note" is the field note of an element of the
	// field Entries of a Ledger. It is the root type's name alone when the
	// root type itself is at fault.
	Path string
	// FieldType is the type of the value at Path.
	FieldType reflect.Type
	// Reason says what msgpack does wrong there.
	Reason Reason

	rel    string   // Path without the root type's name, "" for the root
	detail string   // what msgpack does, in words, for the message
	fixes  []string // fixes particular to the Reason, best first
	root   string   // the root type, pointers removed, for the message
	hint   string   // marshaler interfaces the message suggests
}

// Error names the type, the field, what msgpack does with it and the
// fixes.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "type %s ", e.root)
	// A path of markers alone, such as [] for the elements of a root
	// slice, names no field.
	noun := "field"
	if strings.HasPrefix(e.rel, "[") && !strings.Contains(e.rel, ".") {
		noun = "value"
	}
	switch {
	case e.rel != "" && e.Reason.loses():
		fmt.Fprintf(&b, "would lose %s %s (%s, type %s)", noun, e.rel, e.detail, e.FieldType)
	case e.rel != "":
		fmt.Fprintf(&b, "would fail in msgpack at %s %s (%s, type %s)", noun, e.rel, e.detail, e.FieldType)
	case e.Reason == NoExportedFields:
		fmt.Fprintf(&b, "would lose all its fields (%s)", e.detail)
	default:
		fmt.Fprintf(&b, "would fail in msgpack (%s)", e.detail)
	}
	fixes := e.fixes
	if e.rel != "" && noun == "field" {
		fixes = append(fixes[:len(fixes):len(fixes)], `tag it msgpack:"-" to leave it out on purpose`)
	}
	fixes = append(fixes[:len(fixes):len(fixes)], fmt.Sprintf("implement %s on %s", e.hint, e.root))
	b.WriteString(": ")
	for i, f := range fixes {
		switch {
		case i == 0:
		case i == len(fixes)-1:
			b.WriteString(", or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(f)
	}
	return b.String()
}

// Option changes what Check trusts or how its Error reads.
type Option func(*config)

type config struct {
	hint    string
	trusted []reflect.Type
}

// WithMarshalerHint names, in an Error's fixes, the interfaces the caller
// lets a type implement to encode itself, such as
// "actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder". The
// message reads "implement <hint> on <type>".
func WithMarshalerHint(hint string) Option {
	return func(c *config) { c.hint = hint }
}

// Trust makes Check accept, without looking inside, the types that
// implement t (on a value or pointer receiver) when t is an interface
// type, or t itself otherwise. It is for interfaces the caller calls
// instead of msgpack, such as a state marshaler, and for types registered
// with msgpack.Register or msgpack.RegisterExt, which Check cannot see.
// Trusted concrete types are also not inlined when embedded, as msgpack
// does not inline a registered type.
func Trust(t reflect.Type) Option {
	return func(c *config) {
		if t != nil {
			c.trusted = append(c.trusted, t)
		}
	}
}

// Check reports why values of type t cannot go through msgpack without
// loss, or nil. The error is an *Error naming the first offending field in
// depth-first field order. Check accepts a nil t, interface types and
// empty structs; see the package documentation for what it checks and
// what it cannot see. It walks t on every call, so callers checking a type
// often should remember the answer.
func Check(t reflect.Type, opts ...Option) error {
	if t == nil {
		return nil
	}
	cfg := config{hint: DefaultMarshalerHint}
	for _, o := range opts {
		o(&cfg)
	}
	w := &walker{cfg: cfg, seen: map[reflect.Type]bool{}, building: map[reflect.Type]bool{}}
	base := deref(t)
	name := base.Name()
	if name == "" {
		name = base.String()
	}
	// msgpack.Marshal takes the root as an interface value, which is not
	// addressable unless the root is a pointer.
	p := w.walk(t, "", false)
	if p == nil {
		return nil
	}
	return &Error{
		Type:      t,
		Path:      name + p.path,
		FieldType: p.typ,
		Reason:    p.reason,
		rel:       strings.TrimPrefix(p.path, "."),
		detail:    p.detail,
		fixes:     p.fixes,
		root:      base.String(),
		hint:      cfg.hint,
	}
}

// IsEmpty reports whether t, with pointers removed, is a struct with no
// fields at all, such as struct{}: a type that deliberately has no state.
// Check accepts it; callers decide whether such a type makes sense where
// they use it.
func IsEmpty(t reflect.Type) bool {
	if t == nil {
		return false
	}
	t = deref(t)
	return t.Kind() == reflect.Struct && t.NumField() == 0
}

// deref returns t without its pointers. It stops at a pointer type that
// points back to one already seen, such as type P *P.
func deref(t reflect.Type) reflect.Type {
	var seen map[reflect.Type]bool
	for t.Kind() == reflect.Pointer && !seen[t] {
		if seen == nil {
			seen = map[reflect.Type]bool{}
		}
		seen[t] = true
		t = t.Elem()
	}
	return t
}
