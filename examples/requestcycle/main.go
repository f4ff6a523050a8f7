// Command requestcycle shows what a snapshot says when participants
// block on each other: a and b each ask the other a question in a
// handler and wait for the answer there, in Future.Result. Neither can
// answer, since each holds its goroutine until its own answer comes, and
// neither can record a snapshot, since a participant records between
// two messages. The snapshot times out, and its reason
// (*actors.BlockedError) names the cycle from the glue's books of
// requests:
//
//	snapshot 1 timed out: a waits in Result for b (request 1, *main.Question), b waits in Result for a (request 1, *main.Question)
//
// System.Deadlocks returns the same cycle, with how long each has
// waited. Both futures time out after --patience and the program ends
// with status 3, as for any deadlock it finds.
//
//	go run ./examples/requestcycle
//
// A handler that sends its question with ctx.Request and takes the
// answer as a message never blocks: then a snapshot completes, and the
// deadlock check (actors.WithDeadlockCheck) finds such a cycle in it
// (examples/philosophers).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Question is what one participant asks another; Answer is the reply.
type (
	Question struct{ From string }
	Answer   struct{ From string }
)

// ask tells a participant, from outside every snapshot, whom to ask.
// both holds each participant until both are in their handlers, so that
// the deadlock is certain: without it, one's question could reach the
// other before its own ask, be answered at once, and leave no cycle.
type ask struct {
	peer string
	both *sync.WaitGroup
}

// Asker asks its peer a question when told to, and blocks in its handler
// until the answer comes or its patience runs out. It answers questions
// at once, when it is not blocked.
type Asker struct {
	Answers int // answers it got in time

	patience time.Duration `msgpack:"-"`
	events   chan<- string `msgpack:"-"` // to the program: "blocked" and "gave up" lines
}

// Receive implements actor.Actor.
func (a *Asker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case ask:
		m.both.Done()
		m.both.Wait()
		f := ctx.RequestFuture(actors.SystemOf(ctx).PID(m.peer), &Question{From: ctx.Self().Id}, a.patience)
		a.events <- fmt.Sprintf("%s asked %s and waits for the answer", ctx.Self().Id, m.peer)
		if _, err := f.Result(); err != nil {
			a.events <- fmt.Sprintf("%s gave up waiting for %s: %v", ctx.Self().Id, m.peer, err)
			return
		}
		a.Answers++
	case *Question:
		ctx.Respond(&Answer{From: ctx.Self().Id})
	}
}

// config is what the flags set.
type config struct {
	Timeout  time.Duration // of a snapshot
	Patience time.Duration // how long each waits for its answer
}

// exitDeadlock is the exit status of a run that found a deadlock.
const exitDeadlock = 3

func main() {
	var c config
	flag.DurationVar(&c.Timeout, "timeout", 200*time.Millisecond, "how long a snapshot may take")
	flag.DurationVar(&c.Patience, "patience", 3*time.Second, "how long a and b wait for their answers (at least 5 timeouts)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	o, err := run(ctx, os.Stdout, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "requestcycle:", err)
		os.Exit(1)
	}
	if o.Blocked != nil {
		os.Exit(exitDeadlock)
	}
}

// outcome is what a run found.
type outcome struct {
	Blocked   *actors.BlockedError // the snapshot's reason
	Deadlocks []snapshot.Deadlock  // what System.Deadlocks returned
}

// run sets a and b asking each other, takes a snapshot, asks for the
// deadlocks, and waits for a and b to give up, printing to w.
func run(ctx context.Context, w io.Writer, c config) (o outcome, err error) {
	if c.Timeout < actors.MinTimeout || c.Patience < 5*c.Timeout {
		// The futures must outlast a snapshot and a cut, each of which
		// waits one timeout, with room to spare.
		return o, fmt.Errorf("--timeout %v, --patience %v: want a timeout of at least %v and a patience of at least 5 timeouts", c.Timeout, c.Patience, actors.MinTimeout)
	}
	events := make(chan string, 4)
	sys, err := actors.NewSystem(
		actors.WithMessage[*Question]("requestcycle.Question"),
		actors.WithTimeout(c.Timeout),
		actors.WithKind("asker", func() actor.Actor { return &Asker{patience: c.Patience, events: events} }))
	if err != nil {
		return o, err
	}
	defer func() {
		// Shutdown waits for a and b to leave their handlers, when their
		// futures time out.
		if serr := sys.Shutdown(context.Background()); serr != nil && !errors.Is(serr, actors.ErrShutdown) {
			err = errors.Join(err, serr)
		}
		for len(events) > 0 {
			fmt.Fprintln(w, <-events)
		}
	}()
	for _, name := range []string{"a", "b"} {
		if _, err := sys.Spawn("asker", name); err != nil {
			return o, err
		}
	}
	var both sync.WaitGroup
	both.Add(2)
	sys.Root().Send(sys.PID("a"), ask{peer: "b", both: &both})
	sys.Root().Send(sys.PID("b"), ask{peer: "a", both: &both})
	// Both are in their handlers before the snapshot starts, so that
	// neither records it.
	for range 2 {
		select {
		case e := <-events:
			fmt.Fprintln(w, e)
		case <-ctx.Done():
			return o, ctx.Err()
		}
	}

	_, err = sys.Snapshot(ctx)
	if !errors.As(err, &o.Blocked) {
		return o, fmt.Errorf("snapshot: want a timeout naming the cycle, got %v", err)
	}
	fmt.Fprintln(w, o.Blocked)

	if o.Deadlocks, err = sys.Deadlocks(ctx); err != nil {
		return o, err
	}
	for _, d := range o.Deadlocks {
		fmt.Fprintf(w, "deadlock: %s\n", d)
	}
	return o, nil
}
