package actors

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/snapshot"
)

// The glue's books of requests, for the deadlock and termination
// analyses. A participant's Request, RequestFuture or
// RequestWithCustomSender to another participant is numbered and noted,
// with its target, message type and time, until its answer comes: the
// request carries its number in a header, and whatever the target sends
// back to the requester while it handles that request (Respond, or a Send
// or Request to it) carries the number as the answer's. A request whose
// answer goes to a future is answered when the future completes.
//
// Each record carries the requests not answered whose answers come on a
// channel (the cut shows an answer in flight there), with what the actor
// declares (Waiter). Requests answered through a future are outside the
// cut: they serve to name what a participant blocked in Future.Result
// waits for when a snapshot it cannot record times out.

// Headers the glue sets on requests between participants and on their
// answers.
const (
	requestHeader   = "actorsnap-request"   // a request's number at its requester
	requesterHeader = "actorsnap-requester" // the requester's name (a forwarded request keeps it)
	answerHeader    = "actorsnap-answer"    // the number of the request answered
)

// maxOpenRequests bounds a participant's books: a request never answered
// (an actor that uses Request only to pass its PID, say) must not grow
// them for ever. The oldest goes first.
const maxOpenRequests = 1024

// Waiter is implemented by an actor that declares what it waits for, for
// the deadlock and termination analyses (System.Deadlocks,
// System.AwaitQuiescence): the glue asks it when it records, on its own
// goroutine, between two messages. Edges name participants and what is
// awaited from each (their Request is 0); Any makes the actor wait for any
// one of its waits, its requests not answered included, rather than all;
// Timer says a timer it set will wake it. A philosopher holding one fork
// and waiting for its neighbour's declares {Edges: [{To: neighbour, Type:
// "fork", Since: t}]}.
type Waiter interface {
	Waiting() snapshot.Waits
}

// books are a participant's requests not answered yet. The participant's
// goroutine writes them; the guardian reads them when a snapshot times
// out, so they are kept under a lock.
type books struct {
	mu   sync.Mutex
	next uint64
	open []openRequest // by number
	// blocking is the number of the last request to a future made in the
	// handler running now (0 when none): the actor may be blocked in its
	// Result.
	blocking uint64
}

type openRequest struct {
	id     uint64
	to     snapshot.ProcessID
	typ    string
	since  time.Time
	future bool
}

// request notes a request from p to t and returns its number.
func (b *books) request(to snapshot.ProcessID, typ string, future bool) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	if len(b.open) >= maxOpenRequests {
		b.open = slices.Delete(b.open, 0, 1)
	}
	b.open = append(b.open, openRequest{id: b.next, to: to, typ: typ, since: time.Now(), future: future})
	if future {
		b.blocking = b.next
	}
	return b.next
}

// answered strikes request id from the books.
func (b *books) answered(id uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i, ok := slices.BinarySearchFunc(b.open, id, func(r openRequest, id uint64) int {
		switch {
		case r.id < id:
			return -1
		case r.id > id:
			return 1
		}
		return 0
	}); ok {
		b.open = slices.Delete(b.open, i, i+1)
	}
}

// handled ends the handler: a request to a future made in it no longer
// blocks the actor (it returned; the answer comes later, if it was
// piped or reentered).
func (b *books) handled() {
	b.mu.Lock()
	b.blocking = 0
	b.mu.Unlock()
}

// waits returns the requests answered on a channel that are still open,
// oldest first, as wait-for edges.
func (b *books) waits() []snapshot.Wait {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []snapshot.Wait
	for _, r := range b.open {
		if !r.future {
			out = append(out, snapshot.Wait{To: r.to, Request: r.id, Type: r.typ, Since: r.since})
		}
	}
	return out
}

// blocked returns what the actor waits for if it is blocked in a
// handler on a future: the requests to futures made in that handler and
// not answered, and reports whether there are any.
func (b *books) blocked() ([]snapshot.Wait, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocking == 0 {
		return nil, false
	}
	var out []snapshot.Wait
	for _, r := range b.open {
		if r.future {
			out = append(out, snapshot.Wait{To: r.to, Request: r.id, Type: r.typ, Since: r.since})
		}
	}
	return out, len(out) > 0
}

// waiting returns what p waits for as it records: its open requests and
// what its actor declares; nil when nothing.
func (p *participant) waiting() *snapshot.Waits {
	var w snapshot.Waits
	if d, ok := p.inner.(Waiter); ok {
		w = d.Waiting()
		w.Edges = slices.Clone(w.Edges)
	}
	if p.requested {
		w.Edges = append(p.books.waits(), w.Edges...)
	}
	if w.Empty() {
		return nil
	}
	return &w
}

// request sends msg from p to pid as a request whose answer goes to
// sender: numbered and noted when pid is another participant, with its
// number in a header.
func (p *participant) request(ctx actor.Context, pid *actor.PID, msg interface{}, sender *actor.PID, future *actor.Future) {
	t := p.target(pid)
	if t == nil || t.stopped.Load() {
		p.send(ctx, pid, &actor.MessageEnvelope{Message: msg, Sender: sender})
		return
	}
	if t == p && future != nil {
		// It could answer only once the handler waiting for the answer
		// has returned: the future fails at once rather than at its
		// timeout.
		p.sys.log.Error("a participant's RequestFuture to itself is refused: it cannot answer while it waits (send to itself, or use ctx.Request)",
			slog.String("participant", string(p.id)), slog.String("message", fmt.Sprintf("%T", msg)))
		p.sys.root.Send(future.PID(), &actor.DeadLetterResponse{Target: pid})
		return
	}
	p.requested = true
	id := p.books.request(t.id, typeName(msg), future != nil)
	if future != nil {
		p.blocking = true
		p.watch(future, id)
	}
	env := &actor.MessageEnvelope{Message: msg, Sender: sender,
		Header: map[string]string{requestHeader: strconv.FormatUint(id, 10), requesterHeader: string(p.id)}}
	p.send(ctx, pid, env)
}

// watch strikes request id from the books when future completes (or
// times out): the future pipes its outcome to a process of no goroutine
// that does it. A goroutine waiting on the future would take the wake-up
// meant for the actor's own Result (the future signals one waiter).
func (p *participant) watch(future *actor.Future, id uint64) {
	reg := p.sys.actors.ProcessRegistry
	w := &answerWatch{b: &p.books, id: id, reg: reg}
	pid, ok := reg.Add(w, "actorsnap-answer"+reg.NextId())
	if !ok {
		return
	}
	w.pid = pid
	future.PipeTo(pid)
}

// answerWatch is the process a future's outcome is piped to.
type answerWatch struct {
	b   *books
	id  uint64
	reg *actor.ProcessRegistryValue
	pid *actor.PID
}

func (w *answerWatch) SendUserMessage(*actor.PID, interface{}) {
	w.b.answered(w.id)
	w.reg.Remove(w.pid)
}

func (w *answerWatch) SendSystemMessage(*actor.PID, interface{}) {}

func (w *answerWatch) Stop(*actor.PID) {}

// typeName is the name of msg's type for a wait-for edge.
func typeName(msg interface{}) string { return fmt.Sprintf("%T", msg) }

// handling is the request being handled: its requester, and its number
// there.
type handling struct {
	from snapshot.ProcessID
	id   string
}

// takeAnswer strikes from the books the request a delivered message
// answers, and notes the request it is, if it is one, for the answers
// the handler sends. It runs before the application sees the message.
func (p *participant) takeAnswer(h actor.ReadonlyMessageHeader) {
	if a := h.Get(answerHeader); a != "" {
		if id, err := strconv.ParseUint(a, 10, 64); err == nil {
			p.books.answered(id)
		}
	}
	if r := h.Get(requestHeader); r != "" {
		p.current = handling{from: snapshot.ProcessID(h.Get(requesterHeader)), id: r}
	}
}

// answer marks msg, from p to t, as the answer to the request p handles
// if t made it.
func (p *participant) answer(t *participant, msg interface{}) interface{} {
	if t.id != p.current.from {
		return msg
	}
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		h := make(map[string]string, len(env.Header)+1)
		for k, v := range env.Header {
			h[k] = v
		}
		h[answerHeader] = p.current.id
		return &actor.MessageEnvelope{Message: env.Message, Sender: env.Sender, Header: h}
	}
	return &actor.MessageEnvelope{Message: msg, Header: map[string]string{answerHeader: p.current.id}}
}
