package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/msgpackbound"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// The types of the decode tests: an "old" build's type and the "new"
// build's type that reads what the old one stored. None receives anything.

type walletV1 struct{ Balance int64 }

func (*walletV1) Receive(actor.Context) {}

// walletNote is walletV1 with one more field.
type walletNote struct {
	Balance int64
	Note    string
}

func (*walletNote) Receive(actor.Context) {}

// walletText changed Balance's type from int64 to string.
type walletText struct{ Balance string }

func (*walletText) Receive(actor.Context) {}

// walletSmall narrowed Balance from int64 to int8.
type walletSmall struct{ Balance int8 }

func (*walletSmall) Receive(actor.Context) {}

// walletWide widened Balance from int64 to float64.
type walletWide struct{ Balance float64 }

func (*walletWide) Receive(actor.Context) {}

// walletPointer made Balance a pointer.
type walletPointer struct{ Balance *int64 }

func (*walletPointer) Receive(actor.Context) {}

// walletFloat32 narrowed walletWide's Balance to a float32.
type walletFloat32 struct{ Balance float32 }

func (*walletFloat32) Receive(actor.Context) {}

// walletName and walletBytes hold a name as a string, then as bytes.
type walletName struct{ Name string }

func (*walletName) Receive(actor.Context) {}

type walletBytes struct{ Name []byte }

func (*walletBytes) Receive(actor.Context) {}

// walletFunds renamed Balance to Funds, without a tag.
type walletFunds struct{ Funds int64 }

func (*walletFunds) Receive(actor.Context) {}

// walletTagged renamed Balance to Funds, keeping the stored name.
type walletTagged struct {
	Funds int64 `msgpack:"Balance"`
}

func (*walletTagged) Receive(actor.Context) {}

// walletCents is the versioned wallet of docs/state-evolution.md:
// version 1 stored whole units in Balance, version 2 stores cents.
type walletCents struct{ Cents int64 }

func (*walletCents) Receive(actor.Context) {}

func (w *walletCents) MarshalState() ([]byte, error) {
	data, err := msgpack.Marshal(struct{ Cents int64 }{w.Cents})
	return append([]byte{2}, data...), err
}

func (w *walletCents) UnmarshalState(state []byte) error {
	if len(state) == 0 {
		return errors.New("empty state")
	}
	switch v := state[0]; {
	case v == 1:
		var old struct{ Balance int64 }
		if err := msgpack.Unmarshal(state[1:], &old); err != nil {
			return err
		}
		w.Cents = old.Balance * 100
		return nil
	case v == 2:
		var cur struct{ Cents int64 }
		if err := msgpack.Unmarshal(state[1:], &cur); err != nil {
			return err
		}
		w.Cents = cur.Cents
		return nil
	case v >= 0x80 && v <= 0x8f, v == 0xde, v == 0xdf:
		// A msgpack map: a state stored before the type had versions.
		var old struct{ Balance int64 }
		if err := msgpack.Unmarshal(state, &old); err != nil {
			return err
		}
		w.Cents = old.Balance * 100
		return nil
	}
	return fmt.Errorf("state version %d unknown", state[0])
}

// walletVersioned1 is version 1 of walletCents, with a version byte.
type walletVersioned1 struct{ Balance int64 }

func (*walletVersioned1) Receive(actor.Context) {}

func (w *walletVersioned1) MarshalState() ([]byte, error) {
	data, err := msgpack.Marshal(struct{ Balance int64 }{w.Balance})
	return append([]byte{1}, data...), err
}

// walletFuture stores a version walletCents does not know.
type walletFuture struct{}

func (*walletFuture) Receive(actor.Context) {}

func (*walletFuture) MarshalState() ([]byte, error) { return []byte{9}, nil }

// coinV1 is a message of an old build; coin, registered, is the current
// one, whose Amount became a string.
type coinV1 struct{ Amount int64 }

type coin struct{ Amount string }

// stateOf encodes a as a snapshot stores it.
func stateOf(t *testing.T, a actor.Actor) []byte {
	t.Helper()
	state, err := (&encoder{}).state(a)
	require.NoError(t, err)
	return state
}

// walletSnapshot is a stored snapshot of wallets w1 and w2 of kind
// "wallet", whose states were encoded from old, and msgs in flight from w1
// to w2.
func walletSnapshot(t *testing.T, old actor.Actor, msgs ...RecordedMessage) *snapshot.Global {
	t.Helper()
	state := stateOf(t, old)
	g := &snapshot.Global{ID: 29, Participants: []snapshot.Participant{
		{ID: "w1", Kind: "wallet", State: state},
		{ID: "w2", Kind: "wallet", State: state},
	}}
	c := snapshot.ChannelState{Channel: snapshot.Channel{From: "w1", To: "w2"}, Sent: uint64(len(msgs))}
	for i, m := range msgs {
		c.Messages = append(c.Messages, snapshot.Message{Seq: uint64(i + 1), Payload: m})
	}
	g.Channels = []snapshot.ChannelState{c}
	require.NoError(t, g.Verify())
	return g
}

// restoreFrom saves g in a fresh store and restores it with opts.
func restoreFrom(t *testing.T, g *snapshot.Global, opts ...Option) (*System, error) {
	t.Helper()
	store := persistence.NewMemory()
	require.NoError(t, store.Save(context.Background(), g))
	sys, err := Restore(context.Background(), store, g.ID, append([]Option{testMessages, WithTimeout(testTimeout)}, opts...)...)
	if err == nil {
		t.Cleanup(func() { shutdown(t, sys) })
	}
	return sys, err
}

// oneLine asserts err is one line of text.
func oneLine(t *testing.T, err error) {
	t.Helper()
	assert.NotContains(t, err.Error(), "\n", "one line")
}

func TestCheckDecodesChangedFieldType(t *testing.T) {
	g := walletSnapshot(t, &walletV1{Balance: 300})
	kind := WithKind("wallet", func() actor.Actor { return &walletText{} })

	err := CheckDecodes(g, kind)
	require.ErrorIs(t, err, ErrStateDecode)
	oneLine(t, err)
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, snapshot.SnapshotID(29), de.Snapshot)
	assert.Equal(t, snapshot.ProcessID("w1"), de.Participant, "the first in the snapshot's order")
	assert.Equal(t, "wallet", de.Kind)
	assert.Equal(t, "*actors.walletText", de.Type)
	assert.Equal(t, `actors: snapshot 29: participant w1 (kind "wallet", type *actors.walletText): state does not decode: `+
		`msgpack: invalid code=d3 decoding string/bytes length`, err.Error())

	_, err = restoreFrom(t, g, kind)
	require.ErrorIs(t, err, ErrRestore)
	require.ErrorIs(t, err, ErrStateDecode)
	require.ErrorAs(t, err, &de)
	oneLine(t, err)
	assert.NotContains(t, err.Error(), "restarted")
	assert.Contains(t, err.Error(), `participant w1 (kind "wallet", type *actors.walletText): state does not decode`)
}

func TestCheckDecodesUnknownKind(t *testing.T) {
	g := walletSnapshot(t, &walletV1{Balance: 1})
	err := CheckDecodes(g, WithKind("purse", func() actor.Actor { return &walletV1{} }))
	require.ErrorIs(t, err, ErrStateDecode)
	require.ErrorIs(t, err, ErrUnknownKind)
	oneLine(t, err)
	assert.Equal(t, `actors: snapshot 29: participant w1 (kind "wallet"): state does not decode: `+
		`actors: unknown kind: "wallet" (give it with WithKind)`, err.Error())

	_, err = restoreFrom(t, g)
	require.ErrorIs(t, err, ErrRestore)
	require.ErrorIs(t, err, ErrUnknownKind)
	assert.NotContains(t, err.Error(), "restarted")
}

func TestCheckDecodesMessages(t *testing.T) {
	kind := withOptions(testMessages, WithKind("wallet", func() actor.Actor { return &walletV1{} }))
	good, err := msgpack.Marshal(&coin{Amount: "5"})
	require.NoError(t, err)
	old, err := msgpack.Marshal(&coinV1{Amount: 5})
	require.NoError(t, err)

	t.Run("unregistered", func(t *testing.T) {
		g := walletSnapshot(t, &walletV1{}, RecordedMessage{Type: "test.decode.coin", Data: good},
			RecordedMessage{Type: "test.decode.gone", Data: good})
		err := CheckDecodes(g, kind)
		require.ErrorIs(t, err, ErrStateDecode)
		require.ErrorIs(t, err, ErrUnregistered)
		oneLine(t, err)
		var de *DecodeError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, snapshot.Channel{From: "w1", To: "w2"}, de.Channel)
		assert.Equal(t, 2, de.Position)
		assert.Equal(t, `actors: snapshot 29: message 2 in flight on w1->w2 (seq 2, type "test.decode.gone"): does not decode: `+
			`actors: message type not registered: "test.decode.gone"`, err.Error())

		_, err = restoreFrom(t, g, kind)
		require.ErrorIs(t, err, ErrRestore)
		require.ErrorIs(t, err, ErrUnregistered)
		assert.NotContains(t, err.Error(), "restarted")
	})
	t.Run("changed type", func(t *testing.T) {
		g := walletSnapshot(t, &walletV1{}, RecordedMessage{Type: "test.decode.coin", Data: old})
		err := CheckDecodes(g, kind)
		require.ErrorIs(t, err, ErrStateDecode)
		oneLine(t, err)
		assert.Contains(t, err.Error(), `message 1 in flight on w1->w2 (seq 1, type "test.decode.coin"): does not decode: msgpack: invalid code`)
	})
	t.Run("to a departed participant", func(t *testing.T) {
		// Restore never replays it, so it is not checked.
		g := walletSnapshot(t, &walletV1{}, RecordedMessage{Type: "test.decode.gone", Data: good})
		g.Participants[1] = snapshot.Participant{ID: "w2", Departed: true}
		require.NoError(t, CheckDecodes(g, kind))
	})
}

// A snapshot that decodes passes the check and restores, its states and
// message as stored.
func TestCheckDecodesPasses(t *testing.T) {
	data, err := msgpack.Marshal(&note{Text: "hello"})
	require.NoError(t, err)
	g := walletSnapshot(t, &walletV1{Balance: 7}, RecordedMessage{Type: "test.note", Data: data})
	kind := withOptions(testMessages, WithKind("wallet", func() actor.Actor { return &walletV1{} }))
	require.NoError(t, CheckDecodes(g, kind))

	sys, err := restoreFrom(t, g, kind)
	require.NoError(t, err)
	first, err := sys.cfg.store.Load(context.Background(), g.ID+1)
	require.NoError(t, err)
	sameContent(t, g, first)
}

// walletFragile panics on a state it does not expect.
type walletFragile struct{ Balance int64 }

func (*walletFragile) Receive(actor.Context) {}

func (w *walletFragile) UnmarshalState(state []byte) error {
	w.Balance = int64(state[100])
	return nil
}

// A state whose decoding panics is reported as one that does not decode,
// not a crash of the caller.
func TestCheckDecodesPanic(t *testing.T) {
	g := walletSnapshot(t, &walletV1{Balance: 3})
	err := CheckDecodes(g, WithKind("wallet", func() actor.Actor { return &walletFragile{} }))
	require.ErrorIs(t, err, ErrStateDecode)
	oneLine(t, err)
	assert.Contains(t, err.Error(), `participant w1 (kind "wallet", type *actors.walletFragile): state does not decode: panic: runtime error: index out of range`)
}

func TestRestoreLatestFromEmptyStore(t *testing.T) {
	_, err := Restore(context.Background(), persistence.NewMemory(), 0, testMessages)
	require.ErrorIs(t, err, ErrRestore)
	assert.Contains(t, err.Error(), "loading the latest snapshot")
	assert.NotContains(t, err.Error(), "snapshot 0")
}

// TestStateEvolution checks each rule of docs/state-evolution.md: a state
// stored by an old type, read by the new one through CheckDecodes and the
// decoding a restore does.
func TestStateEvolution(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  actor.Actor
		new  func() actor.Actor
		want actor.Actor // the state decoded, when it decodes
		err  string      // otherwise, part of the error
	}{
		{name: "adding a field gives it its zero value", old: &walletV1{Balance: 3},
			new: func() actor.Actor { return &walletNote{} }, want: &walletNote{Balance: 3}},
		{name: "adding a field keeps the producer's value", old: &walletV1{Balance: 3},
			new: func() actor.Actor { return &walletNote{Note: "new"} }, want: &walletNote{Balance: 3, Note: "new"}},
		{name: "removing a field ignores its value", old: &walletNote{Balance: 3, Note: "gone"},
			new: func() actor.Actor { return &walletV1{} }, want: &walletV1{Balance: 3}},
		{name: "renaming a field loses its value", old: &walletV1{Balance: 3},
			new: func() actor.Actor { return &walletFunds{} }, want: &walletFunds{}},
		{name: "renaming a field with the old name as tag keeps it", old: &walletV1{Balance: 3},
			new: func() actor.Actor { return &walletTagged{} }, want: &walletTagged{Funds: 3}},
		{name: "changing int to string breaks", old: &walletV1{Balance: 3},
			new: func() actor.Actor { return &walletText{} }, err: "msgpack: invalid code=d3 decoding string/bytes length"},
		{name: "narrowing a number that no longer fits breaks", old: &walletV1{Balance: 300},
			new: func() actor.Actor { return &walletSmall{} }, err: "Balance: stored 300 decodes as 44 (the type no longer holds it)"},
		{name: "narrowing a number that fits decodes", old: &walletV1{Balance: 100},
			new: func() actor.Actor { return &walletSmall{} }, want: &walletSmall{Balance: 100}},
		{name: "widening a number decodes", old: &walletV1{Balance: 300},
			new: func() actor.Actor { return &walletWide{} }, want: &walletWide{Balance: 300}},
		{name: "a float64 that became a float32 breaks", old: &walletWide{Balance: 0.5},
			new: func() actor.Actor { return &walletFloat32{} }, err: "msgpack: invalid code=cb decoding float32"},
		{name: "a value that became a pointer decodes", old: &walletV1{Balance: 3},
			new: func() actor.Actor { return &walletPointer{} }, want: &walletPointer{Balance: new(int64(3))}},
		{name: "a string that became bytes decodes", old: &walletName{Name: "ann"},
			new: func() actor.Actor { return &walletBytes{} }, want: &walletBytes{Name: []byte("ann")}},
		{name: "versioned: version 1 read by version 2", old: &walletVersioned1{Balance: 3},
			new: func() actor.Actor { return &walletCents{} }, want: &walletCents{Cents: 300}},
		{name: "versioned: version 2 read by version 2", old: &walletCents{Cents: 301},
			new: func() actor.Actor { return &walletCents{} }, want: &walletCents{Cents: 301}},
		{name: "versioned: a state from before versions", old: &walletV1{Balance: 3},
			new: func() actor.Actor { return &walletCents{} }, want: &walletCents{Cents: 300}},
		{name: "versioned: an unknown version breaks", old: &walletFuture{},
			new: func() actor.Actor { return &walletCents{} }, err: "state version 9 unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := walletSnapshot(t, tc.old)
			err := CheckDecodes(g, WithKind("wallet", tc.new))
			a := tc.new()
			decodeErr := restoreState(a, g.Participants[0].State)
			if tc.err != "" {
				require.ErrorIs(t, err, ErrStateDecode)
				oneLine(t, err)
				assert.True(t, strings.HasSuffix(err.Error(), "state does not decode: "+tc.err), err.Error())
				return
			}
			require.NoError(t, err)
			require.NoError(t, decodeErr)
			assert.Equal(t, tc.want, a)
		})
	}
}

// A number in a nested value is checked too, and an integer against a
// float exactly.
func TestLossless(t *testing.T) {
	type inner struct{ N int64 }
	type innerSmall struct{ N uint8 }
	type outer struct {
		Items []inner
		Ratio float64
	}
	type outerSmall struct {
		Items []innerSmall
		Ratio float64
	}
	type float struct{ N float64 }
	check := func(old, into any) error {
		data, err := msgpack.Marshal(old)
		require.NoError(t, err)
		require.NoError(t, msgpack.Unmarshal(data, into))
		return numbersSurvive(data, into)
	}
	assert.NoError(t, check(&outer{Items: []inner{{1}, {255}}, Ratio: 0.5}, &outerSmall{}))
	assert.EqualError(t, check(&outer{Items: []inner{{1}, {-1}}}, &outerSmall{}), "Items[1].N: stored -1 decodes as 255 (the type no longer holds it)")
	assert.NoError(t, check(&inner{N: 1 << 53}, &float{}))
	assert.EqualError(t, check(&inner{N: 1<<53 + 1}, &float{}), "N: stored 9007199254740993 decodes as 9.007199254740992e+15 (the type no longer holds it)")
	assert.NoError(t, check(map[int]int64{1: 2}, &map[int]int64{}))
}

// A state or a message from an untrusted store whose array claims four
// billion elements is refused before anything is allocated for it (the
// decoder alone would try to allocate them all).
func TestClaimedLengthsAreChecked(t *testing.T) {
	hostile := []byte{0x81, 0xa4, 'S', 'e', 'e', 'n', 0xdd, 0xff, 0xff, 0xff, 0xff}
	g := &snapshot.Global{ID: 3, Participants: []snapshot.Participant{{ID: "p", Kind: "probe", State: hostile}}}
	_, err := DecodeState[probe](g, "p")
	require.ErrorIs(t, err, msgpackbound.ErrMalformed)
	_, err = DecodeMessage(RecordedMessage{Type: "test.note", Data: []byte{0xdd, 0xff, 0xff, 0xff, 0xff}}, testMessages)
	require.ErrorIs(t, err, msgpackbound.ErrMalformed)
	require.ErrorIs(t, CheckDecodes(g, testMessages, WithKind("probe", func() actor.Actor { return &probe{} })), msgpackbound.ErrMalformed)
}
