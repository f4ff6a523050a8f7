package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

// transfer moves money between accounts. From and Seq number it on its
// channel, as its sender counts: the n-th transfer an account sends to a
// peer has Seq n. So a snapshot's states say which transfers are in
// flight on each channel, and in what order (checkChannelsFromStates),
// and a receiver sees a channel's order broken (orderCheck).
type transfer struct {
	Amount int64
	From   string
	Seq    uint64
}

// peers tells an account whom it may pay; it comes from outside the
// snapshot and is not part of the state.
type peers struct{ pids []*actor.PID }

// kick makes an account start n chains of transfers.
type kick struct{ n int }

// addPeer makes an account pay pid too.
type addPeer struct{ pid *actor.PID }

// account forwards a random part of every payment it gets to a random
// peer, so that the number of transfers in flight stays constant.
type account struct {
	Balance int64
	// Sent and Got count, per peer's name, the transfers sent to it and
	// received from it: the ends of each channel.
	Sent, Got peerCounts
	peers     []*actor.PID `msgpack:"-"` // wiring, given at the start
	rng       *rand.Rand   `msgpack:"-"`
	paused    *atomic.Bool `msgpack:"-"`
	order     *orderCheck  `msgpack:"-"` // nil: not checked
}

// peerCounts are counts by peer's name, sorted by it: a state encodes
// the same way every time.
type peerCounts []peerCount

type peerCount struct {
	Peer string
	N    uint64
}

// find returns where peer's count is, or would go, and whether it is.
func (c peerCounts) find(peer string) (int, bool) {
	return slices.BinarySearchFunc(c, peer, func(x peerCount, p string) int { return strings.Compare(x.Peer, p) })
}

// at returns the index of peer's count, made 0 if it has none.
func (c *peerCounts) at(peer string) int {
	i, ok := c.find(peer)
	if !ok {
		*c = slices.Insert(*c, i, peerCount{Peer: peer})
	}
	return i
}

// get returns peer's count.
func (c peerCounts) get(peer string) uint64 {
	if i, ok := c.find(peer); ok {
		return c[i].N
	}
	return 0
}

// orderCheck keeps the first transfer an account received out of its
// channel's order.
type orderCheck struct{ first atomic.Pointer[error] }

func (o *orderCheck) broke(err error) { o.first.CompareAndSwap(nil, &err) }

// err returns the first order broken; nil when none was.
func (o *orderCheck) err() error {
	if e := o.first.Load(); e != nil {
		return *e
	}
	return nil
}

func (a *account) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *peers:
		a.peers = m.pids
	case *kick:
		for range m.n {
			a.pay(ctx)
		}
	case *addPeer:
		a.peers = append(a.peers, m.pid)
	case *transfer:
		a.Balance += m.Amount
		got := &a.Got[a.Got.at(m.From)]
		if want := got.N + 1; m.Seq != want && a.order != nil {
			a.order.broke(fmt.Errorf("%s received transfer %d from %s, want %d", ctx.Self().Id, m.Seq, m.From, want))
		}
		got.N = m.Seq
		if !a.paused.Load() {
			a.pay(ctx)
		}
	}
}

func (a *account) pay(ctx actor.Context) {
	if len(a.peers) == 0 {
		return
	}
	amount := int64(0)
	if a.Balance > 0 {
		amount = a.rng.Int64N(a.Balance + 1)
	}
	a.Balance -= amount
	to := a.peers[a.rng.IntN(len(a.peers))]
	sent := &a.Sent[a.Sent.at(to.Id)]
	sent.N++
	ctx.Send(to, &transfer{Amount: amount, From: ctx.Self().Id, Seq: sent.N})
}

// bank is a running bank of participants.
type bank struct {
	sys    *System
	pids   []*actor.PID
	total  int64
	trace  *snapshottest.Trace
	paused atomic.Bool
	order  orderCheck
}

// testTimeout is the snapshot timeout of the bank tests: a bound for a
// failure, not a latency target (those are benchmarks), generous because
// the race detector and parallel packages slow everything down many times.
const testTimeout = 2 * time.Minute

// newBank spawns n accounts with initial money each on a random graph with
// cycles (a ring plus random chords), and kicks traffic off.
func newBank(t testing.TB, n int, initial int64, seed uint64, opts ...Option) *bank {
	t.Helper()
	return newBankWith(t, n, 2, initial, seed, opts...)
}

// newBankWith is newBank with chords random peers an account besides the
// next on the ring.
func newBankWith(t testing.TB, n, chords int, initial int64, seed uint64, opts ...Option) *bank {
	t.Helper()
	sys, err := NewSystem(append([]Option{testMessages, WithTimeout(testTimeout)}, opts...)...)
	require.NoError(t, err)
	b := &bank{sys: sys, total: int64(n) * initial, trace: snapshottest.NewTrace()}
	sys.trace = b.trace
	r := rand.New(rand.NewPCG(seed, 7))
	require.NoError(t, sys.RegisterKind("account", func() actor.Actor {
		return &account{Balance: initial, rng: rand.New(rand.NewPCG(r.Uint64(), 1)), paused: &b.paused, order: &b.order}
	}))
	for i := range n {
		pid, err := sys.Spawn("account", fmt.Sprintf("acct-%04d", i))
		require.NoError(t, err)
		b.pids = append(b.pids, pid)
	}
	for i, pid := range b.pids {
		ps := []*actor.PID{b.pids[(i+1)%n]}
		for range chords {
			ps = append(ps, b.pids[r.IntN(n)])
		}
		sys.Root().Send(pid, &peers{pids: ps})
	}
	for _, pid := range b.pids {
		sys.Root().Send(pid, &kick{n: 2})
	}
	return b
}

// check runs every invariant on a snapshot of the bank.
func (b *bank) check(t testing.TB, g *snapshot.Global) {
	t.Helper()
	require.NoError(t, g.Verify())
	require.NoError(t, b.trace.CheckCut(g))
	require.NoError(t, b.trace.CheckChannels(g))
	require.NoError(t, snapshottest.CheckConservation(g, b.total, balanceOf, amountOf))
	require.NoError(t, checkChannelsFromStates(g))
	require.NoError(t, b.order.err())
}

// checkChannelsFromStates checks a bank's snapshot against its accounts'
// own counts, in every mode and counting: on each channel between two
// accounts that recorded, the transfers in flight are exactly those the
// sender had sent before its record and the receiver had not received
// before its own, in the order sent. A channel left out, a transfer left
// off, one too many, or two out of order, fail it; so does a transfer
// received that its sender had not sent (an orphan). Of a departed
// sender's channel, the transfers in flight must follow what its
// receiver got.
func checkChannelsFromStates(g *snapshot.Global) error {
	accounts := map[snapshot.ProcessID]*account{}
	for _, p := range g.Participants {
		if p.Departed || (p.Kind != "account" && p.Kind != "opened") {
			continue
		}
		a := &account{}
		if err := msgpack.Unmarshal(p.State, a); err != nil {
			return fmt.Errorf("snapshot %d: state of %s: %w", g.ID, p.ID, err)
		}
		accounts[p.ID] = a
	}
	listed := map[snapshot.Channel]bool{}
	for _, c := range g.Channels {
		from, to := accounts[c.Channel.From], accounts[c.Channel.To]
		if to == nil || len(c.Messages) == 0 {
			continue
		}
		listed[c.Channel] = true
		next := to.Got.get(string(c.Channel.From)) + 1
		for i, m := range c.Messages {
			v, err := DecodeMessage(m.Payload.(RecordedMessage), testMessages)
			if err != nil {
				return fmt.Errorf("snapshot %d: channel %s: %w", g.ID, c.Channel, err)
			}
			tr := v.(*transfer)
			if tr.From != string(c.Channel.From) || tr.Seq != next+uint64(i) {
				return fmt.Errorf("snapshot %d: channel %s: message %d in flight is transfer %d from %s, want %d", g.ID, c.Channel, i, tr.Seq, tr.From, next+uint64(i))
			}
		}
		if from != nil {
			if sent := from.Sent.get(string(c.Channel.To)); next-1+uint64(len(c.Messages)) != sent {
				return fmt.Errorf("snapshot %d: channel %s: %d in flight after %d received, but %d sent", g.ID, c.Channel, len(c.Messages), next-1, sent)
			}
		}
	}
	// Sent but neither received nor in flight: a channel left out.
	for fromID, from := range accounts {
		for _, s := range from.Sent {
			ch := snapshot.Channel{From: fromID, To: snapshot.ProcessID(s.Peer)}
			if to := accounts[ch.To]; to != nil && to.Got.get(string(fromID)) < s.N && !listed[ch] {
				return fmt.Errorf("snapshot %d: channel %s: %d sent, %d received, and none in flight", g.ID, ch, s.N, to.Got.get(string(fromID)))
			}
		}
	}
	// Received but not sent before the cut: an orphan.
	for toID, to := range accounts {
		for _, r := range to.Got {
			if from := accounts[snapshot.ProcessID(r.Peer)]; from != nil && r.N > from.Sent.get(string(toID)) {
				return fmt.Errorf("snapshot %d: channel %s->%s: %d received before the cut, only %d sent", g.ID, r.Peer, toID, r.N, from.Sent.get(string(toID)))
			}
		}
	}
	return nil
}

func balanceOf(state []byte) (int64, error) {
	var a account
	err := msgpack.Unmarshal(state, &a)
	return a.Balance, err
}

func amountOf(payload any) (int64, error) {
	v, err := DecodeMessage(payload.(RecordedMessage), testMessages)
	if err != nil {
		return 0, err
	}
	return v.(*transfer).Amount, nil
}

func shutdown(t testing.TB, sys *System) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, sys.Shutdown(ctx))
	// Every snapshot has ended and every participant stopped: nothing is
	// held for a snapshot any more (WithMaxRecorded's count).
	assert.Zero(t, sys.recorded.Load(), "messages still counted for snapshots after shutdown")
}

// modes are the snapshot algorithms the tests run on the same workloads:
// each mode, and the epoch mode with lazy starts too.
var modes = []struct {
	name string
	opt  Option
}{
	{"unaligned", WithMode(snapshot.Unaligned)},
	{"aligned", WithMode(snapshot.Aligned)},
	// Counting per channel, as in a cluster.
	{"epoch", func(c *config) {
		WithMode(snapshot.Epochs)(c)
		WithCounting(PerChannel)(c)
	}},
	// Lazy starts, and records of every counter when more than a quarter
	// changed (snapshot.Config.DeltaMin): the default lists only what
	// changed.
	{"epoch-lazy", func(c *config) {
		WithMode(snapshot.Epochs)(c)
		WithCounting(PerChannel)(c)
		WithInitiation(Lazy)(c)
		withDeltaMin(2)(c)
	}},
	// Counting in sums, the default within one member: two totals per
	// participant, no count per channel.
	{"epoch-sums", func(c *config) {
		WithMode(snapshot.Epochs)(c)
		WithCounting(InSums)(c)
	}},
}

// isLazy reports whether a mode of modes starts snapshots lazily: an
// idle participant records only at the sweep, after DefaultLazyStart.
func isLazy(mode Option) bool {
	var c config
	mode(&c)
	return c.initiation == Lazy
}

// forModes runs test once per mode, as a subtest named for the mode.
func forModes(t *testing.T, test func(t *testing.T, mode Option)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { test(t, m.opt) })
	}
}

// Accounts that pay 150 others each (some 300 channels an account) in
// the epoch mode, with records of every counter when more than a quarter
// of an account's channels changed (snapshot.Config.DeltaMin 64): an
// account few of whose channels changed since its last record lists only
// those, one with many lists them all, both follow its last record in
// the coordinator's ledger, and every snapshot still checks out (its cut,
// its channels, the money). The traffic stops for the last ten
// snapshots, so that however slow the machine, some accounts change
// few channels between two records.
func TestRecordsOfChangesAtTheDeltaMinRule(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	b := newBankWith(t, 200, 150, 1000, 3, WithMode(snapshot.Epochs), WithCounting(PerChannel), withDeltaMin(64),
		WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	defer shutdown(t, b.sys)
	for i := range 40 {
		if i == 30 {
			b.paused.Store(true) // a transfer received is not paid on
		}
		g, err := b.sys.Snapshot(context.Background())
		require.NoError(t, err)
		b.check(t, g)
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	lists := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "actorsnap.records" {
				for _, dp := range s.DataPoints {
					v, _ := dp.Attributes.Value("lists")
					lists[v.AsString()] += dp.Value
				}
			}
		}
	}
	t.Logf("records: %v", lists)
	assert.Equal(t, int64(40*200), lists["all"]+lists["changes"], "a record per account per snapshot")
	assert.Positive(t, lists["changes"], "records of what changed")
	assert.Positive(t, lists["all"], "records of every counter")
}

func TestBankSnapshotsUnderLoad(t *testing.T) {
	forModes(t, func(t *testing.T, mode Option) {
		b := newBank(t, 100, 1000, 1, mode)
		defer shutdown(t, b.sys)
		ctx := context.Background()
		for range 10 {
			g, err := b.sys.Snapshot(ctx)
			require.NoError(t, err)
			require.Len(t, g.Participants, 100)
			b.check(t, g)
			t.Logf("snapshot %d: %d in flight, %v", g.ID, g.TotalInFlight(), g.End.Sub(g.Start))
		}
	})
}

// TestThousandActorsFiftySnapshots is the acceptance run: 1,000 accounts
// under full load (every account always has transfers to handle), 50
// snapshots back to back, every one checked against every invariant.
//
// In the aligned mode it also checks that, once a snapshot has shown the
// guardian the channel graph, only back edges hold channel state.
func TestThousandActorsFiftySnapshots(t *testing.T) {
	forModes(t, func(t *testing.T, mode Option) {
		b := newBank(t, 1000, 1000, 11, mode)
		defer shutdown(t, b.sys)
		var inFlight int
		seen := make(map[snapshot.Channel]bool) // the guardian's graph
		checked := 0
		for range 50 {
			g, err := b.sys.Snapshot(context.Background())
			require.NoError(t, err)
			require.Len(t, g.Participants, 1000)
			b.check(t, g)
			inFlight += g.TotalInFlight()
			if g.Mode == snapshot.Aligned {
				checkAlignedChannels(t, seen, &checked, g)
			}
		}
		if len(seen) > 0 {
			require.Greater(t, checked, 25, "most aligned snapshots hold channel state on back edges only")
		}
		require.Positive(t, inFlight, "the snapshots caught transfers in flight")
		t.Logf("50 snapshots, %d transfers in flight on average", inFlight/50)
	})
}

// checkAlignedChannels checks that g, taken in the aligned mode one at a
// time, holds messages only on channels the guardian did not wait for:
// back edges of the graph seen in earlier snapshots, and channels not in
// it. Then it adds g's channels to seen. A snapshot during which a channel
// was first used is not checked: the channel's first message makes its
// receiver record at once if its sender had recorded (snapshot.Process),
// which logs the channels the receiver still waited on.
func checkAlignedChannels(t testing.TB, seen map[snapshot.Channel]bool, checked *int, g *snapshot.Global) {
	t.Helper()
	defer func() {
		for _, c := range g.Channels {
			seen[c.Channel] = true
		}
	}()
	for _, c := range g.Channels {
		if !seen[c.Channel] {
			return
		}
	}
	var chans []snapshot.Channel
	for c := range seen {
		chans = append(chans, c)
	}
	back := make(map[snapshot.Channel]bool)
	for _, c := range snapshot.ShallowBackEdges(chans, nil) {
		back[c] = true
	}
	for _, c := range g.Channels {
		if len(c.Messages) > 0 && seen[c.Channel] && !back[c.Channel] {
			t.Fatalf("snapshot %d: %s was awaited but holds %d messages", g.ID, c.Channel, len(c.Messages))
		}
	}
	*checked++
}

func snapshotConservation(g *snapshot.Global, total int64) error {
	return snapshottest.CheckConservation(g, total, balanceOf, amountOf)
}

// Accounts opened from outside any actor while snapshots run back to back,
// and paid at once by accounts that may not have recorded the snapshot in
// progress: each new account joins the snapshots in progress with its
// state at birth (nothing), and every snapshot passes every invariant.
func TestAccountsOpenedWhileSnapshotting(t *testing.T) {
	forModes(t, func(t *testing.T, mode Option) {
		b := newBank(t, 100, 1000, 5, mode)
		defer shutdown(t, b.sys)
		r := rand.New(rand.NewPCG(5, 9))
		require.NoError(t, b.sys.RegisterKind("opened", func() actor.Actor {
			return &account{rng: rand.New(rand.NewPCG(r.Uint64(), 2)), paused: &b.paused, order: &b.order}
		}))
		type shot struct {
			g   *snapshot.Global
			err error
		}
		shots := make(chan shot)
		stop := make(chan struct{})
		go func() { // back to back, until stopped
			defer close(shots)
			for {
				g, err := b.sys.Snapshot(context.Background())
				select {
				case shots <- shot{g, err}:
				case <-stop:
					return
				}
				if err != nil {
					return
				}
			}
		}()
		const opened = 60
		pick := rand.New(rand.NewPCG(5, 11))
		joined := 0
		for i := range opened {
			// Opened while the next snapshot runs, and paid at once.
			pid, err := b.sys.Spawn("opened", fmt.Sprintf("new-%03d", i))
			require.NoError(t, err)
			b.sys.Root().Send(pid, &peers{pids: []*actor.PID{b.pids[pick.IntN(len(b.pids))], b.pids[pick.IntN(len(b.pids))]}})
			b.sys.Root().Send(b.pids[pick.IntN(len(b.pids))], &addPeer{pid: pid})
			s := <-shots
			require.NoError(t, s.err)
			b.check(t, s.g)
			for _, p := range s.g.Participants {
				if strings.HasPrefix(string(p.ID), "new-") {
					joined++
				}
			}
		}
		close(stop)
		for range shots {
		}
		g, err := b.sys.Snapshot(context.Background())
		require.NoError(t, err)
		b.check(t, g)
		require.Len(t, g.Participants, 100+opened)
		t.Logf("%d snapshots while %d accounts opened; %d new-account records in them", opened, opened, joined)
	})
}
