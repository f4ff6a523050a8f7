// Package lossless tells, from a Go type alone, whether encoding values of
// that type with github.com/vmihailenco/msgpack/v5 and decoding them into a
// fresh value gives the same value back, and if not, which field is lost
// or fails and how to fix it.
//
// Snapshots store actor states and recorded messages as msgpack. msgpack
// drops some data without an error (an unexported field, a struct with no
// exported fields, which becomes an empty map) and fails on other data
// with an error that does not name the field (a chan, a func). Check finds
// these when a type is first seen, before a snapshot needs it, and names
// the type, the field and the fixes.
//
// Check mirrors what msgpack v5 does with a type; the rules below come
// from its source (types.go, encode_value.go, decode_value.go, ext.go,
// time.go). Check reports:
//
//   - Unexported: an unexported field without a msgpack:"-" tag, which
//     msgpack skips. The blank field _ and msgpack's _msgpack options
//     field hold no data and are not reported.
//   - NoExportedFields: a struct with fields, none of which msgpack
//     encodes, so its whole value becomes an empty map. struct{} itself is
//     a deliberate "no state" and passes; IsEmpty tells it apart.
//   - Shadowed: a field whose msgpack name another field also uses (two
//     tags with one name, an alias, or a field of an embedded struct that
//     msgpack inlines next to a field of the same name); msgpack decodes
//     the name into one of them only.
//   - PromotedMarshaler: a struct that gets its marshaler method from an
//     embedded field (for example by embedding time.Time), so msgpack
//     encodes that field alone and drops the others.
//   - Unsupported: a chan, func, unsafe.Pointer, complex64 or complex128,
//     which msgpack refuses to encode, or a uintptr, on which it panics.
//   - HalfMarshaler: a type that msgpack encodes through one interface
//     (say encoding.TextMarshaler) and decodes through another or field by
//     field, so the decoder cannot read what the encoder wrote.
//   - Unaddressable: a marshaler method with a pointer receiver on a value
//     msgpack cannot take the address of (the root value itself when it
//     is not a pointer, a map key or value, an array inside such a value);
//     msgpack then fails to encode.
//   - Panics: a layout on which msgpack panics: an embedded unexported
//     field of a type other than a struct (msgpack decodes into it through
//     reflection and cannot set it), an inline or intern tag option on a
//     field of the wrong kind, a struct that embeds itself through
//     pointers (msgpack recurses without end building its field list).
//
// Types that implement msgpack.CustomEncoder, msgpack.Marshaler,
// encoding.BinaryMarshaler or encoding.TextMarshaler, on a value or a
// pointer receiver, with the matching decoder interface, are trusted:
// msgpack hands them their whole value and Check does not look inside.
// time.Time is trusted too, since msgpack encodes it with its own
// extension. Callers add their own trusted interfaces and types with
// Trust: an interface they call themselves instead of msgpack, or a type
// they registered with msgpack.Register or msgpack.RegisterExt, which
// Check cannot see.
//
// Fields of type any or error pass, since the value inside is only known
// at run time, but they do not round-trip as the same Go value: msgpack
// decodes into an empty interface the generic form of the data (a struct
// or a map with string keys becomes map[string]interface{}, a slice
// []interface{}, an integer the integer type of the msgpack code it was
// written with, such as int8 or uint16), and fails on a map with other
// keys; into an error field it decodes an errors.New of the message. A
// field of any other interface type is refused (Unsupported): msgpack
// panics decoding into it a value that is not nil, because the generic
// value does not implement the interface.
//
// Check looks at types, not values, and assumes the default msgpack
// Encoder and Decoder settings. Some differences only values show remain:
// msgpack:",omitempty" turns an empty non-nil slice or map into nil; a nil
// pointer to an embedded struct that msgpack inlines comes back pointing
// to a zero struct; a pointer to a nil pointer comes back nil; two
// pointers to one value come back as two values, and a cycle of pointers
// makes encoding recurse without end; a time.Time keeps its instant but
// comes back in time.Local without a monotonic reading.
package lossless
