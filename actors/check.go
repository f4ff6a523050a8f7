package actors

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/proto"

	"github.com/actorsnap/actorsnap/internal/msgpackbound"
	"github.com/actorsnap/actorsnap/snapshot"
)

// ErrStateDecode is returned, inside a *DecodeError, by CheckDecodes and
// Restore when a stored snapshot holds a participant's state or a message
// in flight that this program cannot decode: the participant's kind or the
// message's type is not registered, or the stored bytes no longer fit the
// Go type (a field's type changed between builds).
var ErrStateDecode = errors.New("actors: state does not decode")

// DecodeError says which part of a stored snapshot does not decode and
// why. It matches ErrStateDecode with errors.Is, and unwraps to the cause:
// ErrUnknownKind for a kind not given, ErrUnregistered for a message type
// not registered, or the decoder's error.
type DecodeError struct {
	Snapshot snapshot.SnapshotID
	// Participant is the participant whose state does not decode; empty
	// for a message.
	Participant snapshot.ProcessID
	// Kind is the participant's kind; empty for a message.
	Kind string
	// Type is the Go type the state was decoded into ("*bankdemo.Account";
	// empty when the kind is unknown, "<nil>" when its producer panicked),
	// or a message's registered name.
	Type string
	// Channel is the channel of a message in flight, and Position its
	// place there (1 for the first); zero for a participant's state.
	Channel  snapshot.Channel
	Position int
	// Seq is the message's sequence number on Channel.
	Seq uint64
	Err error
}

// Error returns one line naming the snapshot, the participant or message,
// and the cause.
func (e *DecodeError) Error() string {
	var s string
	switch {
	case e.Participant == "":
		s = fmt.Sprintf("actors: snapshot %d: message %d in flight on %s (seq %d, type %q): does not decode: %v",
			e.Snapshot, e.Position, e.Channel, e.Seq, e.Type, e.Err)
	case e.Type == "":
		s = fmt.Sprintf("actors: snapshot %d: participant %s (kind %q): state does not decode: %v",
			e.Snapshot, e.Participant, e.Kind, e.Err)
	default:
		s = fmt.Sprintf("actors: snapshot %d: participant %s (kind %q, type %s): state does not decode: %v",
			e.Snapshot, e.Participant, e.Kind, e.Type, e.Err)
	}
	// A decoder's error may span lines; a command line prints one.
	return strings.ReplaceAll(s, "\n", " ")
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }

// Is reports whether target is ErrStateDecode.
func (e *DecodeError) Is(target error) bool { return target == ErrStateDecode }

// CheckDecodes checks that the stored snapshot g decodes with this
// program's types, without spawning anything: every participant's state
// into a fresh instance of its kind, and every message in flight to a
// participant into its registered type. Kinds are given with WithKind, as
// to Restore (other options are ignored); message types are those
// registered with RegisterMessage. Restore runs it before it spawns.
//
// Each state is decoded as a restore decodes it: by the actor's
// UnmarshalState, or with msgpack into its exported fields. A msgpack
// state or message also fails when a number it holds does not survive the
// decoding (a field narrowed from int64 to int8, or made unsigned, with a
// value that no longer fits), which msgpack itself lets pass. Fields
// stored but no longer in the type are ignored, and fields of the type not
// stored keep the value the kind's producer gave them, as in a restore.
//
// The kind's producer is called once per participant; the instance is
// dropped, never started. Departed participants, and messages to them,
// are skipped, as Restore skips them. The error, for the first failure in
// the snapshot's order, is a *DecodeError matching ErrStateDecode, or an
// error wrapping ErrConfig for a kind given without a name or producer, or
// twice.
func CheckDecodes(g *snapshot.Global, opts ...Option) error {
	var c config
	for _, o := range opts {
		o(&c)
	}
	kinds := make(map[string]*kind, len(c.kinds))
	for _, k := range c.kinds {
		if k.name == "" || k.producer == nil {
			return fmt.Errorf("%w: a kind needs a name and a producer", ErrConfig)
		}
		if _, ok := kinds[k.name]; ok {
			return fmt.Errorf("%w: kind %q registered twice", ErrConfig, k.name)
		}
		kinds[k.name] = k
	}
	types, err := c.messageTypes()
	if err != nil {
		return err
	}
	live := make(map[snapshot.ProcessID]bool, len(g.Participants))
	for _, pt := range g.Participants {
		if pt.Departed {
			continue
		}
		live[pt.ID] = true
		k, ok := kinds[pt.Kind]
		if !ok {
			return &DecodeError{Snapshot: g.ID, Participant: pt.ID, Kind: pt.Kind,
				Err: fmt.Errorf("%w: %q (give it with WithKind)", ErrUnknownKind, pt.Kind)}
		}
		if err := checkState(k, pt.State); err != nil {
			return &DecodeError{Snapshot: g.ID, Participant: pt.ID, Kind: pt.Kind, Type: err.typ, Err: err.err}
		}
	}
	for _, ch := range g.Channels {
		if !live[ch.Channel.To] {
			continue
		}
		for i, m := range ch.Messages {
			rm, ok := m.Payload.(RecordedMessage)
			if !ok {
				return &DecodeError{Snapshot: g.ID, Channel: ch.Channel, Position: i + 1, Seq: m.Seq, Type: fmt.Sprintf("%T", m.Payload),
					Err: fmt.Errorf("payload %T is not a RecordedMessage", m.Payload)}
			}
			if err := checkRecorded(types, rm); err != nil {
				return &DecodeError{Snapshot: g.ID, Channel: ch.Channel, Position: i + 1, Seq: m.Seq, Type: rm.Type, Err: err}
			}
		}
	}
	return nil
}

// stateError is a state that does not decode into an instance of type typ.
type stateError struct {
	typ string
	err error
}

// checkState decodes state into a fresh instance of k, as a restore does.
// A panic of the producer or the decoder is a state that does not decode:
// in a restore it would crash the actor as it starts.
func checkState(k *kind, state []byte) (se *stateError) {
	var a actor.Actor
	defer func() {
		if r := recover(); r != nil {
			se = &stateError{typ: fmt.Sprintf("%T", a), err: fmt.Errorf("panic: %v", r)}
		}
	}()
	a = k.producer()
	if state == nil {
		state = []byte{} // a restore decodes even an empty state
	}
	err := restoreState(a, state)
	if _, custom := a.(StateUnmarshaler); err == nil && !custom {
		err = numbersSurvive(state, a)
	}
	if err != nil {
		return &stateError{typ: fmt.Sprintf("%T", a), err: err}
	}
	return nil
}

// checkRecorded decodes a recorded message as a restore does.
func checkRecorded(types *messageTypes, m RecordedMessage) error {
	name, data, _, err := unwrapRecorded(m)
	if err != nil {
		return err
	}
	t, err := types.typeOf(name)
	if err != nil {
		return err
	}
	v, err := decodeMessage(t, data)
	if _, pb := v.(proto.Message); err == nil && !pb {
		err = numbersSurvive(data, v)
	}
	return err
}

// numbersSurvive checks that the numbers in the msgpack data survived decoding
// into v: msgpack converts an integer to a narrower or unsigned field, or
// to a float that cannot hold it exactly, without a word, so a changed
// type could turn a balance of 300 into 44. v, encoded again, is compared with data field
// by field; only numbers stored under the same field on both sides are
// compared, so fields added, removed or encoded differently pass. When
// either side cannot be read generically, it judges nothing. A state
// encoded again to the same bytes, the common case, is compared no
// further.
func numbersSurvive(data []byte, v any) error {
	again, err := msgpack.Marshal(v)
	if err != nil || bytes.Equal(again, data) {
		return nil // the type did not change, or nothing to compare
	}
	stored, err := untyped(data)
	if err != nil {
		return nil
	}
	decoded, err := untyped(again)
	if err != nil {
		return nil
	}
	return sameNumbers("", stored, decoded)
}

// untyped decodes msgpack data into maps, slices and scalars.
func untyped(data []byte) (any, error) {
	if _, err := msgpackbound.Len(data); err != nil {
		return nil, err
	}
	d := msgpack.NewDecoder(bytes.NewReader(data))
	d.SetMapDecoder(func(d *msgpack.Decoder) (any, error) { return d.DecodeUntypedMap() })
	return d.DecodeInterface()
}

// sameNumbers compares the numbers of stored with those at the same place
// in decoded; path names the place.
func sameNumbers(path string, stored, decoded any) error {
	switch s := stored.(type) {
	case map[any]any:
		d, ok := decoded.(map[any]any)
		if !ok {
			return nil
		}
		keys := slices.SortedFunc(maps.Keys(s), func(a, b any) int {
			return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
		})
		for _, k := range keys {
			dv, ok := lookup(d, k)
			if !ok {
				continue
			}
			if err := sameNumbers(join(path, fmt.Sprint(k)), s[k], dv); err != nil {
				return err
			}
		}
	case []any:
		d, ok := decoded.([]any)
		if !ok || len(d) != len(s) {
			return nil
		}
		for i := range s {
			if err := sameNumbers(fmt.Sprintf("%s[%d]", path, i), s[i], d[i]); err != nil {
				return err
			}
		}
	default:
		a, okA := number(stored)
		b, okB := number(decoded)
		if !okA || !okB || a == nil && b == nil || a != nil && b != nil && a.Cmp(b) == 0 {
			return nil
		}
		if path == "" {
			path = "value"
		}
		return fmt.Errorf("%s: stored %s decodes as %s (the type no longer holds it)", path, show(stored), show(decoded))
	}
	return nil
}

// lookup finds key k in m; a key of a type that cannot index a map finds
// nothing.
func lookup(m map[any]any, k any) (any, bool) {
	if k == nil || !isComparable(k) {
		return nil, false
	}
	v, ok := m[k]
	return v, ok
}

// isComparable reports whether k can be a map key.
func isComparable(k any) bool {
	switch k.(type) {
	case []byte, []any, map[any]any:
		return false
	}
	return true
}

// join appends a field name to a path.
func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// number returns x as an exact number, nil for NaN; ok is false when x is
// not a number.
func number(x any) (n *big.Float, ok bool) {
	switch v := reflect.ValueOf(x); v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return new(big.Float).SetInt64(v.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return new(big.Float).SetUint64(v.Uint()), true
	case reflect.Float32, reflect.Float64:
		return float(v.Float()), true
	}
	return nil, false
}

// show prints a number, a float32 with the digits it holds as a float64.
func show(x any) string {
	if f, ok := x.(float32); ok {
		return strconv.FormatFloat(float64(f), 'g', -1, 64)
	}
	return fmt.Sprint(x)
}

// float returns f as an exact number, nil for NaN.
func float(f float64) *big.Float {
	if math.IsNaN(f) {
		return nil
	}
	return new(big.Float).SetFloat64(f)
}
