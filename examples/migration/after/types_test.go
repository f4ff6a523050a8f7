package after

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
)

// Every message and state type of the program comes back from a snapshot
// whole.
func TestTypesRoundTrip(t *testing.T) {
	pid := actor.NewPID("nonhost", "coordinator/shard0")
	for _, v := range []any{
		&Peers{Shards: []*actor.PID{pid}}, &Read{Round: 2}, &Words{Words: []string{"actor"}},
		&Ack{}, &Done{}, &Report{}, &Counts{Counts: map[string]int{"cut": 3}},
		&shard{Index: 1, Words: 5, Seed: 9, Peers: []*actor.PID{pid}, Counts: map[string]int{"a": 1}, Pending: 2},
		&coordinator{Cfg: Config{Shards: 2, Rounds: 3, Words: 4, Seed: 5}, Children: []*actor.PID{pid},
			Round: 2, Finished: 1, Reported: 1, Result: Result{"a": 2}},
	} {
		if err := actors.RoundTrip(v); err != nil {
			t.Fatal(err)
		}
	}
}
