package mailbox

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// BenchmarkMailbox compares this mailbox with Proto.Actor's default
// (unbounded) mailbox on real actors, in the same run. One op is one
// message delivered; msgs/s is the rate over the whole benchmark.
func BenchmarkMailbox(b *testing.B) {
	mailboxes := []struct {
		name     string
		producer actor.MailboxProducer
	}{
		{"default", actor.Unbounded()},
		{"persender", Producer(WithSenderKey(benchKey))},
		{"arrival", Producer(WithSenderKey(benchKey), WithArrivalOrder())},
	}
	for _, w := range []struct {
		name string
		run  func(b *testing.B, producer actor.MailboxProducer)
	}{
		{"pingpong", benchPingPong},
		{"fanin8", benchFanIn},
	} {
		b.Run(w.name, func(b *testing.B) {
			for _, mb := range mailboxes {
				b.Run(mb.name, func(b *testing.B) { w.run(b, mb.producer) })
			}
		})
	}
}

// benchMsg is preallocated per sender and sent again and again, so that the
// only allocations measured are the mailbox's.
type benchMsg struct{ from SenderKey }

func benchKey(message interface{}) (SenderKey, bool) {
	if m, ok := message.(*benchMsg); ok {
		return m.from, true
	}
	return 0, false
}

type pingStart struct {
	n    int
	pong *actor.PID
	done chan struct{}
}

// pinger keeps inFlight messages going to a ponger that sends each back.
type pinger struct {
	start      *pingStart
	ping       benchMsg
	sent, recv int
}

const inFlight = 100

func (p *pinger) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *pingStart:
		p.start = m
		for p.sent < min(inFlight, m.n) {
			p.sent++
			c.Send(m.pong, &p.ping)
		}
	case *benchMsg:
		p.recv++
		if p.sent < p.start.n {
			p.sent++
			c.Send(p.start.pong, &p.ping)
		}
		if p.recv == p.start.n {
			close(p.start.done)
		}
	}
}

type ponger struct {
	ping *actor.PID
	pong benchMsg
}

func (p *ponger) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.PID:
		p.ping = m
	case *benchMsg:
		c.Send(p.ping, &p.pong)
	}
}

// benchPingPong counts both directions: b.N messages are b.N/2 round trips.
func benchPingPong(b *testing.B, producer actor.MailboxProducer) {
	system := newSystem()
	defer system.Shutdown()
	ping := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &pinger{ping: benchMsg{from: 1}}
	}, actor.WithMailbox(producer)))
	pong := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &ponger{pong: benchMsg{from: 2}}
	}, actor.WithMailbox(producer)))
	system.Root.Send(pong, ping)

	start := &pingStart{n: max(1, b.N/2), pong: pong, done: make(chan struct{})}
	b.ReportAllocs()
	b.ResetTimer()
	system.Root.Send(ping, start)
	await(b, start.done, "ping-pong")
	b.StopTimer()
	b.ReportMetric(float64(2*start.n)/b.Elapsed().Seconds(), "msgs/s")
	system.Root.Stop(ping)
	system.Root.Stop(pong)
}

type fanStart struct {
	n      int
	target *actor.PID
}

// fanSender sends n messages to its target as fast as it can.
type fanSender struct{ msg benchMsg }

func (s *fanSender) Receive(c actor.Context) {
	if m, ok := c.Message().(*fanStart); ok {
		for i := 0; i < m.n; i++ {
			c.Send(m.target, &s.msg)
		}
	}
}

type fanReceiver struct {
	n, recv int
	done    chan struct{}
}

func (r *fanReceiver) Receive(c actor.Context) {
	if _, ok := c.Message().(*benchMsg); ok {
		r.recv++
		if r.recv == r.n {
			close(r.done)
		}
	}
}

// benchFanIn has 8 sender actors (default mailboxes) flood one receiver
// that uses the mailbox under test.
func benchFanIn(b *testing.B, producer actor.MailboxProducer) {
	const senders = 8
	system := newSystem()
	defer system.Shutdown()
	each := max(1, b.N/senders)
	recv := &fanReceiver{n: each * senders, done: make(chan struct{})}
	target := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return recv },
		actor.WithMailbox(producer)))
	pids := make([]*actor.PID, senders)
	for i := range pids {
		key := SenderKey(i + 1)
		pids[i] = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &fanSender{msg: benchMsg{from: key}}
		}))
	}
	start := &fanStart{n: each, target: target}
	b.ReportAllocs()
	b.ResetTimer()
	for _, pid := range pids {
		system.Root.Send(pid, start)
	}
	await(b, recv.done, "fan-in")
	b.StopTimer()
	b.ReportMetric(float64(recv.n)/b.Elapsed().Seconds(), "msgs/s")
	for _, pid := range pids {
		system.Root.Stop(pid)
	}
	system.Root.Stop(target)
}
