package snapshot_test

import (
	"fmt"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Four participants as a snapshot shows them: a and b each wait for the
// other's answer, c waits for a fork a holds, and d's request to b has
// its answer in flight, so d is not stuck. The cut shows one deadlock,
// with c blocked on it, and a system that has not terminated.
func ExampleDeadlocks() {
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return end.Add(-d) }
	g := &snapshot.Global{
		ID: 7, End: end,
		Participants: []snapshot.Participant{
			{ID: "a", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "b", Request: 7, Type: "*main.Ping", Since: ago(3200 * time.Millisecond)}}}},
			{ID: "b", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "a", Request: 9, Type: "*main.Pong", Since: ago(3100 * time.Millisecond)}}}},
			{ID: "c", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "a", Type: "fork", Since: ago(time.Second)}}}},
			{ID: "d", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "b", Request: 2, Type: "*main.Get", Since: ago(time.Second)}}}},
		},
		Channels: []snapshot.ChannelState{
			{Channel: snapshot.Channel{From: "b", To: "d"}, Sent: 1, Messages: []snapshot.Message{{Seq: 1, Payload: "answer"}}},
		},
	}
	for _, d := range snapshot.Deadlocks(g) {
		fmt.Println(d)
	}
	fmt.Println(snapshot.Quiescent(g))
	// Output:
	// a waits for b (request 7, *main.Ping, 3.2s), b waits for a (request 9, *main.Pong, 3.1s); blocked on it: c
	// snapshot 7: not quiescent: 1 message in flight on 1 channel (b->d); 3 requests not answered (a waits for b (request 7, *main.Ping, 3.2s), b waits for a (request 9, *main.Pong, 3.1s), d waits for b (request 2, *main.Get, 1.0s))
}
