// Package bankdemo is the bank workload of the demos: account actors on a
// random graph with cycles, each forwarding part of every payment it gets
// to a random peer, so that money keeps moving and a fixed number of
// transfers is always in flight. The total is conserved, which makes any
// inconsistency in a snapshot visible: balances plus money in recorded
// transfers must equal the initial total.
package bankdemo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Transfer is money moving from one account to another.
type Transfer struct{ Amount int64 }

// Messages registers the bank's message types, for NewSystem, Restore
// and reading a stored snapshot.
var Messages = actors.WithMessage[*Transfer]("bank.transfer")

// Peers tells an account whom it pays, by name. The names are part of the
// account's state, so a restored account pays the same peers.
type Peers struct{ Names []string }

// Kick makes an account start N chains of transfers.
type Kick struct{ N int }

// Account is one bank account. Its exported fields are its snapshot state.
type Account struct {
	Balance int64
	Peers   []string
	pids    []*actor.PID `msgpack:"-"` // looked up again from Peers
	rng     *rand.Rand   `msgpack:"-"` // seeded afresh: transfers are random
}

// Receive implements actor.Actor.
func (a *Account) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Peers:
		a.Peers, a.pids = m.Names, nil
	case *Kick:
		for range m.N {
			a.pay(ctx)
		}
	case *Transfer:
		transfers.Add(1)
		a.Balance += m.Amount
		a.pay(ctx)
	}
}

func (a *Account) pay(ctx actor.Context) {
	if len(a.Peers) == 0 {
		return
	}
	if a.pids == nil {
		// By name: on this system, or on the member of a cluster that
		// hosts it.
		sys := actors.SystemOf(ctx)
		for _, name := range a.Peers {
			a.pids = append(a.pids, sys.PID(name))
		}
	}
	if a.rng == nil {
		a.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	amount := int64(0)
	if a.Balance > 0 {
		amount = a.rng.Int64N(a.Balance/2 + 1)
	}
	a.Balance -= amount
	ctx.Send(a.pids[a.rng.IntN(len(a.pids))], &Transfer{Amount: amount})
}

// transfers counts the transfers accounts received, for throughput
// measures.
var transfers atomic.Int64

// Transfers returns how many transfers this process's accounts have
// received.
func Transfers() int64 { return transfers.Load() }

// Config describes a bank.
type Config struct {
	Accounts int   // number of account actors
	Initial  int64 // initial balance of each
	Chords   int   // random extra peers per account, besides the ring
	InFlight int   // transfer chains each account starts
	Seed     uint64
}

// Bank is a running bank of account participants.
type Bank struct {
	Config
	System *actors.System
	PIDs   []*actor.PID
}

// Total returns the money in the bank.
func (c Config) Total() int64 { return int64(c.Accounts) * c.Initial }

// start spawns the accounts in sys, whose account kind is Kind, and sets
// money moving.
func start(sys *actors.System, cfg Config) (*Bank, error) {
	return Start(sys, cfg, nil)
}

// Start spawns the accounts owns says are this system's (all of them if
// owns is nil: a member of a cluster spawns those placed on it), tells
// each its peers and sets money moving.
func Start(sys *actors.System, cfg Config, owns func(name string) bool) (*Bank, error) {
	if cfg.Accounts < 2 {
		return nil, errors.New("bankdemo: need at least 2 accounts")
	}
	b := &Bank{Config: cfg, System: sys}
	peers := b.peers()
	for i := range cfg.Accounts {
		if owns != nil && !owns(Name(i)) {
			continue
		}
		pid, err := sys.Spawn("account", Name(i))
		if err != nil {
			return nil, err
		}
		b.PIDs = append(b.PIDs, pid)
		sys.Root().Send(pid, &Peers{Names: peers[i]})
	}
	for _, pid := range b.PIDs {
		sys.Root().Send(pid, &Kick{N: cfg.InFlight})
	}
	return b, nil
}

// Name is the name of account i.
func Name(i int) string { return fmt.Sprintf("acct-%05d", i) }

// peers returns every account's peers: a ring through all of them plus
// random chords, a graph with cycles, the same from the same seed on
// every member.
func (b *Bank) peers() [][]string {
	r := rand.New(rand.NewPCG(b.Seed, 1))
	n := b.Accounts
	out := make([][]string, n)
	for i := range n {
		ps := []string{Name((i + 1) % n)}
		for range b.Chords {
			ps = append(ps, Name(r.IntN(n)))
		}
		out[i] = ps
	}
	return out
}

// Check verifies a snapshot of the bank: the counters balance, and the
// balances plus the money in recorded transfers equal the total.
func Check(g *snapshot.Global, total int64) error {
	if err := g.Verify(); err != nil {
		return err
	}
	sum, err := Money(g)
	if err != nil {
		return err
	}
	if sum != total {
		return fmt.Errorf("money not conserved: %d, want %d", sum, total)
	}
	return nil
}

// Verdict checks a snapshot of a bank that may be losing accounts: it
// returns how many accounts had stopped before it (a member shut down;
// a departed participant carries no kind, and the bank has no other),
// and an error if it is inconsistent or, with none stopped, does
// not hold total. A stopped account holds no state, and what was sent to
// it after it stopped is lost with it: such a snapshot is held to
// consistency alone.
func Verdict(g *snapshot.Global, total int64) (departed int, err error) {
	for _, p := range g.Participants {
		if p.Departed {
			departed++
		}
	}
	if departed > 0 {
		return departed, g.Verify()
	}
	return 0, Check(g, total)
}

// Money returns the money a snapshot of the bank holds: balances plus
// transfers in flight.
func Money(g *snapshot.Global) (int64, error) {
	var sum int64
	for _, p := range g.Participants {
		if p.Kind != "account" {
			continue
		}
		var a Account
		if err := msgpack.Unmarshal(p.State, &a); err != nil {
			return 0, fmt.Errorf("state of %s: %w", p.ID, err)
		}
		sum += a.Balance
	}
	for _, c := range g.Channels {
		for _, m := range c.Messages {
			rm, ok := m.Payload.(actors.RecordedMessage)
			if !ok {
				return 0, fmt.Errorf("channel %s: payload %T", c.Channel, m.Payload)
			}
			v, err := actors.DecodeMessage(rm, Messages)
			if err != nil {
				return 0, err
			}
			t, ok := v.(*Transfer)
			if !ok {
				return 0, fmt.Errorf("channel %s: unexpected %T", c.Channel, v)
			}
			sum += t.Amount
		}
	}
	return sum, nil
}

// Kind returns the WithKind option of the account kind, for NewSystem and
// for Restore.
func Kind(initial int64) actors.Option {
	return actors.WithKind("account", func() actor.Actor { return &Account{Balance: initial} })
}

// Kinds returns the options giving every kind of the bank's participants
// and its message types, for actors.CheckDecodes of a stored snapshot of
// the bank, as `actorsnap verify` runs it.
func Kinds() []actors.Option { return []actors.Option{Kind(0), Messages} }

// RunConfig is what Run and Resume do.
type RunConfig struct {
	Config
	Interval time.Duration // between snapshots
	Duration time.Duration // of the whole run
	Options  []actors.Option
	// MaxFailures is how many snapshots in a row may fail (to be taken
	// or saved) before the run stops with an error; 0 means
	// DefaultMaxFailures.
	MaxFailures int
	// Errors is where failed snapshots are reported, a line each; nil
	// means the writer the run reports to.
	Errors io.Writer
}

// DefaultMaxFailures is RunConfig.MaxFailures's default.
const DefaultMaxFailures = 3

// Run starts a bank, takes a snapshot every Interval for Duration, checks
// each, and writes a line per snapshot to w. It returns an error if any
// snapshot is inconsistent.
func Run(ctx context.Context, w io.Writer, cfg RunConfig) error {
	sys, err := actors.NewSystem(append([]actors.Option{Kind(cfg.Initial), Messages}, cfg.Options...)...)
	if err != nil {
		return err
	}
	defer sys.Shutdown(context.Background())
	if _, err := start(sys, cfg.Config); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d accounts, $%d in all, %d transfers in flight; a snapshot every %v for %v\n",
		cfg.Accounts, cfg.Total(), cfg.Accounts*cfg.InFlight, cfg.Interval, cfg.Duration)
	return loop(ctx, w, sys, cfg.Total(), cfg)
}

// Resume restores the bank from snapshot id of store (the latest when id
// is 0) and runs it as Run does. The total is taken from the snapshot.
func Resume(ctx context.Context, w io.Writer, store persistence.Store, id snapshot.SnapshotID, cfg RunConfig) error {
	start := time.Now()
	if id == 0 {
		// Name the snapshot restored: the latest now.
		g, err := store.Latest(ctx)
		if err != nil {
			return fmt.Errorf("bankdemo: the latest snapshot: %w", err)
		}
		id = g.ID
	}
	sys, err := actors.Restore(ctx, store, id, append([]actors.Option{Kind(0), Messages}, cfg.Options...)...)
	if err != nil {
		return err
	}
	defer sys.Shutdown(context.Background())
	// The restored system's first snapshot holds what the restored one
	// held, and is the newest in the store now.
	first, err := store.Latest(ctx)
	if err != nil {
		return err
	}
	total, err := Money(first)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "restored %d accounts, $%d in all, from snapshot %d in %v; first snapshot %d\n",
		len(first.Participants), total, id, time.Since(start).Round(time.Millisecond), first.ID)
	return loop(ctx, w, sys, total, cfg)
}

// loop takes and checks snapshots every Interval for Duration.
func loop(ctx context.Context, w io.Writer, sys *actors.System, total int64, cfg RunConfig) error {
	fmt.Fprintf(w, "%8s %8s %10s %12s  %s\n", "snapshot", "actors", "in-flight", "duration", "consistent")
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	var taken, bad, failed int
	maxFailed := cfg.MaxFailures
	if maxFailed <= 0 {
		maxFailed = DefaultMaxFailures
	}
	errw := cfg.Errors
	if errw == nil {
		errw = w
	}
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(w, "%d snapshots, %d inconsistent\n", taken, bad)
			if bad > 0 {
				return fmt.Errorf("bankdemo: %d inconsistent snapshots", bad)
			}
			return nil
		case <-tick.C:
		}
		g, err := sys.Snapshot(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			failed++
			fmt.Fprintf(errw, "snapshot failed: %v\n", err)
			if failed >= maxFailed {
				return fmt.Errorf("bankdemo: %d snapshots in a row failed, the last: %w", failed, err)
			}
			continue
		}
		failed = 0
		taken++
		verdict := "yes"
		if err := Check(g, total); err != nil {
			verdict = "NO: " + err.Error()
			bad++
		}
		fmt.Fprintf(w, "%8d %8d %10d %12v  %s\n", g.ID, len(g.Participants), g.TotalInFlight(), g.End.Sub(g.Start).Round(time.Microsecond), verdict)
	}
}
