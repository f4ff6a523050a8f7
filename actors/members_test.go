package actors_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/cluster/placement"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// The members of a cluster as Systems in one process, joined by an
// in-memory Transport: what the guardians tell each other, and the
// channels between members, run as they do over the network, without
// Proto.Actor remote (whose own data races several members in one
// process would trip under -race). The real network, real processes and
// real faults are package cluster's tests; these reorder what members
// send, at seeded moments, and check every snapshot.

// memNet is an in-memory network of members: one FIFO queue per ordered
// member pair, delivered by its own goroutine, which a test may hold.
type memNet struct {
	mu      sync.Mutex
	members []*memMember // sorted by address
	placed  []string     // the members names are placed on, if pinned
}

// memMember is one member's Transport.
type memMember struct {
	net     *memNet
	addr    string
	deliver func(from string, b []byte)
	mu      sync.Mutex
	links   map[string]*memLink // to each peer
	gone    bool
}

// memLink is the queue from one member to another.
type memLink struct {
	mu     sync.Mutex
	q      [][]byte
	paused bool
	lose   int // channel messages to lose, as a broken link would
	wake   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup
}

func (n *memNet) add(addr string) *memMember {
	m := n.newMember(addr)
	n.insert(m)
	return m
}

// newMember returns a member at addr, not yet among n's members.
func (n *memNet) newMember(addr string) *memMember {
	return &memMember{net: n, addr: addr, links: make(map[string]*memLink)}
}

// insert makes m one of n's members.
func (n *memNet) insert(m *memMember) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.members = append(n.members, m)
	slices.SortFunc(n.members, func(a, b *memMember) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
}

// remove takes m out of n's members, as a member that dies: its queues
// stop, and what they held is lost.
func (n *memNet) remove(m *memMember) {
	m.Detach()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.members = slices.DeleteFunc(n.members, func(o *memMember) bool { return o == m })
}

func (n *memNet) member(addr string) *memMember {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.members {
		if m.addr == addr {
			return m
		}
	}
	return nil
}

// Attach gives the actor system the member's address, as Proto.Actor
// remote does when it starts: PIDs of this member's actors carry it.
func (m *memMember) Attach(a actors.Attachment) error {
	a.Actors.ProcessRegistry.Address = m.addr
	m.mu.Lock()
	m.deliver = a.Deliver
	m.mu.Unlock()
	// What the others queued for it before it attached goes now.
	m.net.mu.Lock()
	others := slices.Clone(m.net.members)
	m.net.mu.Unlock()
	for _, o := range others {
		o.mu.Lock()
		l := o.links[m.addr]
		o.mu.Unlock()
		if l != nil {
			l.poke()
		}
	}
	return nil
}

// attached returns the function that delivers to m, nil until its
// system attached.
func (m *memMember) attached() func(from string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deliver
}

func (m *memMember) Self() string { return m.addr }

func (m *memMember) Members() []string {
	m.net.mu.Lock()
	defer m.net.mu.Unlock()
	var out []string
	for _, p := range m.net.members {
		out = append(out, p.addr)
	}
	return out
}

func (m *memMember) Coordinator() string { return m.Members()[0] }

// Owner places name as package cluster does.
func (m *memMember) Owner(name string) string {
	m.net.mu.Lock()
	placed := m.net.placed
	m.net.mu.Unlock()
	if placed != nil {
		return placement.Owner(name, placed)
	}
	return placement.Owner(name, m.Members())
}

// pin keeps names placed on the members there are now, as package
// cluster does until a restore: a member that joins hosts nothing.
func (n *memNet) pin() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.members {
		n.placed = append(n.placed, m.addr)
	}
}

func (m *memMember) Send(to string, b []byte) error {
	l, err := m.link(to)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.q = append(l.q, b)
	l.mu.Unlock()
	l.poke()
	return nil
}

// link returns the queue to member to, started at first use.
func (m *memMember) link(to string) (*memLink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return nil, errors.New("memnet: detached")
	}
	if l := m.links[to]; l != nil {
		return l, nil
	}
	peer := m.net.member(to)
	if peer == nil {
		return nil, fmt.Errorf("memnet: no member %s", to)
	}
	l := &memLink{wake: make(chan struct{}, 1), done: make(chan struct{})}
	m.links[to] = l
	l.wg.Add(1)
	go l.run(m.addr, peer)
	return l, nil
}

func (l *memLink) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run delivers the queue in order, while it is not paused.
func (l *memLink) run(from string, to *memMember) {
	defer l.wg.Done()
	for {
		select {
		case <-l.done:
			return
		case <-l.wake:
		}
		for {
			deliver := to.attached()
			l.mu.Lock()
			if l.paused || len(l.q) == 0 || deliver == nil {
				l.mu.Unlock()
				break
			}
			b := l.q[0]
			l.q = l.q[1:]
			lost := l.lose > 0 && len(b) > 0 && b[0] == 1 // a participant's message (the first byte of its frame)
			if lost {
				l.lose--
			}
			l.mu.Unlock()
			if !lost {
				deliver(from, b)
			}
		}
	}
}

// pause holds (or, with false, releases) the queue to member to.
func (m *memMember) pause(to string, on bool) {
	l, err := m.link(to)
	if err != nil {
		return
	}
	l.mu.Lock()
	l.paused = on
	l.mu.Unlock()
	l.poke()
}

// Detach stops the member's queues. What it still had queued is lost, as
// with a member that leaves.
func (m *memMember) Detach() {
	m.mu.Lock()
	m.gone = true
	links := m.links
	m.links = nil
	m.mu.Unlock()
	for _, l := range links {
		close(l.done)
		l.wg.Wait()
	}
}

// memCluster is a bank spread over n in-memory members sharing one store.
type memCluster struct {
	net     *memNet
	members []*memMember
	systems []*actors.System
	total   int64
	store   persistence.Store
	opts    []actors.Option // every member's
}

func startMemCluster(t *testing.T, n, accounts, chords int, opts ...actors.Option) *memCluster {
	t.Helper()
	c := &memCluster{net: &memNet{}, total: int64(accounts) * 1000, store: persistence.NewMemory(), opts: opts}
	for i := range n {
		c.members = append(c.members, c.net.add(fmt.Sprintf("m%d", i)))
	}
	for _, m := range c.members {
		c.systems = append(c.systems, c.newSystem(t, m))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Coordinator last: the others' last words reach it.
		for i := len(c.systems) - 1; i >= 0; i-- {
			require.NoError(t, c.systems[i].Shutdown(ctx))
		}
	})
	for _, sys := range c.systems {
		sys.MembersChanged()
	}
	var banks []*bankdemo.Bank
	for i, sys := range c.systems {
		m := c.members[i]
		b, err := bankdemo.Start(sys, bankdemo.Config{Accounts: accounts, Initial: 1000, Chords: chords, Seed: 7},
			func(name string) bool { return m.Owner(name) == m.addr })
		require.NoError(t, err)
		require.NotEmpty(t, b.PIDs, "no account placed on %s", m.addr)
		banks = append(banks, b)
	}
	eventually(t, "every account reachable from every member", func() bool {
		for _, sys := range c.systems {
			for i := range accounts {
				if !sys.Reachable(bankdemo.Name(i)) {
					return false
				}
			}
		}
		return true
	})
	for i, b := range banks {
		for _, pid := range b.PIDs {
			c.systems[i].Root().Send(pid, &bankdemo.Kick{N: 2})
		}
	}
	return c
}

// newSystem starts the actor system of member m.
func (c *memCluster) newSystem(t *testing.T, m *memMember) *actors.System {
	t.Helper()
	o := append([]actors.Option{bankdemo.Kind(1000), bankdemo.Messages, actors.WithStore(c.store), actors.WithTransport(m),
		actors.WithTimeout(5 * time.Second)}, c.opts...)
	sys, err := actors.NewSystem(o...)
	require.NoError(t, err)
	return sys
}

// join adds a member at addr, which must sort first: it coordinates,
// first in the slices (and so shut down last). It hosts no participants:
// names stay placed on the members there were.
func (c *memCluster) join(t *testing.T, addr string) {
	t.Helper()
	c.net.pin()
	m := c.net.newMember(addr)
	sys := c.newSystem(t, m) // attached before the others can send to it
	c.net.insert(m)
	c.members = append([]*memMember{m}, c.members...)
	c.systems = append([]*actors.System{sys}, c.systems...)
	for _, s := range c.systems {
		s.MembersChanged()
	}
}

// eventually polls cond until it holds, failing the test after 30 s: the
// conditions are other members' state, announced with no signal here.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("not in 30 s: %s", what)
		case <-tick.C:
		}
	}
}

// die ends member i as a process killed would: its queues stop, what
// they held is lost, and its hold on the store goes with it. The others
// hear that it left.
func (c *memCluster) die(t *testing.T, i int) {
	t.Helper()
	m, sys := c.members[i], c.systems[i]
	c.net.remove(m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = sys.Shutdown(ctx) // it aborts the snapshots it coordinated
	c.members = slices.Delete(c.members, i, i+1)
	c.systems = slices.Delete(c.systems, i, i+1)
	for _, s := range c.systems {
		s.MembersChanged()
	}
}

// snapshotWhileChanging is snapshot asked again while the answer is that
// coordination is moving to another member, for at most 30 s.
func (c *memCluster) snapshotWhileChanging(i int) (*snapshot.Global, error) {
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		g, err := c.snapshot(i)
		if err == nil || !strings.Contains(err.Error(), "it is changing") || time.Now().After(deadline) {
			return g, err
		}
		<-tick.C
	}
}

// snapshot takes a snapshot from system i and checks it.
func (c *memCluster) snapshot(i int) (*snapshot.Global, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := c.systems[i].Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if err := bankdemo.Check(g, c.total); err != nil {
		return nil, fmt.Errorf("snapshot %d: %w", g.ID, err)
	}
	return g, nil
}

// outcome is a snapshot taken on another goroutine.
type outcome struct {
	g   *snapshot.Global
	err error
}

// snapshotAsync takes a snapshot from system i on another goroutine.
func (c *memCluster) snapshotAsync(i int) <-chan outcome {
	done := make(chan outcome, 1)
	go func() {
		g, err := c.snapshot(i)
		done <- outcome{g, err}
	}()
	return done
}

// awaitSnapshot waits for a snapshot taken by snapshotAsync, checks it was taken
// in mode, and returns it.
func awaitSnapshot(t *testing.T, done <-chan outcome, mode snapshot.Mode) *snapshot.Global {
	t.Helper()
	select {
	case o := <-done:
		require.NoError(t, o.err)
		require.Equal(t, mode, o.g.Mode)
		return o.g
	case <-time.After(60 * time.Second):
		t.Fatal("a snapshot did not end")
	}
	return nil
}

// A member that joins with the lowest address takes over coordination
// while every participant runs on and sends records of what changed
// since its last (deltas from the first channel on): the coordinator
// before it held their counters, the new one does not. It asks every
// participant for all its counters as it takes over, so that the first
// snapshot it coordinates completes rather than aborting for each of
// them.
func TestTakeOverAsksForAllCounters(t *testing.T) {
	var logs testenv.SyncBuffer
	c := startMemCluster(t, 2, 30, 2, actors.WithMode(snapshot.Epochs), actors.WithDeltaMin(-1),
		actors.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	for range 3 {
		_, err := c.snapshot(1)
		require.NoError(t, err)
	}
	c.join(t, "a0")
	for i := range 3 {
		_, err := c.snapshot(i % 3)
		require.NoError(t, err, "snapshot %d after the takeover: %s", i+1, logs.String())
	}
	require.NotContains(t, logs.String(), "lost track of participants' records")
	require.NotContains(t, logs.String(), "lost a record of a participant")
}

// A coordinator that dies while its start reaches some members and not
// the next coordinator: the participants of the members that heard it
// record it, and send messages that name it, which the next
// coordinator's member holds at its gate. The next coordinator numbers
// its snapshots after every id a member heard of (each member's
// confirmation of the takeover says its last, and passes the gate), not
// only after those it heard itself, and its first start releases what
// its member held: its first snapshot is not numbered as one that
// participants already recorded for the coordinator that died, and it
// completes, as do the ones after it. Every mode and initiation; the
// coordinator that dies hosts no participant.
func TestTakeOverNumbersAfterEveryMembersStarts(t *testing.T) {
	forModesAndInitiations(t, func(t *testing.T, mode snapshot.Mode, init actors.Initiation) {
		var logs testenv.SyncBuffer
		// A flooding start's initiator is on the next coordinator, behind
		// the link held below: only a sweep from a0, which hosts no
		// participant, reaches the other member's participants.
		var behind atomic.Pointer[memMember]
		pick := func(live []snapshot.ProcessID) snapshot.ProcessID {
			if m := behind.Load(); m != nil {
				for _, id := range live {
					if m.Owner(string(id)) == m.addr {
						return id
					}
				}
			}
			return live[0]
		}
		c := startMemCluster(t, 2, 30, 2, actors.WithMode(mode), actors.WithInitiation(init), actors.WithInitiator(pick),
			actors.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		behind.Store(c.members[0])
		awaitSnapshot(t, c.snapshotAsync(1), mode)
		c.join(t, "a0") // coordinates, and hosts no participant
		g := awaitSnapshot(t, c.snapshotAsync(0), mode)

		a0, next := c.members[0], c.members[1]
		a0.pause(next.addr, true)
		other := c.systems[2]
		sent := other.Traffic().StateBytes
		dying := c.snapshotAsync(0)
		eventually(t, "participants of the member that heard the start recorded", func() bool {
			return other.Traffic().StateBytes > sent
		})
		c.die(t, 0)
		for i := range 3 {
			after, err := c.snapshotWhileChanging(i % 2)
			require.NoError(t, err, "snapshot %d after the takeover: %s", i+1, logs.String())
			require.Greater(t, after.ID, g.ID+1, "numbered after the start the members heard")
		}
		<-dying // ends with its coordinator, one way or the other
	})
}

// A member whose confirmation of a takeover comes after the new
// coordinator stopped waiting for it: the ids given meanwhile may be
// ones its participants recorded for the coordinator before, and those
// cannot complete, but the confirmation, when it comes, still moves the
// next ids past the last start the member heard.
func TestLateTakeOverConfirmationMovesTheIds(t *testing.T) {
	for _, mode := range []snapshot.Mode{snapshot.Unaligned, snapshot.Aligned, snapshot.Epochs} {
		t.Run(mode.String(), func(t *testing.T) {
			var logs testenv.SyncBuffer
			c := startMemCluster(t, 2, 30, 2, actors.WithMode(mode), actors.WithInitiation(actors.Broadcast),
				actors.WithTimeout(3*time.Second),
				actors.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			awaitSnapshot(t, c.snapshotAsync(1), mode)
			c.join(t, "a0") // coordinates, and hosts no participant
			g := awaitSnapshot(t, c.snapshotAsync(0), mode)

			// The next coordinator hears nothing of a0's next two starts,
			// nor from the participants of the member that records them,
			// and a0 hears nothing from it: both stay in progress.
			a0, next, other := c.members[0], c.members[1], c.members[2]
			a0.pause(next.addr, true)
			next.pause(a0.addr, true)
			other.pause(next.addr, true)
			var dying []<-chan outcome
			for i := range snapshot.SnapshotID(2) {
				dying = append(dying, c.snapshotAsync(0))
				eventually(t, "the other member heard the start", func() bool {
					return actors.StartedHere(c.systems[2]) >= g.ID+1+i
				})
			}
			c.die(t, 0)

			// The new coordinator's first start waits for the other
			// member's confirmation until the timeout, then goes under an
			// id that member's participants recorded already.
			_, err := c.snapshotWhileChanging(0)
			require.Error(t, err, "a snapshot whose id was recorded for the coordinator before")
			// Released, the link brings the frames that name those
			// starts (the gate counts them too: heardOf) and then the
			// confirmation, which carries the last of them.
			other.pause(next.addr, false)
			eventually(t, "the late confirmation taken", func() bool {
				l := logs.String()
				return strings.Contains(l, "confirmed after the wait") && strings.Contains(l, fmt.Sprintf("after=%d", g.ID+2))
			})
			for i := range 2 {
				after, err := c.snapshot(i % 2)
				require.NoError(t, err, "snapshot %d after the late confirmation: %s", i+1, logs.String())
				require.Greater(t, after.ID, g.ID+2, "numbered after the starts the other member heard")
			}
			for _, d := range dying {
				<-d // ended with their coordinator, one way or the other
			}
		})
	}
}

// A member that joins with the lowest address takes over at once,
// before it knew another coordinator, while the store holds no id: the
// snapshots before were probes (an analysis's cuts, never stored). It
// still asks every member for the last start heard, and numbers after
// the probes' ids, which the participants recorded already.
func TestJoinedCoordinatorNumbersAfterProbes(t *testing.T) {
	for _, mode := range []snapshot.Mode{snapshot.Unaligned, snapshot.Aligned, snapshot.Epochs} {
		t.Run(mode.String(), func(t *testing.T) {
			c := startMemCluster(t, 2, 30, 2, actors.WithMode(mode), actors.WithTimeout(3*time.Second))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for range 2 {
				_, err := c.systems[1].Deadlocks(ctx)
				require.NoError(t, err)
			}
			c.join(t, "a0")
			for i := range 2 {
				g, err := c.snapshotWhileChanging(i)
				require.NoError(t, err, "snapshot %d after the join", i+1)
				require.Greater(t, g.ID, snapshot.SnapshotID(2), "numbered after the probes")
			}
		})
	}
}

// A record lost on its way from a member: its participant's next record
// does not follow the last the coordinator applied, whose sums held that
// participant's counts. The coordinator resets its sums and asks every
// participant, on every member, for all its counters (one frame a
// member), and the snapshots after complete.
func TestLostRecordAsksEveryMemberForCounters(t *testing.T) {
	var logs testenv.SyncBuffer
	c := startMemCluster(t, 2, 30, 2, actors.WithMode(snapshot.Epochs),
		actors.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	g, err := c.snapshot(0)
	require.NoError(t, err)
	p := c.systems[1].Participants()[0]
	actors.TellRecord(c.systems[1], snapshot.LocalRecord{Snapshot: g.ID, Process: p, Prev: g.ID + 7, Changes: true})
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "lost a record of a participant") },
		10*time.Second, time.Millisecond, "the coordinator never heard of the record")
	for i := range 3 {
		g, err := c.snapshot(i % 2)
		require.NoError(t, err, "snapshot %d after the reset: %s", i+1, logs.String())
		require.NoError(t, g.Verify())
	}
}

// A participant on a member that does not coordinate, whose state cannot
// be encoded once, fails that snapshot only: its counters cross to the
// coordinator with the failure, so the coordinator does not lose track
// of it and ask every participant of every member for all its counters.
func TestStateThatCannotBeEncodedAcrossMembers(t *testing.T) {
	var logs testenv.SyncBuffer
	c := startMemCluster(t, 2, 30, 2, actors.WithMode(snapshot.Epochs),
		actors.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	var failing atomic.Bool
	sys := c.systems[1]
	require.NoError(t, sys.RegisterKind("flaky", func() actor.Actor { return actors.NewFlaky(&failing) }))
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("flaky%d", i); c.members[1].Owner(n) == c.members[1].addr {
			name = n
		}
	}
	_, err := sys.Spawn("flaky", name)
	require.NoError(t, err)
	_, err = c.snapshot(0)
	require.NoError(t, err)

	failing.Store(true)
	_, err = c.snapshot(1)
	require.Error(t, err)
	require.Contains(t, err.Error(), "state of "+name)
	failing.Store(false)
	for i := range 3 {
		_, err := c.snapshot(i % 2)
		require.NoError(t, err, "snapshot %d after the failure: %s", i+1, logs.String())
	}
	require.NotContains(t, logs.String(), "lost a record")
}

var memSeed = flag.Uint64("members-seed", 0, "seed of TestMembersInProcess (0: from the clock)")

// Snapshots across in-memory members, every mode and initiation,
// asked of any member, while the links between members are held and
// released at seeded moments: whatever order the members' frames arrive
// in, every snapshot completes and balances.
func TestMembersInProcess(t *testing.T) {
	seed := *memSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -members-seed %d)", seed, seed)
	forModesAndInitiations(t, func(t *testing.T, mode snapshot.Mode, init actors.Initiation) {
		rng := rand.New(rand.NewPCG(seed, uint64(mode)*2+uint64(init)))
		c := startMemCluster(t, 3, 30, 2, actors.WithMode(mode), actors.WithInitiation(init))
		for range 12 {
			// Hold one or two links for the snapshot's start.
			var held [][2]int
			for range 1 + rng.IntN(2) {
				from, to := rng.IntN(3), rng.IntN(3)
				if from != to {
					c.members[from].pause(c.members[to].addr, true)
					held = append(held, [2]int{from, to})
				}
			}
			done := c.snapshotAsync(rng.IntN(3))
			for _, h := range held {
				runtimeYield(rng.IntN(50))
				c.members[h[0]].pause(c.members[h[1]].addr, false)
			}
			awaitSnapshot(t, done, mode)
		}
	})
}

// forModesAndInitiations runs test as a subtest for every mode and each
// of its initiations.
func forModesAndInitiations(t *testing.T, test func(t *testing.T, mode snapshot.Mode, init actors.Initiation)) {
	for _, mode := range []snapshot.Mode{snapshot.Unaligned, snapshot.Aligned, snapshot.Epochs} {
		inits := []actors.Initiation{actors.Broadcast, actors.Flooding}
		if mode == snapshot.Epochs {
			inits = append(inits, actors.Lazy)
		}
		for _, init := range inits {
			t.Run(fmt.Sprintf("%s/initiation=%d", mode, init), func(t *testing.T) { test(t, mode, init) })
		}
	}
}

// runtimeYield lets other goroutines run n times: a seeded moment, with
// no wait on a clock.
func runtimeYield(n int) {
	for range n {
		var wg sync.WaitGroup
		wg.Add(1)
		go wg.Done()
		wg.Wait()
	}
}

// In the aligned mode, a member holds the barriers other members'
// participants send it for a snapshot whose start it has not heard yet,
// until the start comes: its participants then begin that snapshot with
// the awaited sets the start hands them, never with an older graph's.
//
// The bank is a ring (no chords) whose one back edge is declared to end
// at an account k on m2 whose successor is on m1: k is the ring's only
// source. With the coordinator's link to m1 held, m2 hears the start, k
// records at once and its barrier reaches m1 first.
func TestAlignedStartGate(t *testing.T) {
	const accounts = 30
	members := []string{"m0", "m1", "m2"}
	k := -1
	for i := range accounts {
		if placement.Owner(bankdemo.Name(i), members) == "m2" && placement.Owner(bankdemo.Name((i+1)%accounts), members) == "m1" {
			k = i
			break
		}
	}
	require.GreaterOrEqual(t, k, 0, "no account on m2 is followed by one on m1")
	back := snapshot.Channel{From: snapshot.ProcessID(bankdemo.Name((k + accounts - 1) % accounts)), To: snapshot.ProcessID(bankdemo.Name(k))}
	c := startMemCluster(t, 3, accounts, 0, actors.WithMode(snapshot.Aligned), actors.WithBackEdges(back))
	// The channels are learned: the next start hands awaited sets.
	awaitSnapshot(t, c.snapshotAsync(0), snapshot.Aligned)
	c.members[0].pause("m1", true)
	done := c.snapshotAsync(0)
	eventually(t, "m1 holds m2's barrier", func() bool { return actors.GateHeld(c.systems[1]) > 0 })
	c.members[0].pause("m1", false)
	awaitSnapshot(t, done, snapshot.Aligned)
	require.Zero(t, actors.GateHeld(c.systems[1]), "frames still held after the start came")
}

// relay passes a token back and forth between two members until none is
// left.
type relay struct{ Peer string }

type token struct{ Left int }

var relayed atomic.Int64

func (r *relay) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*token); ok {
		relayed.Add(1)
		if m.Left > 0 {
			ctx.Send(actors.SystemOf(ctx).PID(r.Peer), &token{Left: m.Left - 1})
		}
	}
}

// A link that loses a participant's message, which the transport
// contract forbids: every cut then finds the channel short of it, and
// AwaitQuiescence reports the probable loss instead of waiting for a
// quiescence that cannot come. Before the loss it finds quiescence.
func TestQuiescenceAcrossMembersAndLoss(t *testing.T) {
	net := &memNet{}
	members := []*memMember{net.add("m0"), net.add("m1")}
	names := [2]string{}
	for i := 0; names[0] == "" || names[1] == ""; i++ {
		n := fmt.Sprintf("r%d", i)
		if o := placement.Owner(n, []string{"m0", "m1"}); o == "m0" && names[0] == "" {
			names[0] = n
		} else if o == "m1" && names[1] == "" {
			names[1] = n
		}
	}
	var systems []*actors.System
	for i, m := range members {
		peer := names[1-i]
		sys, err := actors.NewSystem(actors.WithMessage[*token]("test.token"), actors.WithTransport(m), actors.WithStore(persistence.NewMemory()),
			actors.WithTimeout(2*time.Second), actors.WithKind("relay", func() actor.Actor { return &relay{Peer: peer} }))
		require.NoError(t, err)
		systems = append(systems, sys)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := len(systems) - 1; i >= 0; i-- {
			_ = systems[i].Shutdown(ctx)
		}
	}()
	for _, sys := range systems {
		sys.MembersChanged()
	}
	for i, sys := range systems {
		_, err := sys.Spawn("relay", names[i])
		require.NoError(t, err)
	}
	eventually(t, "both relays reachable", func() bool {
		return systems[0].Reachable(names[1]) && systems[1].Reachable(names[0])
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	relayed.Store(0)
	systems[0].Root().Send(systems[0].PID(names[0]), &token{Left: 100})
	require.NoError(t, systems[0].AwaitQuiescence(ctx))
	require.Equal(t, int64(101), relayed.Load(), "quiescent before the last relay")

	l, err := members[0].link("m1")
	require.NoError(t, err)
	l.mu.Lock()
	l.lose = 1
	l.mu.Unlock()
	systems[0].Root().Send(systems[0].PID(names[0]), &token{Left: 10})
	err = systems[0].AwaitQuiescence(ctx)
	var loss *actors.ProbableLossError
	require.ErrorAs(t, err, &loss)
	require.Equal(t, snapshot.ProcessID(names[1]), loss.Receiver, "the epoch mode counts per receiver")
	require.Equal(t, loss.Received+1, loss.Sent)
	t.Log(err)
}

// asking asks its peer a question when told, and holds the questions it
// is asked until told to answer them, which it does by Send.
type asking struct {
	Held []string
}

type (
	askNow    struct{ Peer string }
	askQ      struct{}
	askA      struct{}
	answerNow struct{}
)

func (a *asking) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *askNow:
		ctx.Request(actors.SystemOf(ctx).PID(m.Peer), &askQ{})
	case *askQ:
		a.Held = append(a.Held, ctx.Sender().Id)
	case *answerNow:
		for _, h := range a.Held {
			ctx.Send(actors.SystemOf(ctx).PID(h), &askA{})
		}
		a.Held = nil
	}
}

// A request cycle across members: the requests' marks cross as headers,
// the coordinator's cut shows the cycle, and answers sent later by Send
// from the other member end it.
func TestDeadlockAcrossMembers(t *testing.T) {
	c := startMemCluster(t, 3, 30, 2, actors.WithMessage[*askNow]("test.asknow"), actors.WithMessage[*askQ]("test.askq"),
		actors.WithMessage[*askA]("test.aska"), actors.WithMessage[*answerNow]("test.answernow"),
		actors.WithKind("asking", func() actor.Actor { return &asking{} }))
	names := [2]string{}
	for i := 0; names[0] == "" || names[1] == ""; i++ {
		n := fmt.Sprintf("q%d", i)
		if o := placement.Owner(n, []string{"m0", "m1", "m2"}); o == "m1" && names[0] == "" {
			names[0] = n
		} else if o == "m2" && names[1] == "" {
			names[1] = n
		}
	}
	_, err := c.systems[1].Spawn("asking", names[0])
	require.NoError(t, err)
	_, err = c.systems[2].Spawn("asking", names[1])
	require.NoError(t, err)
	eventually(t, "both reachable", func() bool {
		return c.systems[1].Reachable(names[1]) && c.systems[2].Reachable(names[0]) && c.systems[0].Reachable(names[0]) && c.systems[0].Reachable(names[1])
	})
	c.systems[1].Root().Send(c.systems[1].PID(names[0]), &askNow{Peer: names[1]})
	c.systems[2].Root().Send(c.systems[2].PID(names[1]), &askNow{Peer: names[0]})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ds []snapshot.Deadlock
	eventually(t, "the cycle across members shows", func() bool {
		var err error
		ds, err = c.systems[0].Deadlocks(ctx)
		require.NoError(t, err)
		return len(ds) == 1
	})
	want := []snapshot.ProcessID{snapshot.ProcessID(names[0]), snapshot.ProcessID(names[1])}
	slices.Sort(want)
	require.Equal(t, want, ds[0].Participants)
	t.Log(ds[0])
	c.systems[1].Root().Send(c.systems[1].PID(names[0]), &answerNow{})
	c.systems[2].Root().Send(c.systems[2].PID(names[1]), &answerNow{})
	eventually(t, "the cycle is over", func() bool {
		ds, err := c.systems[0].Deadlocks(ctx)
		require.NoError(t, err)
		return len(ds) == 0
	})
}
