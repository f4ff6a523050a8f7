package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// snapContext is the context a participant's actor receives: Proto.Actor's
// own, with the sends that reach other participants stamped and posted to
// their queue for this sender.
type snapContext struct {
	actor.Context
	p   *participant
	msg interface{} // the message being delivered, when not ctx's own
}

// Message implements actor.Context.
func (c *snapContext) Message() interface{} {
	if c.msg != nil {
		if t, ok := c.msg.(*tagged); ok {
			return actor.UnwrapEnvelopeMessage(t.msg)
		}
		return actor.UnwrapEnvelopeMessage(c.msg)
	}
	return c.Context.Message()
}

// MessageHeader implements actor.Context.
func (c *snapContext) MessageHeader() actor.ReadonlyMessageHeader {
	if c.msg != nil {
		if t, ok := c.msg.(*tagged); ok {
			return actor.UnwrapEnvelopeHeader(t.msg)
		}
		return actor.UnwrapEnvelopeHeader(c.msg)
	}
	return c.Context.MessageHeader()
}

// Sender implements actor.Context.
func (c *snapContext) Sender() *actor.PID {
	if c.msg != nil {
		if t, ok := c.msg.(*tagged); ok {
			if t.sender != nil {
				return t.sender
			}
			return actor.UnwrapEnvelopeSender(t.msg)
		}
		return actor.UnwrapEnvelopeSender(c.msg)
	}
	return c.Context.Sender()
}

// Send implements actor.Context.
func (c *snapContext) Send(pid *actor.PID, message interface{}) {
	c.p.send(c.Context, pid, message)
}

// Request implements actor.Context.
func (c *snapContext) Request(pid *actor.PID, message interface{}) {
	c.p.request(c.Context, pid, message, c.Self(), nil)
}

// RequestWithCustomSender implements actor.Context.
func (c *snapContext) RequestWithCustomSender(pid *actor.PID, message interface{}, sender *actor.PID) {
	c.p.request(c.Context, pid, message, sender, nil)
}

// RequestFuture implements actor.Context. The reply goes to a future, which
// is outside the snapshot. One to the participant itself fails at once:
// it could answer only after the handler waiting for it returned.
func (c *snapContext) RequestFuture(pid *actor.PID, message interface{}, timeout time.Duration) *actor.Future {
	f := actor.NewFuture(c.ActorSystem(), timeout)
	c.p.request(c.Context, pid, message, f.PID(), f)
	return f
}

// Respond implements actor.Context.
func (c *snapContext) Respond(response interface{}) {
	to := c.Sender()
	if to == nil {
		c.ActorSystem().DeadLetter.SendUserMessage(nil, response)
		return
	}
	c.p.send(c.Context, to, response)
}

// Forward implements actor.Context: the message goes on with its sender and
// headers, as a new message on the channel from this participant.
func (c *snapContext) Forward(pid *actor.PID) {
	msg := c.msg
	if msg == nil {
		msg = c.Context.Message()
		hdr, sender := c.Context.MessageHeader(), c.Context.Sender()
		if sender != nil || (hdr != nil && hdr.Length() > 0) {
			env := &actor.MessageEnvelope{Message: msg, Sender: sender}
			if hdr != nil && hdr.Length() > 0 {
				env.Header = hdr.ToMap()
			}
			msg = env
		}
	}
	if _, ok := actor.UnwrapEnvelopeMessage(msg).(actor.SystemMessage); ok {
		c.Context.Forward(pid) // Proto.Actor refuses these; let it say so
		return
	}
	c.p.send(c.Context, pid, c.p.forwarded(msg))
}

// Poison implements actor.Context: the pill goes after this participant's
// earlier messages to pid, as Proto.Actor promises.
func (c *snapContext) Poison(pid *actor.PID) {
	if t := c.p.target(pid); t != nil && !t.stopped.Load() {
		t.mb.PostFrom(c.p.key, &actor.PoisonPill{})
		return
	}
	c.Context.Poison(pid) // a stopped entry has no mailbox: a dead letter
}

// Actor implements actor.Context: the application's actor, not the shell.
func (c *snapContext) Actor() actor.Actor { return c.p.inner }
