package wire_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/actorsnap/actorsnap/cluster/link"
	"github.com/actorsnap/actorsnap/cluster/wire"
)

// Each message comes back as it went, through protobuf as remote carries
// it.
func TestRoundTrip(t *testing.T) {
	for _, m := range []any{
		&wire.Frame{From: "127.0.0.1:9001", Frame: link.Frame{Session: 7, First: 3, Messages: [][]byte{[]byte("a"), {}, []byte("ccc")}}},
		&wire.Ack{From: "127.0.0.1:9002", Ack: link.Ack{Session: 7, Through: 5}},
		&wire.Hello{Version: wire.Version, Member: "127.0.0.1:9001", Session: 7, Messages: []string{"bank.transfer"}, Kinds: []string{"account"}},
	} {
		a, err := wire.Encode(m)
		require.NoError(t, err)
		b, err := proto.Marshal(a)
		require.NoError(t, err)
		var back anypb.Any
		require.NoError(t, proto.Unmarshal(b, &back))
		got, err := wire.Decode(&back)
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
}

// What Decode is given is not trusted: unknown types, damaged values and
// oversized ones are errors, never panics.
func TestDecodeRefuses(t *testing.T) {
	for _, a := range []*anypb.Any{
		nil,
		{TypeUrl: "actorsnap.dev/wire.Nope", Value: []byte{0x80}},
		{TypeUrl: "actorsnap.dev/wire.Frame", Value: []byte{0xde, 0xad}},
		{TypeUrl: "actorsnap.dev/wire.Ack", Value: make([]byte, wire.MaxBytes+1)},
	} {
		_, err := wire.Decode(a)
		require.ErrorIs(t, err, wire.ErrDecode)
	}
	_, err := wire.Encode(&wire.Frame{Frame: link.Frame{Messages: [][]byte{make([]byte, wire.MaxBytes)}}})
	require.Error(t, err, "a frame no remote message holds")
	_, err = wire.Encode(struct{}{})
	require.Error(t, err)
}

func FuzzDecode(f *testing.F) {
	for _, m := range []any{
		&wire.Frame{From: "a", Frame: link.Frame{Session: 1, First: 1, Messages: [][]byte{[]byte("x")}}},
		&wire.Ack{From: "b", Ack: link.Ack{Session: 1, Through: 1}},
		&wire.Hello{Version: 1, Member: "a", Messages: []string{"m"}},
	} {
		a, err := wire.Encode(m)
		require.NoError(f, err)
		f.Add(a.TypeUrl, a.Value)
	}
	f.Fuzz(func(t *testing.T, url string, value []byte) {
		got, err := wire.Decode(&anypb.Any{TypeUrl: url, Value: value})
		if err != nil {
			require.ErrorIs(t, err, wire.ErrDecode)
			return
		}
		a, err := wire.Encode(got)
		require.NoError(t, err, "what decodes encodes")
		again, err := wire.Decode(a)
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}

// Members refuse a peer of another version or registry, naming the
// difference.
func TestCheckHello(t *testing.T) {
	a := &wire.Hello{Version: 1, Member: "A", Messages: []string{"bank.transfer", "bank.open"}, Kinds: []string{"account"}}
	require.NoError(t, wire.CheckHello(a, &wire.Hello{Version: 1, Member: "B", Messages: []string{"bank.open", "bank.transfer"}, Kinds: []string{"account"}}))

	err := wire.CheckHello(a, &wire.Hello{Version: 2, Member: "B"})
	require.Error(t, err)
	assert.Equal(t, "wire: member B speaks version 2, A version 1", err.Error())

	err = wire.CheckHello(a, &wire.Hello{Version: 1, Member: "B", Messages: []string{"bank.transfer", "bank.close"}, Kinds: []string{"account", "teller"}})
	require.Error(t, err)
	assert.Equal(t, "wire: members A and B differ: message types registered only on A: bank.open; "+
		"message types registered only on B: bank.close; kinds registered only on B: teller", err.Error())
}
