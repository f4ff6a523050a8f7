package decoded

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/msgpackbound"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Map is a msgpack map with its entries in the order they were stored: an
// actor's fields in declaration order, as msgpack writes a struct.
type Map struct {
	Entries []Entry
}

// Entry is one key and value of a Map.
type Entry struct {
	Key, Value any
}

// Get returns the value under the string key, the first if there are
// several.
func (m *Map) Get(key string) (any, bool) {
	for _, e := range m.Entries {
		if k, ok := e.Key.(string); ok && k == key {
			return e.Value, true
		}
	}
	return nil, false
}

// Ext is a msgpack extension other than a timestamp: its type and its
// bytes, which only the application that wrote them can read.
type Ext struct {
	Type int8
	Data []byte
}

// Undecoded stands for bytes that are not exactly one msgpack value: a
// state that MarshalState wrote in another format, say.
type Undecoded struct {
	Size   int
	Reason string // why it is not msgpack, e.g. "not msgpack: ..."
	Bytes  []byte // the raw bytes (JSON output omits them unless asked)
}

// notMsgpack prefixes the Reason of bytes that are not one msgpack value.
const notMsgpack = "not msgpack: "

// timestampExt is msgpack's extension type for a timestamp.
const timestampExt = -1

// Decode reads b as exactly one msgpack value; bytes that are not
// (garbage, trailing bytes, truncated) give Undecoded{Size, Reason}.
// Integers are int64 when they fit, uint64 above; floats are float64.
// b is checked before anything is made for it (msgpackbound.Len), so
// what Decode allocates is proportional to len(b), whatever b claims;
// nesting is at most 64 (msgpackbound.MaxDepth) deep.
func Decode(b []byte) any {
	undecoded := func(reason string) Undecoded {
		return Undecoded{Size: len(b), Reason: notMsgpack + reason, Bytes: b}
	}
	if len(b) == 0 {
		return undecoded("no bytes")
	}
	n, err := msgpackbound.Len(b)
	if err != nil {
		return undecoded(strings.TrimPrefix(err.Error(), msgpackbound.ErrMalformed.Error()+": "))
	}
	if n != len(b) {
		return undecoded(fmt.Sprintf("a value of %s, then %s more", size(n), size(len(b)-n)))
	}
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(bytes.NewReader(b))
	v, err := value(dec)
	if err != nil {
		return undecoded(strings.TrimPrefix(err.Error(), "msgpack: "))
	}
	return v
}

// value decodes the next value of dec, which msgpackbound.Len has
// checked: every length in it is within the bytes left.
func value(dec *msgpack.Decoder) (any, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Nil:
		return nil, dec.DecodeNil()
	case c == msgpcode.False || c == msgpcode.True:
		return dec.DecodeBool()
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Int8 && c <= msgpcode.Int64):
		return dec.DecodeInt64()
	case c >= msgpcode.Uint8 && c <= msgpcode.Uint64:
		u, err := dec.DecodeUint64()
		if u <= math.MaxInt64 {
			return int64(u), err
		}
		return u, err
	case c == msgpcode.Float || c == msgpcode.Double:
		return dec.DecodeFloat64()
	case msgpcode.IsString(c):
		return dec.DecodeString()
	case msgpcode.IsBin(c):
		b, err := dec.DecodeBytes()
		if b == nil {
			b = []byte{}
		}
		return b, err
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = value(dec); err != nil {
				return nil, err
			}
		}
		return a, nil
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return nil, err
		}
		m := &Map{Entries: make([]Entry, n)}
		for i := range m.Entries {
			e := &m.Entries[i]
			if e.Key, err = value(dec); err != nil {
				return nil, err
			}
			if e.Value, err = value(dec); err != nil {
				return nil, err
			}
		}
		return m, nil
	case msgpcode.IsExt(c):
		typ, n, err := dec.DecodeExtHeader()
		if err != nil {
			return nil, err
		}
		data := make([]byte, n)
		if err := dec.ReadFull(data); err != nil {
			return nil, err
		}
		if typ == timestampExt {
			if t, ok := timestamp(data); ok {
				return t, nil
			}
		}
		return Ext{Type: typ, Data: data}, nil
	}
	return nil, fmt.Errorf("code 0x%02x is never used", c)
}

// timestamp reads the data of a msgpack timestamp extension, in UTC: one
// of its three sizes, with nanoseconds below a second.
func timestamp(b []byte) (time.Time, bool) {
	var sec, nsec int64
	switch len(b) {
	case 4:
		sec = int64(binary.BigEndian.Uint32(b))
	case 8:
		v := binary.BigEndian.Uint64(b)
		sec, nsec = int64(v&(1<<34-1)), int64(v>>34)
	case 12:
		nsec = int64(binary.BigEndian.Uint32(b))
		sec = int64(binary.BigEndian.Uint64(b[4:]))
	default:
		return time.Time{}, false
	}
	if nsec > 999_999_999 {
		return time.Time{}, false
	}
	return time.Unix(sec, nsec).UTC(), true
}

// State decodes a participant's state; a departed participant's is nil.
func State(p snapshot.Participant) any {
	if p.Departed {
		return nil
	}
	return Decode(p.State)
}

// Message is one in-flight message decoded.
type Message struct {
	Seq    uint64
	Type   string // the registered name as the user gave it (no internal prefixes)
	Sender string // a request's sender PID as "address/id", "" when none
	Value  any    // decoded content; Undecoded when the payload is not a RecordedMessage or not msgpack
	Size   int    // encoded size in bytes
}

// Messages decodes the messages in flight on a channel, as a snapshot
// that actors produced holds them: RecordedMessage payloads. A payload of
// another type is Undecoded, with its Go type as Type.
func Messages(ms []snapshot.Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = message(m)
	}
	return out
}

func message(m snapshot.Message) Message {
	var rm persistence.RecordedMessage
	switch p := m.Payload.(type) {
	case persistence.RecordedMessage:
		rm = p
	case *persistence.RecordedMessage:
		if p == nil {
			return Message{Seq: m.Seq, Type: fmt.Sprintf("%T", m.Payload), Value: Undecoded{Reason: "not a recorded message: nil"}}
		}
		rm = *p
	default:
		return Message{Seq: m.Seq, Type: fmt.Sprintf("%T", m.Payload), Value: Undecoded{Reason: fmt.Sprintf("not a recorded message: %T", m.Payload)}}
	}
	out := Message{Seq: m.Seq, Size: len(rm.Data)}
	name, data, env, err := actors.UnwrapRecorded(rm)
	out.Type = name
	if err != nil {
		out.Value = Undecoded{Size: len(rm.Data), Reason: "not a readable envelope: " + err.Error(), Bytes: rm.Data}
		return out
	}
	if env != nil && env.Sender != nil {
		out.Sender = env.Sender.Address + "/" + env.Sender.Id
	}
	out.Value = Decode(data)
	return out
}
