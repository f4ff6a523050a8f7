package actors

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// StateMarshaler is implemented by actors that encode their own state for a
// snapshot. MarshalState runs on the actor's goroutine, between two
// messages, so it may read the actor's fields freely; the bytes it returns
// belong to the snapshot and must not be changed afterwards. An actor that
// does not implement it has its exported fields encoded with msgpack.
type StateMarshaler interface {
	MarshalState() ([]byte, error)
}

// StateUnmarshaler is implemented by actors that decode the state their
// MarshalState produced. A restore calls it on a fresh instance, on the
// actor's goroutine, before the actor sees its first message.
type StateUnmarshaler interface {
	UnmarshalState(state []byte) error
}

// RecordedMessage is an application message recorded as channel state, in
// the form a snapshot stores it: its registered type name and its msgpack
// encoding. It is the payload of every snapshot.Message in a Global that
// actors produces.
type RecordedMessage = persistence.RecordedMessage

// ErrUnregistered is wrapped by the error of a snapshot that recorded a
// message whose type was never registered with RegisterMessage.
var ErrUnregistered = errors.New("actors: message type not registered")

// messageTypes maps message types to names and back. It is global, like
// encoding/gob's, because message types are a property of the program.
var messageTypes = struct {
	sync.RWMutex
	byType map[reflect.Type]string
	byName map[string]reflect.Type
}{byType: map[reflect.Type]string{}, byName: map[string]reflect.Type{}}

// RegisterMessage registers the message type T under name, so that messages
// of type T in flight can be recorded in a snapshot and rebuilt by a
// restore. Register the type the application sends: T for values, *T for
// pointers. Registering one name for two types, or one type under two
// names, panics, since it is a programming error.
func RegisterMessage[T any](name string) {
	t := reflect.TypeFor[T]()
	messageTypes.Lock()
	defer messageTypes.Unlock()
	if old, ok := messageTypes.byName[name]; ok && old != t {
		panic(fmt.Sprintf("actors: message name %q registered for %v and %v", name, old, t))
	}
	if old, ok := messageTypes.byType[t]; ok && old != name {
		panic(fmt.Sprintf("actors: message type %v registered as %q and %q", t, old, name))
	}
	messageTypes.byType[t] = name
	messageTypes.byName[name] = t
}

// messageName returns the registered name of payload's type.
func messageName(payload any) (string, error) {
	messageTypes.RLock()
	name, ok := messageTypes.byType[reflect.TypeOf(payload)]
	messageTypes.RUnlock()
	if !ok {
		return "", fmt.Errorf("%w: %T (register it with actors.RegisterMessage)", ErrUnregistered, payload)
	}
	return name, nil
}

// encoder encodes recorded messages and states with one reused msgpack
// encoder and buffer. Each participant owns one, used on its goroutine.
type encoder struct {
	buf   bytes.Buffer
	enc   *msgpack.Encoder
	ends  []int
	names []string
	// The last message type named, and its name: a channel's messages
	// are mostly of one type, and the registry costs a read lock and a
	// hash of the type.
	lastType reflect.Type
	lastName string
}

// name returns the registered name of payload's type.
func (e *encoder) name(payload any) (string, error) {
	t := reflect.TypeOf(payload)
	if t == e.lastType && t != nil {
		return e.lastName, nil
	}
	name, err := messageName(payload)
	if err == nil {
		e.lastType, e.lastName = t, name
	}
	return name, err
}

func (e *encoder) reset() {
	if e.enc == nil {
		e.enc = msgpack.NewEncoder(&e.buf)
	}
	e.buf.Reset()
	e.ends = e.ends[:0]
}

// messages returns msgs with each payload replaced by its RecordedMessage.
// The encodings share one allocation.
func (e *encoder) messages(msgs []snapshot.Message) ([]snapshot.Message, error) {
	e.reset()
	e.names = e.names[:0]
	for _, m := range msgs {
		name, err := e.name(m.Payload)
		if err != nil {
			return nil, err
		}
		if err := e.enc.Encode(m.Payload); err != nil {
			return nil, fmt.Errorf("actors: encoding %s: %w", name, err)
		}
		e.names = append(e.names, name)
		e.ends = append(e.ends, e.buf.Len())
	}
	data := bytes.Clone(e.buf.Bytes())
	out := make([]snapshot.Message, len(msgs))
	start := 0
	for i, m := range msgs {
		end := e.ends[i]
		out[i] = snapshot.Message{Seq: m.Seq, Payload: RecordedMessage{Type: e.names[i], Data: data[start:end:end]}}
		start = end
	}
	return out, nil
}

// state encodes an actor's state, on its goroutine.
func (e *encoder) state(a actor.Actor) ([]byte, error) {
	if m, ok := a.(StateMarshaler); ok {
		return m.MarshalState()
	}
	e.reset()
	if err := e.enc.Encode(a); err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// DecodeMessage rebuilds a recorded message as a value of its registered
// type. Only registered types are built.
func DecodeMessage(m RecordedMessage) (any, error) {
	t, err := messageType(m.Type)
	if err != nil {
		return nil, err
	}
	v, err := decodeMessage(t, m.Data)
	if err != nil {
		return nil, fmt.Errorf("actors: decoding %s: %w", m.Type, err)
	}
	return v, nil
}

// messageType returns the type registered under name.
func messageType(name string) (reflect.Type, error) {
	messageTypes.RLock()
	t, ok := messageTypes.byName[name]
	messageTypes.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnregistered, name)
	}
	return t, nil
}

// decodeMessage decodes data as a value of type t.
func decodeMessage(t reflect.Type, data []byte) (any, error) {
	ptr := reflect.New(t)
	if err := msgpack.Unmarshal(data, ptr.Interface()); err != nil {
		return nil, err
	}
	return ptr.Elem().Interface(), nil
}

// restoreState decodes state into a fresh actor instance.
func restoreState(a actor.Actor, state []byte) error {
	if u, ok := a.(StateUnmarshaler); ok {
		return u.UnmarshalState(state)
	}
	return msgpack.Unmarshal(state, a)
}
