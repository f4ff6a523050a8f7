package actors

import (
	"cmp"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/snapshot"
)

// The glue's books of requests, for the deadlock and termination
// analyses. A participant's Request, RequestFuture or
// RequestWithCustomSender to another participant is numbered and noted,
// with its target, message type and time, until its answer comes: the
// request carries its number and requester, and whatever the target sends
// back to the requester while it handles that request (Respond, or a Send
// or Request to it) carries the number as the answer's. Between
// participants of one system the marks ride in a small wrapper (tagged)
// that the receiving shell takes off; to another member they travel as
// envelope headers. A request whose answer goes to a future is answered
// when the future completes.
//
// Each record carries the requests not answered whose answers come on a
// channel (the cut shows an answer in flight there), with what the actor
// declares (Waiter). Requests answered through a future are outside the
// cut: they serve to name what a participant blocked in Future.Result
// waits for when a snapshot it cannot record times out.

// Headers the glue sets on requests between participants and on their
// answers.
const (
	// requestHeader is a request's number at its requester, then its
	// requester's name: "7/acct-3" (a forwarded request keeps it).
	requestHeader = "actorsnap-request"
	// answerHeader is the number of the request an answer answers.
	answerHeader = "actorsnap-answer"
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

// books are a participant's requests not answered yet. Those answered on
// a channel are the participant goroutine's alone (it notes, strikes and
// records them); those to futures are also read by the guardian, when a
// snapshot times out, and struck when the future completes, so they are
// kept apart, under a lock.
type books struct {
	next uint64
	open map[uint64]openRequest // answered on a channel

	mu      sync.Mutex
	futures map[uint64]openRequest
	// blocking is the number of the last request to a future made in the
	// handler running now (0 when none): the actor may be blocked in its
	// Result.
	blocking uint64
}

type openRequest struct {
	to    snapshot.ProcessID
	typ   string
	since time.Time
}

// request notes a request to participant to and returns its number.
func (b *books) request(to snapshot.ProcessID, typ string, future bool) uint64 {
	b.next++
	r := openRequest{to: to, typ: typ, since: time.Now()}
	if future {
		b.mu.Lock()
		b.futures = noteOpen(b.futures, b.next, r)
		b.blocking = b.next
		b.mu.Unlock()
	} else {
		b.open = noteOpen(b.open, b.next, r)
	}
	return b.next
}

// noteOpen adds request id to open, less the oldest when maxOpenRequests are
// open.
func noteOpen(open map[uint64]openRequest, id uint64, r openRequest) map[uint64]openRequest {
	if open == nil {
		open = make(map[uint64]openRequest)
	}
	if len(open) >= maxOpenRequests {
		oldest := id
		for o := range open {
			oldest = min(oldest, o)
		}
		delete(open, oldest)
	}
	open[id] = r
	return open
}

// restore takes the requests a restored participant had open when it
// recorded: their answers, recorded in flight or still to come, carry
// the same numbers. It reports whether there were any.
func (b *books) restore(w *snapshot.Waits) bool {
	if w == nil {
		return false
	}
	for _, e := range w.Edges {
		if e.Request == 0 {
			continue // declared: the actor declares it again
		}
		b.open = noteOpen(b.open, e.Request, openRequest{to: e.To, typ: e.Type, since: e.Since})
		b.next = max(b.next, e.Request)
	}
	return len(b.open) > 0
}

// heard strikes the oldest request to participant from still open: a
// message from it that is neither a request nor marked as an answer (an
// answer sent later, from another handler, as a lock grants a queued
// request) may be the answer. Striking too soon can hide a wait from one
// cut; never striking would leave a wait for ever, and a cycle of such
// could be reported though nothing waits.
func (b *books) heard(from snapshot.ProcessID) {
	var oldest uint64
	for id, r := range b.open {
		if r.to == from && (oldest == 0 || id < oldest) {
			oldest = id
		}
	}
	if oldest != 0 {
		delete(b.open, oldest)
	}
}

// answered strikes request id, answered on a channel, from the books.
func (b *books) answered(id uint64) { delete(b.open, id) }

// futureDone strikes request id, answered through a future.
func (b *books) futureDone(id uint64) {
	b.mu.Lock()
	delete(b.futures, id)
	b.mu.Unlock()
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
func (b *books) waits() []snapshot.Wait { return edges(b.open) }

// edges returns open as wait-for edges, by number.
func edges(open map[uint64]openRequest) []snapshot.Wait {
	out := make([]snapshot.Wait, 0, len(open))
	for id, r := range open {
		out = append(out, snapshot.Wait{To: r.to, Request: id, Type: r.typ, Since: r.since})
	}
	slices.SortFunc(out, func(a, b snapshot.Wait) int { return cmp.Compare(a.Request, b.Request) })
	return out
}

// blocked returns what the actor waits for if it is blocked in a
// handler on a future: the requests to futures not answered, and reports
// whether there are any.
func (b *books) blocked() ([]snapshot.Wait, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocking == 0 {
		return nil, false
	}
	out := edges(b.futures)
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
	if p.mb.Outside() > 0 {
		// Input from outside the cut (the root context, a timer, a
		// future) is queued for it: it will run, whatever the cut shows.
		w.Timer = true
	}
	if w.Empty() {
		return nil
	}
	out := w // on the heap only when there is something: most records wait for nothing
	return &out
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
	p.send(ctx, pid, &tagged{msg: msg, sender: sender, request: id, from: p.id})
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
	w.b.futureDone(w.id)
	w.reg.Remove(w.pid)
}

func (w *answerWatch) SendSystemMessage(*actor.PID, interface{}) {}

func (w *answerWatch) Stop(*actor.PID) {}

// typeName is the name of msg's type for a wait-for edge.
func typeName(msg interface{}) string {
	if msg == nil {
		return "nil"
	}
	return reflect.TypeOf(msg).String()
}

// tagged is a message between participants with the books' marks: the
// request it is (its number at its requester) or the request it answers.
// The receiving shell takes it off before the application sees the
// message; recordings keep the message without it.
type tagged struct {
	msg     interface{} // as the application sent it: a message or an envelope
	sender  *actor.PID  // a request's sender, when msg is a bare message
	request uint64
	from    snapshot.ProcessID // the requester, with request
	answer  uint64
}

// untag returns msg without the books' marks: the message as the
// application sent it, in an envelope if it has a sender.
func untag(msg interface{}) interface{} {
	t, ok := msg.(*tagged)
	switch {
	case !ok:
		return msg
	case t.sender != nil:
		return &actor.MessageEnvelope{Message: t.msg, Sender: t.sender}
	}
	return t.msg
}

// envelope returns t as an envelope with the marks in headers, for
// another member.
func (t *tagged) envelope() *actor.MessageEnvelope {
	env, ok := t.msg.(*actor.MessageEnvelope)
	h := make(map[string]string, 2)
	if ok {
		for k, v := range env.Header {
			h[k] = v
		}
		env = &actor.MessageEnvelope{Message: env.Message, Sender: env.Sender, Header: h}
	} else {
		env = &actor.MessageEnvelope{Message: t.msg, Sender: t.sender, Header: h}
	}
	if t.request != 0 {
		h[requestHeader] = strconv.FormatUint(t.request, 10) + "/" + string(t.from)
	}
	if t.answer != 0 {
		h[answerHeader] = strconv.FormatUint(t.answer, 10)
	}
	return env
}

// handling is the request being handled: its requester, and its number
// there.
type handling struct {
	from snapshot.ProcessID
	id   uint64
}

// takeTags strikes from the books the request a delivered message from
// participant from answers (or the oldest open to from, if it carries no
// answer's mark: heard), and notes the request it is, if it is one, for
// the answers the handler sends. It runs before the application sees the
// message.
func (p *participant) takeTags(t *tagged, from snapshot.ProcessID) {
	if t.answer != 0 {
		p.books.answered(t.answer)
	} else if p.requested && from != "" && t.request == 0 {
		p.books.heard(from)
	}
	if t.request != 0 {
		p.current = handling{from: t.from, id: t.request}
	}
}

// takeHeaders is takeTags for the marks of a message from another
// member, in headers.
func (p *participant) takeHeaders(h actor.ReadonlyMessageHeader, from snapshot.ProcessID) {
	if a := h.Get(answerHeader); a != "" {
		if id, err := strconv.ParseUint(a, 10, 64); err == nil {
			p.books.answered(id)
		}
	} else if p.requested && from != "" && h.Get(requestHeader) == "" {
		p.books.heard(from)
	}
	if r := h.Get(requestHeader); r != "" {
		if n, from, ok := strings.Cut(r, "/"); ok {
			if id, err := strconv.ParseUint(n, 10, 64); err == nil {
				p.current = handling{from: snapshot.ProcessID(from), id: id}
			}
		}
	}
}

// answer marks msg, from p to t, as the answer to the request p handles
// if t made it.
func (p *participant) answer(t *participant, msg interface{}) interface{} {
	if t.id != p.current.from {
		return msg
	}
	if tg, ok := msg.(*tagged); ok && tg.answer == 0 { // a request back to the requester
		tg.answer = p.current.id
		return tg
	}
	return &tagged{msg: msg, answer: p.current.id}
}

// forwarded keeps the request p handles on a message it forwards: whoever
// handles it next answers the requester.
func (p *participant) forwarded(msg interface{}) interface{} {
	if p.current.id == 0 {
		return untag(msg)
	}
	return &tagged{msg: untag(msg), request: p.current.id, from: p.current.from}
}
