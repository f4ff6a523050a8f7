// Command bank runs the bank demo on real Proto.Actor actors: account
// actors on a random graph with cycles send each other money without
// pause, and a consistent global snapshot is taken every interval while
// they do. Each snapshot is checked: the counters balance, and the balances
// plus the money in transfers caught in flight equal the initial total.
//
//	go run ./examples/bank --actors 1000 --interval 200ms --duration 5s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/actorsnap/actorsnap/internal/bankdemo"
)

func main() {
	actorsN := flag.Int("actors", 1000, "number of account actors")
	interval := flag.Duration("interval", 200*time.Millisecond, "time between snapshots")
	duration := flag.Duration("duration", 5*time.Second, "how long to run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := bankdemo.Run(ctx, os.Stdout, bankdemo.RunConfig{
		Config:   bankdemo.Config{Accounts: *actorsN, Initial: 1000, Chords: 2, InFlight: 2, Seed: 1},
		Interval: *interval,
		Duration: *duration,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bank:", err)
		os.Exit(1)
	}
}
