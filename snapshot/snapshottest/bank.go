package snapshottest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Transfer is the message of the bank application: money moving along a
// channel.
type Transfer struct{ Amount int64 }

func (t Transfer) String() string { return fmt.Sprintf("$%d", t.Amount) }

// Bank is the token application: every process holds a balance and sends
// part of it to its neighbours. The total is conserved, which makes any
// inconsistency in a snapshot visible.
type Bank struct {
	// Balances per process.
	Balances []int64
	// Rate is the number of transfers started per tick.
	Rate int
	out  [][]int
}

// NewBank returns a bank over g with initial balance per process.
func NewBank(g Graph, initial int64, rate int) *Bank {
	b := &Bank{Balances: make([]int64, g.Len()), Rate: rate, out: make([][]int, g.Len())}
	for i := range b.Balances {
		b.Balances[i] = initial
	}
	for _, e := range g.Edges {
		b.out[e.From] = append(b.out[e.From], e.To)
	}
	return b
}

// Total returns the money in the bank's balances (not counting transfers in
// flight).
func (b *Bank) Total() int64 {
	var t int64
	for _, v := range b.Balances {
		t += v
	}
	return t
}

// Tick starts Rate transfers, each from a random process with money and
// a channel to a random neighbour.
func (b *Bank) Tick(n *Network) {
	r := n.Rand()
	for range b.Rate {
		from := r.IntN(len(b.Balances))
		if len(b.out[from]) == 0 || b.Balances[from] == 0 {
			continue
		}
		b.transfer(n, r, from)
	}
}

func (b *Bank) transfer(n *Network, r *rand.Rand, from int) {
	amount := 1 + r.Int64N(b.Balances[from])
	b.Balances[from] -= amount
	n.Send(from, b.out[from][r.IntN(len(b.out[from]))], Transfer{Amount: amount})
}

// Send makes from send amount to to, as a script does by hand.
func (b *Bank) Send(n *Network, from, to int, amount int64) {
	b.Balances[from] -= amount
	n.Send(from, to, Transfer{Amount: amount})
}

// Receive credits a transfer.
func (b *Bank) Receive(_ *Network, to, _ int, payload any) {
	b.Balances[to] += payload.(Transfer).Amount
}

// State encodes p's balance as a varint.
func (b *Bank) State(p int) []byte { return binary.AppendVarint(nil, b.Balances[p]) }

// BalanceOf decodes a state encoded by State.
func BalanceOf(state []byte) (int64, error) {
	v, n := binary.Varint(state)
	if n <= 0 || n != len(state) {
		return 0, errors.New("snapshottest: bad balance encoding")
	}
	return v, nil
}

// AmountOf returns the amount of a Transfer payload.
func AmountOf(payload any) (int64, error) {
	t, ok := payload.(Transfer)
	if !ok {
		return 0, fmt.Errorf("snapshottest: payload %T is not a Transfer", payload)
	}
	return t.Amount, nil
}

// CheckAll runs every invariant on g: the counter proof (Verify), the
// consistency of the cut, the exact channel states, and conservation of
// total.
func CheckAll(g *snapshot.Global, tr *Trace, total int64) error {
	if err := g.Verify(); err != nil {
		return err
	}
	if err := tr.CheckCut(g); err != nil {
		return err
	}
	if err := tr.CheckChannels(g); err != nil {
		return err
	}
	return CheckConservation(g, total, BalanceOf, AmountOf)
}

// BankRun describes a randomized bank run: a network, traffic, and
// snapshots started at random ticks by random processes or by broadcast.
type BankRun struct {
	Config
	// Initial balance of every process.
	Initial int64
	// Rate of transfers per tick.
	Rate int
	// Ticks of traffic.
	Ticks int
	// Snapshots to start, at random ticks in the first half of the run.
	Snapshots int
	// Broadcast is the chance (0 to 1) that a snapshot is broadcast rather
	// than initiated by a random process.
	Broadcast float64
}

// BankResult is what a BankRun left.
type BankResult struct {
	Network *Network
	Bank    *Bank
	Total   int64
}

// Run runs br to quiescence and checks every invariant on every completed
// snapshot. It returns an error if a snapshot fails a check, a snapshot is
// aborted or pending at the end, or the protocol failed.
func (br BankRun) Run() (*BankResult, error) {
	bank := NewBank(br.Graph, br.Initial, br.Rate)
	n, err := NewNetwork(br.Config, bank)
	if err != nil {
		return nil, err
	}
	res := &BankResult{Network: n, Bank: bank, Total: bank.Total()}
	at := make([]int, br.Snapshots)
	for i := range at {
		at[i] = n.rng.IntN(br.Ticks/2 + 1)
	}
	for t := 0; t <= br.Ticks && n.err == nil; t++ {
		for _, s := range at {
			if s == t {
				who := -1
				if n.rng.Float64() >= br.Broadcast {
					who = n.rng.IntN(br.Graph.Len())
				}
				n.StartSnapshot(who)
			}
		}
		n.Tick(true)
	}
	limit := 100*br.MaxDelay*br.Graph.Len() + 10*br.SweepAfter + 1000
	if err := n.Drain(limit); err != nil {
		return res, err
	}
	if len(n.aborted) > 0 {
		return res, n.aborted[0]
	}
	if got := len(n.completed); got != br.Snapshots {
		return res, fmt.Errorf("snapshottest: %d of %d snapshots completed", got, br.Snapshots)
	}
	for _, g := range n.completed {
		if err := CheckAll(g, n.trace, res.Total); err != nil {
			return res, err
		}
	}
	if got := bank.Total(); got != res.Total {
		return res, fmt.Errorf("snapshottest: bank lost money: %d, want %d", got, res.Total)
	}
	return res, nil
}
