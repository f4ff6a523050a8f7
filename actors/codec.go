package actors

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/proto"

	"github.com/actorsnap/actorsnap/internal/boxed"
	"github.com/actorsnap/actorsnap/internal/msgpackbound"
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
// message whose type was never registered (WithMessage, RegisterMessage).
var ErrUnregistered = errors.New("actors: message type not registered")

// messageTypes is a system's registry of message types: names to types
// and back. A type T and *T are one registration: the form registered is
// stored under its name, the other form under otherForm + name, so that a
// restore delivers what was sent.
type messageTypes struct {
	mu     sync.RWMutex
	byType map[reflect.Type]string
	byName map[string]reflect.Type
}

// otherForm prefixes the stored name of a registered type's other form:
// *T when T was registered, T when *T was.
const otherForm = "~"

func newMessageTypes() *messageTypes {
	return &messageTypes{byType: map[reflect.Type]string{}, byName: map[string]reflect.Type{}}
}

// register registers t, and its pointer or value form, under name. The
// same registration twice is no error; a name or a type taken otherwise
// is, and so is a type whose encoding would lose data (ErrLossy).
func (m *messageTypes) register(t reflect.Type, name string) error {
	if name == "" || strings.HasPrefix(name, otherForm) {
		return fmt.Errorf("%w: message type %v: a name must be given, and not start with %q", ErrConfig, t, otherForm)
	}
	if err := checkMessage(t); err != nil {
		return err
	}
	other := reflect.PointerTo(t)
	if t.Kind() == reflect.Pointer {
		other = t.Elem()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.byType[t]; ok && strings.TrimPrefix(old, otherForm) == name {
		return nil // registered already, in this form or the other
	}
	if old, ok := m.byName[name]; ok && old != t {
		return fmt.Errorf("%w: message name %q registered for %v and %v", ErrConfig, name, old, t)
	}
	for _, u := range []reflect.Type{t, other} {
		if old, ok := m.byType[u]; ok && old != name && old != otherForm+name {
			return fmt.Errorf("%w: message type %v registered as %q and %q", ErrConfig, t, strings.TrimPrefix(old, otherForm), name)
		}
	}
	m.byType[t], m.byName[name] = name, t
	if t.Kind() == reflect.Pointer && t.Implements(protoMessage) {
		return nil // a protobuf message goes by pointer only
	}
	m.byType[other], m.byName[otherForm+name] = otherForm+name, other
	return nil
}

// name returns the name payload's type is stored under.
func (m *messageTypes) name(payload any) (string, error) {
	m.mu.RLock()
	name, ok := m.byType[reflect.TypeOf(payload)]
	m.mu.RUnlock()
	if !ok {
		return "", fmt.Errorf("%w: %T (register it: actors.WithMessage)", ErrUnregistered, payload)
	}
	return name, nil
}

// typeOf returns the type stored under name.
func (m *messageTypes) typeOf(name string) (reflect.Type, error) {
	m.mu.RLock()
	t, ok := m.byName[name]
	m.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnregistered, name)
	}
	return t, nil
}

// decode rebuilds a recorded message as a value of the type it was sent
// as: within its envelope (*actor.MessageEnvelope), with its sender and
// headers, if it was sent with them.
func (m *messageTypes) decode(rm RecordedMessage) (any, error) {
	name, data, env, err := unwrapRecorded(rm)
	if err != nil {
		return nil, err
	}
	t, err := m.typeOf(name)
	if err != nil {
		return nil, err
	}
	v, err := decodeMessage(t, data)
	if err != nil {
		return nil, fmt.Errorf("actors: decoding %s: %w", displayName(name), err)
	}
	if env != nil {
		env.Message = v
		return env, nil
	}
	return v, nil
}

// unwrapRecorded returns the type name and the encoding of a recorded
// message, and its envelope (Message unset) if it was recorded with one.
func unwrapRecorded(rm RecordedMessage) (name string, data []byte, env *actor.MessageEnvelope, err error) {
	name, ok := strings.CutPrefix(rm.Type, withEnvelope)
	if !ok {
		return rm.Type, rm.Data, nil, nil
	}
	var r envelopeRecord
	if err := msgpackbound.Unmarshal(rm.Data, &r); err != nil {
		return "", nil, nil, fmt.Errorf("actors: decoding the envelope of %s: %w", displayName(name), err)
	}
	return name, r.Data, &actor.MessageEnvelope{Sender: r.Sender, Header: r.Header}, nil
}

// UnwrapRecorded returns a recorded message's type name as registered,
// its encoding (msgpack; protobuf's own for a protobuf message), and its
// envelope's sender and headers when it was recorded with one
// (env.Message unset; env nil when it was not). It reads a message
// without its Go type: a tool that shows a snapshot decodes data itself.
// err is set when the envelope does not decode; name is set even then.
func UnwrapRecorded(m RecordedMessage) (name string, data []byte, env *actor.MessageEnvelope, err error) {
	name, data, env, err = unwrapRecorded(m)
	if err != nil {
		return displayName(m.Type), nil, nil, err
	}
	return displayName(name), data, env, nil
}

// displayName is a stored type name as the user registered it.
func displayName(name string) string {
	return strings.TrimPrefix(strings.TrimPrefix(name, withEnvelope), otherForm)
}

// WithMessage registers the message type T under name as the system is
// built, so that messages of type T (or *T: a type and its pointer are
// one registration) in flight can be recorded in a snapshot and rebuilt
// by a restore; CheckDecodes and DecodeMessage read recorded messages by
// the same options. A name or type registered twice otherwise, or a type
// whose encoding would lose data (ErrLossy: an unexported field, say),
// fails NewSystem with an error that says how to fix it.
func WithMessage[T any](name string) Option {
	t := reflect.TypeFor[T]()
	return func(c *config) { c.messages = append(c.messages, messageReg{t: t, name: name}) }
}

// messageReg is a WithMessage registration.
type messageReg struct {
	t    reflect.Type
	name string
}

// RegisterMessage registers the message type T under name in a running
// system, as WithMessage does when it is built.
func RegisterMessage[T any](s *System, name string) error {
	return s.types.register(reflect.TypeFor[T](), name)
}

// encoder encodes recorded messages and states with one reused msgpack
// encoder and buffer. Each participant owns one, used on its goroutine.
type encoder struct {
	types *messageTypes
	buf   bytes.Buffer
	enc   *msgpack.Encoder
	ends  []int
	names []string
	// The last message type named, and its name: a channel's messages
	// are mostly of one type, and the registry costs a read lock and a
	// hash of the type.
	lastType reflect.Type
	lastName string
	// lastState is the size of the last state encoded: the next is
	// likely of about that size.
	lastState int
}

// name returns the registered name of payload's type.
func (e *encoder) name(payload any) (string, error) {
	t := reflect.TypeOf(payload)
	if t == e.lastType && t != nil {
		return e.lastName, nil
	}
	name, err := e.types.name(payload)
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
		if err := e.add(m.Payload); err != nil {
			return nil, err
		}
	}
	return e.encoded(func(i int) uint64 { return msgs[i].Seq }), nil
}

// add encodes payload at the end of e's buffer and notes its name and
// where it ends.
func (e *encoder) add(payload any) error {
	name, err := e.append(payload)
	if err != nil {
		return err
	}
	e.names = append(e.names, name)
	e.ends = append(e.ends, e.buf.Len())
	return nil
}

// encoded returns the messages added since the last reset, the i-th
// numbered seq(i), sharing one allocation of bytes and one of payloads,
// each payload boxed where it lies: boxed one by one they would
// allocate a copy each.
func (e *encoder) encoded(seq func(i int) uint64) []snapshot.Message {
	data := bytes.Clone(e.buf.Bytes())
	out := make([]snapshot.Message, len(e.ends))
	recs := make([]RecordedMessage, len(e.ends))
	start := 0
	for i, end := range e.ends {
		recs[i] = RecordedMessage{Type: e.names[i], Data: data[start:end:end]}
		out[i] = snapshot.Message{Seq: seq(i), Payload: recordedBoxer.Box(&recs[i])}
		start = end
	}
	return out
}

// recordedBoxer boxes recorded messages where they lie.
var recordedBoxer = boxed.New[RecordedMessage]()

// append encodes payload (a message or an envelope) at the end of e's
// buffer and returns its type name.
func (e *encoder) append(payload any) (string, error) {
	var sender *actor.PID
	var header map[string]string
	var t *tagged
	if tg, ok := payload.(*tagged); ok {
		// The books' marks are recorded as headers: a restore
		// replays a request or an answer with them.
		t, payload, sender = tg, tg.msg, tg.sender
	}
	if env, ok := payload.(*actor.MessageEnvelope); ok {
		payload, sender, header = env.Message, env.Sender, env.Header
	}
	name, err := e.name(payload)
	if err != nil {
		return "", err
	}
	if sender != nil || len(header) > 0 || (t != nil && (t.request != 0 || t.answer != 0)) {
		err = e.envelope(payload, sender, header, t)
		name = withEnvelope + name
	} else {
		err = e.encode(payload)
	}
	if err != nil {
		return "", fmt.Errorf("actors: encoding %s: %w", name, err)
	}
	return name, nil
}

// one returns msg (a message or an envelope) as a RecordedMessage, the
// form in which it crosses to another member: its Data is e's buffer,
// valid until e encodes again.
func (e *encoder) one(msg any) (RecordedMessage, error) {
	e.reset()
	name, err := e.append(msg)
	if err != nil {
		return RecordedMessage{}, err
	}
	return RecordedMessage{Type: name, Data: e.buf.Bytes()}, nil
}

// handOff is the size from which an encoded state keeps the encoder's
// buffer rather than a copy of it: a large state is then written once,
// into a buffer sized from the last one, where a copy would double the
// bytes an actor's turn writes (and growing from empty would copy them
// again on every doubling).
const handOff = 16 << 10

// state encodes an actor's state, on its goroutine.
func (e *encoder) state(a actor.Actor) ([]byte, error) {
	if m, ok := a.(StateMarshaler); ok {
		return m.MarshalState()
	}
	e.reset()
	if want := e.lastState + e.lastState/16; want > e.buf.Cap() {
		e.buf.Grow(want)
	}
	if err := e.enc.Encode(a); err != nil {
		return nil, err
	}
	out := e.buf.Bytes()
	e.lastState = len(out)
	if len(out) < handOff {
		return bytes.Clone(out), nil
	}
	e.buf = bytes.Buffer{} // e.enc writes to &e.buf, which stays
	return out[:len(out):len(out)], nil
}

// DecodeMessage rebuilds a recorded message as a value of the type it
// was sent as, registered through opts (WithMessage). Only registered
// types are built. A request's sender and headers, which a restore
// replays with it, are left out: DecodeEnvelope gives them.
func DecodeMessage(m RecordedMessage, opts ...Option) (any, error) {
	v, err := DecodeEnvelope(m, opts...)
	return actor.UnwrapEnvelopeMessage(v), err
}

// DecodeEnvelope is DecodeMessage with a message sent with a sender or
// headers (a Request, say) given within its *actor.MessageEnvelope, as a
// restore delivers it.
func DecodeEnvelope(m RecordedMessage, opts ...Option) (any, error) {
	types, err := messageTypesOf(opts)
	if err != nil {
		return nil, err
	}
	return types.decode(m)
}

// messageTypesOf returns the registry the WithMessage options in opts
// build.
func messageTypesOf(opts []Option) (*messageTypes, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c.messageTypes()
}

// messageTypes builds the registry of c's WithMessage options.
func (c *config) messageTypes() (*messageTypes, error) {
	types := newMessageTypes()
	for _, r := range c.messages {
		if err := types.register(r.t, r.name); err != nil {
			return nil, err
		}
	}
	return types, nil
}

// DecodeAs decodes a recorded message as a T: a typed read of a message
// in flight (snapshot.ChannelState.Messages hold RecordedMessage
// payloads), with no registration needed. It fails if m was not stored
// as a T: its type name is the caller's to check (m.Type).
func DecodeAs[T any](m RecordedMessage) (T, error) {
	var zero T
	name, data, _, err := unwrapRecorded(m)
	if err != nil {
		return zero, err
	}
	v, err := decodeMessage(reflect.TypeFor[T](), data)
	if err != nil {
		return zero, fmt.Errorf("actors: decoding %s as %T: %w", displayName(name), zero, err)
	}
	return v.(T), nil
}

// encode appends a message's encoding to e.buf: protobuf's own for a
// protobuf message (as Proto.Actor's remote sends it), msgpack otherwise.
func (e *encoder) encode(payload any) error {
	if pm, ok := payload.(proto.Message); ok {
		b, err := proto.MarshalOptions{}.MarshalAppend(e.buf.AvailableBuffer(), pm)
		if err != nil {
			return err
		}
		e.buf.Write(b)
		return nil
	}
	return e.enc.Encode(payload)
}

// withEnvelope prefixes the stored name of a message recorded with its
// envelope: a request's sender, or headers. Its data is an
// envelopeRecord.
const withEnvelope = "@"

// envelopeRecord is the stored form of a message with its envelope.
type envelopeRecord struct {
	Sender *actor.PID         `msgpack:"s,omitempty"`
	Header map[string]string  `msgpack:"h,omitempty"`
	Data   msgpack.RawMessage `msgpack:"d"` // the message's own encoding
}

// envelope appends to e.buf msg with its envelope, in the form msgpack
// gives an envelopeRecord (a map of the fields that are not empty, in
// their order), written field by field: the headers are header's, and a
// tagged message's marks (t, if not nil) over them, as tagged.envelope
// makes them; the message's own encoding goes straight after "d", with
// no copy and no intermediate envelope or map.
func (e *encoder) envelope(msg any, sender *actor.PID, header map[string]string, t *tagged) error {
	var request, answer string
	if t != nil {
		if t.request != 0 {
			request = strconv.FormatUint(t.request, 10) + "/" + string(t.from)
		}
		if t.answer != 0 {
			answer = strconv.FormatUint(t.answer, 10)
		}
	}
	marked := func(k string) bool {
		return (k == requestHeader && request != "") || (k == answerHeader && answer != "")
	}
	nh := 0
	for k := range header {
		if !marked(k) {
			nh++
		}
	}
	if request != "" {
		nh++
	}
	if answer != "" {
		nh++
	}
	fields := 1
	if sender != nil {
		fields++
	}
	if nh > 0 {
		fields++
	}
	enc := e.enc
	err := enc.EncodeMapLen(fields)
	if err == nil && sender != nil {
		if err = enc.EncodeString("s"); err == nil {
			err = enc.Encode(sender)
		}
	}
	if err == nil && nh > 0 {
		if err = enc.EncodeString("h"); err == nil {
			err = enc.EncodeMapLen(nh)
		}
		for k, v := range header {
			if err == nil && !marked(k) {
				if err = enc.EncodeString(k); err == nil {
					err = enc.EncodeString(v)
				}
			}
		}
		for _, kv := range [2][2]string{{requestHeader, request}, {answerHeader, answer}} {
			if err == nil && kv[1] != "" {
				if err = enc.EncodeString(kv[0]); err == nil {
					err = enc.EncodeString(kv[1])
				}
			}
		}
	}
	if err == nil {
		err = enc.EncodeString("d")
	}
	if err != nil {
		return err
	}
	return e.encode(msg)
}

// protoMessage is the interface of protobuf messages: their values are
// recorded with protobuf's encoding, which keeps what msgpack would not
// (oneofs, unknown fields).
var protoMessage = reflect.TypeFor[proto.Message]()

// decodeMessage decodes data as a value of type t.
func decodeMessage(t reflect.Type, data []byte) (any, error) {
	ptr := reflect.New(t)
	if t.Implements(protoMessage) && t.Kind() == reflect.Pointer {
		ptr.Elem().Set(reflect.New(t.Elem()))
		if err := proto.Unmarshal(data, ptr.Elem().Interface().(proto.Message)); err != nil {
			return nil, err
		}
		return ptr.Elem().Interface(), nil
	}
	if err := msgpackbound.Unmarshal(data, ptr.Interface()); err != nil {
		return nil, err
	}
	return ptr.Elem().Interface(), nil
}

// restoreState decodes state into a fresh actor instance.
func restoreState(a actor.Actor, state []byte) error {
	if u, ok := a.(StateUnmarshaler); ok {
		return u.UnmarshalState(state)
	}
	return msgpackbound.Unmarshal(state, a)
}

// DecodeState decodes the state participant id recorded in g as a T, the
// actor's type (a pointer, as in DecodeState[*Account], or the struct):
// through its StateUnmarshaler if it has one, with msgpack otherwise. A
// participant absent from g, or departed (it holds no state), is an error.
func DecodeState[T any](g *snapshot.Global, id snapshot.ProcessID) (T, error) {
	var zero T
	pt, ok := g.Participant(id)
	switch {
	case !ok:
		return zero, fmt.Errorf("actors: snapshot %d has no participant %s", g.ID, id)
	case pt.Departed:
		return zero, fmt.Errorf("actors: participant %s had stopped before snapshot %d: no state", id, g.ID)
	}
	t := reflect.TypeFor[T]()
	ptr := reflect.New(t) // *T
	target := ptr.Interface()
	if t.Kind() == reflect.Pointer {
		ptr.Elem().Set(reflect.New(t.Elem()))
		target = ptr.Elem().Interface()
	}
	var err error
	if u, ok := target.(StateUnmarshaler); ok {
		err = u.UnmarshalState(pt.State)
	} else {
		err = msgpackbound.Unmarshal(pt.State, target)
	}
	if err != nil {
		return zero, fmt.Errorf("actors: decoding the state of %s as %v: %w", id, t, err)
	}
	return ptr.Elem().Interface().(T), nil
}

// Registered returns the names of the message types and the kinds
// registered in s, sorted: what the members of a cluster must agree on.
func (s *System) Registered() (messages, kinds []string) {
	s.types.mu.RLock()
	for name := range s.types.byName {
		if !strings.HasPrefix(name, otherForm) {
			messages = append(messages, name)
		}
	}
	s.types.mu.RUnlock()
	s.kindsMu.RLock()
	for name := range s.kinds {
		if name != ingressKind {
			kinds = append(kinds, name)
		}
	}
	s.kindsMu.RUnlock()
	slices.Sort(messages)
	slices.Sort(kinds)
	return messages, kinds
}
