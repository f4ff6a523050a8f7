package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// BenchShape is the snapshot the stores' benchmarks save and load, so that
// their figures compare: 10,000 participants with 100-byte states, and
// 2,000 messages of 64 bytes in flight on 1,000 channels (1.5 MB encoded).
var BenchShape = Shape{Participants: 10000, StateSize: 100, Channels: 1000, InFlight: 2, MessageSize: 64}

// LargeShape is the file store's large benchmark: 10,000 participants
// with 4 KB states, and 20,000 messages of 64 bytes in flight on 10,000
// channels (about 42 MB encoded).
var LargeShape = Shape{Participants: 10000, StateSize: 4096, Channels: 10000, InFlight: 2, MessageSize: 64}

// Shape says what NewGlobal puts in a snapshot.
type Shape struct {
	// Participants is the number of participants; the last one has
	// departed (no state) when there are at least two. Zero makes an
	// empty snapshot.
	Participants int
	// StateSize is the size of each state, in bytes.
	StateSize int
	// Channels is the number of channels with messages in flight, at most
	// Participants*(Participants-1).
	Channels int
	// InFlight is the number of messages in flight on each channel.
	InFlight int
	// MessageSize is the size of each message's data, in bytes.
	MessageSize int
	// Waiting is the number of participants, the first ones, that record
	// waits (the departed one excepted), each with Edges wait-for edges.
	Waiting int
	// Edges is the number of wait-for edges of each waiting participant:
	// requests to the participants after it, and a declared wait for a
	// process that is not a participant.
	Edges int
	// Violations is the number of invariants the snapshot broke.
	Violations int
	// ReceiverCounts makes it an Epochs snapshot that keeps each
	// receiver's counts (Global.ReceiverCounts), balanced with what is in
	// flight to it.
	ReceiverCounts bool
	// Sums makes it an Epochs snapshot counted in sums (Global.Sums),
	// balanced with what is in flight.
	Sums bool
}

// Small is the shape of most conformance tests.
var Small = Shape{Participants: 12, StateSize: 100, Channels: 16, InFlight: 3, MessageSize: 24}

// WithWaits is Small with waits and violations: 8 participants with 3
// wait-for edges each, and 2 violations.
var WithWaits = Shape{Participants: 12, StateSize: 100, Channels: 16, InFlight: 3, MessageSize: 24, Waiting: 8, Edges: 3, Violations: 2}

// NewGlobal returns a valid snapshot id of the given shape, with
// RecordedMessage payloads. Its content is a function of id and shape
// only, so a test can rebuild what a store should return.
func NewGlobal(id snapshot.SnapshotID, s Shape) *snapshot.Global {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(s.Participants)))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	g := &snapshot.Global{
		ID:    id,
		Mode:  snapshot.Unaligned,
		Start: base.Add(time.Duration(id) * time.Second).Add(123456789),
		End:   base.Add(time.Duration(id)*time.Second + 987654321),
	}
	pid := func(i int) snapshot.ProcessID { return snapshot.ProcessID(fmt.Sprintf("node-1/account-%06d", i)) }
	for i := range s.Participants {
		p := snapshot.Participant{ID: pid(i), Kind: []string{"account", "router", "auditor"}[i%3], State: fill(s.StateSize)}
		if i == s.Participants-1 && i > 0 {
			p.Kind, p.State, p.Departed = "", nil, true
		}
		g.Participants = append(g.Participants, p)
	}
	n := s.Participants
	for i := range min(s.Channels, n*(n-1)) {
		from := i % n
		to := (from + 1 + i/n) % n
		c := snapshot.ChannelState{Channel: snapshot.Channel{From: pid(from), To: pid(to)}, Received: uint64(rng.IntN(1000))}
		for j := range s.InFlight {
			c.Messages = append(c.Messages, snapshot.Message{
				Seq:     c.Received + 1 + uint64(j),
				Payload: persistence.RecordedMessage{Type: "bank.Transfer", Data: fill(s.MessageSize)},
			})
		}
		c.Sent = c.Received + uint64(len(c.Messages))
		g.Channels = append(g.Channels, c)
	}
	slices.SortFunc(g.Channels, func(x, y snapshot.ChannelState) int {
		if r := strings.Compare(string(x.Channel.From), string(y.Channel.From)); r != 0 {
			return r
		}
		return strings.Compare(string(x.Channel.To), string(y.Channel.To))
	})
	// Waits and violations are drawn from nothing random, so that adding
	// them leaves the rest as it was for shapes without them.
	for i := range min(s.Waiting, n) {
		p := &g.Participants[i]
		if p.Departed {
			continue
		}
		w := &snapshot.Waits{Any: i%2 == 1, Timer: i%3 == 2}
		for j := range s.Edges {
			e := snapshot.Wait{
				To:      pid((i + 1 + j) % n),
				Request: uint64(i*s.Edges + j + 1),
				Type:    "bank.Transfer",
				Since:   base.Add(time.Duration(i)*time.Millisecond + time.Duration(j)),
			}
			if j == s.Edges-1 && j > 0 {
				e.To, e.Request, e.Type = snapshot.ProcessID(fmt.Sprintf("node-2/ledger-%d", i)), 0, "ledger.Lock"
			}
			w.Edges = append(w.Edges, e)
		}
		p.Waits = w
	}
	if s.ReceiverCounts {
		g.Mode = snapshot.Epochs
		BalanceReceivers(g, func(i int, _ uint64) uint64 { return uint64(i)<<33 + 7 })
	}
	if s.Sums {
		g.Mode = snapshot.Epochs
		BalanceSums(g, uint64(id)<<40+uint64(s.Participants))
	}
	for i := range s.Violations {
		g.Violations = append(g.Violations, snapshot.Violation{
			Invariant: fmt.Sprintf("invariant-%d", i),
			Err:       fmt.Sprintf("total balance is %d, want %d", 1000*int(id)-i-1, 1000*int(id)),
		})
	}
	return g
}

// BalanceReceivers gives g receiver counts (Global.ReceiverCounts) that
// balance: participant i, unless departed, received received(i, k)
// before it recorded, k being the messages in flight to it, and was sent
// that plus k. received(i, k) must not exceed the largest uint64 less k.
func BalanceReceivers(g *snapshot.Global, received func(i int, inFlight uint64) uint64) {
	g.ReceiverCounts = true
	inFlight := make(map[snapshot.ProcessID]uint64)
	for _, c := range g.Channels {
		inFlight[c.Channel.To] += uint64(len(c.Messages))
	}
	for i := range g.Participants {
		if p := &g.Participants[i]; !p.Departed {
			k := inFlight[p.ID]
			p.Received = received(i, k)
			p.SentTo = p.Received + k
		}
	}
}

// BalanceSums gives g sums (Global.Sums) that balance: received before
// the records, and that plus every message in flight sent before them.
// received must not exceed the largest uint64 less what is in flight.
func BalanceSums(g *snapshot.Global, received uint64) {
	g.Sums = &snapshot.SumCounts{Sent: received + uint64(g.TotalInFlight()), Received: received}
}

// Equal reports whether got is want as a store must return it: the same
// id, mode and instants (locations and monotonic readings are not kept),
// the same participants with the same waits (nil where want's are nil),
// the same channels and messages, the same violations, receiver counts
// and sums; a nil and an empty slice are equal.
func Equal(want, got *snapshot.Global) error {
	switch {
	case want == nil || got == nil:
		if want != got {
			return fmt.Errorf("want %v, got %v", want, got)
		}
		return nil
	case want.ID != got.ID:
		return fmt.Errorf("id: want %d, got %d", want.ID, got.ID)
	case want.Mode != got.Mode:
		return fmt.Errorf("mode: want %v, got %v", want.Mode, got.Mode)
	case !want.Start.Equal(got.Start):
		return fmt.Errorf("start: want %v, got %v", want.Start, got.Start)
	case !want.End.Equal(got.End):
		return fmt.Errorf("end: want %v, got %v", want.End, got.End)
	case len(want.Participants) != len(got.Participants):
		return fmt.Errorf("want %d participants, got %d", len(want.Participants), len(got.Participants))
	case len(want.Channels) != len(got.Channels):
		return fmt.Errorf("want %d channels, got %d", len(want.Channels), len(got.Channels))
	case len(want.Violations) != len(got.Violations):
		return fmt.Errorf("want %d violations, got %d", len(want.Violations), len(got.Violations))
	case want.ReceiverCounts != got.ReceiverCounts:
		return fmt.Errorf("receiver counts: want %v, got %v", want.ReceiverCounts, got.ReceiverCounts)
	case (want.Sums == nil) != (got.Sums == nil) || want.Sums != nil && *want.Sums != *got.Sums:
		return fmt.Errorf("sums: want %v, got %v", want.Sums, got.Sums)
	}
	for i, w := range want.Participants {
		p := got.Participants[i]
		if w.ID != p.ID || w.Kind != p.Kind || w.Departed != p.Departed || !bytes.Equal(w.State, p.State) || w.SentTo != p.SentTo || w.Received != p.Received {
			return fmt.Errorf("participant %d: want %+v, got %+v", i, w, p)
		}
		if err := equalWaits(w.Waits, p.Waits); err != nil {
			return fmt.Errorf("participant %s: waits: %w", w.ID, err)
		}
	}
	for i, w := range want.Violations {
		if v := got.Violations[i]; v != w {
			return fmt.Errorf("violation %d: want %+v, got %+v", i, w, v)
		}
	}
	for i, w := range want.Channels {
		c := got.Channels[i]
		if w.Channel != c.Channel || w.Sent != c.Sent || w.Received != c.Received || len(w.Messages) != len(c.Messages) {
			return fmt.Errorf("channel %d: want %s sent %d received %d with %d messages, got %s sent %d received %d with %d messages",
				i, w.Channel, w.Sent, w.Received, len(w.Messages), c.Channel, c.Sent, c.Received, len(c.Messages))
		}
		for j, wm := range w.Messages {
			m := c.Messages[j]
			wp, ok1 := wm.Payload.(persistence.RecordedMessage)
			p, ok2 := m.Payload.(persistence.RecordedMessage)
			if wm.Seq != m.Seq || !ok1 || !ok2 || wp.Type != p.Type || !bytes.Equal(wp.Data, p.Data) {
				return fmt.Errorf("channel %s message %d: want %d %#v, got %d %#v", w.Channel, j, wm.Seq, wm.Payload, m.Seq, m.Payload)
			}
		}
	}
	return nil
}

// equalWaits reports whether got is want, the waits of one participant.
func equalWaits(want, got *snapshot.Waits) error {
	switch {
	case want == nil || got == nil:
		if (want == nil) != (got == nil) {
			return fmt.Errorf("want %+v, got %+v", want, got)
		}
		return nil
	case want.Any != got.Any || want.Timer != got.Timer:
		return fmt.Errorf("want any %v timer %v, got any %v timer %v", want.Any, want.Timer, got.Any, got.Timer)
	case len(want.Edges) != len(got.Edges):
		return fmt.Errorf("want %d edges, got %d", len(want.Edges), len(got.Edges))
	}
	for i, w := range want.Edges {
		e := got.Edges[i]
		if w.To != e.To || w.Request != e.Request || w.Type != e.Type || !w.Since.Equal(e.Since) {
			return fmt.Errorf("edge %d: want %+v, got %+v", i, w, e)
		}
	}
	return nil
}

// Run runs the conformance suite, each test in its own subtest on a store
// from open. open must return an empty store; it may register cleanups
// with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s persistence.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Empty", testEmpty},
		{"Exists", testExists},
		{"ListOrder", testListOrder},
		{"Delete", testDelete},
		{"Retain", testRetain},
		{"Refused", testRefused},
		{"Cancelled", testCancelled},
		{"LoadedIsCallers", testLoadedIsCallers},
		{"ConcurrentSaves", testConcurrentSaves},
		{"ConcurrentMixed", testConcurrentMixed},
		{"ConcurrentReplace", testConcurrentReplace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open(t)) })
	}
}

func requireEqual(t testing.TB, want, got *snapshot.Global) {
	t.Helper()
	if err := Equal(want, got); err != nil {
		t.Fatalf("snapshot %d as loaded: %v", want.ID, err)
	}
}

func ids(t testing.TB, s persistence.Store) []snapshot.SnapshotID {
	t.Helper()
	ids, err := s.List(context.Background())
	require.NoError(t, err)
	return ids
}

func testRoundTrip(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	edge := &snapshot.Global{
		ID: 3,
		Participants: []snapshot.Participant{
			// Waits that wait for nothing, kept as given.
			{ID: "a", Kind: "k", State: []byte{}, Waits: &snapshot.Waits{}},
			{ID: "b", Kind: "", State: nil, Departed: true, Waits: &snapshot.Waits{Any: true, Timer: true}},
			{ID: "c/\u00e9\x00", Kind: "k", State: bytes.Repeat([]byte{0xff}, 70000), Waits: &snapshot.Waits{Any: true, Edges: []snapshot.Wait{
				{To: "c/\u00e9\x00", Request: 1<<64 - 1, Type: strings.Repeat("t", 300), Since: time.Unix(-1<<40, 999999999).UTC()},
				{To: "", Type: ""},
				{To: "not a participant \x00", Request: 7, Type: "fork", Since: time.Date(2026, 12, 1, 8, 0, 0, 1, time.FixedZone("X", -3600))},
				{To: "a"},
			}}},
		},
		Channels: []snapshot.ChannelState{
			{Channel: snapshot.Channel{From: "a", To: "c/\u00e9\x00"}, Sent: 5, Received: 5},
			{Channel: snapshot.Channel{From: "b", To: "a"}, Sent: 1 << 40, Received: 1<<40 - 2, Messages: []snapshot.Message{
				{Seq: 1<<40 - 1, Payload: persistence.RecordedMessage{Type: "t", Data: nil}},
				{Seq: 1 << 40, Payload: persistence.RecordedMessage{Type: "", Data: []byte("x")}},
			}},
		},
		Violations: []snapshot.Violation{
			{Invariant: "", Err: ""},
			{Invariant: "balance \x00é", Err: strings.Repeat("e", 70000)},
		},
	}
	empty := &snapshot.Global{ID: 1}
	waiting := NewGlobal(5, Shape{Participants: 300, StateSize: 10, Channels: 100, InFlight: 1, MessageSize: 10, Waiting: 200, Edges: 4, Violations: 3})
	big := NewGlobal(9, Shape{Participants: 300, StateSize: 100, Channels: 400, InFlight: 4, MessageSize: 40})
	counted := NewGlobal(6, Shape{Participants: 300, StateSize: 10, Channels: 120, InFlight: 2, MessageSize: 10, ReceiverCounts: true})
	// Receiver counts at the ends of their range.
	countedEdge := *edge
	countedEdge.ID, countedEdge.Mode, countedEdge.ReceiverCounts = 4, snapshot.Epochs, true
	countedEdge.Participants = slices.Clone(edge.Participants)
	countedEdge.Participants[0].SentTo, countedEdge.Participants[0].Received = 1<<64-1, 1<<64-3
	countedEdge.Participants[2].SentTo, countedEdge.Participants[2].Received = 1<<63, 1<<63
	summed := NewGlobal(2, Shape{Participants: 300, StateSize: 10, Channels: 90, InFlight: 3, MessageSize: 10, Sums: true})
	// Sums at the end of their range.
	summedEdge := *edge
	summedEdge.ID, summedEdge.Mode = 8, snapshot.Epochs
	BalanceSums(&summedEdge, 1<<64-1-uint64(edge.TotalInFlight()))
	all := []*snapshot.Global{empty, summed, &summedEdge, edge, &countedEdge, waiting, counted, big}
	for _, g := range all {
		require.NoError(t, s.Save(ctx, g))
	}
	for _, g := range all {
		got, err := s.Load(ctx, g.ID)
		require.NoError(t, err)
		requireEqual(t, g, got)
		require.NoError(t, got.Verify())
	}
	got, err := s.Latest(ctx)
	require.NoError(t, err)
	requireEqual(t, big, got)
}

func testEmpty(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	_, err := s.Latest(ctx)
	require.ErrorIs(t, err, persistence.ErrNotFound)
	_, err = s.Load(ctx, 1)
	require.ErrorIs(t, err, persistence.ErrNotFound)
	assert.Empty(t, ids(t, s))
	require.NoError(t, s.Delete(ctx, 1))
	require.NoError(t, s.Retain(ctx, 1))
	require.NoError(t, s.Save(ctx, NewGlobal(2, Small)))
	_, err = s.Load(ctx, 1)
	require.ErrorIs(t, err, persistence.ErrNotFound)
}

func testExists(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	first := NewGlobal(3, Small)
	require.NoError(t, s.Save(ctx, first))
	second := NewGlobal(3, Shape{Participants: 2, StateSize: 5})
	require.ErrorIs(t, s.Save(ctx, second), persistence.ErrExists)
	got, err := s.Load(ctx, 3)
	require.NoError(t, err)
	requireEqual(t, first, got)
	assert.Equal(t, []snapshot.SnapshotID{3}, ids(t, s))
}

func testListOrder(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	for _, id := range []snapshot.SnapshotID{5, 1, 30, 2, 17, 1 << 40} {
		require.NoError(t, s.Save(ctx, NewGlobal(id, Small)))
	}
	assert.Equal(t, []snapshot.SnapshotID{1, 2, 5, 17, 30, 1 << 40}, ids(t, s))
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	requireEqual(t, NewGlobal(1<<40, Small), g)
}

func testDelete(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	for id := snapshot.SnapshotID(1); id <= 3; id++ {
		require.NoError(t, s.Save(ctx, NewGlobal(id, Small)))
	}
	require.NoError(t, s.Delete(ctx, 2))
	require.NoError(t, s.Delete(ctx, 2))
	assert.Equal(t, []snapshot.SnapshotID{1, 3}, ids(t, s))
	_, err := s.Load(ctx, 2)
	require.ErrorIs(t, err, persistence.ErrNotFound)
	// A deleted id can be saved again.
	require.NoError(t, s.Save(ctx, NewGlobal(2, Small)))
	require.NoError(t, s.Delete(ctx, 3))
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	requireEqual(t, NewGlobal(2, Small), g)
}

func testRetain(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	for id := snapshot.SnapshotID(1); id <= 6; id++ {
		require.NoError(t, s.Save(ctx, NewGlobal(id, Small)))
	}
	require.Error(t, s.Retain(ctx, 0), "Retain(0) would delete every snapshot")
	require.Error(t, s.Retain(ctx, -1))
	assert.Len(t, ids(t, s), 6)
	require.NoError(t, s.Retain(ctx, 3))
	assert.Equal(t, []snapshot.SnapshotID{4, 5, 6}, ids(t, s))
	require.NoError(t, s.Retain(ctx, 10))
	assert.Equal(t, []snapshot.SnapshotID{4, 5, 6}, ids(t, s))
	require.NoError(t, s.Retain(ctx, 1))
	assert.Equal(t, []snapshot.SnapshotID{6}, ids(t, s))
	_, err := s.Load(ctx, 5)
	require.ErrorIs(t, err, persistence.ErrNotFound)
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	requireEqual(t, NewGlobal(6, Small), g)
}

func testRefused(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	imbalance := NewGlobal(2, Small)
	imbalance.Channels[0].Sent++
	unsorted := NewGlobal(3, Small)
	unsorted.Participants[0], unsorted.Participants[1] = unsorted.Participants[1], unsorted.Participants[0]
	payload := NewGlobal(4, Small)
	payload.Channels[1].Messages[0].Payload = "a string"
	pointer := NewGlobal(5, Small)
	rm := pointer.Channels[0].Messages[0].Payload.(persistence.RecordedMessage)
	pointer.Channels[0].Messages[0].Payload = &rm
	zero := NewGlobal(1, Small)
	zero.ID = 0

	require.Error(t, s.Save(ctx, nil))
	require.ErrorIs(t, s.Save(ctx, zero), snapshot.ErrInvalidID)
	require.ErrorIs(t, s.Save(ctx, imbalance), snapshot.ErrImbalance)
	require.Error(t, s.Save(ctx, unsorted))
	err := s.Save(ctx, payload)
	require.ErrorIs(t, err, persistence.ErrPayloadType)
	assert.Contains(t, err.Error(), "string", "the error names the payload's type")
	err = s.Save(ctx, pointer)
	require.ErrorIs(t, err, persistence.ErrPayloadType)
	assert.Contains(t, err.Error(), "*persistence.RecordedMessage")
	assert.Empty(t, ids(t, s), "nothing refused is stored")
	_, err = s.Latest(ctx)
	require.ErrorIs(t, err, persistence.ErrNotFound)
}

func testCancelled(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, NewGlobal(1, Small)))
	require.NoError(t, s.Save(ctx, NewGlobal(2, Small)))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.Save(cancelled, NewGlobal(3, Small)), context.Canceled)
	_, err := s.Load(cancelled, 1)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Latest(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.List(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, s.Delete(cancelled, 1), context.Canceled)
	require.ErrorIs(t, s.Retain(cancelled, 1), context.Canceled)
	assert.Equal(t, []snapshot.SnapshotID{1, 2}, ids(t, s), "a cancelled call changed nothing")
	_, err = s.Load(ctx, 3)
	require.ErrorIs(t, err, persistence.ErrNotFound)
}

func testLoadedIsCallers(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	require.NoError(t, s.Save(ctx, NewGlobal(1, WithWaits)))
	g, err := s.Load(ctx, 1)
	require.NoError(t, err)
	g.Participants[0].Kind = "changed"
	g.Participants[0].Waits.Timer = !g.Participants[0].Waits.Timer
	g.Participants[0].Waits.Edges[0].Type = "changed"
	g.Participants[1].Waits.Edges = g.Participants[1].Waits.Edges[:1]
	g.Participants[2].Waits = nil
	g.Participants = g.Participants[:3]
	g.Channels[0].Messages[0].Seq = 0
	g.Violations[0].Err = "changed"
	g.Violations = g.Violations[:1]
	again, err := s.Load(ctx, 1)
	require.NoError(t, err)
	requireEqual(t, NewGlobal(1, WithWaits), again)
}

// testConcurrentSaves saves from several goroutines at once: distinct ids
// all succeed, and of the Saves racing for one id exactly one does.
func testConcurrentSaves(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	const workers, each, contested = 6, 5, snapshot.SnapshotID(1000)
	var wg sync.WaitGroup
	errs := make([][]error, workers)
	won := make([]bool, workers)
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range each {
				errs[w] = append(errs[w], s.Save(ctx, NewGlobal(snapshot.SnapshotID(1+w*each+i), Small)))
			}
			// Each worker's version of the contested id differs.
			err := s.Save(ctx, NewGlobal(contested, Shape{Participants: 2 + w, StateSize: 10}))
			if err == nil {
				won[w] = true
			} else if !errors.Is(err, persistence.ErrExists) {
				errs[w] = append(errs[w], err)
			}
		})
	}
	close(start)
	wg.Wait()
	for w := range workers {
		for _, err := range errs[w] {
			require.NoError(t, err, "worker %d", w)
		}
	}
	winner := slices.Index(won, true)
	require.NotEqual(t, -1, winner, "one Save of the contested id succeeds")
	assert.Equal(t, 1, countTrue(won), "only one Save of the contested id succeeds")
	got, err := s.Load(ctx, contested)
	require.NoError(t, err)
	requireEqual(t, NewGlobal(contested, Shape{Participants: 2 + winner, StateSize: 10}), got)
	var want []snapshot.SnapshotID
	for id := snapshot.SnapshotID(1); id <= workers*each; id++ {
		want = append(want, id)
	}
	assert.Equal(t, append(want, contested), ids(t, s))
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// testConcurrentMixed runs readers against a writer that saves, retains
// and deletes: every snapshot read is whole (equal to what was saved) and
// the only error is ErrNotFound.
func testConcurrentMixed(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	const last = 40
	require.NoError(t, s.Save(ctx, NewGlobal(1, Small)))
	done := make(chan struct{})
	var wg sync.WaitGroup
	failures := make(chan error, 16)
	fail := func(err error) {
		select {
		case failures <- err:
		default:
		}
	}
	for r := range 3 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var g *snapshot.Global
				var err error
				switch r {
				case 0:
					g, err = s.Latest(ctx)
				case 1:
					var list []snapshot.SnapshotID
					if list, err = s.List(ctx); err == nil && !slices.IsSorted(list) {
						err = fmt.Errorf("list not sorted: %v", list)
					}
				default:
					g, err = s.Load(ctx, snapshot.SnapshotID(2+rand.IntN(last)))
				}
				switch {
				case errors.Is(err, persistence.ErrNotFound):
				case err != nil:
					fail(err)
				case g != nil:
					if err := Equal(NewGlobal(g.ID, Small), g); err != nil {
						fail(fmt.Errorf("snapshot %d read while written: %w", g.ID, err))
					}
				}
			}
		})
	}
	for id := snapshot.SnapshotID(2); id <= last; id++ {
		require.NoError(t, s.Save(ctx, NewGlobal(id, Small)))
		switch id % 3 {
		case 0:
			require.NoError(t, s.Retain(ctx, 4))
		case 1:
			require.NoError(t, s.Delete(ctx, id-1))
		}
	}
	close(done)
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	g, err := s.Latest(ctx)
	require.NoError(t, err)
	requireEqual(t, NewGlobal(last, Small), g)
}

// testConcurrentReplace loads a snapshot that a writer keeps deleting and
// saving again: every Load returns it whole or ErrNotFound.
func testConcurrentReplace(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	want := NewGlobal(5, Small)
	require.NoError(t, s.Save(ctx, want))
	done := make(chan struct{})
	var wg sync.WaitGroup
	var loaded, missing int
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			g, err := s.Load(ctx, 5)
			switch {
			case errors.Is(err, persistence.ErrNotFound):
				missing++
			case err != nil:
				t.Error(err)
				return
			default:
				loaded++
				if err := Equal(want, g); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	for range 30 {
		require.NoError(t, s.Delete(ctx, 5))
		require.NoError(t, s.Save(ctx, NewGlobal(5, Small)))
	}
	close(done)
	wg.Wait()
	t.Logf("loaded %d times, not found %d times", loaded, missing)
}

// RunPair runs the ownership tests: claims, leases, the highest id and
// the entries. openPair returns two Stores on one fresh storage (two
// FileStores on one directory, two PostgreSQL Stores on one schema), or
// one Store twice where a store cannot be shared (Memory).
func RunPair(t *testing.T, openPair func(t *testing.T) (a, b persistence.Store)) {
	tests := []struct {
		name string
		run  func(t *testing.T, a, b persistence.Store)
	}{
		{"Claim", testClaim},
		{"HighKeptAfterDelete", testHighKeptAfterDelete},
		{"Entries", testEntries},
		{"ClaimNameChecked", testClaimNameChecked},
		{"ProbesDoNotFailClaims", testProbesDoNotFailClaims},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := openPair(t)
			tt.run(t, a, b)
		})
	}
}

func ownership(t testing.TB, s persistence.Store) persistence.Ownership {
	t.Helper()
	o, err := s.Ownership(context.Background())
	require.NoError(t, err)
	return o
}

func requireOwnerError(t testing.TB, err, sentinel error, owner string) {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	var oe *persistence.OwnerError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, owner, oe.Ownership.Owner.System)
	assert.Contains(t, err.Error(), fmt.Sprintf("%q", owner), "the error names the owner")
	assert.NotContains(t, err.Error(), "\n", "one line")
}

func testClaim(t *testing.T, a, b persistence.Store) {
	ctx := context.Background()
	shared := a != b
	assert.Equal(t, persistence.Ownership{}, ownership(t, a), "a new store has no owner")

	la, err := a.Claim(ctx, "sys-a", persistence.ClaimNew)
	require.NoError(t, err, "a new system claims an empty store")
	assert.Equal(t, "sys-a", la.Owner().System)
	assert.Equal(t, uint64(1), la.Owner().Generation)
	assert.Zero(t, la.High())
	o := ownership(t, b)
	assert.True(t, o.Live, "a held lease shows")
	assert.Equal(t, "sys-a", o.Owner.System)

	_, err = b.Claim(ctx, "sys-b", persistence.ClaimNew)
	requireOwnerError(t, err, persistence.ErrLocked, "sys-a")
	_, err = b.Claim(ctx, "sys-a", persistence.ClaimRestore)
	requireOwnerError(t, err, persistence.ErrLocked, "sys-a")
	if shared {
		requireOwnerError(t, b.Save(ctx, NewGlobal(1, Small)), persistence.ErrLocked, "sys-a")
	}
	require.NoError(t, a.Save(ctx, NewGlobal(1, Small)), "the lease holder saves")
	require.NoError(t, a.Save(ctx, NewGlobal(2, Small)))
	require.NoError(t, la.Release(ctx))
	require.NoError(t, la.Release(ctx), "Release is idempotent")
	o = ownership(t, b)
	assert.False(t, o.Live)
	assert.Equal(t, "sys-a", o.Owner.System, "the owner outlives its lease")
	assert.Equal(t, snapshot.SnapshotID(2), o.High)

	_, err = b.Claim(ctx, "sys-b", persistence.ClaimNew)
	requireOwnerError(t, err, persistence.ErrOwned, "sys-a")
	_, err = b.Claim(ctx, "sys-a", persistence.ClaimNew)
	requireOwnerError(t, err, persistence.ErrOwned, "sys-a")

	lb, err := b.Claim(ctx, "sys-a", persistence.ClaimRestore)
	require.NoError(t, err, "a restore takes the store over")
	assert.Equal(t, uint64(2), lb.Owner().Generation)
	assert.Equal(t, snapshot.SnapshotID(2), lb.High(), "ids continue after the highest")
	if shared {
		requireOwnerError(t, a.Save(ctx, NewGlobal(3, Small)), persistence.ErrLocked, "sys-a")
	}
	require.NoError(t, b.Save(ctx, NewGlobal(3, Small)))
	require.NoError(t, lb.Release(ctx))
	assert.Equal(t, []snapshot.SnapshotID{1, 2, 3}, ids(t, a))
}

func testHighKeptAfterDelete(t *testing.T, a, b persistence.Store) {
	ctx := context.Background()
	for id := snapshot.SnapshotID(1); id <= 3; id++ {
		require.NoError(t, a.Save(ctx, NewGlobal(id, Small)))
	}
	require.NoError(t, a.Delete(ctx, 3))
	require.NoError(t, a.Delete(ctx, 2))
	assert.Equal(t, snapshot.SnapshotID(3), ownership(t, b).High, "a deleted id still counts")
	_, err := b.Claim(ctx, "sys", persistence.ClaimNew)
	require.ErrorIs(t, err, persistence.ErrOwned, "a store that held snapshots is owned, even without an owner record")
	l, err := b.Claim(ctx, "sys", persistence.ClaimRestore)
	require.NoError(t, err)
	assert.Equal(t, snapshot.SnapshotID(3), l.High())
	require.NoError(t, l.Release(ctx))
}

func testEntries(t *testing.T, a, b persistence.Store) {
	ctx := context.Background()
	es, err := b.Entries(ctx)
	require.NoError(t, err)
	assert.Empty(t, es)
	for _, id := range []snapshot.SnapshotID{2, 1, 3} {
		require.NoError(t, a.Save(ctx, NewGlobal(id, Small)))
	}
	es, err = b.Entries(ctx)
	require.NoError(t, err)
	var got []snapshot.SnapshotID
	for _, e := range es {
		assert.NoError(t, e.Damage, "entry %s", e.Name)
		assert.NotEmpty(t, e.Name)
		got = append(got, e.ID)
	}
	assert.Equal(t, []snapshot.SnapshotID{1, 2, 3}, got)
	require.NoError(t, b.SetAside(ctx, es[1]))
	assert.Equal(t, []snapshot.SnapshotID{1, 3}, ids(t, a), "an entry set aside is not listed")
	assert.Equal(t, snapshot.SnapshotID(3), ownership(t, a).High)
}

func testClaimNameChecked(t *testing.T, a, _ persistence.Store) {
	ctx := context.Background()
	for _, name := range []string{"", "a\nb", strings.Repeat("x", persistence.MaxSystemName+1), "\xff"} {
		_, err := a.Claim(ctx, name, persistence.ClaimNew)
		require.Error(t, err, "name %q", name)
	}
	assert.Equal(t, persistence.Ownership{}, ownership(t, a), "a refused claim records nothing")
}

// testProbesDoNotFailClaims: readers asking whether a writer holds the
// store (as ls does) never make a claim meanwhile fail.
func testProbesDoNotFailClaims(t *testing.T, a, b persistence.Store) {
	ctx := context.Background()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = b.Ownership(ctx)
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()
	for i := range 100 {
		l, err := a.Claim(ctx, "sys", persistence.ClaimRestore)
		require.NoError(t, err, "claim %d", i)
		require.NoError(t, l.Release(ctx))
	}
}
