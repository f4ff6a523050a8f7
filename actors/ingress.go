package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/snapshot"
)

// ingressKind is the kind of Ingress participants.
const ingressKind = "actorsnap.ingress"

// Ingress brings input from outside the actors inside the snapshots
// (docs/design.md, decision 5). Messages sent from the root context, timers or
// goroutines are outside every cut; sent through an Ingress they become
// messages of a participant: in flight, they are recorded, and the
// Ingress's state, the number of messages it has forwarded, is the
// position of the input in each snapshot (as a Flink source records its
// offset). After a restore, resume feeding the input from there.
type Ingress struct {
	sys *System
	pid *actor.PID
}

// ingressActor is the participant behind an Ingress.
type ingressActor struct {
	// Forwarded counts the messages forwarded so far: the input position.
	Forwarded uint64
}

type ingressMsg struct {
	to  *actor.PID
	msg interface{}
}

func (a *ingressActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*ingressMsg); ok {
		a.Forwarded++
		ctx.Send(m.to, m.msg)
	}
}

// Ingress spawns an Ingress participant named name.
func (s *System) Ingress(name string) (*Ingress, error) {
	pid, err := s.Spawn(ingressKind, name)
	if err != nil {
		return nil, err
	}
	return &Ingress{sys: s, pid: pid}, nil
}

// IngressOf returns the Ingress participant named name, for instance after
// a restore.
func (s *System) IngressOf(name string) (*Ingress, bool) {
	p := s.reg.lookup(snapshot.ProcessID(name))
	if p == nil || p.kind != ingressKind {
		return nil, false
	}
	return &Ingress{sys: s, pid: p.pid}, true
}

// PID returns the Ingress participant's PID.
func (in *Ingress) PID() *actor.PID { return in.pid }

// Send forwards msg to the participant to, inside the snapshots. It may be
// called from any goroutine; messages sent through one Ingress keep their
// order.
func (in *Ingress) Send(to *actor.PID, msg interface{}) {
	in.sys.root.Send(in.pid, &ingressMsg{to: to, msg: msg})
}
