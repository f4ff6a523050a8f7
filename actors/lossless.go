package actors

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/lossless"
)

// ErrLossy is wrapped by the error of a spawn, or of a message type's
// registration, whose type would not survive a snapshot: msgpack would
// leave out a field (an unexported one, say) or fail on it (a channel).
// The error names the type, the field and the fixes.
var ErrLossy = errors.New("actors: type would not survive a snapshot")

// Stateless is embedded in an actor that keeps no state of its own, to
// say so: its snapshots hold an empty state, and a restore gives it
// nothing. Its unexported fields (the PIDs it talks to, say) are left as
// the producer makes them; an exported field beside it is refused, since
// it would be left out of every snapshot.
type Stateless struct{}

// MarshalState implements StateMarshaler: no state.
func (Stateless) MarshalState() ([]byte, error) { return nil, nil }

// UnmarshalState implements StateUnmarshaler: no state.
func (Stateless) UnmarshalState([]byte) error { return nil }

var (
	statelessType = reflect.TypeFor[Stateless]()
	marshalerType = reflect.TypeFor[StateMarshaler]()
	// trusted are the types msgpack encodes without loss though lossless
	// cannot see it: a PID's unexported fields are protobuf's bookkeeping
	// and its process cache, rebuilt on use.
	trusted = []lossless.Option{lossless.Trust(reflect.TypeFor[actor.PID]())}
)

// lossChecks remembers the answer for each actor type: a type is checked
// once, at its first spawn.
var lossChecks sync.Map // reflect.Type -> error

// checkLossless reports why the state of actor a would not survive a
// snapshot, or nil.
func checkLossless(a actor.Actor) error {
	t := reflect.TypeOf(a)
	if v, ok := lossChecks.Load(t); ok {
		err, _ := v.(error)
		return err
	}
	err := stateLoss(t)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrLossy, err)
	}
	lossChecks.Store(t, err)
	return err
}

func stateLoss(t reflect.Type) error {
	if t.Implements(marshalerType) {
		if _, ok := reflect.Zero(t).Interface().(StateUnmarshaler); !ok {
			return fmt.Errorf("%v implements MarshalState but not UnmarshalState: a restore could not read its state back", t)
		}
		if f, ok := exportedBeside(t); ok {
			return fmt.Errorf("%v embeds actors.Stateless but has the exported field %s, which no snapshot would hold: tag it msgpack:\"-\", unexport it, or drop Stateless", t, f)
		}
		return nil
	}
	if lossless.IsEmpty(t) {
		return fmt.Errorf("%v has no fields: embed actors.Stateless to say it keeps no state, or implement actors.StateMarshaler", t)
	}
	return lossless.Check(t, append(trusted, lossless.WithMarshalerHint("actors.StateMarshaler+StateUnmarshaler (or embed actors.Stateless for no state)"))...)
}

// exportedBeside returns an exported field of t's struct, beside an
// embedded Stateless, that msgpack would otherwise encode.
func exportedBeside(t reflect.Type) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return "", false
	}
	embeds := false
	for i := range t.NumField() {
		if f := t.Field(i); f.Anonymous && f.Type == statelessType {
			embeds = true
		}
	}
	if !embeds {
		return "", false
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && f.Type != statelessType && f.Tag.Get("msgpack") != "-" {
			return f.Name, true
		}
	}
	return "", false
}

// checkMessage reports why messages of type t would not survive a
// snapshot, or nil.
func checkMessage(t reflect.Type) error {
	if t.Kind() == reflect.Pointer && t.Implements(protoMessage) {
		return nil // recorded with protobuf's encoding
	}
	if err := lossless.Check(t, append(trusted, lossless.WithMarshalerHint("msgpack.CustomEncoder+CustomDecoder"))...); err != nil {
		return fmt.Errorf("%w: message %w", ErrLossy, err)
	}
	return nil
}

// RoundTrip checks that v, an actor (its state) or a message, comes back
// from a snapshot as it went in: it encodes v as a snapshot does (an
// actor's StateMarshaler if it has one, msgpack otherwise), decodes the
// bytes into a fresh value of v's type as a restore does, and compares.
// A value msgpack encodes must pass the static check (no field left out
// but those tagged msgpack:"-", at any depth) and encode again to the
// same bytes; a value with its own marshaler must come back equal, its
// top-level fields tagged msgpack:"-" aside. Call it in tests with values
// that fill every field: it finds what the static checks cannot, such as
// a custom marshaler that forgets a field.
func RoundTrip(v any) error {
	t := reflect.TypeOf(v)
	if t == nil {
		return errors.New("actors: RoundTrip of nil")
	}
	m, custom := v.(StateMarshaler)
	if !custom {
		if err := lossless.Check(t, trusted...); err != nil {
			return fmt.Errorf("%w: %w", ErrLossy, err)
		}
	}
	fresh := reflect.New(t) // *T
	target := fresh.Interface()
	if t.Kind() == reflect.Pointer {
		fresh.Elem().Set(reflect.New(t.Elem()))
		target = fresh.Elem().Interface()
	}
	var data []byte
	var err error
	if custom {
		data, err = m.MarshalState()
	} else {
		data, err = msgpack.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("actors: encoding %v: %w", t, err)
	}
	if u, ok := target.(StateUnmarshaler); ok {
		err = u.UnmarshalState(data)
	} else {
		err = msgpack.Unmarshal(data, target)
	}
	if err != nil {
		return fmt.Errorf("actors: decoding %v: %w", t, err)
	}
	got := fresh.Elem().Interface()
	if !custom {
		// Compared in msgpack's generic form, where maps compare whatever
		// order msgpack wrote them in.
		if !sameMsgpack(data, got) {
			return fmt.Errorf("actors: %v does not come back whole: sent %+v, got %+v", t, v, got)
		}
		return nil
	}
	if !reflect.DeepEqual(exported(got), exported(v)) {
		return fmt.Errorf("actors: %v does not come back whole: sent %+v, got %+v", t, v, got)
	}
	return nil
}

// sameMsgpack reports whether v encodes to what data holds, compared as
// generic values.
func sameMsgpack(data []byte, v any) bool {
	again, err := msgpack.Marshal(v)
	if err != nil {
		return false
	}
	var a, b any
	if msgpack.Unmarshal(data, &a) != nil || msgpack.Unmarshal(again, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// exported returns v with the fields a snapshot leaves out on purpose
// (tagged msgpack:"-") zeroed, for RoundTrip's comparison; for an actor
// that embeds Stateless, none of its fields is kept.
func exported(v any) any {
	rv := reflect.ValueOf(v)
	ptr := rv.Kind() == reflect.Pointer
	if ptr {
		if rv.IsNil() {
			return v
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return v
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	_, stateless := exportedBeside(rv.Type())
	stateless = stateless || slices.ContainsFunc(reflect.VisibleFields(rv.Type()), func(f reflect.StructField) bool { return f.Type == statelessType })
	for i := range cp.NumField() {
		if f := cp.Type().Field(i); stateless || f.Tag.Get("msgpack") == "-" {
			clearField(cp.Field(i))
		}
	}
	if ptr {
		return cp.Addr().Interface()
	}
	return cp.Interface()
}

// clearField zeroes a field, exported or not, of an addressable struct.
func clearField(f reflect.Value) {
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetZero()
}
