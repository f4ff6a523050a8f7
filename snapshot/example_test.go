package snapshot_test

import (
	"fmt"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Two processes, a and b, with a channel each way, driven by hand. a
// initiates while a message is in flight from b to a; that message ends up
// in the channel state of b->a.
func Example() {
	a, _ := snapshot.NewProcess(snapshot.Config{ID: "a", Outgoing: []snapshot.ProcessID{"b"}, Incoming: []snapshot.ProcessID{"b"}})
	b, _ := snapshot.NewProcess(snapshot.Config{ID: "b", Outgoing: []snapshot.ProcessID{"a"}, Incoming: []snapshot.ProcessID{"a"}})
	asm, _ := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Participants: []snapshot.ProcessID{"a", "b"}})

	// carry out a process's actions; markers are returned to deliver later.
	balance := map[snapshot.ProcessID]int{"a": 10, "b": 10}
	act := func(p *snapshot.Process) []snapshot.MarkerSend {
		rd := p.Ready()
		for _, r := range rd.Records {
			r.State = fmt.Appendf(nil, "%d", balance[p.ID()])
			_ = asm.AddRecord(r)
		}
		for _, c := range rd.Channels {
			_ = asm.AddChannel(c)
		}
		markers := append([]snapshot.MarkerSend(nil), rd.Markers...)
		p.Advance()
		return markers
	}

	// b sends 3 to a; the message is in flight.
	stamp := b.Send("a")
	balance["b"] -= 3

	// a initiates snapshot 1: it records, and a marker leaves for b.
	_ = a.Initiate(1)
	toB := act(a)

	// The transfer reaches a after a recorded: it is recorded as channel state.
	_ = a.Receive("b", stamp, "transfer 3")
	balance["a"] += 3

	// a's marker reaches b: b records and answers with its own marker.
	_ = b.Marker("a", toB[0].Snapshot)
	toA := act(b)

	// b's marker reaches a and closes the recording of b->a.
	_ = a.Marker("b", toA[0].Snapshot)
	act(a)

	fmt.Println(asm.Status(time.Now()).State)
	g, _ := asm.Global()
	for _, p := range g.Participants {
		fmt.Printf("%s: %s\n", p.ID, p.State)
	}
	fmt.Println("in flight b->a:", g.InFlight(snapshot.Channel{From: "b", To: "a"}))
	fmt.Println("verify:", g.Verify())
	// Output:
	// complete
	// a: 10
	// b: 7
	// in flight b->a: [{1 transfer 3}]
	// verify: <nil>
}
