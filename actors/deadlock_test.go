package actors

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Messages of the deadlock tests.
type (
	askOther struct{ Peer string } // ask Peer with a Request
	question struct{ N int }
	answer   struct{ N int }
	blockOn  struct { // ask Peer with RequestFuture, and block in Result for Wait
		Peer string
		Wait time.Duration
		// both holds each blocker until both are in their handlers:
		// otherwise one's question can reach the other before its own
		// blockOn, be answered, and leave no cycle.
		both *sync.WaitGroup `msgpack:"-"`
	}
	askSelf struct{}
	hop     struct{ Left int } // pass on until Left is 0
	release struct{}           // answer the questions held, later, by Send
)

var deadlockMessages = withOptions(
	WithMessage[*askOther]("test.dl.askpeer"),
	WithMessage[*question]("test.dl.question"),
	WithMessage[*answer]("test.dl.answer"),
	WithMessage[*blockOn]("test.dl.blockon"),
	WithMessage[*askSelf]("test.dl.askself"),
	WithMessage[*hop]("test.dl.hop"),
	WithMessage[*release]("test.dl.release"),
)

// holder asks its peer a question and answers questions only once its
// own has been answered: two holders that ask each other deadlock. With
// eager, it answers at once (no deadlock, whatever the traffic).
type holder struct {
	Eager   bool
	Pending []string // questions held, by asker
	Asked   int
	peer    *actor.PID `msgpack:"-"`
	loop    bool       `msgpack:"-"` // ask again on each answer (traffic)
}

func (h *holder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *askOther:
		h.peer = SystemOf(ctx).PID(m.Peer)
		ctx.Request(h.peer, &question{N: 1})
	case *question:
		if h.Eager {
			ctx.Respond(&answer{N: m.N})
			return
		}
		h.Pending = append(h.Pending, ctx.Sender().Id)
	case *answer:
		h.Asked++
		if h.loop {
			ctx.Request(h.peer, &question{N: m.N + 1})
		}
	case *release:
		for _, asker := range h.Pending {
			ctx.Send(SystemOf(ctx).PID(asker), &answer{})
		}
		h.Pending = nil
	}
}

// blocker blocks in Result on a request to its peer, and answers
// questions.
type blocker struct{ Got error }

func (b *blocker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *blockOn:
		m.both.Done()
		m.both.Wait()
		_, err := ctx.RequestFuture(SystemOf(ctx).PID(m.Peer), &question{N: 1}, m.Wait).Result()
		b.Got = err
	case *askSelf:
		_, err := ctx.RequestFuture(ctx.Self(), &question{N: 1}, time.Minute).Result()
		b.Got = err
		if ch := selfAnswers.Load(); ch != nil {
			*ch <- err
		}
	case *question:
		ctx.Respond(&answer{N: m.N})
	}
}

var selfAnswers atomic.Pointer[chan error]

// declarer declares it waits for a fork from Peer (a philosopher).
type declarer struct {
	Peer  string
	Any   bool
	Since time.Time
}

func (d *declarer) Receive(actor.Context) {}

func (d *declarer) Waiting() snapshot.Waits {
	return snapshot.Waits{Any: d.Any, Edges: []snapshot.Wait{{To: snapshot.ProcessID(d.Peer), Type: "fork", Since: d.Since}}}
}

func deadlockSystem(t *testing.T, opts ...Option) *System {
	t.Helper()
	o := append([]Option{testMessages, deadlockMessages,
		WithKind("holder", func() actor.Actor { return &holder{} }),
		WithKind("eager", func() actor.Actor { return &holder{Eager: true, loop: true} }),
		WithKind("blocker", func() actor.Actor { return &blocker{} }),
	}, opts...)
	sys, err := NewSystem(o...)
	require.NoError(t, err)
	return sys
}

// Two participants that each hold the other's question until their own
// is answered: Deadlocks reports the cycle, with the request numbers and
// types from the glue's books.
func TestDeadlockOfRequests(t *testing.T) {
	sys := deadlockSystem(t)
	defer shutdown(t, sys)
	a, err := sys.Spawn("holder", "a")
	require.NoError(t, err)
	b, err := sys.Spawn("holder", "b")
	require.NoError(t, err)
	_, err = sys.Spawn("holder", "c") // waits for a, in no cycle of its own
	require.NoError(t, err)
	sys.Root().Send(a, &askOther{Peer: "b"})
	sys.Root().Send(b, &askOther{Peer: "a"})
	sys.Root().Send(sys.PID("c"), &askOther{Peer: "a"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ds []snapshot.Deadlock
	eventuallyTrue(t, "the deadlock shows", func() bool {
		ds, err = sys.Deadlocks(ctx)
		require.NoError(t, err)
		return len(ds) == 1 && len(ds[0].Blocked) == 1
	})
	d := ds[0]
	assert.Equal(t, []snapshot.ProcessID{"a", "b"}, d.Participants)
	assert.Equal(t, []snapshot.ProcessID{"c"}, d.Blocked)
	require.Len(t, d.Edges, 2)
	for _, e := range d.Edges {
		assert.NotZero(t, e.Request)
		assert.Equal(t, "*actors.question", e.Type)
	}
	t.Log(d)
}

// Participants that ask each other all the time, answering at once: the
// answers are always on their way somewhere, and no cut reports a
// deadlock. The wait-for graph alone has cycles in most cuts (each waits
// for the other's answer): the in-flight rule is what keeps them out, as
// the same cuts analysed without it show.
func TestNoDeadlockUnderRequestTraffic(t *testing.T) {
	sys := deadlockSystem(t)
	defer shutdown(t, sys)
	const n = 6
	for i := range n {
		_, err := sys.Spawn("eager", fmt.Sprintf("e%d", i))
		require.NoError(t, err)
	}
	for i := range n {
		for range 3 {
			sys.Root().Send(sys.PID(fmt.Sprintf("e%d", i)), &askOther{Peer: fmt.Sprintf("e%d", (i+1)%n)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	withoutRule := 0
	for range 50 {
		g, err := sys.take(ctx, true)
		require.NoError(t, err)
		require.Empty(t, snapshot.Deadlocks(g), "a deadlock reported under traffic")
		waits := make(map[snapshot.ProcessID]*snapshot.Waits)
		for _, p := range g.Participants {
			waits[p.ID] = p.Waits
		}
		if len(snapshot.FindDeadlocks(waits, func(id snapshot.ProcessID) bool { return waits[id].Empty() }, g.End)) > 0 {
			withoutRule++
		}
	}
	assert.Positive(t, withoutRule, "the wait-for graph never had a cycle: the test shows nothing")
	t.Logf("%d of 50 cuts would report a deadlock without the in-flight rule", withoutRule)
}

// Two participants blocked in Future.Result on each other cannot take a
// marker: the snapshot times out naming the cycle, and Deadlocks
// reports it.
func TestBlockedInResult(t *testing.T) {
	sys := deadlockSystem(t, WithTimeout(300*time.Millisecond))
	defer shutdown(t, sys)
	a, err := sys.Spawn("blocker", "a")
	require.NoError(t, err)
	b, err := sys.Spawn("blocker", "b")
	require.NoError(t, err)
	// The cycle lasts until the futures time out: snapshots start once
	// both wait, so that a deadline falls inside it however slow the
	// machine (with the first snapshot started earlier, a loaded machine
	// could let the whole wait pass before a deadline met both waiting).
	var both sync.WaitGroup
	both.Add(2)
	sys.Root().Send(a, &blockOn{Peer: "b", Wait: 5 * time.Second, both: &both})
	sys.Root().Send(b, &blockOn{Peer: "a", Wait: 5 * time.Second, both: &both})
	eventuallyTrue(t, "both wait in Result", func() bool { return waitsInResult(sys, "a") && waitsInResult(sys, "b") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var be *BlockedError
	eventuallyTrue(t, "a snapshot names the cycle", func() bool {
		_, err := sys.Snapshot(ctx)
		return errors.As(err, &be)
	})
	require.ErrorIs(t, be, snapshot.ErrTimeout)
	msg := be.Error()
	assert.Contains(t, msg, "a waits in Result for b (request ")
	assert.Contains(t, msg, "b waits in Result for a (request ")
	t.Log(msg)
}

// waitsInResult reports whether participant id waits in a handler for a
// future's answer.
func waitsInResult(sys *System, id snapshot.ProcessID) bool {
	p := sys.reg.lookup(id)
	if p == nil {
		return false
	}
	_, ok := p.books.blocked()
	return ok
}

// A RequestFuture to itself fails at once: the participant could answer
// only once the handler waiting for the answer has returned.
func TestRequestFutureToItself(t *testing.T) {
	ch := make(chan error, 1)
	selfAnswers.Store(&ch)
	defer selfAnswers.Store(nil)
	sys := deadlockSystem(t)
	defer shutdown(t, sys)
	a, err := sys.Spawn("blocker", "a")
	require.NoError(t, err)
	sys.Root().Send(a, &askSelf{})
	select {
	case err := <-ch:
		require.ErrorIs(t, err, actor.ErrDeadLetter)
	case <-time.After(30 * time.Second): // the future's own timeout is a minute
		t.Fatal("the request to itself did not fail")
	}
}

// Waits an actor declares (Waiter) count as requests do: two
// philosophers each waiting for the other's fork deadlock, in either
// model; one waiting for a fork that a message on its way brings does
// not.
func TestDeclaredWaits(t *testing.T) {
	for _, any := range []bool{false, true} {
		t.Run(fmt.Sprintf("any=%v", any), func(t *testing.T) {
			since := time.Now()
			sys := deadlockSystem(t,
				WithKind("p1", func() actor.Actor { return &declarer{Peer: "p2", Any: any, Since: since} }),
				WithKind("p2", func() actor.Actor { return &declarer{Peer: "p1", Any: any, Since: since} }))
			defer shutdown(t, sys)
			_, err := sys.Spawn("p1", "p1")
			require.NoError(t, err)
			_, err = sys.Spawn("p2", "p2")
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ds, err := sys.Deadlocks(ctx)
			require.NoError(t, err)
			require.Len(t, ds, 1)
			assert.Equal(t, []snapshot.ProcessID{"p1", "p2"}, ds[0].Participants)
			assert.Contains(t, ds[0].String(), "p1 waits for p2 (fork")
		})
	}
}

// hopper passes a hop on to Next until none is left, counting them.
type hopper struct{ Next string }

var (
	hops    atomic.Int64
	lastHop atomic.Uint64 // the last snapshot started when the last hop arrived
)

func (h *hopper) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*hop); ok {
		hops.Add(1)
		if m.Left == 0 {
			reg := &SystemOf(ctx).reg
			reg.mu.RLock()
			lastHop.Store(uint64(reg.started))
			reg.mu.RUnlock()
		}
		if m.Left > 0 {
			ctx.Send(SystemOf(ctx).PID(h.Next), &hop{Left: m.Left - 1})
		}
	}
}

// AwaitQuiescence returns once a cut shows the system idle: after the
// last hop of a token passed around a ring, never before.
func TestAwaitQuiescence(t *testing.T) {
	const n, total = 8, 20000
	hops.Store(0)
	var kinds []Option
	for i := range n {
		next := fmt.Sprintf("h%d", (i+1)%n)
		kinds = append(kinds, WithKind(fmt.Sprintf("hop%d", i), func() actor.Actor { return &hopper{Next: next} }))
	}
	sys := deadlockSystem(t, kinds...)
	defer shutdown(t, sys)
	for i := range n {
		_, err := sys.Spawn(fmt.Sprintf("hop%d", i), fmt.Sprintf("h%d", i))
		require.NoError(t, err)
	}
	sys.Root().Send(sys.PID("h0"), &hop{Left: total - 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, sys.AwaitQuiescence(ctx))
	assert.Equal(t, int64(total), hops.Load(), "quiescence reported before the last hop")
	// Found by the first cut started after the last hop, or the one after
	// it (a cut under way at the last hop shows it busy).
	sys.reg.mu.RLock()
	after := uint64(sys.reg.started) - lastHop.Load()
	sys.reg.mu.RUnlock()
	assert.LessOrEqual(t, after, uint64(2), "cuts taken after the last hop")
	t.Logf("quiescence found by the %d. cut after the last hop", after)
}

// An invariant is checked on every stored snapshot: the violations are
// stored with it and published; one that holds adds nothing.
func TestInvariants(t *testing.T) {
	var violated atomic.Int64
	sys := deadlockSystem(t,
		WithInvariant("holds", func(*snapshot.Global) error { return nil }),
		WithInvariant("breaks", func(g *snapshot.Global) error { return fmt.Errorf("snapshot %d is odd", g.ID) }),
		WithInvariant("panics", func(*snapshot.Global) error { panic("boom") }))
	defer shutdown(t, sys)
	events := make(chan *InvariantViolated, 8)
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*InvariantViolated); ok {
			violated.Add(1)
			events <- e
		}
	})
	_, err := sys.Spawn("eager", "e0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := sys.Snapshot(ctx)
	require.NoError(t, err)
	stored, err := sys.cfg.store.Load(ctx, g.ID)
	require.NoError(t, err)
	for _, gl := range []*snapshot.Global{g, stored} {
		require.Len(t, gl.Violations, 2)
		assert.Equal(t, "breaks", gl.Violations[0].Invariant)
		assert.Contains(t, gl.Violations[0].Err, "is odd")
		assert.Equal(t, "panics", gl.Violations[1].Invariant)
		assert.Contains(t, gl.Violations[1].Err, "boom")
	}
	for range 2 {
		select {
		case e := <-events:
			assert.Equal(t, g.ID, e.Snapshot)
		case <-time.After(30 * time.Second):
			t.Fatal("violation not published")
		}
	}
}

// The periodic check publishes a deadlock once, however many checks see
// it.
func TestDeadlockCheck(t *testing.T) {
	checks := make(chan struct{}, 100)
	sys := deadlockSystem(t, WithDeadlockCheck(5*time.Millisecond), withCheckHook(func() {
		select {
		case checks <- struct{}{}:
		default:
		}
	}))
	defer shutdown(t, sys)
	var found atomic.Int64
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*DeadlockFound); ok {
			found.Add(1)
			assert.True(t, strings.HasPrefix(e.Deadlock.String(), "a waits for b"), e.Deadlock.String())
		}
	})
	a, err := sys.Spawn("holder", "a")
	require.NoError(t, err)
	b, err := sys.Spawn("holder", "b")
	require.NoError(t, err)
	sys.Root().Send(a, &askOther{Peer: "b"})
	sys.Root().Send(b, &askOther{Peer: "a"})
	eventuallyTrue(t, "the check finds the deadlock", func() bool { return found.Load() > 0 })
	for range 5 { // five more checks see it
		select {
		case <-checks:
		case <-time.After(30 * time.Second):
			t.Fatal("the check stopped")
		}
	}
	for len(checks) > 0 {
		<-checks
	}
	select {
	case <-checks:
	case <-time.After(30 * time.Second):
		t.Fatal("the check stopped")
	}
	assert.Equal(t, int64(1), found.Load(), "the deadlock was published more than once")
}

// eventuallyTrue polls cond until it holds, failing after 30 s.
func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("not in 30 s: %s", what)
		case <-tick.C:
		}
	}
}

var systemDeadlockSeeds = flag.Int("system-deadlock-seeds", 30, "seeded systems of TestSeededDeadlocks")

// Seeded systems: a cycle of holders of random length (a holder asking
// itself is a cycle of one), holders blocked behind it, and participants
// asking one another without pause around it. Every cycle is reported
// with exactly its participants and those blocked on it, and nothing of
// the traffic ever is.
func TestSeededDeadlocks(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	for i := range *systemDeadlockSeeds {
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			sys := deadlockSystem(t)
			defer shutdown(t, sys)
			spawn := func(kind, name string) {
				_, err := sys.Spawn(kind, name)
				require.NoError(t, err, "seed %d", seed)
			}
			k := 1 + rng.IntN(8)
			var cycle, blocked []snapshot.ProcessID
			for j := range k {
				name := fmt.Sprintf("c%02d", j)
				spawn("holder", name)
				cycle = append(cycle, snapshot.ProcessID(name))
			}
			for j := range rng.IntN(4) {
				name := fmt.Sprintf("w%02d", j)
				spawn("holder", name)
				blocked = append(blocked, snapshot.ProcessID(name))
			}
			traffic := 2 + rng.IntN(6)
			for j := range traffic {
				spawn("eager", fmt.Sprintf("e%02d", j))
			}
			for j := range traffic {
				for range 1 + rng.IntN(3) {
					sys.Root().Send(sys.PID(fmt.Sprintf("e%02d", j)), &askOther{Peer: fmt.Sprintf("e%02d", rng.IntN(traffic))})
				}
			}
			for j, id := range cycle {
				sys.Root().Send(sys.PID(string(id)), &askOther{Peer: string(cycle[(j+1)%k])})
			}
			for _, id := range blocked {
				sys.Root().Send(sys.PID(string(id)), &askOther{Peer: string(cycle[rng.IntN(k)])})
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var ds []snapshot.Deadlock
			eventuallyTrue(t, "the cycle shows", func() bool {
				var err error
				ds, err = sys.Deadlocks(ctx)
				require.NoError(t, err, "seed %d", seed)
				for _, d := range ds {
					for _, id := range slices.Concat(d.Participants, d.Blocked) {
						require.NotEqual(t, byte('e'), id[0], "seed %d: traffic reported: %s", seed, d)
					}
				}
				return len(ds) == 1 && len(ds[0].Participants) == k && len(ds[0].Blocked) == len(blocked)
			})
			assert.Equal(t, cycle, ds[0].Participants, "seed %d", seed)
			assert.Equal(t, blocked, ds[0].Blocked, "seed %d", seed)
			assert.Equal(t, k, ds[0].Cycle, "seed %d", seed)
		})
	}
}

// A deadlock stored in a snapshot is there again after a restore: the
// restored participants' books hold the requests they had open, and the
// requests held in their states are never answered.
func TestDeadlockSurvivesRestore(t *testing.T) {
	store := persistence.NewMemory()
	sys := deadlockSystem(t, WithStore(store))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadlockAB(ctx, t, sys)
	g, err := sys.Snapshot(ctx)
	require.NoError(t, err)
	require.Len(t, snapshot.Deadlocks(g), 1, "the stored snapshot shows it")
	shutdown(t, sys)

	restored, err := Restore(ctx, store, g.ID, testMessages, deadlockMessages, WithKind("holder", func() actor.Actor { return &holder{} }))
	require.NoError(t, err)
	defer shutdown(t, restored)
	ds, err := restored.Deadlocks(ctx)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, []snapshot.ProcessID{"a", "b"}, ds[0].Participants)
}

// Questions held and answered later, from another handler, by a plain
// Send (as a lock grants a queued request): the answer carries no mark,
// and still ends the wait. Without that, two such participants that asked
// each other would be reported deadlocked after both were answered.
func TestAnswerSentLater(t *testing.T) {
	sys := deadlockSystem(t)
	defer shutdown(t, sys)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadlockAB(ctx, t, sys)
	sys.Root().Send(sys.PID("a"), &release{})
	sys.Root().Send(sys.PID("b"), &release{})
	require.NoError(t, sys.AwaitQuiescence(ctx))
	ds, err := sys.Deadlocks(ctx)
	require.NoError(t, err)
	require.Empty(t, ds, "a wait answered by a later Send is still reported")
}

// deadlockAB spawns holders a and b, has them ask each other, and waits
// until their deadlock shows.
func deadlockAB(ctx context.Context, t *testing.T, sys *System) {
	t.Helper()
	// Both first: a question to a name not spawned yet would leave the
	// participants' channels (a dead letter), and no cycle would form.
	pids := make(map[string]*actor.PID)
	for _, name := range []string{"a", "b"} {
		pid, err := sys.Spawn("holder", name)
		require.NoError(t, err)
		pids[name] = pid
	}
	for _, ab := range [][2]string{{"a", "b"}, {"b", "a"}} {
		sys.Root().Send(pids[ab[0]], &askOther{Peer: ab[1]})
	}
	eventuallyTrue(t, "the deadlock shows", func() bool {
		ds, err := sys.Deadlocks(ctx)
		require.NoError(t, err)
		return len(ds) == 1
	})
}
