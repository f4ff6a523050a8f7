package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

// In the epoch mode a broadcast start is recorded ahead of the messages
// queued: a participant busy in a handler records as the handler returns,
// before the messages queued behind it, and those from older epochs are
// the channel's state, taken from the queue at the record. InOrder reads
// the start behind them: they are in the state instead.
func TestBroadcastStartGoesAheadOfTheQueue(t *testing.T) {
	for _, c := range []struct {
		name       string
		initiation Initiation
		inFlight   int
	}{{"broadcast", Broadcast, 3}, {"in-order", InOrder, 0}} {
		t.Run(c.name, func(t *testing.T) {
			sys, pids, events, recorded := probesTraced(t, 2, WithInitiation(c.initiation))
			defer shutdown(t, sys)
			release := block(t, sys, pids[1])
			defer release()
			for _, text := range []string{"q1", "q2", "q3"} {
				sys.Root().Send(pids[0], &sendTo{to: pids[1], msg: &note{Text: text}})
			}
			sys.Root().Send(pids[0], &note{Text: "sent"})
			require.Equal(t, "sent", waitFor(t, events)) // q1-q3 wait in p1's mailbox
			pending := startAsync(sys)
			require.Equal(t, snapshot.ProcessID("p0"), waitFor(t, recorded))
			// p0's record can come before the guardian's broadcast
			// reaches p1: released then, p1 would read its queue first.
			waitFor(t, sys.trace.(*signalTrace).broadcast)
			release()
			r := waitFor(t, pending)
			require.NoError(t, r.err)
			g := r.global
			require.NoError(t, g.Verify())
			ch, _ := g.Channel(snapshot.Channel{From: "p0", To: "p1"})
			require.Len(t, ch.Messages, c.inFlight)
			for i, m := range ch.Messages {
				v, err := DecodeMessage(m.Payload.(RecordedMessage), testMessages)
				require.NoError(t, err)
				assert.Equal(t, []string{"q1", "q2", "q3"}[i], v.(*note).Text)
			}
			assert.Len(t, seenBy(t, g, "p1"), 3-c.inFlight)
		})
	}
}
