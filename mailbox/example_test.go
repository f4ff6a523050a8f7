package mailbox_test

import (
	"fmt"
	"log/slog"

	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/asynkron/protoactor-go/actor"
)

// Stamped is a message that says which actor sent it.
type Stamped struct {
	From mailbox.SenderKey
	Text string
}

// keyOf tells the mailbox who sent a message. Messages that are not
// Stamped have no sending actor and share the external queue.
func keyOf(message interface{}) (mailbox.SenderKey, bool) {
	if m, ok := actor.UnwrapEnvelopeMessage(message).(*Stamped); ok {
		return m.From, true
	}
	return 0, false
}

// Two senders, a and b, each send a barrier among their messages. The
// receiver holds a's messages from a's barrier until b's barrier arrives,
// while b's keep flowing; the senders otherwise take turns.
func Example() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	defer system.Shutdown()

	busy, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	receive := func(c actor.Context) {
		switch m := c.Message().(type) {
		case string: // from outside any actor: the external queue
			close(busy)
			<-release // stay busy until both senders have posted everything
		case *Stamped:
			fmt.Println(m.Text)
			switch m.Text {
			case "a-barrier":
				mailbox.Of(c).Pause(m.From)
			case "b-barrier":
				mailbox.Of(c).Resume(1)
			case "a3":
				close(done)
			}
		}
	}
	props := actor.PropsFromFunc(receive,
		actor.WithMailbox(mailbox.Producer(mailbox.WithSenderKey(keyOf))))
	pid := system.Root.Spawn(props)

	system.Root.Send(pid, "work")
	<-busy
	for _, text := range []string{"a1", "a-barrier", "a2", "a3"} {
		system.Root.Send(pid, &Stamped{From: 1, Text: text})
	}
	for _, text := range []string{"b1", "b2", "b-barrier", "b3"} {
		system.Root.Send(pid, &Stamped{From: 2, Text: text})
	}
	close(release)
	<-done
	system.Root.Stop(pid)

	// Output:
	// a1
	// b1
	// a-barrier
	// b2
	// b-barrier
	// b3
	// a2
	// a3
}
