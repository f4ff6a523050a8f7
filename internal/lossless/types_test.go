package lossless_test

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// The types below are the cases of the tests: each is either one that
// Check accepts, and whose values the round-trip test encodes and decodes
// unchanged, or one that it rejects, with a value showing the loss.

// Scalars has a field of every kind msgpack encodes by itself.
type Scalars struct {
	B   bool
	I   int
	I8  int8
	I16 int16
	I32 int32
	I64 int64
	U   uint
	U8  uint8
	U16 uint16
	U32 uint32
	U64 uint64
	F32 float32
	F64 float64
	S   string
	Raw []byte
	Arr [4]byte
	Dur time.Duration
}

// Containers nests slices, arrays, maps and pointers.
type Containers struct {
	Items   []Item
	Fixed   [3]Item
	ByName  map[string]*Item
	ByKey   map[Key]int
	Matrix  [][]int32
	PP      **int
	Strings []string
	Flags   map[string]bool
}

// Item is an element of Containers.
type Item struct {
	Name  string
	Count int
}

// Key is a struct map key.
type Key struct {
	A string
	B int16
}

// Node is recursive through a pointer, a slice and a map.
type Node struct {
	Value    int
	Next     *Node
	Children []Node
	ByName   map[string]*Node
}

// Ping and Pong are mutually recursive.
type Ping struct {
	Pong *Pong
	N    int
}

// Pong is the other half of Ping.
type Pong struct {
	Ping []Ping
	S    string
}

// Tagged renames, omits and skips fields with msgpack tags.
type Tagged struct {
	//lint:ignore U1000 msgpack reads the tag of _msgpack for the struct's options.
	_msgpack struct{} `msgpack:",omitempty"`
	_        int
	ID       int               `msgpack:"id"`
	Note     string            `msgpack:"note,omitempty"`
	Tags     []string          `msgpack:",omitempty"`
	Meta     map[string]string `msgpack:",omitempty"`
	Old      string            `msgpack:"new,alias:old"`
	Skipped  chan int          `msgpack:"-"`
	//lint:ignore U1000 the field is there to be left out.
	cache map[string]int `msgpack:"-"`
}

// AsArray encodes as an array.
type AsArray struct {
	//lint:ignore U1000 msgpack reads the tag of _msgpack for the struct's options.
	_msgpack struct{} `msgpack:",as_array"`
	A        int
	B        string
}

// Base is embedded, and inlined, in Embedding.
type Base struct {
	ID   int
	Kind string
}

// inner is an unexported struct whose exported fields msgpack inlines.
type inner struct {
	Level int
}

// Extra is embedded through a pointer.
type Extra struct {
	Tag string
}

// Embedding embeds structs that msgpack inlines.
type Embedding struct {
	Base
	inner
	*Extra
	Name string
}

// NotInlined embeds Base after a field with one of its names, so msgpack
// encodes Base as a nested map instead of inlining it.
type NotInlined struct {
	ID int
	Base
}

// Times holds times, which msgpack encodes as an extension.
type Times struct {
	At    time.Time
	Maybe *time.Time
	Log   []time.Time
	ByDay map[string]time.Time
}

// Loose holds interfaces, which Check accepts.
type Loose struct {
	Any  any
	Err  error
	Bag  map[string]any
	List []any
}

// Empty deliberately has no state.
type Empty struct{}

// Ignored has only fields left out on purpose.
type Ignored struct {
	//lint:ignore U1000 the field is there to be left out.
	mu   sync.Mutex `msgpack:"-"`
	Done chan bool  `msgpack:"-"`
}

// Point encodes itself with value-receiver CustomEncoder methods, and has
// an unexported field msgpack never sees.
type Point struct {
	x, y int
}

func (p Point) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeMulti(p.x, p.y) }

func (p *Point) DecodeMsgpack(d *msgpack.Decoder) error { return d.DecodeMulti(&p.x, &p.y) }

func (p *Point) fill(r *rand.Rand) { p.x, p.y = r.Int(), -r.Int() }

// Counter encodes itself with pointer-receiver CustomEncoder methods.
type Counter struct {
	n int
}

func (c *Counter) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeInt(int64(c.n)) }

func (c *Counter) DecodeMsgpack(d *msgpack.Decoder) (err error) {
	c.n, err = d.DecodeInt()
	return err
}

func (c *Counter) fill(r *rand.Rand) { c.n = r.Int() }

// Blob implements msgpack.Marshaler and Unmarshaler.
type Blob struct {
	data string
}

func (b Blob) MarshalMsgpack() ([]byte, error) { return msgpack.Marshal(b.data) }

func (b *Blob) UnmarshalMsgpack(p []byte) error { return msgpack.Unmarshal(p, &b.data) }

func (b *Blob) fill(r *rand.Rand) { b.data = strconv.Itoa(r.Int()) }

// Bin implements encoding.BinaryMarshaler and BinaryUnmarshaler.
type Bin struct {
	v uint16
}

func (b Bin) MarshalBinary() ([]byte, error) { return []byte{byte(b.v >> 8), byte(b.v)}, nil }

func (b *Bin) UnmarshalBinary(p []byte) error {
	if len(p) != 2 {
		return errors.New("bin: bad length")
	}
	b.v = uint16(p[0])<<8 | uint16(p[1])
	return nil
}

func (b *Bin) fill(r *rand.Rand) { b.v = uint16(r.Uint32()) }

// Level implements encoding.TextMarshaler and TextUnmarshaler.
type Level int

func (l Level) MarshalText() ([]byte, error) { return []byte(strconv.Itoa(int(l))), nil }

func (l *Level) UnmarshalText(p []byte) error {
	n, err := strconv.Atoi(string(p))
	*l = Level(n)
	return err
}

// Marshalers holds types that encode themselves, in a pointer root, so
// that Counter's pointer methods have an address.
type Marshalers struct {
	P       Point
	C       Counter
	Cs      []Counter
	B       Blob
	Bin     Bin
	L       Level
	Ls      map[string]Level
	Big     *big.Int
	IP      net.IP
	Counted map[string]*Counter
}

// Snapshotter is an interface a caller trusts, as actors trusts its
// StateMarshaler.
type Snapshotter interface {
	Snapshot() ([]byte, error)
}

// Secretive has only unexported state but encodes itself through
// Snapshotter.
type Secretive struct {
	balance int
}

func (s *Secretive) Snapshot() ([]byte, error) { return []byte(strconv.Itoa(s.balance)), nil }

// Registered stands for a type registered with msgpack.RegisterExt.
type Registered struct {
	//lint:ignore U1000 the field is what msgpack would lose if the type were not registered.
	secret int
}

// HoldsRegistered has a field of a trusted concrete type.
type HoldsRegistered struct {
	R Registered
}

// The rejected types.

// Account loses history.
type Account struct {
	Owner   string
	history []int
}

// Wallet loses Owner.secret.
type Wallet struct {
	ID    int
	Owner Person
}

// Person has an unexported field.
type Person struct {
	Name   string
	secret string
}

// Ledger loses the note of each entry.
type Ledger struct {
	Entries []Entry
}

// Entry has an unexported field.
type Entry struct {
	Amount int
	note   string
}

// Index loses data in map keys and values.
type Index struct {
	ByKey map[Person]int
	ByID  map[int]Entry
}

// Holder loses data behind a pointer.
type Holder struct {
	P *Person
}

// Tally has no exported fields.
type Tally struct {
	n     int
	total float64
}

// Guarded has a field with no exported fields.
type Guarded struct {
	Count int
	Mu    sync.Mutex
}

// hidden has only unexported fields.
type hidden struct {
	a int
}

// OnlyHidden embeds a struct with only unexported fields.
type OnlyHidden struct {
	hidden
}

// Leaky inlines an embedded struct with an unexported field.
type Leaky struct {
	Inner
	Z int
}

// Inner has an unexported field.
type Inner struct {
	A int
	b int
}

// WithChan and the next few hold kinds msgpack cannot encode.
type WithChan struct {
	ID   int
	Done chan struct{}
}

// WithFunc holds a func.
type WithFunc struct {
	OnDone func()
}

// WithUnsafe holds an unsafe.Pointer.
type WithUnsafe struct {
	P unsafe.Pointer
}

// WithComplex holds a complex128.
type WithComplex struct {
	C complex128
}

// WithComplex64 holds a complex64 in a slice.
type WithComplex64 struct {
	Cs []complex64
}

// WithUintptr holds a uintptr, on which msgpack panics.
type WithUintptr struct {
	P uintptr
}

// ChanKey has a map key msgpack cannot encode.
type ChanKey struct {
	M map[chan int]string
}

// Tree is recursive and loses its note.
type Tree struct {
	Kids []*Tree
	note string
}

// First has two problems; the first in depth-first field order is
// First.A.secret.
type First struct {
	A Person
	//lint:ignore U1000 the field is the second problem, which Check does not reach.
	b int
	C chan int
}

// Dup gives two fields one msgpack name.
type Dup struct {
	A int `msgpack:"x"`
	B int `msgpack:"x"`
}

// Named has a Name.
type Named struct {
	Name string
}

// ShadowedAfter inlines Named, then declares a Name of its own.
type ShadowedAfter struct {
	Named
	Name string
}

// ShadowedInline forces Named inline next to a Name of its own.
type ShadowedInline struct {
	Name  string
	Named `msgpack:",inline"`
}

// AliasClash aliases a name another field uses.
type AliasClash struct {
	A int `msgpack:"a"`
	B int `msgpack:"b,alias:a"`
}

// Event embeds time.Time, whose MarshalBinary becomes Event's.
type Event struct {
	time.Time
	Name string
}

// Versioned embeds Bin, whose MarshalBinary becomes Versioned's.
type Versioned struct {
	Bin
	Note string
}

// Stamped embeds two types with MarshalBinary, which cancel out, and
// time.Time, whose MarshalText becomes Stamped's.
type Stamped struct {
	Bin
	time.Time
	Seq int
}

// OwnMarshaler embeds Bin but declares its own MarshalBinary, so nothing is
// lost.
type OwnMarshaler struct {
	Bin
	Note string
}

func (o OwnMarshaler) MarshalBinary() ([]byte, error) {
	b, _ := o.Bin.MarshalBinary()
	return append(b, o.Note...), nil
}

func (o *OwnMarshaler) UnmarshalBinary(p []byte) error {
	if len(p) < 2 {
		return errors.New("short")
	}
	o.Note = string(p[2:])
	return o.Bin.UnmarshalBinary(p[:2])
}

// TextOnly encodes as text but has no way back.
type TextOnly struct {
	A int
}

func (t TextOnly) MarshalText() ([]byte, error) { return []byte(strconv.Itoa(t.A)), nil }

// HasTextOnly holds a TextOnly.
type HasTextOnly struct {
	T TextOnly
}

// Mode decodes from text but encodes as an int.
type Mode int

func (m *Mode) UnmarshalText(p []byte) error {
	n, err := strconv.Atoi(string(p))
	*m = Mode(n)
	return err
}

// HasMode holds a Mode.
type HasMode struct {
	M Mode
}

// HasCounter holds a Counter, whose methods have pointer receivers.
type HasCounter struct {
	C Counter
}

// CounterMap holds Counters as map values, which have no address.
type CounterMap struct {
	M map[string]Counter
}

// CounterArray holds Counters in an array.
type CounterArray struct {
	A [2]Counter
}

// counter is an unexported non-struct type.
type counter int

// EmbedsInt embeds an unexported int type.
type EmbedsInt struct {
	counter
	Z int
}

// EmbedsPtr embeds a pointer to an unexported struct.
type EmbedsPtr struct {
	*inner
	Z int
}

// iface is an unexported interface type.
type iface interface{}

// EmbedsIface embeds an unexported interface type.
type EmbedsIface struct {
	iface
	Z int
}

// InlinePtr forces a pointer inline.
type InlinePtr struct {
	*Named `msgpack:",inline"`
	X      int
}

// InternInt puts the intern option on an int.
type InternInt struct {
	N int `msgpack:",intern"`
}

// SelfEmbed embeds a pointer to itself.
type SelfEmbed struct {
	*SelfEmbed
	X int
}

// NoInlineSelf embeds a pointer to itself but is not inlined, so msgpack
// encodes it as a nested map.
type NoInlineSelf struct {
	*NoInlineSelf `msgpack:",noinline"`
	X             int
}

// Tick embeds Counter, whose pointer-receiver EncodeMsgpack becomes
// *Tick's.
type Tick struct {
	Counter
	At int
}

// JustTime embeds time.Time and nothing else, so the promoted
// MarshalBinary loses nothing.
type JustTime struct {
	time.Time
}

// InlineNamed forces Named inline, with no clash.
type InlineNamed struct {
	Named `msgpack:",inline"`
	X     int
}

// InlineLeaky forces inline a struct with an unexported field.
type InlineLeaky struct {
	Inner `msgpack:",inline"`
}

// binA and binB are unexported types with MarshalBinary.
type binA struct{ V byte }

func (b binA) MarshalBinary() ([]byte, error) { return []byte{b.V}, nil }

func (b *binA) UnmarshalBinary(p []byte) error { b.V = p[0]; return nil }

type binB struct{ V byte }

func (b binB) MarshalBinary() ([]byte, error) { return []byte{b.V}, nil }

func (b *binB) UnmarshalBinary(p []byte) error { b.V = p[0]; return nil }

// Ambiguous embeds two types with MarshalBinary, which cancel out, so
// msgpack encodes its fields, and calls the methods of unexported
// embedded types.
type Ambiguous struct {
	binA
	binB
	X int
}

// EmbedsRegistered embeds a type that a caller trusts as registered with
// msgpack, which msgpack then does not inline.
type EmbedsRegistered struct {
	Registered
	X int
}

// WithStringer has a field of a non-empty interface type other than error.
type WithStringer struct{ S fmt.Stringer }
