package mailbox

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive a mailbox directly, on the test goroutine, with a
// dispatcher that only records what is scheduled: every interleaving is
// chosen by the test, so the expected orders are exact.

// stepDispatcher queues scheduled runs until the test calls drain.
type stepDispatcher struct {
	throughput int
	queued     []func()
	scheduled  int
}

func (d *stepDispatcher) Schedule(fn func()) {
	d.scheduled++
	d.queued = append(d.queued, fn)
}

func (d *stepDispatcher) Throughput() int { return d.throughput }

// stepOne runs the mailbox's first scheduled run with a throughput of
// one message, so that what was posted stays queued behind it.
func (d *stepDispatcher) stepOne(m *Mailbox) {
	d.throughput = 1
	defer func() { d.throughput = 300 }()
	fn := d.queued[0]
	d.queued = d.queued[1:]
	fn()
}

// drain runs scheduled runs until none is left.
func (d *stepDispatcher) drain() {
	for len(d.queued) > 0 {
		fn := d.queued[0]
		d.queued = append(d.queued[:0], d.queued[1:]...)
		fn()
	}
}

type sysMsg string

type failure struct {
	reason, message interface{}
}

// script is an invoker that logs what it is given and lets a test act in
// the middle of a message, as an actor would.
type script struct {
	log      []string
	onUser   func(message interface{})
	failures []failure
}

func (s *script) InvokeSystemMessage(message interface{}) {
	s.log = append(s.log, fmt.Sprint(message))
}

func (s *script) InvokeUserMessage(message interface{}) {
	s.log = append(s.log, fmt.Sprint(message))
	if s.onUser != nil {
		s.onUser(message)
	}
}

func (s *script) EscalateFailure(reason, message interface{}) {
	s.failures = append(s.failures, failure{reason, message})
}

func (s *script) String() string { return strings.Join(s.log, " ") }

func newStepped(opts ...Option) (*Mailbox, *stepDispatcher, *script) {
	m := New(append([]Option{WithSenderKey(keyOf)}, opts...)...)
	d := &stepDispatcher{throughput: 300}
	s := &script{}
	m.RegisterHandlers(s, d)
	m.Start()
	return m, d, s
}

func post(m *Mailbox, from SenderKey, seqs ...int) {
	for _, seq := range seqs {
		m.PostUserMessage(&msg{from, seq})
	}
}

func TestSystemMessagesFirst(t *testing.T) {
	m, d, s := newStepped()
	post(m, 1, 1, 2)
	m.PostSystemMessage(sysMsg("s1"))
	m.PostSystemMessage(sysMsg("s2"))
	s.onUser = func(message interface{}) {
		if message.(*msg).seq == 1 {
			m.PostSystemMessage(sysMsg("s3"))
			m.PostSystemMessage(sysMsg("s4"))
		}
	}
	d.drain()
	assert.Equal(t, "s1 s2 A1 s3 s4 A2", s.String())
	assert.Equal(t, 0, m.UserMessageCount())
}

func TestSuspendResume(t *testing.T) {
	m, d, s := newStepped()
	m.PostSystemMessage(&actor.SuspendMailbox{})
	post(m, 1, 1, 2)
	m.PostSystemMessage(sysMsg("s1"))
	d.drain()
	assert.Equal(t, "s1", s.String(), "suspended: system messages only")
	assert.Equal(t, 2, m.UserMessageCount())

	m.PostSystemMessage(&actor.ResumeMailbox{})
	d.drain()
	assert.Equal(t, "s1 A1 A2", s.String())
	assert.Equal(t, 0, m.UserMessageCount())
}

func TestPanicIsEscalated(t *testing.T) {
	m, d, s := newStepped()
	s.onUser = func(message interface{}) {
		if message.(*msg).seq == 2 {
			panic("boom")
		}
	}
	post(m, 1, 1, 2, 3)
	post(m, 2, 1)
	d.drain()
	require.Len(t, s.failures, 1)
	assert.Equal(t, "boom", s.failures[0].reason)
	assert.Equal(t, "A2", fmt.Sprint(s.failures[0].message))
	// The failed message is not retried; the others are still delivered
	// (a real supervisor would suspend the mailbox in between).
	assert.Equal(t, "A1 B1 A2 A3", s.String())
	assert.Equal(t, 0, m.UserMessageCount())
}

// panicsOn is keyOf, but for bad, on which it panics.
func panicsOn(bad *msg) KeyFunc {
	return func(message interface{}) (SenderKey, bool) {
		if message == bad {
			panic("bad key")
		}
		return keyOf(message)
	}
}

func TestKeyFuncPanicIsEscalated(t *testing.T) {
	bad := &msg{from: 9, seq: 1}
	m, d, s := newStepped(WithSenderKey(panicsOn(bad)))
	post(m, 1, 1)
	m.PostUserMessage(bad)
	post(m, 2, 1)
	d.drain()
	require.Len(t, s.failures, 1)
	assert.Equal(t, "bad key", s.failures[0].reason)
	assert.Same(t, bad, s.failures[0].message)
	assert.Equal(t, "A1 B1", s.String())
	assert.Equal(t, 0, m.UserMessageCount())
}

func TestRoundRobin(t *testing.T) {
	m, d, s := newStepped()
	post(m, 1, 1, 2, 3, 4, 5)
	post(m, 2, 1, 2)
	m.PostUserMessage("x1")
	m.PostUserMessage("x2")
	post(m, 3, 1)
	d.drain()
	// One message per sender per round, senders in order of first arrival;
	// the external queue ("x") takes its turn like a sender.
	assert.Equal(t, "A1 B1 x1 C1 A2 B2 x2 A3 A4 A5", s.String())
}

func TestFloodDoesNotStarve(t *testing.T) {
	m, d, s := newStepped()
	const flood = 1000
	for i := 1; i <= flood; i++ {
		post(m, 1, i)
	}
	// B posts while A's flood is being delivered.
	s.onUser = func(message interface{}) {
		if mm := message.(*msg); mm.from == 1 && mm.seq == 10 {
			post(m, 2, 1, 2)
		}
	}
	d.drain()
	require.Len(t, s.log, flood+2)
	pos := map[string]int{}
	for i, name := range s.log {
		pos[name] = i
	}
	// B waits for at most the round in progress, then alternates with A.
	assert.Equal(t, pos["A10"]+2, pos["B1"])
	assert.Equal(t, pos["B1"]+2, pos["B2"])
}

func TestPauseResume(t *testing.T) {
	m, d, s := newStepped()
	s.onUser = func(message interface{}) {
		switch message.(*msg).String() {
		case "A2":
			m.Pause(1)
			assert.True(t, m.Paused(1))
			post(m, 1, 6, 7) // queued behind the held ones
		case "B4":
			m.Resume(1)
			assert.False(t, m.Paused(1))
		}
	}
	post(m, 1, 1, 2, 3, 4, 5)
	post(m, 2, 1, 2, 3, 4, 5, 6)
	d.drain()
	assert.Equal(t, "A1 B1 A2 B2 B3 B4 B5 A3 B6 A4 A5 A6 A7", s.String())
	assert.Equal(t, 0, m.UserMessageCount())
}

func TestPausedSenderIdles(t *testing.T) {
	m, d, s := newStepped()
	s.onUser = func(message interface{}) {
		switch message := message.(type) {
		case *msg:
			if message.seq == 1 {
				m.Pause(message.from)
			}
		case string:
			if message == "resume" {
				m.Resume(1)
			}
		}
	}
	post(m, 1, 1, 2, 3)
	d.drain()
	assert.Equal(t, "A1", s.String())
	assert.Equal(t, 2, m.UserMessageCount(), "held messages are counted")
	assert.Equal(t, 1, d.scheduled, "a mailbox with only held messages must not reschedule itself")

	// Many runs while A is paused: each post is one run, and nothing leaks
	// through.
	for i := 4; i <= 20; i++ {
		post(m, 1, i)
		post(m, 2, i)
		d.drain()
	}
	assert.Equal(t, 1+17, d.scheduled)
	assert.Equal(t, 19, m.UserMessageCount())
	assert.NotContains(t, s.log, "A2")

	m.PostUserMessage("resume")
	d.drain()
	want := []string{"resume"}
	for i := 2; i <= 20; i++ {
		want = append(want, fmt.Sprintf("A%d", i))
	}
	assert.Equal(t, want, s.log[len(s.log)-len(want):])
	assert.Equal(t, 0, m.UserMessageCount())
}

// Held counts the messages of paused senders; past the limit the mailbox
// calls its callback between two messages, which may post to the actor.
func TestHeldLimit(t *testing.T) {
	var calls []int
	var m *Mailbox
	m, d, s := newStepped(WithHeldLimit(3, func(held int) {
		if len(calls) == 0 {
			m.PostUserMessage("resume")
		}
		calls = append(calls, held)
	}))
	s.onUser = func(message interface{}) {
		switch message {
		case "resume":
			assert.Equal(t, 4, m.Held())
			m.Resume(1)
			assert.Equal(t, 0, m.Held())
			return
		}
		if message.(*msg).String() == "A1" {
			m.Pause(1)
			assert.Equal(t, 2, m.Held(), "the messages already queued are held")
		}
	}
	post(m, 1, 1, 2, 3)
	d.drain()
	post(m, 1, 4)
	d.drain()
	assert.Empty(t, calls, "3 held: at the limit")
	post(m, 1, 5)
	d.drain()
	assert.Equal(t, []int{4}, calls)
	assert.Equal(t, "A1 resume A2 A3 A4 A5", s.String())
	assert.Equal(t, 0, m.UserMessageCount())
}

func TestPauseBeforeFirstMessage(t *testing.T) {
	m, d, s := newStepped()
	s.onUser = func(message interface{}) {
		switch message {
		case "pause":
			m.Pause(7)
		case "resume":
			m.ResumeAll()
		}
	}
	m.PostUserMessage("pause")
	d.drain()
	post(m, 7, 1)
	post(m, 2, 1)
	d.drain()
	assert.Equal(t, "pause B1", s.String())
	m.PostUserMessage("resume")
	d.drain()
	assert.Equal(t, "pause B1 resume G1", s.String())
}

func TestPauseOutsideProcessingPanics(t *testing.T) {
	m, _, _ := newStepped()
	assert.PanicsWithValue(t, "mailbox: Pause called outside message processing", func() { m.Pause(1) })
	assert.Panics(t, func() { m.Resume(1) })
}

func TestNoKeyFuncIsFIFO(t *testing.T) {
	m := New()
	d := &stepDispatcher{throughput: 300}
	s := &script{}
	m.RegisterHandlers(s, d)
	m.Start()
	post(m, 1, 1, 2)
	post(m, 2, 1)
	post(m, 1, 3)
	d.drain()
	assert.Equal(t, "A1 A2 B1 A3", s.String())
}

// A turn delivers at most Throughput messages, then the mailbox schedules
// itself again, at the back of the dispatcher's queue, without going idle.
func TestThroughputEndsTheTurn(t *testing.T) {
	m, d, s := newStepped()
	d.throughput = 10
	for i := 1; i <= 50; i++ {
		post(m, SenderKey(i%3+1), i)
	}
	d.drain()
	assert.Len(t, s.log, 50)
	assert.Equal(t, 6, d.scheduled, "one schedule per 10 messages, and one that finds the mailbox empty")
}

// WithTurnEnd's function runs once at the end of each turn, after the
// turn's last message, in both orders: a turn of Throughput messages, and
// the last, shorter one.
func TestTurnEnd(t *testing.T) {
	for _, arrival := range []bool{false, true} {
		var ends []string
		var s *script
		opts := []Option{WithTurnEnd(func() { ends = append(ends, s.log[len(s.log)-1]) })}
		if arrival {
			opts = append(opts, WithArrivalOrder())
		}
		m, d, s := newStepped(opts...)
		d.throughput = 4
		post(m, 1, 1, 2, 3, 4, 5)
		post(m, 2, 1, 2, 3, 4)
		d.drain()
		require.Len(t, s.log, 9)
		want := []string{s.log[3], s.log[7], s.log[8]}
		assert.Equal(t, want, ends, "arrival order %v: %s", arrival, s)
	}
}

func TestMessageBatch(t *testing.T) {
	m := New()
	d := &stepDispatcher{throughput: 300}
	s := &script{}
	m.RegisterHandlers(s, d)
	m.Start()
	m.PostUserMessage(batch{"b1", "b2"})
	d.drain()
	// As Proto.Actor's default mailbox: the messages, then the batch.
	assert.Equal(t, "b1 b2 [b1 b2]", s.String())
}

type batch []interface{}

func (b batch) GetMessages() []interface{} { return b }

func TestSweepForgetsIdleSenders(t *testing.T) {
	m, d, s := newStepped()
	s.onUser = func(message interface{}) {
		if mm := message.(*msg); mm.from == 1 && mm.seq == 1 {
			m.Pause(1)
		}
	}
	post(m, 1, 1, 2)
	const senders = 10000
	for k := 2; k <= senders; k++ {
		post(m, SenderKey(k), 1)
		if k%100 == 0 {
			d.drain()
		}
	}
	d.drain()
	assert.Len(t, s.log, senders)
	// A finished sender's queue outlives one sweep (it sent since the
	// sweep before), so the table holds up to two sweeps' worth.
	assert.LessOrEqual(t, len(m.queues), 4*minSweep+100, "queues of finished senders are swept")
	assert.Contains(t, m.queues, SenderKey(1), "a paused queue is never swept")
	assert.Equal(t, 1, m.UserMessageCount())
}

// counter is a MailboxMiddleware that counts its calls.
type counter struct{ started, posted, received, empty atomic.Int32 }

func (c *counter) MailboxStarted()             { c.started.Add(1) }
func (c *counter) MessagePosted(interface{})   { c.posted.Add(1) }
func (c *counter) MessageReceived(interface{}) { c.received.Add(1) }
func (c *counter) MailboxEmpty()               { c.empty.Add(1) }

func TestMiddleware(t *testing.T) {
	c := &counter{}
	m, d, _ := newStepped(WithMiddleware(c))
	post(m, 1, 1, 2)
	m.PostSystemMessage(sysMsg("s"))
	d.drain()
	assert.Equal(t, int32(1), c.started.Load())
	assert.Equal(t, int32(3), c.posted.Load())
	assert.Equal(t, int32(3), c.received.Load())
	assert.Equal(t, int32(1), c.empty.Load())
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	m := New(WithSenderKey(keyOf))
	d := &stepDispatcher{throughput: 300}
	m.RegisterHandlers(nopInvoker{}, d)
	m.Start()
	msgs := make([]*msg, 8)
	for i := range msgs {
		msgs[i] = &msg{SenderKey(i + 1), 1}
	}
	round := func() {
		for i := 0; i < 4; i++ {
			for _, mm := range msgs {
				m.PostUserMessage(mm)
			}
		}
		m.PostUserMessage(msgs[0]) // keyed
		m.PostUserMessage("external")
		d.drain()
	}
	round() // grow the buffers once
	assert.Zero(t, testing.AllocsPerRun(100, round))
}

type nopInvoker struct{}

func (nopInvoker) InvokeSystemMessage(interface{})          {}
func (nopInvoker) InvokeUserMessage(interface{})            {}
func (nopInvoker) EscalateFailure(interface{}, interface{}) {}

// PostFrom queues by the given key without the key function, and Sender
// names the queue of the message being delivered: none for the external
// queue and for system messages.
func TestPostFromAndSender(t *testing.T) {
	m, d, s := newStepped()
	var senders []string
	s.onUser = func(message interface{}) {
		k, ok := m.Sender()
		senders = append(senders, fmt.Sprintf("%v:%d:%v", message, k, ok))
	}
	m.PostFrom(7, "x1")
	m.PostUserMessage("plain")
	m.PostFrom(9, "y1")
	m.PostFrom(7, "x2")
	m.PostSystemMessage(sysMsg("sys"))
	d.drain()
	assert.Equal(t, "sys x1 plain y1 x2", s.String())
	assert.Equal(t, []string{"x1:7:true", "plain:0:false", "y1:9:true", "x2:7:true"}, senders)
	_, ok := m.Sender()
	assert.False(t, ok, "no message being delivered")
}

// PostTagged's tag is what Tag returns while its message is delivered,
// whatever the order of delivery; other messages have none.
func TestPostTagged(t *testing.T) {
	m, d, s := newStepped()
	var tags []string
	s.onUser = func(message interface{}) {
		tags = append(tags, fmt.Sprintf("%v:%d", message, m.Tag()))
	}
	m.PostTagged(7, 3, "x1")
	m.PostFrom(9, "y1")
	m.PostTagged(7, 4, "x2")
	m.PostTagged(9, 5, "y2")
	d.drain()
	assert.Equal(t, []string{"x1:3", "y1:0", "x2:4", "y2:5"}, tags)
	assert.Zero(t, m.Tag(), "no message being delivered")
}

// Close hands over every keyed message not delivered, each sender's in
// order (sorted into queues, in the batch, or just posted), and refuses
// keyed posts after it; messages without a key stay.
func TestClose(t *testing.T) {
	for _, arrival := range []bool{false, true} {
		t.Run(fmt.Sprint("arrival=", arrival), func(t *testing.T) {
			var opts []Option
			if arrival {
				opts = append(opts, WithArrivalOrder())
			}
			m, d, s := newStepped(opts...)
			got := map[SenderKey][]string{}
			s.onUser = func(message interface{}) {
				if message != "x1" {
					return
				}
				m.PostTagged(2, 6, "y3") // posted meanwhile: not sorted yet
				m.Close(func(key SenderKey, tag uint64, msg interface{}) {
					got[key] = append(got[key], fmt.Sprintf("%v:%d", msg, tag))
				})
			}
			m.PostTagged(1, 1, "x1")
			m.PostTagged(1, 2, "x2")
			m.PostTagged(2, 3, "y1")
			m.PostUserMessage("outside")
			m.PostTagged(2, 4, "y2")
			m.PostTagged(1, 5, "x3")
			s.log = nil
			d.stepOne(m)
			assert.Equal(t, map[SenderKey][]string{1: {"x2:2", "x3:5"}, 2: {"y1:3", "y2:4", "y3:6"}}, got)
			assert.False(t, m.PostTagged(1, 7, "x4"), "closed")
			m.PostFrom(1, "x5")
			got = map[SenderKey][]string{}
			m.Close(func(key SenderKey, tag uint64, msg interface{}) {
				got[key] = append(got[key], fmt.Sprint(msg))
			})
			assert.Equal(t, []string{"x2", "x3"}, got[1], "nothing posted with a key after the close")
			m.PostUserMessage("outside-2")
		})
	}
}

// Late says whether a keyed post with a tag below the floor came since
// SetFloor: posts without a key, or with a tag at the floor, do not set
// it, and SetFloor clears it.
func TestLate(t *testing.T) {
	m, d, _ := newStepped()
	m.PostTagged(1, 2, "before the floor")
	m.SetFloor(3)
	assert.False(t, m.Late(), "posted before the floor was set")
	m.PostTagged(1, 3, "at the floor")
	m.PostUserMessage("no key")
	assert.False(t, m.Late())
	m.PostTagged(2, 2, "below")
	assert.True(t, m.Late())
	m.SetFloor(3)
	assert.False(t, m.Late(), "cleared")
	d.drain()
}

// Messages posted before the mailbox has an actor wait for it, in order.
func TestPostBeforeRegistration(t *testing.T) {
	m := New()
	m.PostFrom(1, "early1")
	m.PostFrom(1, "early2")
	d := &stepDispatcher{throughput: 300}
	s := &script{}
	m.RegisterHandlers(s, d)
	m.PostSystemMessage(sysMsg("started"))
	assert.Empty(t, d.queued, "nothing scheduled before Start")
	m.Start()
	d.drain()
	assert.Equal(t, "started early1 early2", s.String())
}

// Outside counts the messages posted without a key until they are
// delivered, or sorted to a sender the key function names; those posted
// with PostFrom never count.
func TestOutsideCount(t *testing.T) {
	m, d, s := newStepped()
	post(m, 1, 1)                  // the key function names its sender
	m.PostFrom(2, &msg{2, 1})      // keyed
	m.PostUserMessage("outside-1") // no sender
	m.PostUserMessage("outside-2")
	assert.Equal(t, 3, m.Outside(), "posted without a key, not sorted yet")
	s.onUser = func(message interface{}) {
		if message == "outside-1" {
			assert.Equal(t, 1, m.Outside(), "the one being delivered is not counted")
		}
	}
	d.drain()
	assert.Equal(t, 0, m.Outside())
	assert.Equal(t, 0, m.UserMessageCount())
}

// With arrival order, messages come as posted, across senders and the
// external queue, each still naming its sender.
func TestArrivalOrder(t *testing.T) {
	m, d, s := newStepped(WithArrivalOrder())
	var senders []string
	s.onUser = func(message interface{}) {
		k, ok := m.Sender()
		senders = append(senders, fmt.Sprint(k, ok))
	}
	post(m, 1, 1, 2)
	m.PostUserMessage("x1")
	post(m, 2, 1)
	m.PostFrom(3, "c")
	post(m, 1, 3)
	d.drain()
	assert.Equal(t, "A1 A2 x1 B1 c A3", s.String())
	assert.Equal(t, []string{"1 true", "1 true", "0 false", "2 true", "3 true", "1 true"}, senders)
	assert.Equal(t, 0, m.UserMessageCount())
}

// A pause in arrival order sends what follows through the queues: the
// paused sender's messages wait, the others keep their turns, and once
// every queue is empty messages come as posted again.
func TestArrivalOrderPause(t *testing.T) {
	m, d, s := newStepped(WithArrivalOrder())
	s.onUser = func(message interface{}) {
		switch fmt.Sprint(message) {
		case "A2":
			m.Pause(1)
			post(m, 1, 6) // behind the held ones
		case "B3":
			m.Resume(1)
		}
	}
	post(m, 1, 1, 2, 3)
	post(m, 2, 1, 2)
	post(m, 1, 4, 5)
	post(m, 2, 3, 4, 5)
	d.drain()
	assert.Equal(t, "A1 A2 B1 B2 B3 B4 A3 B5 A4 A5 A6", s.String())
	post(m, 2, 6)
	post(m, 1, 7, 8)
	post(m, 2, 7)
	d.drain()
	assert.Equal(t, "A1 A2 B1 B2 B3 B4 A3 B5 A4 A5 A6 B6 A7 A8 B7", s.String())
	assert.Equal(t, 0, m.UserMessageCount())
}

// A panic in Receive drops only the message being delivered, and one in
// the key function only the message it was given, in arrival order too.
func TestArrivalOrderPanics(t *testing.T) {
	bad := &msg{from: 9, seq: 1}
	m, d, s := newStepped(WithArrivalOrder(), WithSenderKey(panicsOn(bad)))
	s.onUser = func(message interface{}) {
		if fmt.Sprint(message) == "A2" {
			panic("boom")
		}
	}
	post(m, 1, 1, 2)
	m.PostUserMessage(bad)
	post(m, 2, 1)
	post(m, 1, 3)
	d.drain()
	require.Len(t, s.failures, 2)
	assert.Equal(t, "boom", s.failures[0].reason)
	assert.Equal(t, "bad key", s.failures[1].reason)
	assert.Same(t, bad, s.failures[1].message)
	assert.Equal(t, "A1 A2 B1 A3", s.String())
	assert.Equal(t, 0, m.UserMessageCount())
}
