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

// The aligned mode: c receives from a and b. a's barrier blocks a's
// channel until b's barrier comes; then c records, with no channel state,
// and a's channel flows again. And BackEdges finds the channel a cycle
// must not wait on.
func ExampleProcess_aligned() {
	c, _ := snapshot.NewProcess(snapshot.Config{
		ID: "c", Mode: snapshot.Aligned, Incoming: []snapshot.ProcessID{"a", "b"},
	})
	show := func(when string) {
		rd := c.Ready()
		fmt.Printf("%s: records %d, pause %v, resume %v, channel records %d\n",
			when, len(rd.Records), rd.Pause, rd.Resume, len(rd.Channels))
		c.Advance()
	}
	_ = c.Marker("a", 1)
	show("barrier from a")
	_ = c.Receive("b", snapshot.Stamp{Seq: 1}, "sent before b's barrier")
	_ = c.Marker("b", 1)
	show("barrier from b")

	ring := []snapshot.Channel{{From: "x", To: "y"}, {From: "y", To: "z"}, {From: "z", To: "x"}}
	fmt.Println("back edges of a ring:", snapshot.BackEdges(ring, nil))
	// Output:
	// barrier from a: records 0, pause [a], resume [], channel records 0
	// barrier from b: records 1, pause [], resume [a], channel records 0
	// back edges of a ring: [z->x]
}
