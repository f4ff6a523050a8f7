package mailbox

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait; it is a failure deadline, not a timing
// assumption: nothing in these tests is expected to take more than a
// fraction of it.
const deadline = 10 * time.Second

// await fails the test if ch is not closed (or sent on) before the deadline.
func await(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// msg is a test message from a keyed sender.
type msg struct {
	from SenderKey
	seq  int
}

// String names a message as "A3": sender A (key 1), third message.
func (m *msg) String() string { return fmt.Sprintf("%c%d", 'A'+rune(m.from)-1, m.seq) }

// keyOf keys *msg by its sender; everything else is external.
func keyOf(message interface{}) (SenderKey, bool) {
	if m, ok := actor.UnwrapEnvelopeMessage(message).(*msg); ok {
		return m.from, true
	}
	return 0, false
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}
