package mailbox

import (
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run real Proto.Actor actors on the default goroutine
// dispatcher. Senders post from their own goroutines; each test waits for
// an outcome on a channel, with deadline as the failure bound.

func perSenderProps(receive actor.ReceiveFunc, opts ...actor.PropsOption) *actor.Props {
	return orderedProps(nil, receive, opts...)
}

// orderedProps is perSenderProps with more mailbox options.
func orderedProps(mopts []Option, receive actor.ReceiveFunc, opts ...actor.PropsOption) *actor.Props {
	mopts = append([]Option{WithSenderKey(keyOf)}, mopts...)
	opts = append(opts, actor.WithMailbox(Producer(mopts...)))
	return actor.PropsFromFunc(receive, opts...)
}

// orders are the mailbox's two delivery orders, for the tests that must
// hold in both.
var orders = []struct {
	name string
	opts []Option
}{{"rounds", nil}, {"arrival", []Option{WithArrivalOrder()}}}

// orderChecker records, on the actor's goroutine, each sender's sequence
// and the first violation of per-sender FIFO order.
type orderChecker struct {
	next      map[SenderKey]int
	received  int
	violation string
}

func (o *orderChecker) check(m *msg) {
	if o.next == nil {
		o.next = map[SenderKey]int{}
	}
	if want := o.next[m.from] + 1; m.seq != want && o.violation == "" {
		o.violation = fmt.Sprintf("sender %d: got %d, want %d", m.from, m.seq, want)
	}
	o.next[m.from] = m.seq
	o.received++
}

func TestPerSenderFIFOUnderConcurrency(t *testing.T) {
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) { perSenderFIFOUnderConcurrency(t, o.opts) })
	}
}

func perSenderFIFOUnderConcurrency(t *testing.T, mopts []Option) {
	const senders, each = 8, 20000
	system := newSystem()
	defer system.Shutdown()

	var order orderChecker
	externals := 0
	done := make(chan struct{})
	pid := system.Root.Spawn(orderedProps(mopts, func(c actor.Context) {
		switch m := c.Message().(type) {
		case *msg:
			order.check(m)
		case int:
			externals++
		default:
			return
		}
		if order.received == senders*each && externals == each {
			close(done)
		}
	}))

	var wg sync.WaitGroup
	for s := 1; s <= senders; s++ {
		wg.Add(1)
		go func(from SenderKey) {
			defer wg.Done()
			for i := 1; i <= each; i++ {
				system.Root.Send(pid, &msg{from, i})
			}
		}(SenderKey(s))
	}
	wg.Add(1)
	go func() { // a sender that is not an actor
		defer wg.Done()
		for i := 1; i <= each; i++ {
			system.Root.Send(pid, i)
		}
	}()
	wg.Wait()
	await(t, done, "all messages")
	assert.Empty(t, order.violation)
	system.Root.Stop(pid)
}

func TestSupervisorRestartsAfterPanic(t *testing.T) {
	system := newSystem()
	defer system.Shutdown()

	var order orderChecker
	var lifecycle []string
	done := make(chan struct{})
	pid := system.Root.Spawn(perSenderProps(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			lifecycle = append(lifecycle, "started")
		case *actor.Restarting:
			lifecycle = append(lifecycle, "restarting")
		case *msg:
			order.check(m)
			if m.seq == 50 {
				panic("boom")
			}
			if m.seq == 100 {
				close(done)
			}
		}
	}))
	for i := 1; i <= 100; i++ {
		system.Root.Send(pid, &msg{1, i})
	}
	await(t, done, "the messages after the panic")
	assert.Empty(t, order.violation)
	assert.Equal(t, []string{"started", "restarting", "started"}, lifecycle)
	system.Root.Stop(pid)
}

func TestPauseSurvivesRestart(t *testing.T) {
	system := newSystem()
	defer system.Shutdown()

	var got []string
	done := make(chan struct{})
	pid := system.Root.Spawn(perSenderProps(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *msg:
			got = append(got, m.String())
			if m.seq == 3 {
				close(done)
			}
		case string:
			switch m {
			case "pause":
				Of(c).Pause(1)
			case "boom":
				panic(m)
			case "resume":
				assert.True(t, Of(c).Paused(1), "the pause outlived the restart")
				Of(c).Resume(1)
			}
		}
	}))
	system.Root.Send(pid, "pause")
	system.Root.Send(pid, "boom")
	for i := 1; i <= 3; i++ {
		system.Root.Send(pid, &msg{1, i})
	}
	system.Root.Send(pid, "resume")
	await(t, done, "the held messages")
	assert.Equal(t, []string{"A1", "A2", "A3"}, got)
	system.Root.Stop(pid)
}

func TestOf(t *testing.T) {
	system := newSystem()
	defer system.Shutdown()

	probe := func(found chan<- bool) actor.ReceiveFunc {
		return func(c actor.Context) {
			if _, ok := c.Message().(string); ok {
				found <- Of(c) != nil
			}
		}
	}
	oursFound, theirsFound := make(chan bool, 1), make(chan bool, 1)
	ours := system.Root.Spawn(perSenderProps(probe(oursFound)))
	theirs := system.Root.Spawn(actor.PropsFromFunc(probe(theirsFound)))
	system.Root.Send(ours, "probe")
	system.Root.Send(theirs, "probe")
	for _, c := range []struct {
		found <-chan bool
		want  bool
	}{{oursFound, true}, {theirsFound, false}} {
		select {
		case got := <-c.found:
			assert.Equal(t, c.want, got)
		case <-time.After(deadline):
			t.Fatal("timed out waiting for a probe")
		}
	}
	system.Root.Stop(ours)
	system.Root.Stop(theirs)
}

// gate blocks an actor inside Receive until the test has posted what it
// wants queued, so the test knows exactly what is in the mailbox.
type gate struct {
	blocked, release chan struct{}
}

func newGate() gate { return gate{make(chan struct{}), make(chan struct{})} }

func (g gate) hold() {
	close(g.blocked)
	<-g.release
}

func TestFloodingSenderDoesNotStarveOthers(t *testing.T) {
	system := newSystem()
	defer system.Shutdown()

	const flood = 10000
	g := newGate()
	var got []string
	done := make(chan struct{})
	pid := system.Root.Spawn(perSenderProps(func(c actor.Context) {
		switch m := c.Message().(type) {
		case string:
			g.hold()
		case *msg:
			got = append(got, m.String())
			if len(got) == flood+1 {
				close(done)
			}
		}
	}))
	system.Root.Send(pid, "hold")
	await(t, g.blocked, "the actor to block")
	for i := 1; i <= flood; i++ {
		system.Root.Send(pid, &msg{1, i})
	}
	system.Root.Send(pid, &msg{2, 1})
	close(g.release)
	await(t, done, "all messages")
	assert.Equal(t, []string{"A1", "B1"}, got[:2], "B's one message is served in the first round")
	system.Root.Stop(pid)
}

func TestPausedSenderOthersFlow(t *testing.T) {
	system := newSystem()
	defer system.Shutdown()

	const pauseAt, total, bursts = 10, 200, 20
	var order orderChecker
	var resumed bool
	afterPause := 0 // messages of A delivered while paused
	ackB := make(chan int, bursts)
	done := make(chan struct{})
	pid := system.Root.Spawn(perSenderProps(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *msg:
			order.check(m)
			switch {
			case m.from == 1 && m.seq == pauseAt:
				Of(c).Pause(1)
			case m.from == 1 && m.seq > pauseAt && !resumed:
				afterPause++
			case m.from == 2 && m.seq%10 == 0:
				ackB <- m.seq
			}
			if m.from == 1 && m.seq == total {
				close(done)
			}
		case string:
			resumed = true
			Of(c).Resume(1)
		}
	}))

	for i := 1; i <= pauseAt; i++ {
		system.Root.Send(pid, &msg{1, i})
	}
	// B sends in bursts, each acknowledged before the next, so the mailbox
	// runs and goes idle many times while A is paused; A keeps posting.
	a := pauseAt
	for burst := 1; burst <= bursts; burst++ {
		for i := 1; i <= 10; i++ {
			system.Root.Send(pid, &msg{2, (burst-1)*10 + i})
		}
		a++
		system.Root.Send(pid, &msg{1, a})
		select {
		case seq := <-ackB:
			require.Equal(t, burst*10, seq)
		case <-time.After(deadline):
			t.Fatalf("B's burst %d was not delivered while A was paused", burst)
		}
	}
	for a < total {
		a++
		system.Root.Send(pid, &msg{1, a})
	}
	system.Root.Send(pid, "resume")
	await(t, done, "A's held messages")
	assert.Empty(t, order.violation)
	assert.Zero(t, afterPause, "a paused sender's message was delivered")
	system.Root.Stop(pid)
}

// TestNoStrandedMessage posts many small bursts, each of which the mailbox
// must deliver completely. A message posted while a run is ending and left
// undelivered would make a round miss its deadline.
func TestNoStrandedMessage(t *testing.T) {
	for _, throughput := range []int{1, 300} {
		t.Run(fmt.Sprintf("throughput=%d", throughput), func(t *testing.T) {
			system := newSystem()
			defer system.Shutdown()

			const senders, rounds = 4, 2000
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewSource(seed))

			var order orderChecker
			reached := make(chan struct{}, 1)
			target := -1
			pid := system.Root.Spawn(perSenderProps(func(c actor.Context) {
				switch m := c.Message().(type) {
				case *msg:
					order.check(m)
				case int:
					target = m
				default:
					return
				}
				if order.received == target {
					reached <- struct{}{}
				}
			}, actor.WithDispatcher(actor.NewDefaultDispatcher(throughput))))

			seqs := make([]int, senders+1)
			sent := 0
			for round := 0; round < rounds; round++ {
				var wg sync.WaitGroup
				counts := make([]int, senders+1)
				for s := 1; s <= senders; s++ {
					counts[s] = rng.Intn(4)
					sent += counts[s]
				}
				for s := 1; s <= senders; s++ {
					wg.Add(1)
					go func(from, first, n int) {
						defer wg.Done()
						for i := 0; i < n; i++ {
							system.Root.Send(pid, &msg{SenderKey(from), first + i})
						}
					}(s, seqs[s]+1, counts[s])
					seqs[s] += counts[s]
				}
				// The target travels in the external queue, racing the
				// bursts: the actor reports when both have arrived.
				system.Root.Send(pid, sent)
				wg.Wait()
				select {
				case <-reached:
				case <-time.After(deadline):
					t.Fatalf("round %d: a message was stranded", round)
				}
			}
			assert.Empty(t, order.violation)
			system.Root.Stop(pid)
		})
	}
}

// TestNoStrandedMessageWithPauses churns pauses during the bursts: each
// sender is paused after every fifth message and resumed by the next
// message of another queue. The actor sends itself a keyless tick when it
// pauses, so there always is a next message.
func TestNoStrandedMessageWithPauses(t *testing.T) {
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) { noStrandedMessageWithPauses(t, o.opts) })
	}
}

func noStrandedMessageWithPauses(t *testing.T, mopts []Option) {
	system := newSystem()
	defer system.Shutdown()

	const senders, each = 4, 5000
	var order orderChecker
	done := make(chan struct{})
	paused := map[SenderKey]bool{}
	pid := system.Root.Spawn(orderedProps(mopts, func(c actor.Context) {
		mb := Of(c)
		from, keyed := keyOf(c.Message())
		for k := range paused {
			if !keyed || k != from {
				mb.Resume(k)
				delete(paused, k)
			}
		}
		if m, ok := c.Message().(*msg); ok {
			order.check(m)
			if m.seq%5 == 0 {
				mb.Pause(m.from)
				paused[m.from] = true
				c.Send(c.Self(), "tick")
			}
			if order.received == senders*each {
				close(done)
			}
		}
	}, actor.WithDispatcher(actor.NewDefaultDispatcher(1))))

	var wg sync.WaitGroup
	for s := 1; s <= senders; s++ {
		wg.Add(1)
		go func(from SenderKey) {
			defer wg.Done()
			for i := 1; i <= each; i++ {
				system.Root.Send(pid, &msg{from, i})
			}
		}(SenderKey(s))
	}
	wg.Wait()
	await(t, done, "all messages")
	assert.Empty(t, order.violation)
	system.Root.Stop(pid)
}

// TestMailboxStress drives a bare mailbox from several goroutines on the
// goroutine dispatcher, many times going idle, with no actor around it.
func TestMailboxStress(t *testing.T) {
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) { mailboxStress(t, o.opts) })
	}
}

func mailboxStress(t *testing.T, mopts []Option) {
	const posters, rounds = 3, 5000
	inv := &countingInvoker{reached: make(chan struct{}, 1)}
	m := New(append([]Option{WithSenderKey(keyOf)}, mopts...)...)
	m.RegisterHandlers(inv, actor.NewDefaultDispatcher(1))
	m.Start()
	total := 0
	for round := 1; round <= rounds; round++ {
		n := round%3 + 1
		total += posters * n
		inv.target.Store(int64(total))
		var wg sync.WaitGroup
		for p := 1; p <= posters; p++ {
			wg.Add(1)
			go func(from SenderKey) {
				defer wg.Done()
				for i := 0; i < n; i++ {
					m.PostUserMessage(&msg{from, round})
				}
			}(SenderKey(p))
		}
		wg.Wait()
		select {
		case <-inv.reached:
		case <-time.After(deadline):
			t.Fatalf("round %d: %d of %d delivered", round, inv.count.Load(), total)
		}
	}
	assert.Equal(t, 0, m.UserMessageCount())
}

// countingInvoker counts user messages and signals when the count reaches
// the target of the current round.
type countingInvoker struct {
	count, target atomic.Int64
	reached       chan struct{}
}

func (c *countingInvoker) InvokeSystemMessage(interface{}) {}

func (c *countingInvoker) InvokeUserMessage(interface{}) {
	if c.count.Add(1) == c.target.Load() {
		c.reached <- struct{}{}
	}
}

func (c *countingInvoker) EscalateFailure(reason, _ interface{}) { panic(reason) }

// TestNoStrandedMessageAtRunEnd aims at the end of a run: a poster spinning
// on another core posts the next message the moment the previous one has
// been delivered, that is while the run is looking for more work and going
// idle. A message posted in that window and missed by both sides would
// never be delivered.
func TestNoStrandedMessageAtRunEnd(t *testing.T) {
	const messages = 50000
	inv := &countingInvoker{reached: make(chan struct{}, 1)}
	m := New(WithSenderKey(keyOf))
	m.RegisterHandlers(inv, actor.NewDefaultDispatcher(300))
	m.Start()
	start := time.Now()
	for i := 1; i <= messages; i++ {
		m.PostUserMessage(&msg{1, i})
		for inv.count.Load() < int64(i) {
			if time.Since(start) > deadline {
				t.Fatalf("message %d was stranded", i)
			}
			runtime.Gosched()
		}
	}
}
