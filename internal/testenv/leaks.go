package testenv

import "go.uber.org/goleak"

// ProtoActorTimers is the goleak option for goroutines Proto.Actor starts
// on its own and that end by themselves: the dead-letter log throttle
// sleeps for one interval (1s) after the first dead letter. Messages to
// stopped actors at shutdown are dead letters, so a test that ends right
// after a shutdown may catch one.
var ProtoActorTimers = goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")
