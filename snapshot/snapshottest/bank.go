package snapshottest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

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
	// Left is the money of processes that stopped and were replaced under
	// their names (Network.Respawn): it left the bank with them.
	Left int64
	out  [][]int
}

// Respawned gives a process respawned under a dropped one's name an empty
// account; the old one's balance left the bank with it.
func (b *Bank) Respawned(_ *Network, p int) {
	b.Left += b.Balances[p]
	b.Balances[p] = 0
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
		if len(b.out[from]) == 0 || b.Balances[from] == 0 || n.Stopped(from) {
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
	t, ok := untraced(payload).(Transfer)
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
	// Stops is how many processes stop, at random ticks while the traffic
	// runs (Network.Stop); at least one process is left. A snapshot may
	// then abort only because a transfer on its way to a stopped process
	// at the cut was lost with it; the others must complete, and their
	// money adds up to the total less what left with the processes that
	// stopped before their cut.
	Stops int
	// StopSeed draws the stops, apart from the rest of the run, so that a
	// run without stops is the same with any StopSeed.
	StopSeed uint64
	// Respawn gives about half the stopped processes' names to new
	// processes (Network.Respawn) at a random tick after their drop.
	Respawn bool
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
	stops := br.stops()
	checked := 0
	check := func() error { // each snapshot as it completes: a respawn forgets the old traces
		for ; checked < len(n.completed); checked++ {
			g := n.completed[checked]
			if err := CheckAll(g, n.trace, res.Total-res.LeftBefore(g)); err != nil {
				return err
			}
		}
		return nil
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
		for i := range stops {
			s := &stops[i]
			switch {
			case s.at == t:
				n.Stop(s.process)
			case s.respawn && s.at < t && !s.respawned && n.rng.IntN(4) == 0:
				if err := check(); err != nil { // before the old name's traces go
					return res, err
				}
				s.respawned = n.Respawn(s.process)
			}
		}
		n.Tick(true)
		if err := check(); err != nil {
			return res, err
		}
	}
	limit := 100*br.MaxDelay*br.Graph.Len() + 10*br.SweepAfter + 1000
	if err := n.Drain(limit); err != nil {
		return res, err
	}
	if err := check(); err != nil {
		return res, err
	}
	for _, err := range n.aborted {
		if !n.lostWithStop(err) && !errors.Is(err, ErrRecordFailed) {
			return res, err
		}
	}
	if got := len(n.completed) + len(n.aborted); got != br.Snapshots {
		return res, fmt.Errorf("snapshottest: %d of %d snapshots completed or aborted", got, br.Snapshots)
	}
	for i, at := range n.droppedAt {
		if err := notNamedAfter(n.completed, n.name(i), at); err != nil {
			return res, err
		}
	}
	for _, w := range n.unnamed {
		if err := notNamedAfter(n.completed[:w.done], w.name, w.from); err != nil {
			return res, err
		}
	}
	lost := int64(0)
	for _, l := range n.lost {
		lost += l.Payload.(Transfer).Amount
	}
	if got := bank.Total() + lost + bank.Left; got != res.Total {
		return res, fmt.Errorf("snapshottest: bank lost money: %d held, %d lost with stopped processes, %d left with replaced ones, want %d", bank.Total(), lost, bank.Left, res.Total)
	}
	return res, nil
}

// notNamedAfter checks that no snapshot of gs numbered after at holds
// process id or a channel of it: its peers dropped it.
func notNamedAfter(gs []*snapshot.Global, id snapshot.ProcessID, at snapshot.SnapshotID) error {
	for _, g := range gs {
		if g.ID <= at {
			continue
		}
		if _, ok := g.Participant(id); ok {
			return fmt.Errorf("snapshottest: snapshot %d holds %s, dropped before it started", g.ID, id)
		}
		for _, c := range g.Channels {
			if c.Channel.From == id || c.Channel.To == id {
				return fmt.Errorf("snapshottest: snapshot %d holds channel %s of %s, dropped before it started", g.ID, c.Channel, id)
			}
		}
	}
	return nil
}

// stop is a process stopping at a tick, and maybe given to a new one
// once dropped.
type stop struct {
	at, process        int
	respawn, respawned bool
}

// stops draws br.Stops distinct processes to stop, and when.
func (br BankRun) stops() []stop {
	r := rand.New(rand.NewPCG(br.StopSeed, br.Seed))
	k := min(br.Stops, br.Graph.Len()-1)
	var out []stop
	for _, p := range r.Perm(br.Graph.Len())[:max(k, 0)] {
		out = append(out, stop{at: r.IntN(br.Ticks + 1), process: p, respawn: br.Respawn && r.IntN(2) == 0})
	}
	return out
}

// lostWithStop reports whether err aborted a snapshot because a message on
// its way at the cut to a process that stopped was lost with it.
func (n *Network) lostWithStop(err error) bool {
	var receiver snapshot.ProcessID
	var be *snapshot.BalanceError
	var rbe *snapshot.ReceiverBalanceError
	var le *snapshot.LostError
	switch {
	case errors.As(err, &le):
		receiver = le.Receiver
	case errors.As(err, &be) && be.Received+be.Recorded < be.Sent:
		receiver = be.Channel.To
	case errors.As(err, &rbe) && rbe.Lost():
		receiver = rbe.Receiver
	default:
		return false
	}
	to, ok := n.index[receiver]
	return ok && (n.stopped[to] || n.incarnation[to] > 0)
}

// LeftBefore is the money that left the bank before the cut of g: the
// balances of the processes that stopped before they recorded it (they
// stand in g without a state, or not at all), and the transfers lost with
// such a process that were sent before their sender's cut (a transfer
// lost with a process that recorded g, sent before the cut, aborts g).
func (res *BankResult) LeftBefore(g *snapshot.Global) int64 {
	n, tr := res.Network, res.Network.trace
	left := res.Bank.Left // replaced processes: dropped before g started
	for i, name := range n.cfg.Graph.Names {
		if n.stopped[i] && !tr.HasRecorded(g.ID, name) {
			left += res.Bank.Balances[i]
		}
	}
	for _, l := range slices.Concat(n.lost, n.losing()) {
		old := l.Incarnation < n.incarnation[n.index[l.Channel.To]]
		switch {
		case old && l.Seq > 0, l.Sender < n.incarnation[n.index[l.Channel.From]]:
			// Sent before the old receiver was dropped, or by a sender
			// replaced since: before g started.
			left += l.Payload.(Transfer).Amount
			continue
		case !old && tr.HasRecorded(g.ID, l.Channel.To):
			continue // lost with a receiver that recorded g: g aborts if it counts it
		}
		before := tr.SentBeforeRecord(g.ID, l.Channel, l.Seq)
		if l.Seq == 0 { // sent once the receiver was dropped
			before = !tr.RecordedBefore(g.ID, l.Channel.From, l.At)
		}
		if before {
			left += l.Payload.(Transfer).Amount
		}
	}
	return left
}
