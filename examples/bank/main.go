// Command bank is a small Proto.Actor program written the way a user of
// actorsnap writes one: account actors pay each other without pause, and
// the program takes a consistent global snapshot every interval, stores it
// in a file store, and checks it: the balances plus the money in
// transfers caught in flight equal the money the bank started with.
//
//	go run ./examples/bank --store ./bank-snaps --accounts 100 --duration 3s
//	go run ./examples/bank --store ./bank-snaps --restore --duration 3s
//
// The first command starts a bank; the second continues it from its
// latest snapshot, with the same balances and the transfers that were in
// flight replayed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Transfer moves money to the account that receives it.
type Transfer struct{ Amount int64 }

// Open tells a new account whom it pays.
type Open struct{ Next string }

// Account holds money and pays part of every transfer it receives to the
// next account. Its exported fields are its state in a snapshot: a
// restored account has the same balance and pays the same peer.
type Account struct {
	Balance int64
	Next    string // the name of the account it pays
}

// Receive implements actor.Actor. ctx.Send to another participant is
// counted and stamped by actorsnap, so a snapshot knows which transfers
// were in flight.
func (a *Account) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Open:
		a.Next = m.Next
	case *Transfer:
		a.Balance += m.Amount
		if a.Next == "" {
			// Paid before it was told whom to pay (another account's
			// transfer may overtake the Open sent from outside): keep it.
			return
		}
		pay := a.Balance / 3
		a.Balance -= pay
		ctx.Send(actor.NewPID(ctx.ActorSystem().Address(), a.Next), &Transfer{Amount: pay})
	}
}

const (
	initial = 1000 // each account's money at the start
	kind    = "account"
	system  = "example-bank"
)

// transfers registers the message type: transfers may be caught in
// flight, so a snapshot must be able to store them and a restore rebuild
// them.
var transfers = actors.WithMessage[*Transfer]("example.bank.transfer")

// config is what one run does.
type config struct {
	store    string
	accounts int
	interval time.Duration
	duration time.Duration
	restore  bool
}

func main() {
	var c config
	flag.StringVar(&c.store, "store", "./bank-snaps", "the snapshot store: a directory")
	flag.IntVar(&c.accounts, "accounts", 100, "number of accounts")
	flag.DurationVar(&c.interval, "interval", 200*time.Millisecond, "time between snapshots")
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "how long to run")
	flag.BoolVar(&c.restore, "restore", false, "continue the bank from its latest snapshot")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, c); err != nil {
		fmt.Fprintln(os.Stderr, "bank:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, c config) error {
	store, err := persistence.Open(ctx, c.store)
	if err != nil {
		return err
	}
	sys, err := start(ctx, store, c)
	if err != nil {
		return err
	}
	defer func() {
		if err := sys.Shutdown(context.Background()); err != nil {
			fmt.Fprintln(w, "shutdown:", err)
		}
	}()

	// A new bank holds what its accounts were given; a restored one what
	// its first snapshot, taken as it was restored, holds.
	total := int64(c.accounts) * initial
	if c.restore {
		g, err := store.Latest(ctx)
		if err != nil {
			return err
		}
		if total, _, err = count(g); err != nil {
			return err
		}
		fmt.Fprintf(w, "restored %d accounts from snapshot %d\n", len(g.Participants), g.ID)
	}
	end := time.After(c.duration)
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-end:
			return nil
		case <-tick.C:
		}
		g, err := sys.Snapshot(ctx)
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if err != nil {
			return err
		}
		money, inFlight, err := count(g)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "snapshot %d: %d accounts, %d transfers in flight, $%d in all\n",
			g.ID, len(g.Participants), inFlight, money)
		if money != total {
			return fmt.Errorf("snapshot %d holds $%d, want $%d", g.ID, money, total)
		}
	}
}

// start starts a new bank in store, or restores the latest one.
func start(ctx context.Context, store persistence.Store, c config) (*actors.System, error) {
	opts := []actors.Option{
		// Accounts are spawned by kind; a restore builds a fresh instance
		// the same way and fills in its exported fields from the snapshot.
		transfers,
		actors.WithKind(kind, func() actor.Actor { return &Account{Balance: initial} }),
		actors.WithStore(store),
		actors.WithSystemName(system),
		actors.WithRetain(5),
	}
	if c.restore {
		return actors.Restore(ctx, store, 0, opts...)
	}
	sys, err := actors.NewSystem(opts...)
	if err != nil {
		return nil, err
	}
	pids := make([]*actor.PID, c.accounts)
	for i := range pids {
		if pids[i], err = sys.Spawn(kind, name(i)); err != nil {
			_ = sys.Shutdown(ctx)
			return nil, err
		}
	}
	// Each account pays the next, around a ring; a transfer of nothing
	// into every account sets money moving.
	for i, pid := range pids {
		sys.Root().Send(pid, &Open{Next: name((i + 1) % c.accounts)})
		sys.Root().Send(pid, &Transfer{})
	}
	return sys, nil
}

func name(i int) string { return fmt.Sprintf("account-%04d", i) }

// count returns the money a snapshot holds, balances plus transfers in
// flight, and the number of transfers in flight.
func count(g *snapshot.Global) (money int64, inFlight int, err error) {
	for _, p := range g.Participants {
		var a Account
		if err := msgpack.Unmarshal(p.State, &a); err != nil {
			return 0, 0, fmt.Errorf("state of %s: %w", p.ID, err)
		}
		money += a.Balance
	}
	for _, c := range g.Channels {
		for _, m := range c.Messages {
			v, err := actors.DecodeMessage(m.Payload.(actors.RecordedMessage), transfers)
			if err != nil {
				return 0, 0, err
			}
			money += v.(*Transfer).Amount
			inFlight++
		}
	}
	return money, inFlight, nil
}
