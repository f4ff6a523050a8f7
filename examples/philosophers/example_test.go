package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Three philosophers, naive: the check finds every one of them holding
// its left fork and waiting for its right one, and every fork waiting
// for the philosopher who holds it.
func Example() {
	o, err := run(context.Background(), io.Discard, config{
		N: 3, Think: 4 * time.Millisecond, Reach: 2 * time.Millisecond, Eat: 4 * time.Millisecond,
		Seed: 1, Check: 10 * time.Millisecond, Duration: time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := o.Deadlock
	if d == nil {
		fmt.Println("no deadlock")
		return
	}
	fmt.Println(d.Participants, "in a cycle of", d.Cycle)
	for _, e := range d.Edges {
		fmt.Println(e.From, "waits for", e.To, "("+e.Type+")")
	}
	// Output:
	// [f0 f1 f2 p0 p1 p2] in a cycle of 6
	// f0 waits for p0 (release)
	// p0 waits for f1 (fork)
	// f1 waits for p1 (release)
	// p1 waits for f2 (fork)
	// f2 waits for p2 (release)
	// p2 waits for f0 (fork)
}
