package actors

import (
	"context"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/actorsnap/actorsnap/snapshot"
)

// spawner is a plain actor (not a participant) that spawns from its own
// context the Props it is sent.
type spawner struct{}

type spawnThese struct {
	props *actor.Props
	done  chan<- []*actor.PID
}

func (spawner) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*spawnThese); ok {
		named, err := ctx.SpawnNamed(m.props, "named")
		if err != nil {
			panic(err)
		}
		m.done <- []*actor.PID{ctx.Spawn(m.props), ctx.SpawnPrefix(m.props, "pre-"), named}
	}
}

// A program's own Props become participants with one option, spawned by
// every one of Proto.Actor's calls: from the root, from a plain actor,
// and as children of a participant. Each is in the snapshot under its
// PID's id, with its state.
func TestSnapshottedPropsSpawnParticipantsEverywhere(t *testing.T) {
	sys, err := NewSystem(testMessages)
	require.NoError(t, err)
	events := make(chan string, 100)
	props := actor.PropsFromProducer(func() actor.Actor { return &probe{events: events} }, sys.Snapshotted("probe"))
	root := sys.Root()

	var pids []*actor.PID
	pid, err := root.SpawnNamed(props, "r-named")
	require.NoError(t, err)
	pids = append(pids, pid, root.Spawn(props), root.SpawnPrefix(props, "r-pre-"))

	plain, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return spawner{} }), "plain")
	require.NoError(t, err)
	done := make(chan []*actor.PID, 1)
	root.Send(plain, &spawnThese{props: props, done: done})
	pids = append(pids, waitFor(t, done)...)

	// A child of a participant, through ctx.SpawnNamed with the kind's
	// Props (sys.Props builds them on the same option).
	require.NoError(t, sys.RegisterKind("probe", func() actor.Actor { return &probe{events: events} }))
	kid := make(chan *actor.PID, 1)
	root.Send(pids[0], &spawnKid{name: "kid", done: kid})
	pids = append(pids, waitFor(t, kid))

	for i, pid := range pids {
		root.Send(pid, &note{Text: pid.Id})
		require.Equal(t, pid.Id, waitFor(t, events), "participant %d", i)
	}
	g, err := sys.Snapshot(context.Background())
	require.NoError(t, err)
	require.NoError(t, g.Verify())
	require.Len(t, g.Participants, len(pids), "all and only the participants: %v", sys.Participants())
	for _, pid := range pids {
		p, err := DecodeState[*probe](g, snapshot.ProcessID(pid.Id))
		require.NoError(t, err)
		assert.Equal(t, []string{pid.Id}, p.Seen)
	}
	assert.Contains(t, sys.Participants(), snapshot.ProcessID("r-named/kid"))
	assert.Nil(t, SystemOf(nil))
	_, err = DecodeState[probe](g, "r-named") // the struct, not a pointer
	require.NoError(t, err)
	_, err = DecodeState[*probe](g, "nobody")
	require.Error(t, err)

	// Restored, a child of a participant has its parent again; a child of
	// the plain actor, which is not restored, has none rather than a
	// parent that is not there to supervise it, and still records.
	store := sys.cfg.store
	shutdown(t, sys)
	restored, err := Restore(context.Background(), store, g.ID, testMessages, WithTimeout(testTimeout),
		WithKind("probe", func() actor.Actor { return &probe{} }))
	require.NoError(t, err)
	defer shutdown(t, restored)
	parent := make(chan *actor.PID, 1)
	restored.Root().Send(actor.NewPID(restored.ActorSystem().Address(), "r-named/kid"), &askParent{reply: parent})
	assert.Equal(t, "r-named", waitFor(t, parent).Id)
	restored.Root().Send(actor.NewPID(restored.ActorSystem().Address(), "plain/named"), &askParent{reply: parent})
	assert.Nil(t, waitFor(t, parent))
	restored.Root().Send(actor.NewPID(restored.ActorSystem().Address(), "plain/named"), &boom{})
	next, err := restored.Snapshot(context.Background())
	if err != nil {
		require.ErrorIs(t, err, ErrParticipantRestarted, "the crash may abort the snapshot it overlaps")
		next, err = restored.Snapshot(context.Background())
	}
	require.NoError(t, err, "the restarted child records")
	require.NoError(t, next.Verify())
}

// Props options that a participant cannot keep are refused, never
// silently overridden.
func TestSnapshottedPropsRefuseConflicts(t *testing.T) {
	sys, err := NewSystem(testMessages)
	require.NoError(t, err)
	defer shutdown(t, sys)
	producer := func() actor.Actor { return &probe{} }
	for name, opt := range map[string]actor.PropsOption{
		"actor.WithMailbox":          actor.WithMailbox(actor.Unbounded()),
		"actor.WithDispatcher":       actor.WithDispatcher(actor.NewDefaultDispatcher(10)),
		"actor.WithSenderMiddleware": actor.WithSenderMiddleware(func(next actor.SenderFunc) actor.SenderFunc { return next }),
	} {
		_, err := sys.Root().SpawnNamed(actor.PropsFromProducer(producer, opt, sys.Snapshotted("probe")), "x")
		require.ErrorIs(t, err, ErrProps, name)
		assert.Contains(t, err.Error(), name)
		require.ErrorIs(t, sys.RegisterKind("k-"+name, producer, opt), ErrConfig, name)
	}
	assert.Empty(t, sys.Participants())

	_, err = sys.Root().SpawnNamed(actor.PropsFromProducer(producer, sys.Snapshotted("")), "z")
	require.ErrorIs(t, err, ErrProps, "no kind")

	// Props of one system spawned in another.
	other := actor.NewActorSystem()
	defer other.Shutdown()
	_, err = other.Root.SpawnNamed(actor.PropsFromProducer(producer, sys.Snapshotted("probe")), "y")
	require.ErrorIs(t, err, ErrProps)
}

type (
	hidden      struct{ balance int }
	withChan    struct{ Done chan struct{} }
	empty       struct{}
	halfMarshal struct{ N int }
	stateless   struct {
		Stateless
		peer *actor.PID
	}
	statelessButNot struct {
		Stateless
		Balance int
	}
)

func (hidden) Receive(actor.Context)          {}
func (withChan) Receive(actor.Context)        {}
func (empty) Receive(actor.Context)           {}
func (*halfMarshal) Receive(actor.Context)    {}
func (*stateless) Receive(actor.Context)      {}
func (statelessButNot) Receive(actor.Context) {}

func (*halfMarshal) MarshalState() ([]byte, error) { return nil, nil }

// A state that a snapshot would not hold whole fails the spawn, before
// the actor starts, with an error naming the type, the field and the
// fixes.
func TestLossyStateRefusedAtSpawn(t *testing.T) {
	sys, err := NewSystem(testMessages)
	require.NoError(t, err)
	defer shutdown(t, sys)
	for _, tc := range []struct {
		actor actor.Actor
		says  []string
	}{
		{hidden{balance: 1}, []string{"actors.hidden", "no exported fields", "StateMarshaler", "Stateless"}},
		{withChan{}, []string{"actors.withChan", "field Done", "chan", `msgpack:"-"`}},
		{empty{}, []string{"actors.empty has no fields", "embed actors.Stateless"}},
		{&halfMarshal{}, []string{"MarshalState but not UnmarshalState"}},
		{statelessButNot{}, []string{"embeds actors.Stateless but has the exported field Balance"}},
	} {
		a := tc.actor
		_, err := sys.Root().SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }, sys.Snapshotted("k")), "lossy")
		require.ErrorIs(t, err, ErrLossy, "%T", a)
		for _, s := range tc.says {
			assert.Contains(t, err.Error(), s, "%T", a)
		}
	}
	assert.Empty(t, sys.Participants(), "nothing registered")

	pid, err := sys.Root().SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &stateless{} }, sys.Snapshotted("k")), "ok")
	require.NoError(t, err)
	g, err := sys.Snapshot(context.Background())
	require.NoError(t, err)
	p, _ := g.Participant(snapshot.ProcessID(pid.Id))
	assert.Empty(t, p.State, "Stateless: no state")
}

type (
	secretMsg  struct{ amount int }
	stringerIn struct{ V interface{ String() string } }
	valueMsg   struct{ N int }
)

// Message types register one way: as options of the system, with errors
// rather than panics; a type that would lose data is refused; a type and
// its pointer are one registration, each restored in the form it was
// sent.
func TestMessageRegistration(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		is   error
		says string
	}{
		{[]Option{WithMessage[*secretMsg]("s")}, ErrLossy, "actors.secretMsg has no exported fields"},
		{[]Option{WithMessage[stringerIn]("s")}, ErrLossy, "non-empty interface"},
		{[]Option{WithMessage[*note]("a"), WithMessage[*ping]("a")}, ErrConfig, `message name "a" registered for`},
		{[]Option{WithMessage[*note]("a"), WithMessage[note]("b")}, ErrConfig, "registered as"},
		{[]Option{WithMessage[*note]("")}, ErrConfig, "a name must be given"},
	} {
		_, err := NewSystem(tc.opts...)
		require.ErrorIs(t, err, tc.is)
		assert.Contains(t, err.Error(), tc.says)
	}
	sys, err := NewSystem(WithMessage[*note]("a"), WithMessage[*note]("a"), WithMessage[valueMsg]("v"))
	require.NoError(t, err, "the same registration twice")
	require.NoError(t, RegisterMessage[note](sys, "a"), "the value form of a registered pointer")
	require.ErrorIs(t, RegisterMessage[*ping](sys, "a"), ErrConfig)
	shutdown(t, sys)

	types, err := messageTypesOf([]Option{WithMessage[valueMsg]("v")})
	require.NoError(t, err)
	enc := encoder{types: types}
	recorded, err := enc.messages([]snapshot.Message{{Seq: 1, Payload: valueMsg{N: 1}}, {Seq: 2, Payload: &valueMsg{N: 2}}})
	require.NoError(t, err)
	for i, want := range []any{valueMsg{N: 1}, &valueMsg{N: 2}} {
		rm := recorded[i].Payload.(RecordedMessage)
		got, err := DecodeMessage(rm, WithMessage[valueMsg]("v"))
		require.NoError(t, err)
		assert.Equal(t, want, got, "restored as sent")
		typed, err := DecodeAs[valueMsg](rm)
		require.NoError(t, err)
		assert.Equal(t, i+1, typed.N)
	}
	_, err = enc.messages([]snapshot.Message{{Seq: 1, Payload: &ping{}}})
	require.ErrorIs(t, err, ErrUnregistered)
}

type (
	forgetful struct {
		Kept, Forgot int
	}
	wired struct {
		Balance int
		peer    *actor.PID `msgpack:"-"`
	}
)

func (*forgetful) Receive(actor.Context) {}
func (*wired) Receive(actor.Context)     {}

func (f *forgetful) MarshalState() ([]byte, error) { return []byte{byte(f.Kept)}, nil }
func (f *forgetful) UnmarshalState(b []byte) error { f.Kept = int(b[0]); return nil }

// RoundTrip finds what a custom marshaler forgets, and passes what a
// snapshot keeps; fields tagged msgpack:"-" are left out on purpose.
func TestRoundTrip(t *testing.T) {
	require.NoError(t, RoundTrip(&note{Text: "x"}))
	require.NoError(t, RoundTrip(note{Text: "x"}))
	require.NoError(t, RoundTrip(&wired{Balance: 3, peer: actor.NewPID("a", "b")}))
	require.NoError(t, RoundTrip(&stateless{peer: actor.NewPID("a", "b")}))
	require.NoError(t, RoundTrip(&forgetful{Kept: 1}))
	err := RoundTrip(&forgetful{Kept: 1, Forgot: 2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not come back whole")
	require.ErrorIs(t, RoundTrip(&secretMsg{amount: 1}), ErrLossy, "an unexported field is lost")
	type inner struct {
		Kept int
		skip chan int `msgpack:"-"`
	}
	type outer struct{ In []inner }
	require.NoError(t, RoundTrip(&outer{In: []inner{{Kept: 1, skip: make(chan int)}}}), "msgpack:\"-\" at any depth")
	type withMap struct{ M map[string]int }
	for range 50 {
		require.NoError(t, RoundTrip(&withMap{M: map[string]int{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}}), "whatever the map's order")
	}
}

// A protobuf message, as Proto.Actor programs send them, is recorded with
// protobuf's own encoding: its unexported bookkeeping is not a loss.
func TestProtobufMessagesRecorded(t *testing.T) {
	reg := WithMessage[*wrapperspb.StringValue]("pb.string")
	types, err := messageTypesOf([]Option{reg})
	require.NoError(t, err)
	enc := encoder{types: types}
	_, err = enc.messages([]snapshot.Message{{Seq: 1, Payload: wrapperspb.String("hello")}, {Seq: 2, Payload: &valueMsg{N: 1}}})
	require.ErrorIs(t, err, ErrUnregistered, "valueMsg is not registered here")
	recorded, err := enc.messages([]snapshot.Message{{Seq: 1, Payload: wrapperspb.String("hello")}})
	require.NoError(t, err)
	rm := recorded[0].Payload.(RecordedMessage)
	got, err := DecodeMessage(rm, reg)
	require.NoError(t, err)
	assert.True(t, proto.Equal(wrapperspb.String("hello"), got.(proto.Message)))
	typed, err := DecodeAs[*wrapperspb.StringValue](rm)
	require.NoError(t, err)
	assert.Equal(t, "hello", typed.GetValue())
}

func TestRegistered(t *testing.T) {
	sys, err := NewSystem(WithMessage[*note]("b.note"), WithMessage[valueMsg]("a.value"),
		WithKind("probe", func() actor.Actor { return &probe{} }))
	require.NoError(t, err)
	defer shutdown(t, sys)
	messages, kinds := sys.Registered()
	assert.Equal(t, []string{"a.value", "b.note"}, messages, "one name per registration, sorted")
	assert.Equal(t, []string{"probe"}, kinds)
}

// A recorded message with an envelope decodes to what msgpack's own
// encoding of its envelopeRecord decodes to, whatever the envelope holds:
// a sender, headers, a tagged message's marks, marks over headers of the
// same name; a bare message is recorded bare.
func TestEnvelopeRecordEncoding(t *testing.T) {
	types, err := messageTypesOf([]Option{WithMessage[valueMsg]("v")})
	require.NoError(t, err)
	pid := actor.NewPID("host:1", "someone")
	hdr := map[string]string{"trace": "t1", requestHeader: "9/old", "x": ""}
	for i, payload := range []any{
		valueMsg{N: 1},
		&actor.MessageEnvelope{Message: valueMsg{N: 2}, Sender: pid},
		&actor.MessageEnvelope{Message: valueMsg{N: 3}, Header: hdr},
		&tagged{msg: valueMsg{N: 4}, sender: pid, request: 7, from: "asker"},
		&tagged{msg: valueMsg{N: 5}, answer: 12},
		&tagged{msg: &actor.MessageEnvelope{Message: valueMsg{N: 6}, Header: hdr, Sender: pid}, request: 3, from: "a", answer: 8},
		&tagged{msg: &actor.MessageEnvelope{Message: valueMsg{N: 7}, Header: hdr}, answer: 2},
		&tagged{msg: valueMsg{N: 8}},
		&tagged{msg: valueMsg{N: 9}, sender: pid},
	} {
		enc := encoder{types: types}
		recorded, err := enc.messages([]snapshot.Message{{Seq: 1, Payload: payload}})
		require.NoError(t, err)
		rm := recorded[0].Payload.(RecordedMessage)
		name, data, env, err := unwrapRecorded(rm)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, "v", name)
		var got valueMsg
		require.NoError(t, msgpack.Unmarshal(data, &got))
		assert.Equal(t, i+1, got.N)

		// What msgpack makes of the same envelope.
		want := payload
		if tg, ok := want.(*tagged); ok {
			want = tg.envelope()
		}
		we, ok := want.(*actor.MessageEnvelope)
		if !ok || (we.Sender == nil && len(we.Header) == 0) {
			assert.Nil(t, env, "message %d is recorded bare", i)
			continue
		}
		b, err := msgpack.Marshal(&envelopeRecord{Sender: we.Sender, Header: we.Header, Data: data})
		require.NoError(t, err)
		var wr envelopeRecord
		require.NoError(t, msgpack.Unmarshal(b, &wr))
		require.NotNil(t, env, "message %d has its envelope", i)
		assert.True(t, proto.Equal(wr.Sender, env.Sender) || (wr.Sender == nil && env.Sender == nil), "message %d: sender %v, want %v", i, env.Sender, wr.Sender)
		assert.Equal(t, wr.Header, map[string]string(env.Header), "message %d", i)
	}
}
