package actors

import (
	"testing"

	"go.uber.org/goleak"
)

// protoActorTimers are goroutines Proto.Actor starts on its own and that end
// by themselves: the dead-letter log throttle sleeps for one interval (1s)
// after the first dead letter. Messages to stopped actors at shutdown are
// dead letters, so a test that ends right after a shutdown may catch one.
var protoActorTimers = goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, protoActorTimers)
}
