// Command tokens runs the token (bank) simulation on the simulated network
// of package snapshottest, takes concurrent global snapshots while money
// moves, and prints each snapshot as a table with the verdict of every
// invariant checker on it.
//
//	go run ./examples/tokens -processes 12 -snapshots 4 -seed 7
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

func main() {
	processes := flag.Int("processes", 8, "number of processes (2 or more)")
	snapshots := flag.Int("snapshots", 3, "concurrent snapshots to take")
	ticks := flag.Int("ticks", 60, "ticks of traffic")
	seed := flag.Uint64("seed", 1, "seed of the run: graph, delays, traffic")
	flag.Parse()
	if err := run(os.Stdout, *processes, *snapshots, *ticks, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "tokens:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, processes, snapshots, ticks int, seed uint64) error {
	if processes < 2 || snapshots < 1 || ticks < 1 {
		return fmt.Errorf("need -processes >= 2, -snapshots >= 1, -ticks >= 1")
	}
	r := rand.New(rand.NewPCG(seed, 1))
	g := snapshottest.RandomGraph(r, processes, true)
	bank := snapshottest.NewBank(g, 100, 1+processes/4)
	net, err := snapshottest.NewNetwork(snapshottest.Config{Seed: seed, Graph: g, MaxDelay: 5, Declare: snapshottest.DeclareNone, SweepAfter: 20}, bank)
	if err != nil {
		return err
	}
	total := bank.Total()
	fmt.Fprintf(w, "%d processes, %d channels, $%d; %d concurrent snapshots (seed %d)\n\n", processes, len(g.Edges), total, snapshots, seed)
	// Start the snapshots a few ticks apart, so that they overlap, half by
	// an initiating process and half by broadcast.
	for t := 1; t <= ticks; t++ {
		if t%3 == 0 && t/3 <= snapshots {
			who := -1
			if t/3%2 == 1 {
				who = r.IntN(processes)
			}
			net.StartSnapshot(who)
		}
		net.Tick(true)
	}
	if err := net.Drain(10000); err != nil {
		return err
	}
	for _, err := range net.Aborted() {
		fmt.Fprintln(w, err)
	}
	bad := 0
	for _, gs := range net.Completed() {
		if !print(w, gs, net.Trace(), total) {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d inconsistent snapshots", bad)
	}
	return nil
}

// print writes one snapshot as a table and reports whether every
// invariant holds on it.
func print(w io.Writer, g *snapshot.Global, tr *snapshottest.Trace, total int64) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "snapshot %d\t(%d ticks)\n", g.ID, g.End.Sub(g.Start).Milliseconds())
	fmt.Fprintln(tw, "process\tbalance\tin flight to it")
	var held int64
	for _, p := range g.Participants {
		v, _ := snapshottest.BalanceOf(p.State)
		held += v
		var in []string
		for _, c := range g.Channels {
			if c.Channel.To != p.ID {
				continue
			}
			for _, m := range c.Messages {
				in = append(in, fmt.Sprintf("%v from %s", m.Payload, c.Channel.From))
			}
		}
		fmt.Fprintf(tw, "%s\t$%d\t%s\n", p.ID, v, strings.Join(in, ", "))
	}
	tw.Flush()
	checks := []struct {
		name string
		err  error
	}{
		{"counters balance", g.Verify()},
		{"consistent cut", tr.CheckCut(g)},
		{"exact channel states", tr.CheckChannels(g)},
		{"money conserved", snapshottest.CheckConservation(g, total, snapshottest.BalanceOf, snapshottest.AmountOf)},
	}
	ok := true
	fmt.Fprintf(w, "states $%d + in flight $%d (%d transfers) = $%d\n", held, total-held, g.TotalInFlight(), total)
	for _, c := range checks {
		verdict := "ok"
		if c.err != nil {
			verdict, ok = "FAILED: "+c.err.Error(), false
		}
		fmt.Fprintf(w, "  %-22s %s\n", c.name, verdict)
	}
	if ok {
		fmt.Fprintf(w, "snapshot %d: CONSISTENT\n\n", g.ID)
	} else {
		fmt.Fprintf(w, "snapshot %d: INCONSISTENT\n\n", g.ID)
	}
	return ok
}
