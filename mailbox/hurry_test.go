package mailbox

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// urgentDispatcher is a stepDispatcher that also takes urgent work, run
// before the queued runs.
type urgentDispatcher struct {
	stepDispatcher
	urgent []func()
}

func (d *urgentDispatcher) ScheduleUrgent(fn func()) { d.urgent = append(d.urgent, fn) }

func (d *urgentDispatcher) drain() {
	for len(d.urgent)+len(d.queued) > 0 {
		if len(d.urgent) > 0 {
			fn := d.urgent[0]
			d.urgent = d.urgent[1:]
			fn()
			continue
		}
		fn := d.queued[0]
		d.queued = d.queued[1:]
		fn()
	}
}

func newHurried(s *script, opts ...Option) (*Mailbox, *urgentDispatcher) {
	m := New(append([]Option{WithSenderKey(keyOf), WithHurry(func() { s.log = append(s.log, "H") })}, opts...)...)
	d := &urgentDispatcher{stepDispatcher: stepDispatcher{throughput: 300}}
	m.RegisterHandlers(s, d)
	m.Start()
	return m, d
}

// Hurried work runs ahead of the messages queued, once however many
// times it was asked for before it ran, and not while suspended: asked
// for then, it runs first once the mailbox resumes.
func TestHurryGoesAheadOfQueuedMessages(t *testing.T) {
	for _, arrival := range []bool{false, true} {
		s := &script{}
		var opts []Option
		if arrival {
			opts = append(opts, WithArrivalOrder())
		}
		m, d := newHurried(s, opts...)
		post(m, 1, 1, 2)
		post(m, 2, 1)
		m.Hurry()
		m.Hurry()
		d.drain()
		want := "H A1 B1 A2" // round robin
		if arrival {
			want = "H A1 A2 B1"
		}
		assert.Equal(t, want, s.String())

		m.PostSystemMessage(&actor.SuspendMailbox{})
		d.drain()
		m.Hurry()
		post(m, 1, 3)
		d.drain()
		assert.Len(t, s.log, 4, "suspended: nothing runs")
		m.PostSystemMessage(&actor.ResumeMailbox{})
		d.drain()
		assert.Equal(t, []string{"H", "A3"}, s.log[4:], "the hurry asked for while suspended runs once resumed")
	}
}

// Hurried while a run is under way, the work runs in that run before its
// next message, whatever the run's budget left.
func TestHurryDuringARunRunsBeforeTheNextMessage(t *testing.T) {
	s := &script{}
	m, d := newHurried(s, WithArrivalOrder())
	d.throughput = 2
	s.onUser = func(message interface{}) {
		if message.(*msg).seq == 2 {
			m.Hurry()
		}
	}
	post(m, 1, 1, 2, 3, 4)
	d.drain()
	assert.Equal(t, "A1 A2 H A3 A4", s.String())
	assert.Empty(t, d.urgent)
}

// Hurried work asked for while hurried work runs (its urgent work finds
// the mailbox busy) runs after it, with no message to bring a run.
func TestHurryDuringHurriedWorkRunsAfterIt(t *testing.T) {
	s := &script{}
	var m *Mailbox
	var d *urgentDispatcher
	nested := true
	m, d = newHurried(s)
	m.hurried = func() {
		s.log = append(s.log, "H")
		if nested {
			nested = false
			m.Hurry()
			// The urgent work just scheduled runs now, on another
			// worker as it were, and finds this one's hold.
			fn := d.urgent[len(d.urgent)-1]
			d.urgent = d.urgent[:len(d.urgent)-1]
			fn()
		}
	}
	d.drain() // started: no run is left to take it
	m.Hurry()
	d.drain()
	assert.Equal(t, "H H", s.String())
	assert.False(t, m.hurry.Load())
}

// On a dispatcher that takes no urgent work, Hurry on an idle mailbox
// schedules a run, which does the work.
func TestHurryWithoutUrgentDispatcher(t *testing.T) {
	s := &script{}
	m := New(WithSenderKey(keyOf), WithHurry(func() { s.log = append(s.log, "H") }))
	d := &stepDispatcher{throughput: 300}
	m.RegisterHandlers(s, d)
	m.Start()
	d.drain()
	m.Hurry()
	d.drain()
	assert.Equal(t, "H", s.String())
}

// A panic in hurried work escalates as a message's would, and the
// mailbox goes on.
func TestHurryPanicIsEscalated(t *testing.T) {
	s := &script{}
	boom := true
	m := New(WithSenderKey(keyOf), WithHurry(func() {
		if boom {
			boom = false
			panic("hurried")
		}
		s.log = append(s.log, "H")
	}))
	d := &urgentDispatcher{stepDispatcher: stepDispatcher{throughput: 300}}
	m.RegisterHandlers(s, d)
	m.Start()
	m.Hurry()
	d.drain()
	require.Len(t, s.failures, 1)
	assert.Equal(t, "hurried", s.failures[0].reason)
	post(m, 1, 1)
	m.Hurry()
	d.drain()
	assert.Equal(t, "H A1", s.String())
}

// Hurried work and messages never run at once, and every hurry asked
// for runs: real goroutines, for the race detector.
func TestHurryIsExclusiveUnderConcurrency(t *testing.T) {
	var inside, hurried, handled atomic.Int64
	var wg sync.WaitGroup
	enter := func() {
		if inside.Add(1) != 1 {
			t.Error("hurried work and a message at once")
		}
		runtime.Gosched()
		inside.Add(-1)
	}
	d := &goUrgent{}
	ran := make(chan struct{}, 1)
	m := New(WithArrivalOrder(), WithHurry(func() {
		enter()
		hurried.Add(1)
		select {
		case ran <- struct{}{}:
		default:
		}
	}))
	inv := &funcInvoker{onUser: func() { enter(); handled.Add(1); wg.Done() }}
	m.RegisterHandlers(inv, d)
	m.Start()
	const n = 2000
	wg.Add(n)
	for i := range n {
		m.PostUserMessage(i)
		if i%10 == 0 {
			m.Hurry()
		}
	}
	wg.Wait()
	// A hurry asked for once the mailbox is idle runs too.
	for m.hurry.Load() {
		select {
		case <-ran: // one still to run
		case <-time.After(10 * time.Second):
			t.Fatal("a hurry never ran")
		}
	}
	select {
	case <-ran:
	default:
	}
	m.Hurry()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a hurry never ran")
	}
	assert.Equal(t, int64(n), handled.Load())
	assert.Positive(t, hurried.Load())
}

// goUrgent runs every run and every urgent work on a goroutine of its own.
type goUrgent struct{}

func (goUrgent) Schedule(fn func())       { go fn() }
func (goUrgent) ScheduleUrgent(fn func()) { go fn() }
func (goUrgent) Throughput() int          { return 7 }

type funcInvoker struct{ onUser func() }

func (c *funcInvoker) InvokeSystemMessage(interface{})  {}
func (c *funcInvoker) InvokeUserMessage(interface{})    { c.onUser() }
func (c *funcInvoker) EscalateFailure(_, _ interface{}) {}

// Queued lists what is left to deliver, in the order it will be, to an
// owner in the middle of a message or in hurried work; a mailbox that
// sorts by sender cannot say.
func TestQueuedListsWhatIsLeftInOrder(t *testing.T) {
	s := &script{}
	var listed []string
	var m *Mailbox
	list := func() {
		listed = listed[:0]
		ok := m.Queued(func(key SenderKey, keyed bool, tag uint64, message interface{}) bool {
			listed = append(listed, fmt.Sprint(message, "/", tag))
			return true
		})
		require.True(t, ok)
	}
	m = New(WithSenderKey(keyOf), WithArrivalOrder(), WithHurry(list))
	d := &urgentDispatcher{stepDispatcher: stepDispatcher{throughput: 300}}
	m.RegisterHandlers(s, d)
	m.Start()
	m.PostTagged(1, 7, &msg{1, 1})
	m.PostTagged(2, 8, &msg{2, 1})
	m.PostTagged(1, 9, &msg{1, 2})
	m.Hurry()
	d.urgent[0]() // before any run
	assert.Equal(t, []string{"A1/7", "B1/8", "A2/9"}, listed)

	s.onUser = func(message interface{}) {
		if message.(*msg).seq == 1 && message.(*msg).from == 1 {
			m.PostTagged(2, 10, &msg{2, 2})
			list()
		}
	}
	d.drain()
	assert.Equal(t, []string{"B1/8", "A2/9", "B2/10"}, listed, "in a message: those after it, new ones last")

	sorted := New(WithSenderKey(keyOf))
	sorted.RegisterHandlers(s, d)
	assert.False(t, sorted.Queued(func(SenderKey, bool, uint64, interface{}) bool { return true }))
}

// TestHurriedTurnEndsOnlyWhenWorkRan ends a turn of hurried work
// (WithTurnEnd) only when the work ran: a run can take the work between
// runHurried's look and its hold on the mailbox, and the turn it then
// ended had done nothing.
func TestHurriedTurnEndsOnlyWhenWorkRan(t *testing.T) {
	s := &script{}
	ends := 0
	m, d := newHurried(s, WithTurnEnd(func() { ends++ }))
	d.drain()
	ends = 0

	m.busy.Store(true) // as runHurried holds it
	m.hurryOnce()      // the work was taken already
	assert.Zero(t, ends, "a turn with no work ended")
	assert.Empty(t, s.log)

	m.hurry.Store(true)
	m.busy.Store(true)
	m.hurryOnce()
	assert.Equal(t, 1, ends)
	assert.Equal(t, "H", s.String())
	assert.False(t, m.busy.Load())
}

// TestHurryLeavesTheMailboxToAWaitingRun: urgent work asked for while a
// run waits for the mailbox (acquire) is left to that run, which does it
// before its next message, rather than keep the run waiting.
func TestHurryLeavesTheMailboxToAWaitingRun(t *testing.T) {
	s := &script{}
	m, d := newHurried(s)
	d.drain()

	m.waiting.Add(1) // a run spins in acquire
	m.hurry.Store(true)
	m.runHurried()
	assert.Empty(t, s.log, "hurried work took the mailbox from a waiting run")
	assert.False(t, m.busy.Load())
	assert.True(t, m.hurry.Load(), "the work is still asked for")

	m.waiting.Add(-1)
	m.runHurried()
	assert.Equal(t, "H", s.String())
}

// TestHurriesTakeTurnsWithMessages asks for hurried work again from
// within the work, as hurries asked for faster than their work runs do:
// a run used to do the work again and again before its next message,
// for as long as the asking lasted. The run now delivers a message
// between two hurries.
func TestHurriesTakeTurnsWithMessages(t *testing.T) {
	s := &script{}
	var m *Mailbox
	var d *urgentDispatcher
	m, d = newHurried(s)
	again := 3
	m.hurried = func() {
		s.log = append(s.log, "H")
		if again > 0 {
			again--
			m.Hurry()
		}
	}
	d.drain()
	s.onUser = func(msg interface{}) {
		if msg == "a" {
			m.Hurry()
		}
	}
	for _, msg := range []string{"a", "b", "c"} {
		m.PostUserMessage(msg)
	}
	d.drain()
	assert.Equal(t, "a H b H c H H", s.String())
	assert.False(t, m.hurry.Load())
}
