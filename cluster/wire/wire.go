package wire

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/actorsnap/actorsnap/cluster/link"
	"github.com/actorsnap/actorsnap/internal/msgpackbound"
)

// Version is the version of what members say to each other: members of
// different versions refuse each other.
const Version = 2

// MaxBytes bounds what Decode accepts, under gRPC's default limit of
// 4 MiB a message, with room for remote's own envelope.
const MaxBytes = 4<<20 - 64<<10

// Type URLs of the messages.
const (
	frameURL = "actorsnap.dev/wire.Frame"
	ackURL   = "actorsnap.dev/wire.Ack"
	helloURL = "actorsnap.dev/wire.Hello"
)

// ErrDecode is wrapped by every error of Decode.
var ErrDecode = errors.New("wire: cannot decode")

// Frame is a link frame from member From.
type Frame struct {
	From string
	link.Frame
}

// Ack is a link acknowledgement from member From.
type Ack struct {
	From string
	link.Ack
}

// Hello is what a member tells a peer first.
type Hello struct {
	Version  int
	Member   string   // its address
	Session  uint64   // its link session: larger at each start
	Messages []string // registered message names, sorted
	Kinds    []string // registered kind names, sorted
}

// wireFrame and the others are the msgpack forms, with short keys.
type (
	wireFrame struct {
		From     string   `msgpack:"f"`
		Session  uint64   `msgpack:"s"`
		First    uint64   `msgpack:"n"`
		Messages [][]byte `msgpack:"m"`
	}
	wireAck struct {
		From    string `msgpack:"f"`
		Session uint64 `msgpack:"s"`
		Through uint64 `msgpack:"t"`
	}
)

// Encode returns m (a *Frame, *Ack or *Hello) as the protobuf Any that
// remote carries. A message over MaxBytes is an error: the link's batches
// are to be smaller (link.Config.BatchBytes).
func Encode(m any) (*anypb.Any, error) {
	var url string
	var v any
	size := 64 // the fields but a frame's messages, and their headers
	switch m := m.(type) {
	case *Frame:
		url, v = frameURL, &wireFrame{From: m.From, Session: m.Session, First: m.First, Messages: m.Messages}
		size += len(m.From)
		for _, msg := range m.Messages {
			size += 5 + len(msg)
		}
	case *Ack:
		url, v = ackURL, &wireAck{From: m.From, Session: m.Session, Through: m.Through}
	case *Hello:
		url, v = helloURL, m
	default:
		return nil, fmt.Errorf("wire: cannot encode %T", m)
	}
	// Into a buffer the size of a frame's messages: a batch of them,
	// encoded into a buffer that grows by doubling, allocated about twice
	// its size.
	buf := bytes.NewBuffer(make([]byte, 0, size))
	enc := msgpack.GetEncoder()
	enc.Reset(buf)
	err := enc.Encode(v)
	msgpack.PutEncoder(enc)
	if err != nil {
		return nil, fmt.Errorf("wire: encoding %T: %w", m, err)
	}
	b := buf.Bytes()
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("wire: %T of %d bytes, more than %d", m, len(b), MaxBytes)
	}
	return &anypb.Any{TypeUrl: url, Value: b}, nil
}

// Decode returns the *Frame, *Ack or *Hello that a is. a comes from
// another member and is not trusted: a value that claims more elements or
// bytes than it holds is refused before anything is made for it (see
// msgpackbound), so what decoding allocates is proportional to its size.
func Decode(a *anypb.Any) (any, error) {
	switch {
	case a == nil:
		return nil, fmt.Errorf("%w: nil", ErrDecode)
	case len(a.Value) > MaxBytes:
		return nil, fmt.Errorf("%w: %s of %d bytes, more than %d", ErrDecode, a.TypeUrl, len(a.Value), MaxBytes)
	}
	var err error
	var out any
	switch a.TypeUrl {
	case frameURL:
		var f wireFrame
		err = msgpackbound.Unmarshal(a.Value, &f)
		out = &Frame{From: f.From, Frame: link.Frame{Session: f.Session, First: f.First, Messages: f.Messages}}
	case ackURL:
		var k wireAck
		err = msgpackbound.Unmarshal(a.Value, &k)
		out = &Ack{From: k.From, Ack: link.Ack{Session: k.Session, Through: k.Through}}
	case helloURL:
		var h Hello
		err = msgpackbound.Unmarshal(a.Value, &h)
		out = &h
	default:
		return nil, fmt.Errorf("%w: unknown type %q", ErrDecode, a.TypeUrl)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDecode, a.TypeUrl, err)
	}
	return out, nil
}

// maxListed bounds the names a difference lists.
const maxListed = 8

// CheckHello reports why a member that said local cannot work with the
// peer that said remote: another wire version, or message or kind names
// that only one of them registered, named. It returns nil if they agree.
func CheckHello(local, remote *Hello) error {
	if local.Version != remote.Version {
		return fmt.Errorf("wire: member %s speaks version %d, %s version %d", remote.Member, remote.Version, local.Member, local.Version)
	}
	var diffs []string
	for _, l := range []struct {
		what        string
		here, there []string
	}{{"message types", local.Messages, remote.Messages}, {"kinds", local.Kinds, remote.Kinds}} {
		if only := missing(l.here, l.there); len(only) > 0 {
			diffs = append(diffs, fmt.Sprintf("%s registered only on %s: %s", l.what, local.Member, list(only)))
		}
		if only := missing(l.there, l.here); len(only) > 0 {
			diffs = append(diffs, fmt.Sprintf("%s registered only on %s: %s", l.what, remote.Member, list(only)))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("wire: members %s and %s differ: %s", local.Member, remote.Member, strings.Join(diffs, "; "))
	}
	return nil
}

// missing returns the names of a not in b.
func missing(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func list(names []string) string {
	if len(names) > maxListed {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}
