package lossless_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/internal/lossless"
)

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// accepted lists types Check passes; roundTripTypes in roundtrip_test.go
// encodes values of most of them.
var accepted = []struct {
	name string
	t    reflect.Type
	opts []lossless.Option
}{
	{"nil type", nil, nil},
	{"int", typeOf[int](), nil},
	{"scalars", typeOf[Scalars](), nil},
	{"pointer to scalars", typeOf[*Scalars](), nil},
	{"containers", typeOf[Containers](), nil},
	{"recursive", typeOf[Node](), nil},
	{"mutually recursive", typeOf[*Ping](), nil},
	{"tags", typeOf[Tagged](), nil},
	{"as array", typeOf[AsArray](), nil},
	{"embedded structs", typeOf[Embedding](), nil},
	{"embedded struct not inlined", typeOf[NotInlined](), nil},
	{"embedded self pointer not inlined", typeOf[NoInlineSelf](), nil},
	{"time", typeOf[time.Time](), nil},
	{"times", typeOf[Times](), nil},
	{"interfaces", typeOf[Loose](), nil},
	{"empty interface", typeOf[any](), nil},
	{"empty struct", typeOf[Empty](), nil},
	{"empty struct pointer", typeOf[*struct{}](), nil},
	{"set", typeOf[map[string]struct{}](), nil},
	{"fields left out", typeOf[Ignored](), nil},
	{"marshalers", typeOf[*Marshalers](), nil},
	{"value-receiver custom encoder at the root", typeOf[Point](), nil},
	{"pointer-receiver custom encoder behind a pointer", typeOf[*Counter](), nil},
	{"pointer-receiver custom encoder in a slice", typeOf[[]Counter](), nil},
	{"own marshaler over embedded one", typeOf[OwnMarshaler](), nil},
	{"promoted marshaler with no other field", typeOf[JustTime](), nil},
	{"inline option", typeOf[InlineNamed](), nil},
	{"embedded trusted concrete type", typeOf[EmbedsRegistered](), []lossless.Option{lossless.Trust(typeOf[Registered]())}},
	{"trusted interface", typeOf[*Secretive](), []lossless.Option{lossless.Trust(typeOf[Snapshotter]())}},
	{"trusted concrete type", typeOf[HoldsRegistered](), []lossless.Option{lossless.Trust(typeOf[Registered]())}},
}

func TestCheckAccepts(t *testing.T) {
	for _, c := range accepted {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, lossless.Check(c.t, c.opts...))
		})
	}
}

// rejected lists types Check rejects, with the path and reason it gives
// and a value whose round trip through msgpack shows the loss or failure
// (nil where the failure would crash the test).
var rejected = []struct {
	name   string
	t      reflect.Type
	path   string
	field  reflect.Type
	reason lossless.Reason
	sample any
}{
	// Unexported fields.
	{"unexported field", typeOf[Account](), "Account.history", typeOf[[]int](), lossless.Unexported,
		&Account{Owner: "ann", history: []int{1}}},
	{"unexported field behind the root pointer", typeOf[*Account](), "Account.history", typeOf[[]int](), lossless.Unexported,
		&Account{history: []int{1}}},
	{"nested unexported field", typeOf[Wallet](), "Wallet.Owner.secret", typeOf[string](), lossless.Unexported,
		&Wallet{Owner: Person{Name: "bo", secret: "s"}}},
	{"unexported field of slice elements", typeOf[Ledger](), "Ledger.Entries[].note", typeOf[string](), lossless.Unexported,
		&Ledger{Entries: []Entry{{Amount: 1, note: "n"}}}},
	{"unexported field of a root slice", typeOf[[]Entry](), "[]lossless_test.Entry[].note", typeOf[string](), lossless.Unexported,
		&[]Entry{{note: "n"}}},
	{"unexported field of map keys", typeOf[Index](), "Index.ByKey[key].secret", typeOf[string](), lossless.Unexported,
		&Index{ByKey: map[Person]int{{secret: "s"}: 1}}},
	{"unexported field of map values", typeOf[map[int]Entry](), "map[int]lossless_test.Entry[].note", typeOf[string](), lossless.Unexported,
		&map[int]Entry{1: {note: "n"}}},
	{"unexported field behind a pointer", typeOf[Holder](), "Holder.P.secret", typeOf[string](), lossless.Unexported,
		&Holder{P: &Person{secret: "s"}}},
	{"unexported field of an inlined struct", typeOf[Leaky](), "Leaky.Inner.b", typeOf[int](), lossless.Unexported,
		&Leaky{Inner: Inner{A: 1, b: 2}}},
	{"unexported field of a struct inlined by option", typeOf[InlineLeaky](), "InlineLeaky.Inner.b", typeOf[int](), lossless.Unexported,
		&InlineLeaky{Inner: Inner{A: 1, b: 2}}},
	{"unexported field of an embedded type not trusted", typeOf[EmbedsRegistered](), "EmbedsRegistered.Registered.secret", typeOf[int](), lossless.Unexported,
		&EmbedsRegistered{Registered: Registered{secret: 1}}},
	{"recursive type", typeOf[Tree](), "Tree.note", typeOf[string](), lossless.Unexported,
		&Tree{Kids: []*Tree{{note: "n"}}}},
	{"first problem in depth-first field order", typeOf[First](), "First.A.secret", typeOf[string](), lossless.Unexported,
		&First{A: Person{secret: "s"}}},

	// No exported fields.
	{"no exported fields", typeOf[Tally](), "Tally", typeOf[Tally](), lossless.NoExportedFields,
		&Tally{n: 1}},
	{"no exported fields behind the root pointer", typeOf[*Tally](), "Tally", typeOf[Tally](), lossless.NoExportedFields,
		&Tally{total: 1}},
	{"field with no exported fields", typeOf[Guarded](), "Guarded.Mu", typeOf[Guarded]().Field(1).Type, lossless.NoExportedFields,
		nil}, // A sync.Mutex has no state to show lost.
	{"only an embedded struct with no exported fields", typeOf[OnlyHidden](), "OnlyHidden", typeOf[OnlyHidden](), lossless.NoExportedFields,
		&OnlyHidden{hidden{a: 1}}},

	// Unsupported kinds.
	{"chan", typeOf[WithChan](), "WithChan.Done", typeOf[chan struct{}](), lossless.Unsupported,
		&WithChan{Done: make(chan struct{})}},
	{"func", typeOf[WithFunc](), "WithFunc.OnDone", typeOf[func()](), lossless.Unsupported,
		&WithFunc{OnDone: func() {}}},
	{"unsafe pointer", typeOf[WithUnsafe](), "WithUnsafe.P", typeOf[WithUnsafe]().Field(0).Type, lossless.Unsupported,
		&WithUnsafe{}},
	{"complex128", typeOf[WithComplex](), "WithComplex.C", typeOf[complex128](), lossless.Unsupported,
		&WithComplex{C: 1i}},
	{"complex64 element", typeOf[WithComplex64](), "WithComplex64.Cs[]", typeOf[complex64](), lossless.Unsupported,
		&WithComplex64{Cs: []complex64{1}}},
	{"uintptr", typeOf[WithUintptr](), "WithUintptr.P", typeOf[uintptr](), lossless.Unsupported,
		&WithUintptr{P: 1}},
	{"chan map key", typeOf[ChanKey](), "ChanKey.M[key]", typeOf[chan int](), lossless.Unsupported,
		&ChanKey{M: map[chan int]string{make(chan int): "a"}}},
	{"chan root", typeOf[chan int](), "chan int", typeOf[chan int](), lossless.Unsupported,
		nil},
	{"non-empty interface", typeOf[WithStringer](), "WithStringer.S", typeOf[fmt.Stringer](), lossless.Unsupported,
		&WithStringer{S: time.Second}},

	// Two fields, one msgpack name.
	{"duplicate name", typeOf[Dup](), "Dup.A", typeOf[int](), lossless.Shadowed,
		&Dup{A: 1, B: 2}},
	{"inlined field shadowed by a later one", typeOf[ShadowedAfter](), "ShadowedAfter.Named.Name", typeOf[string](), lossless.Shadowed,
		&ShadowedAfter{Named: Named{"a"}, Name: "b"}},
	{"inline option over a taken name", typeOf[ShadowedInline](), "ShadowedInline.Named.Name", typeOf[string](), lossless.Shadowed,
		&ShadowedInline{Name: "a", Named: Named{"b"}}},
	{"alias over a taken name", typeOf[AliasClash](), "AliasClash.A", typeOf[int](), lossless.Shadowed,
		&AliasClash{A: 1, B: 2}},

	// A marshaler promoted from an embedded field.
	{"embedded time", typeOf[Event](), "Event.Name", typeOf[string](), lossless.PromotedMarshaler,
		&Event{Time: time.Unix(1, 0), Name: "e"}},
	{"embedded binary marshaler", typeOf[Versioned](), "Versioned.Note", typeOf[string](), lossless.PromotedMarshaler,
		&Versioned{Bin: Bin{1}, Note: "n"}},
	{"embedded text marshaler", typeOf[Stamped](), "Stamped.Bin", typeOf[Bin](), lossless.PromotedMarshaler,
		&Stamped{Bin: Bin{1}, Time: time.Unix(1, 0), Seq: 1}},

	// Encoder and decoder differ.
	{"text marshaler without unmarshaler", typeOf[HasTextOnly](), "HasTextOnly.T", typeOf[TextOnly](), lossless.HalfMarshaler,
		&HasTextOnly{T: TextOnly{1}}},
	{"text unmarshaler without marshaler", typeOf[HasMode](), "HasMode.M", typeOf[Mode](), lossless.HalfMarshaler,
		&HasMode{M: 1}},

	// Pointer methods without an address.
	{"pointer-receiver marshaler at a value root", typeOf[Counter](), "Counter", typeOf[Counter](), lossless.Unaddressable,
		Counter{n: 1}},
	{"pointer-receiver marshaler in a value root", typeOf[HasCounter](), "HasCounter.C", typeOf[Counter](), lossless.Unaddressable,
		HasCounter{C: Counter{1}}},
	{"pointer-receiver marshaler as a map value", typeOf[*CounterMap](), "CounterMap.M[]", typeOf[Counter](), lossless.Unaddressable,
		&CounterMap{M: map[string]Counter{"a": {1}}}},
	{"pointer-receiver marshaler in an array in a value root", typeOf[CounterArray](), "CounterArray.A[]", typeOf[Counter](), lossless.Unaddressable,
		CounterArray{}},
	{"promoted pointer-receiver marshaler", typeOf[*Tick](), "Tick.At", typeOf[int](), lossless.PromotedMarshaler,
		&Tick{Counter: Counter{1}, At: 2}},

	// Layouts msgpack panics on.
	{"embedded unexported int", typeOf[EmbedsInt](), "EmbedsInt.counter", typeOf[counter](), lossless.Panics,
		&EmbedsInt{counter: 1, Z: 2}},
	{"embedded pointer to unexported struct", typeOf[EmbedsPtr](), "EmbedsPtr.inner", typeOf[*inner](), lossless.Panics,
		&EmbedsPtr{inner: &inner{Level: 1}, Z: 2}},
	{"embedded unexported interface", typeOf[EmbedsIface](), "EmbedsIface.iface", typeOf[iface](), lossless.Panics,
		&EmbedsIface{iface: 1, Z: 2}},
	{"embedded unexported types with marshalers", typeOf[*Ambiguous](), "Ambiguous.binA", typeOf[binA](), lossless.Panics,
		&Ambiguous{binA: binA{1}, binB: binB{2}, X: 3}},
	{"inline option on a pointer", typeOf[InlinePtr](), "InlinePtr.Named", typeOf[*Named](), lossless.Panics,
		&InlinePtr{Named: &Named{"a"}, X: 1}},
	{"intern option on an int", typeOf[InternInt](), "InternInt.N", typeOf[int](), lossless.Panics,
		&InternInt{N: 1}},
	{"struct embedding a pointer to itself", typeOf[SelfEmbed](), "SelfEmbed.SelfEmbed", typeOf[*SelfEmbed](), lossless.Panics,
		nil}, // msgpack overflows the stack, which no test survives.
}

func TestCheckRejects(t *testing.T) {
	for _, c := range rejected {
		t.Run(c.name, func(t *testing.T) {
			err := lossless.Check(c.t)
			var le *lossless.Error
			require.ErrorAs(t, err, &le)
			assert.Equal(t, c.t, le.Type)
			assert.Equal(t, c.path, le.Path)
			assert.Equal(t, c.field, le.FieldType)
			assert.Equal(t, c.reason, le.Reason, "reason %v", le.Reason)
			assert.Contains(t, err.Error(), "type ")
			assert.Contains(t, err.Error(), lossless.DefaultMarshalerHint)
		})
	}
}

func TestErrorMessage(t *testing.T) {
	hint := lossless.WithMarshalerHint("actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder")
	for _, c := range []struct {
		t    reflect.Type
		opts []lossless.Option
		want string
	}{{
		typeOf[*Account](), []lossless.Option{hint},
		`type lossless_test.Account would lose field history (unexported, type []int): export it, ` +
			`tag it msgpack:"-" to leave it out on purpose, ` +
			`or implement actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder on lossless_test.Account`,
	}, {
		typeOf[Ledger](), nil,
		`type lossless_test.Ledger would lose field Entries[].note (unexported, type string): export it, ` +
			`tag it msgpack:"-" to leave it out on purpose, ` +
			`or implement msgpack.CustomEncoder+CustomDecoder or encoding.BinaryMarshaler+BinaryUnmarshaler on lossless_test.Ledger`,
	}, {
		typeOf[*Tally](), []lossless.Option{hint},
		`type lossless_test.Tally would lose all its fields ` +
			`(lossless_test.Tally has no exported fields, so msgpack encodes it as an empty map): export its fields, ` +
			`or implement actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder on lossless_test.Tally`,
	}, {
		typeOf[Guarded](), []lossless.Option{hint},
		`type lossless_test.Guarded would lose field Mu ` +
			`(sync.Mutex has no exported fields, so msgpack encodes it as an empty map, type sync.Mutex): export its fields, ` +
			`tag it msgpack:"-" to leave it out on purpose, ` +
			`or implement actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder on lossless_test.Guarded`,
	}, {
		typeOf[*WithChan](), []lossless.Option{hint},
		`type lossless_test.WithChan would fail in msgpack at field Done ` +
			`(msgpack cannot encode a chan, type chan struct {}): ` +
			`tag it msgpack:"-" to leave it out on purpose, ` +
			`or implement actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder on lossless_test.WithChan`,
	}, {
		typeOf[Event](), []lossless.Option{hint},
		`type lossless_test.Event would lose field Name ` +
			`(lossless_test.Event gets MarshalBinary from its embedded field Time, so msgpack encodes that field alone, type string): ` +
			`make Time a named field, tag it msgpack:"-" to leave it out on purpose, ` +
			`or implement actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder on lossless_test.Event`,
	}, {
		typeOf[Counter](), nil,
		`type lossless_test.Counter would fail in msgpack ` +
			`(msgpack calls (*lossless_test.Counter).EncodeMsgpack on a value it cannot take the address of): ` +
			`give EncodeMsgpack a value receiver, encode a *lossless_test.Counter, ` +
			`or implement msgpack.CustomEncoder+CustomDecoder or encoding.BinaryMarshaler+BinaryUnmarshaler on lossless_test.Counter`,
	}, {
		typeOf[HasTextOnly](), []lossless.Option{hint},
		`type lossless_test.HasTextOnly would fail in msgpack at field T ` +
			`(msgpack encodes it with encoding.TextMarshaler and decodes it field by field, type lossless_test.TextOnly): ` +
			`implement encoding.TextUnmarshaler on lossless_test.TextOnly, tag it msgpack:"-" to leave it out on purpose, ` +
			`or implement actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder on lossless_test.HasTextOnly`,
	}, {
		typeOf[[]chan int](), nil,
		`type []chan int would fail in msgpack at value [] (msgpack cannot encode a chan, type chan int): ` +
			`implement msgpack.CustomEncoder+CustomDecoder or encoding.BinaryMarshaler+BinaryUnmarshaler on []chan int`,
	}, {
		typeOf[Dup](), []lossless.Option{hint},
		`type lossless_test.Dup would lose field A (msgpack decodes its name "x" into B, type int): ` +
			`give one of them another msgpack:"name", tag it msgpack:"-" to leave it out on purpose, ` +
			`or implement actors.StateMarshaler / msgpack.CustomEncoder+CustomDecoder on lossless_test.Dup`,
	}} {
		t.Run(c.t.String(), func(t *testing.T) {
			require.EqualError(t, lossless.Check(c.t, c.opts...), c.want)
		})
	}
}

func TestTrust(t *testing.T) {
	snap := lossless.Trust(typeOf[Snapshotter]())
	err := lossless.Check(typeOf[*Secretive]())
	var le *lossless.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, lossless.NoExportedFields, le.Reason)
	require.NoError(t, lossless.Check(typeOf[*Secretive](), snap))
	// Secretive's method has a pointer receiver; a value is trusted too,
	// since the caller, not msgpack, calls it.
	require.NoError(t, lossless.Check(typeOf[Secretive](), snap))
	// Trust reaches nested fields as well as the root.
	require.NoError(t, lossless.Check(typeOf[map[string]*Secretive](), snap))
	require.NoError(t, lossless.Check(typeOf[HoldsRegistered](), lossless.Trust(typeOf[Registered]()), lossless.Trust(nil)))
	require.Error(t, lossless.Check(typeOf[HoldsRegistered]()))
}

func TestIsEmpty(t *testing.T) {
	type P *P
	for _, c := range []struct {
		t    reflect.Type
		want bool
	}{
		{typeOf[struct{}](), true},
		{typeOf[Empty](), true},
		{typeOf[*Empty](), true},
		{typeOf[**struct{}](), true},
		{typeOf[Ignored](), false},
		{typeOf[Tally](), false},
		{typeOf[int](), false},
		{typeOf[[]struct{}](), false},
		{typeOf[P](), false},
		{nil, false},
	} {
		assert.Equal(t, c.want, lossless.IsEmpty(c.t), "%v", c.t)
	}
}

func TestReasonString(t *testing.T) {
	assert.Equal(t, "unexported field", lossless.Unexported.String())
	assert.Equal(t, "msgpack panics", lossless.Panics.String())
	assert.Equal(t, "Reason(0)", lossless.Reason(0).String())
}

func TestErrorIsPointer(t *testing.T) {
	err := lossless.Check(typeOf[Account]())
	var le *lossless.Error
	require.True(t, errors.As(err, &le))
	assert.Equal(t, err, le)
}
