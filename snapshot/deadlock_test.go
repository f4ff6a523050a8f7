package snapshot_test

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

var (
	deadlockSeeds = flag.Int("deadlock-seeds", 2000, "number of seeds for the randomized deadlock tests")
	deadlockSeed  = flag.Uint64("deadlock-seed", 0, "run only this seed of the randomized deadlock tests")
)

// deadlockSeedRange returns the seeds a randomized deadlock test runs.
func deadlockSeedRange() (first, count uint64) {
	switch {
	case *deadlockSeed != 0:
		return *deadlockSeed, 1
	case testing.Short():
		return 1, uint64(min(*deadlockSeeds, 200))
	}
	return 1, uint64(*deadlockSeeds)
}

var end = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// waitGraph is a wait-for graph and what the Global built from it holds
// besides: departed participants, and messages in flight to each.
type waitGraph struct {
	ids      []snapshot.ProcessID // every participant, departed too
	waits    map[snapshot.ProcessID]*snapshot.Waits
	departed map[snapshot.ProcessID]bool
	inFlight map[snapshot.ProcessID]int
}

func newWaitGraph() *waitGraph {
	return &waitGraph{
		waits:    make(map[snapshot.ProcessID]*snapshot.Waits),
		departed: make(map[snapshot.ProcessID]bool),
		inFlight: make(map[snapshot.ProcessID]int),
	}
}

// active is the in-flight rule as FindDeadlocks takes it.
func (wg *waitGraph) active(id snapshot.ProcessID) bool { return wg.inFlight[id] > 0 }

// global builds the Global: each message in flight on a channel from a
// participant drawn by r, and a drained channel along each wait between
// participants (the request, delivered).
func (wg *waitGraph) global(r *rand.Rand) *snapshot.Global {
	g := &snapshot.Global{ID: 1, Start: end.Add(-time.Second), End: end}
	for _, id := range wg.ids {
		g.Participants = append(g.Participants, snapshot.Participant{ID: id, Departed: wg.departed[id], Waits: wg.waits[id]})
	}
	slices.SortFunc(g.Participants, func(a, b snapshot.Participant) int { return cmp.Compare(a.ID, b.ID) })
	chans := make(map[snapshot.Channel]*snapshot.ChannelState)
	channel := func(c snapshot.Channel) *snapshot.ChannelState {
		cs, ok := chans[c]
		if !ok {
			n := uint64(r.IntN(5))
			cs = &snapshot.ChannelState{Channel: c, Sent: n, Received: n}
			chans[c] = cs
		}
		return cs
	}
	known := func(id snapshot.ProcessID) bool { _, ok := wg.waits[id]; return ok || wg.departed[id] }
	for _, id := range wg.ids {
		if w := wg.waits[id]; w != nil {
			for _, e := range w.Edges {
				if known(e.To) && e.To != id {
					channel(snapshot.Channel{From: id, To: e.To})
				}
			}
		}
	}
	for _, to := range sortedKeys(wg.inFlight) {
		for range wg.inFlight[to] {
			from := wg.ids[r.IntN(len(wg.ids))]
			cs := channel(snapshot.Channel{From: from, To: to})
			cs.Sent++
			cs.Messages = append(cs.Messages, snapshot.Message{Seq: cs.Sent, Payload: "reply"})
		}
	}
	for _, cs := range chans {
		g.Channels = append(g.Channels, *cs)
	}
	slices.SortFunc(g.Channels, func(a, b snapshot.ChannelState) int {
		return cmp.Or(cmp.Compare(a.Channel.From, b.Channel.From), cmp.Compare(a.Channel.To, b.Channel.To))
	})
	return g
}

func sortedKeys[V any](m map[snapshot.ProcessID]V) []snapshot.ProcessID {
	ks := make([]snapshot.ProcessID, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// reduce is the oracle: graph reduction by brute force, sweeping over
// every waiter until a sweep frees none. It returns the deadlocked.
func reduce(waits map[snapshot.ProcessID]*snapshot.Waits, active func(snapshot.ProcessID) bool) map[snapshot.ProcessID]bool {
	stuck := make(map[snapshot.ProcessID]bool)
	for id, w := range waits {
		if w != nil && !w.Timer && len(w.Edges) > 0 && !active(id) {
			stuck[id] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for id := range stuck {
			w := waits[id]
			free := !w.Any
			for _, e := range w.Edges {
				if w.Any && !stuck[e.To] {
					free = true
				}
				if !w.Any && stuck[e.To] {
					free = false
				}
			}
			if free {
				delete(stuck, id)
				changed = true
			}
		}
	}
	return stuck
}

// injection is a deadlock put into a random graph.
type injection struct {
	members []snapshot.ProcessID // sorted
	any     bool
	blocked []snapshot.ProcessID // sorted: the waiters expected in Blocked
}

// deadlockCase is one seed's graph and the deadlocks put into it.
type deadlockCase struct {
	wg        *waitGraph
	injected  []injection
	waiters   []snapshot.ProcessID
	crossings int // waits from one injected deadlock to another
	fixes     int // messages put in flight so the background frees
}

// randomDeadlockCase draws from seed s a wait-for graph: a background
// of random waits (AND and OR, with timers, self-waits, waits for
// departed and unknown participants) made free by messages in flight to
// some of it, plus injected deadlocks: AND cycles and OR knots of 1 to 20
// participants with chords inside them and, now and then, a wait into an
// earlier injected deadlock; waiters blocked on them through chains of
// other waiters; and, for AND, noise edges to the background.
func randomDeadlockCase(s uint64) *deadlockCase {
	r := rand.New(rand.NewPCG(s, 0xdead))
	nBg := r.IntN(60)
	if r.IntN(10) == 0 {
		nBg = 100 + r.IntN(1900)
	}
	lengths := make([]int, r.IntN(5))
	total := nBg
	for i := range lengths {
		lengths[i] = 1 + r.IntN(20)
		total += lengths[i]
	}
	nWaiters := 0
	if len(lengths) > 0 {
		nWaiters = r.IntN(3*len(lengths) + 1)
	}
	nDeparted := r.IntN(4)
	total += nWaiters + nDeparted
	perm := r.Perm(total)
	next := 0
	name := func() snapshot.ProcessID {
		next++
		return snapshot.ProcessID(fmt.Sprintf("p%d", perm[next-1]))
	}
	c := &deadlockCase{wg: newWaitGraph()}
	wg := c.wg
	bg := make([]snapshot.ProcessID, nBg)
	for i := range bg {
		bg[i] = name()
	}
	var departed []snapshot.ProcessID
	for range nDeparted {
		id := name()
		departed = append(departed, id)
		wg.departed[id] = true
		wg.ids = append(wg.ids, id)
	}
	req := uint64(0)
	wait := func(to snapshot.ProcessID) snapshot.Wait {
		w := snapshot.Wait{To: to, Since: end.Add(-time.Duration(r.IntN(10000)) * time.Millisecond)}
		if r.IntN(3) > 0 {
			req++
			w.Request, w.Type = req, "*main.Ping"
		} else {
			w.Type = "fork"
		}
		return w
	}
	// elsewhere is a participant that is free whatever happens: one of
	// the background, a departed one, or one not in the Global.
	elsewhere := func() snapshot.ProcessID {
		switch k := r.IntN(10); {
		case k == 1 && nDeparted > 0, k > 1 && nBg == 0 && nDeparted > 0:
			return departed[r.IntN(nDeparted)]
		case k > 1 && nBg > 0:
			return bg[r.IntN(nBg)]
		}
		return snapshot.ProcessID(fmt.Sprintf("ghost%d", r.IntN(3)))
	}

	// The background: random waits inside it and to elsewhere.
	for _, id := range bg {
		wg.ids = append(wg.ids, id)
		switch r.IntN(10) {
		case 0:
			wg.waits[id] = nil
		case 1:
			wg.waits[id] = &snapshot.Waits{Any: r.IntN(2) == 0}
		case 2:
			wg.waits[id] = &snapshot.Waits{Timer: true, Edges: []snapshot.Wait{wait(elsewhere())}}
		default:
			w := &snapshot.Waits{Any: r.IntN(2) == 0}
			for range 1 + r.IntN(4) {
				w.Edges = append(w.Edges, wait(elsewhere()))
			}
			wg.waits[id] = w
		}
		if r.IntN(5) == 0 {
			wg.inFlight[id] += 1 + r.IntN(3)
		}
	}
	// Messages in flight until the background frees; to a random half of
	// what is still stuck each round, so that some cycles of it free
	// through one member only.
	bgWaits := make(map[snapshot.ProcessID]*snapshot.Waits, nBg)
	for _, id := range bg {
		bgWaits[id] = wg.waits[id]
	}
	for {
		stuck := sortedKeys(reduce(bgWaits, wg.active))
		if len(stuck) == 0 {
			break
		}
		r.Shuffle(len(stuck), func(i, j int) { stuck[i], stuck[j] = stuck[j], stuck[i] })
		for _, id := range stuck[:(len(stuck)+1)/2] {
			wg.inFlight[id]++
			c.fixes++
		}
	}

	// The injected deadlocks.
	deadlocked := make(map[snapshot.ProcessID]int) // member -> injection
	var pool []snapshot.ProcessID                  // every member and waiter so far
	for k, n := range lengths {
		in := injection{any: r.IntN(2) == 0}
		for range n {
			id := name()
			in.members = append(in.members, id)
			deadlocked[id] = k
			wg.ids = append(wg.ids, id)
		}
		for i, id := range in.members {
			w := &snapshot.Waits{Any: in.any}
			w.Edges = append(w.Edges, wait(in.members[(i+1)%n]))
			for range r.IntN(3) {
				w.Edges = append(w.Edges, wait(in.members[r.IntN(n)]))
			}
			if k > 0 && r.IntN(4) == 0 {
				w.Edges = append(w.Edges, wait(pool[r.IntN(len(pool))]))
				c.crossings++
			}
			if !in.any {
				for range r.IntN(3) {
					w.Edges = append(w.Edges, wait(elsewhere()))
				}
			}
			r.Shuffle(len(w.Edges), func(i, j int) { w.Edges[i], w.Edges[j] = w.Edges[j], w.Edges[i] })
			wg.waits[id] = w
		}
		pool = append(pool, in.members...)
		c.injected = append(c.injected, in)
	}
	// Waiters on them, through earlier waiters or directly; each blocked
	// on the injected deadlocks its waits first reach.
	blockedOn := make(map[snapshot.ProcessID]map[int]bool)
	for range nWaiters {
		id := name()
		wg.ids = append(wg.ids, id)
		w := &snapshot.Waits{Any: r.IntN(2) == 0}
		on := make(map[int]bool)
		for range 1 + r.IntN(3) {
			to := pool[r.IntN(len(pool))]
			w.Edges = append(w.Edges, wait(to))
			if k, ok := deadlocked[to]; ok {
				on[k] = true
			}
			for k := range blockedOn[to] {
				on[k] = true
			}
		}
		if !w.Any {
			for range r.IntN(3) {
				w.Edges = append(w.Edges, wait(elsewhere()))
			}
		}
		r.Shuffle(len(w.Edges), func(i, j int) { w.Edges[i], w.Edges[j] = w.Edges[j], w.Edges[i] })
		wg.waits[id] = w
		blockedOn[id] = on
		pool = append(pool, id)
		c.waiters = append(c.waiters, id)
	}
	for k := range c.injected {
		in := &c.injected[k]
		slices.Sort(in.members)
		for _, id := range c.waiters {
			if blockedOn[id][k] {
				in.blocked = append(in.blocked, id)
			}
		}
		slices.Sort(in.blocked)
	}
	return c
}

// checkEdges checks the edges of d against the waits they come from:
// every wait from a member to a member once, a shortest cycle through
// the first participant first, its hops the oldest such wait, the rest
// by From and then oldest first, each timed against end.
func checkEdges(d snapshot.Deadlock, waits map[snapshot.ProcessID]*snapshot.Waits) error {
	in := make(map[snapshot.ProcessID]bool)
	for _, id := range d.Participants {
		in[id] = true
	}
	if d.Cycle < 1 || d.Cycle > len(d.Edges) {
		return fmt.Errorf("cycle of %d in %d edges", d.Cycle, len(d.Edges))
	}
	s := d.Participants[0]
	at := s
	for i, e := range d.Edges[:d.Cycle] {
		if e.From != at {
			return fmt.Errorf("cycle edge %d (%s) does not start at %s", i, e, at)
		}
		at = e.To
	}
	if at != s {
		return fmt.Errorf("cycle does not lead back to %s", s)
	}
	// The shortest cycle through s, by a breadth-first search.
	dist := map[snapshot.ProcessID]int{s: 0}
	shortest := 0
	for queue := []snapshot.ProcessID{s}; len(queue) > 0 && shortest == 0; queue = queue[1:] {
		u := queue[0]
		for _, e := range waits[u].Edges {
			if e.To == s && shortest == 0 {
				shortest = dist[u] + 1
			}
			if _, seen := dist[e.To]; !seen && in[e.To] {
				dist[e.To] = dist[u] + 1
				queue = append(queue, e.To)
			}
		}
	}
	if d.Cycle != shortest {
		return fmt.Errorf("cycle of %d, shortest through %s is %d", d.Cycle, s, shortest)
	}
	var want []snapshot.WaitEdge
	hop := make(map[snapshot.Channel]bool)
	for _, e := range d.Edges[:d.Cycle] {
		hop[snapshot.Channel{From: e.From, To: e.To}] = true
	}
	var cycle []snapshot.WaitEdge
	for _, u := range d.Participants {
		for _, w := range waits[u].Edges {
			if !in[w.To] {
				continue
			}
			e := snapshot.WaitEdge{From: u, Wait: w, Waited: end.Sub(w.Since)}
			if c := (snapshot.Channel{From: u, To: w.To}); hop[c] {
				delete(hop, c)
				cycle = append(cycle, e)
				continue
			}
			want = append(want, e)
		}
	}
	for _, e := range d.Edges[:d.Cycle] {
		if !slices.Contains(cycle, e) {
			return fmt.Errorf("cycle edge %s is not the oldest of its hop", e)
		}
	}
	if got := d.Edges[d.Cycle:]; !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
		return fmt.Errorf("edges after the cycle:\n got %v\nwant %v", got, want)
	}
	return nil
}

// TestDeadlocksRandomized injects AND cycles and OR knots into random
// wait-for graphs made free by messages in flight, and checks that
// Deadlocks reports each with exactly its participants and the waiters
// blocked on it, nothing else, the same as FindDeadlocks on the same
// graph, and the same deadlocked participants as a brute-force reduction.
func TestDeadlocksRandomized(t *testing.T) {
	t.Parallel()
	first, count := deadlockSeedRange()
	var st struct{ and, or, self, long, waiters, blocked, crossings, fixes, big int }
	for s := first; s < first+count; s++ {
		c := randomDeadlockCase(s)
		wg := c.wg
		r := rand.New(rand.NewPCG(s, 0xc4a2))
		g := wg.global(r)
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d (%d participants, %d injected): %s\nreplay: go test ./snapshot -run 'TestDeadlocksRandomized$' -deadlock-seed %d -v",
				s, len(wg.ids), len(c.injected), fmt.Sprintf(format, args...), s)
		}
		if err := g.Verify(); err != nil {
			fail("the Global built does not verify: %v", err)
		}
		got := snapshot.Deadlocks(g)
		if direct := snapshot.FindDeadlocks(wg.waits, wg.active, end); !reflect.DeepEqual(got, direct) {
			fail("Deadlocks and FindDeadlocks differ:\n%v\n%v", got, direct)
		}

		// The oracle finds exactly the injected members and waiters.
		want := make(map[snapshot.ProcessID]bool)
		for _, in := range c.injected {
			for _, id := range in.members {
				want[id] = true
			}
		}
		for _, id := range c.waiters {
			want[id] = true
		}
		oracle := reduce(wg.waits, wg.active)
		if !reflect.DeepEqual(oracle, want) && (len(oracle) > 0 || len(want) > 0) {
			fail("the oracle finds %v deadlocked, the injection %v", sortedKeys(oracle), sortedKeys(want))
		}
		reported := make(map[snapshot.ProcessID]bool)
		for _, d := range got {
			for _, id := range d.Participants {
				reported[id] = true
			}
			for _, id := range d.Blocked {
				reported[id] = true
			}
		}
		if !reflect.DeepEqual(reported, oracle) && (len(oracle) > 0 || len(reported) > 0) {
			fail("reported %v, the oracle finds %v deadlocked", sortedKeys(reported), sortedKeys(oracle))
		}

		if len(got) != len(c.injected) {
			fail("%d deadlocks reported, %d injected: %v", len(got), len(c.injected), got)
		}
		for _, in := range c.injected {
			i := slices.IndexFunc(got, func(d snapshot.Deadlock) bool { return d.Participants[0] == in.members[0] })
			if i < 0 {
				fail("injected %v not reported: %v", in.members, got)
			}
			d := got[i]
			if !slices.Equal(d.Participants, in.members) {
				fail("injected %v, reported %v", in.members, d.Participants)
			}
			if !slices.Equal(d.Blocked, in.blocked) {
				fail("deadlock %v: blocked %v, want %v", in.members, d.Blocked, in.blocked)
			}
			if err := checkEdges(d, wg.waits); err != nil {
				fail("deadlock %v: %v", in.members, err)
			}
			if in.any {
				st.or++
			} else {
				st.and++
			}
			switch n := len(in.members); {
			case n == 1:
				st.self++
			case n >= 15:
				st.long++
			}
			st.blocked += len(in.blocked)
		}
		for i := 1; i < len(got); i++ {
			if got[i-1].Participants[0] >= got[i].Participants[0] {
				fail("deadlocks not sorted: %v", got)
			}
		}
		st.waiters += len(c.waiters)
		st.crossings += c.crossings
		st.fixes += c.fixes
		if len(wg.ids) > 100 {
			st.big++
		}
	}
	t.Logf("%d seeds: %d AND cycles, %d OR knots (%d self-waits, %d of 15 or more), %d waiters (%d blocked entries), %d waits across deadlocks, %d messages in flight to free the background, %d graphs over 100 participants",
		count, st.and, st.or, st.self, st.long, st.waiters, st.blocked, st.crossings, st.fixes, st.big)
	if count >= 500 && (st.and == 0 || st.or == 0 || st.self == 0 || st.long == 0 || st.blocked == 0 || st.crossings == 0 || st.fixes == 0 || st.big == 0) {
		t.Errorf("a kind of case not exercised")
	}
}

// requestTraffic draws from seed s a graph where every participant has
// requests out (AND, or OR for a third of them) and every cycle of waits
// has a member whose reply is in flight: those with a wait that goes
// back in a random order, or to themselves.
func requestTraffic(s uint64) *waitGraph {
	r := rand.New(rand.NewPCG(s, 0x7aff))
	n := 2 + r.IntN(300)
	wg := newWaitGraph()
	for i := range n {
		wg.ids = append(wg.ids, snapshot.ProcessID(fmt.Sprintf("a%d", i)))
	}
	pos := r.Perm(n)
	req := uint64(0)
	for i, id := range wg.ids {
		w := &snapshot.Waits{Any: r.IntN(3) == 0}
		back := false
		for range 1 + r.IntN(3) {
			j := r.IntN(n)
			req++
			w.Edges = append(w.Edges, snapshot.Wait{To: wg.ids[j], Request: req, Type: "*main.Get", Since: end.Add(-time.Second)})
			back = back || pos[j] <= pos[i]
		}
		wg.waits[id] = w
		if back {
			wg.inFlight[id] = 1
		}
	}
	return wg
}

// TestRuleInFlightFreesAWaiter: under heavy request traffic, with every
// cycle of waits holding a reply in flight, no deadlock is reported; the
// same graph read without the in-flight rule (FindDeadlocks with no one
// active, or the Global with its replies taken out) reports one. The rule
// is what keeps the report free of false positives.
func TestRuleInFlightFreesAWaiter(t *testing.T) {
	t.Parallel()
	first, count := deadlockSeedRange()
	for s := first; s < first+count; s++ {
		wg := requestTraffic(s)
		r := rand.New(rand.NewPCG(s, 0x91))
		g := wg.global(r)
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d (%d participants): %s\nreplay: go test ./snapshot -run 'TestRuleInFlightFreesAWaiter$' -deadlock-seed %d -v",
				s, len(wg.ids), fmt.Sprintf(format, args...), s)
		}
		if err := g.Verify(); err != nil {
			fail("the Global built does not verify: %v", err)
		}
		if got := snapshot.Deadlocks(g); got != nil {
			fail("deadlocks reported with replies in flight: %v", got)
		}
		if oracle := reduce(wg.waits, wg.active); len(oracle) > 0 {
			fail("the oracle finds %v deadlocked", sortedKeys(oracle))
		}

		none := func(snapshot.ProcessID) bool { return false }
		ignored := snapshot.FindDeadlocks(wg.waits, none, end)
		if len(ignored) == 0 {
			fail("no deadlock without the in-flight rule")
		}
		all := make(map[snapshot.ProcessID]bool)
		for _, d := range ignored {
			for _, id := range slices.Concat(d.Participants, d.Blocked) {
				all[id] = true
			}
		}
		if oracle := reduce(wg.waits, none); !reflect.DeepEqual(all, oracle) {
			fail("without the rule: reported %v, the oracle %v", sortedKeys(all), sortedKeys(oracle))
		}
		// The same Global with every reply delivered.
		drained := *g
		drained.Channels = slices.Clone(g.Channels)
		for i := range drained.Channels {
			c := &drained.Channels[i]
			c.Received, c.Messages = c.Sent, nil
		}
		if got := snapshot.Deadlocks(&drained); !reflect.DeepEqual(got, ignored) {
			fail("the Global without messages in flight reports\n%v\nwant\n%v", got, ignored)
		}
	}
}

// parseWaits builds a wait-for graph from a script: "a>b,c" (a waits for
// b and c), "a>b|c" (for either), "a>=b" (a declared wait, no request),
// "a@" (a timer), "-a" (departed), "~a" (a message in flight to a),
// "a" (waits for nothing). Requests are numbered in script order; every
// wait began 1.5s before end.
func parseWaits(script string) *waitGraph {
	wg := newWaitGraph()
	req := uint64(0)
	add := func(id snapshot.ProcessID) {
		if !slices.Contains(wg.ids, id) {
			wg.ids = append(wg.ids, id)
		}
	}
	for _, tok := range strings.Fields(script) {
		switch {
		case strings.HasPrefix(tok, "-"):
			id := snapshot.ProcessID(tok[1:])
			add(id)
			wg.departed[id] = true
			continue
		case strings.HasPrefix(tok, "~"):
			wg.inFlight[snapshot.ProcessID(tok[1:])]++
			continue
		}
		w := &snapshot.Waits{}
		if strings.HasSuffix(tok, "@") {
			w.Timer, tok = true, strings.TrimSuffix(tok, "@")
		}
		id, targets, _ := strings.Cut(tok, ">")
		add(snapshot.ProcessID(id))
		sep := ","
		if strings.Contains(targets, "|") {
			w.Any, sep = true, "|"
		}
		for to := range strings.SplitSeq(targets, sep) {
			if to == "" {
				continue
			}
			e := snapshot.Wait{Since: end.Add(-1500 * time.Millisecond)}
			if declared, ok := strings.CutPrefix(to, "="); ok {
				e.To, e.Type = snapshot.ProcessID(declared), "fork"
			} else {
				req++
				e.To, e.Request, e.Type = snapshot.ProcessID(to), req, "*main.Ping"
			}
			w.Edges = append(w.Edges, e)
		}
		if w.Timer || len(w.Edges) > 0 {
			wg.waits[snapshot.ProcessID(id)] = w
		} else {
			wg.waits[snapshot.ProcessID(id)] = nil
		}
	}
	return wg
}

// TestDeadlocksRules checks each rule of the reduction on a small graph,
// through Deadlocks on a Global and FindDeadlocks alike.
func TestDeadlocksRules(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         []string
	}{
		{"nothing waits", "a b c", nil},
		{"a self-wait is a cycle of one", "a>a", []string{"a waits for a (request 1, *main.Ping, 1.5s)"}},
		{"a cycle of two", "a>b b>a", []string{
			"a waits for b (request 1, *main.Ping, 1.5s), b waits for a (request 2, *main.Ping, 1.5s)"}},
		{"a declared wait has no request number", "p1>=p2 p2>=p1", []string{
			"p1 waits for p2 (fork, 1.5s), p2 waits for p1 (fork, 1.5s)"}},
		{"a message in flight frees a cycle", "a>b b>a ~a", nil},
		{"a message in flight to one outside does not", "a>b b>a c ~c", []string{
			"a waits for b (request 1, *main.Ping, 1.5s), b waits for a (request 2, *main.Ping, 1.5s)"}},
		{"a timer frees a cycle", "a>b b>a@", nil},
		{"a departed participant is free", "a>b b>c -c", nil},
		{"one not in the Global is free", "a>b b>ghost", nil},
		{"AND needs every one", "a>b,c b>a c", []string{
			"a waits for b (request 1, *main.Ping, 1.5s), b waits for a (request 3, *main.Ping, 1.5s)"}},
		{"OR needs one", "a>b|c b>a c", nil},
		{"OR with every one deadlocked is a knot", "a>b|c b>a c>a|b", []string{
			"a waits for b (request 1, *main.Ping, 1.5s), b waits for a (request 3, *main.Ping, 1.5s), a waits for c (request 2, *main.Ping, 1.5s), c waits for a (request 4, *main.Ping, 1.5s), c waits for b (request 5, *main.Ping, 1.5s)"}},
		{"waiters are blocked, not members", "c>d d>a e>d a>b b>a", []string{
			"a waits for b (request 4, *main.Ping, 1.5s), b waits for a (request 5, *main.Ping, 1.5s); blocked on it: c, d, e"}},
		{"blocked on two", "x>y,z y>y z>z", []string{
			"y waits for y (request 3, *main.Ping, 1.5s); blocked on it: x",
			"z waits for z (request 4, *main.Ping, 1.5s); blocked on it: x"}},
		{"a cycle waiting for another is a deadlock of its own", "a>b b>a,c c>c w>a", []string{
			"a waits for b (request 1, *main.Ping, 1.5s), b waits for a (request 2, *main.Ping, 1.5s); blocked on it: w",
			"c waits for c (request 4, *main.Ping, 1.5s)"}},
		{"the cycle is a shortest one through the first", "a>b b>c c>a,b", []string{
			"a waits for b (request 1, *main.Ping, 1.5s), b waits for c (request 2, *main.Ping, 1.5s), c waits for a (request 3, *main.Ping, 1.5s), c waits for b (request 4, *main.Ping, 1.5s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wg := parseWaits(tc.script)
			g := wg.global(rand.New(rand.NewPCG(1, 1)))
			if err := g.Verify(); err != nil {
				t.Fatal(err)
			}
			got := snapshot.Deadlocks(g)
			var strs []string
			for _, d := range got {
				strs = append(strs, d.String())
			}
			if !slices.Equal(strs, tc.want) {
				t.Errorf("Deadlocks:\n got %q\nwant %q", strs, tc.want)
			}
			if direct := snapshot.FindDeadlocks(wg.waits, wg.active, end); !reflect.DeepEqual(direct, got) {
				t.Errorf("FindDeadlocks: %v, Deadlocks: %v", direct, got)
			}
		})
	}
}

// TestDeadlocksDeep runs the analyses on graphs deeper than a recursive
// search could go: a cycle of 100,000, a chain of 100,000 waiters on a
// self-wait, and the same chain ending in a message in flight.
func TestDeadlocksDeep(t *testing.T) {
	t.Parallel()
	const n = 100_000
	id := func(i int) snapshot.ProcessID { return snapshot.ProcessID(fmt.Sprintf("p%06d", i)) }
	build := func(to func(i int) int) map[snapshot.ProcessID]*snapshot.Waits {
		waits := make(map[snapshot.ProcessID]*snapshot.Waits, n)
		for i := range n {
			waits[id(i)] = &snapshot.Waits{Edges: []snapshot.Wait{{To: id(to(i)), Request: uint64(i + 1)}}}
		}
		return waits
	}
	ring := snapshot.FindDeadlocks(build(func(i int) int { return (i + 1) % n }), nil, end)
	if len(ring) != 1 || len(ring[0].Participants) != n || ring[0].Cycle != n || len(ring[0].Edges) != n || len(ring[0].Blocked) != 0 {
		t.Fatalf("ring of %d: %d deadlocks", n, len(ring))
	}
	if e := ring[0].Edges[n-1]; e.From != id(n-1) || e.To != id(0) {
		t.Errorf("ring closes with %s", e)
	}
	chain := build(func(i int) int { return max(i-1, 0) })
	got := snapshot.FindDeadlocks(chain, nil, end)
	if len(got) != 1 || !slices.Equal(got[0].Participants, []snapshot.ProcessID{id(0)}) || len(got[0].Blocked) != n-1 {
		t.Fatalf("chain of %d: %d deadlocks", n, len(got))
	}
	if got := snapshot.FindDeadlocks(chain, func(p snapshot.ProcessID) bool { return p == id(0) }, end); got != nil {
		t.Fatalf("chain freed at its end: %d deadlocks", len(got))
	}
}

// TestWaitEdgeString checks the edge format with and without a request
// number, a type and a start.
func TestWaitEdgeString(t *testing.T) {
	for _, tc := range []struct {
		e    snapshot.WaitEdge
		want string
	}{
		{snapshot.WaitEdge{From: "a", Wait: snapshot.Wait{To: "b", Request: 7, Type: "*main.Ping", Since: end.Add(-3200 * time.Millisecond)}, Waited: 3200 * time.Millisecond},
			"a waits for b (request 7, *main.Ping, 3.2s)"},
		{snapshot.WaitEdge{From: "p1", Wait: snapshot.Wait{To: "p2", Type: "fork", Since: end.Add(-time.Second)}, Waited: time.Second},
			"p1 waits for p2 (fork, 1.0s)"},
		{snapshot.WaitEdge{From: "a", Wait: snapshot.Wait{To: "b", Request: 3}}, "a waits for b (request 3)"},
		{snapshot.WaitEdge{From: "a", Wait: snapshot.Wait{To: "b"}}, "a waits for b"},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestQuiescent checks the termination test on hand-built Globals.
func TestQuiescent(t *testing.T) {
	since := end.Add(-2 * time.Second)
	parts := func(ps ...snapshot.Participant) []snapshot.Participant { return ps }
	idle := snapshot.Participant{ID: "a"}
	declared := snapshot.Participant{ID: "b", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "a", Type: "fork", Since: since}}}}
	requester := snapshot.Participant{ID: "c", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "a", Request: 9, Type: "*main.Get", Since: since}}}}
	timer := snapshot.Participant{ID: "d", Waits: &snapshot.Waits{Timer: true}}
	drained := snapshot.ChannelState{Channel: snapshot.Channel{From: "a", To: "b"}, Sent: 4, Received: 4}
	busy := snapshot.ChannelState{Channel: snapshot.Channel{From: "b", To: "a"}, Sent: 5, Received: 3,
		Messages: []snapshot.Message{{Seq: 4}, {Seq: 5}}}
	for _, tc := range []struct {
		name string
		g    snapshot.Global
		want string // "" for nil
	}{
		{"all idle", snapshot.Global{Participants: parts(idle, declared), Channels: []snapshot.ChannelState{drained}}, ""},
		{"nobody", snapshot.Global{}, ""},
		{"a departed requester is idle", snapshot.Global{Participants: parts(idle, snapshot.Participant{ID: "c", Departed: true, Waits: requester.Waits})}, ""},
		{"a message in flight", snapshot.Global{ID: 3, Participants: parts(idle, declared), Channels: []snapshot.ChannelState{drained, busy}},
			"snapshot 3: not quiescent: 2 messages in flight on 1 channel (b->a)"},
		{"a request outstanding", snapshot.Global{ID: 3, End: end, Participants: parts(idle, declared, requester)},
			"snapshot 3: not quiescent: 1 request not answered (c waits for a (request 9, *main.Get, 2.0s))"},
		{"a timer", snapshot.Global{ID: 3, Participants: parts(idle, timer)},
			"snapshot 3: not quiescent: 1 woken from outside the cut, by a timer or queued input (d)"},
		{"everything, the first few named", snapshot.Global{ID: 3, End: end, Participants: parts(idle, declared, requester, timer), Channels: []snapshot.ChannelState{
			{Channel: snapshot.Channel{From: "a", To: "b"}, Sent: 1, Messages: []snapshot.Message{{Seq: 1}}},
			{Channel: snapshot.Channel{From: "a", To: "c"}, Sent: 1, Messages: []snapshot.Message{{Seq: 1}}},
			{Channel: snapshot.Channel{From: "a", To: "d"}, Sent: 1, Messages: []snapshot.Message{{Seq: 1}}},
			busy}},
			"snapshot 3: not quiescent: 5 messages in flight on 4 channels (a->b, a->c, a->d and 1 more); 1 request not answered (c waits for a (request 9, *main.Get, 2.0s)); 1 woken from outside the cut, by a timer or queued input (d)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := snapshot.Quiescent(&tc.g)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
			var nq *snapshot.NotQuiescentError
			if !errors.As(err, &nq) || !errors.Is(err, snapshot.ErrNotQuiescent) {
				t.Fatalf("%T is not a *NotQuiescentError wrapping ErrNotQuiescent", err)
			}
		})
	}
}

// deadlockFreeGlobal builds a Global of n participants under request
// traffic, each waiting on two others (AND, OR for one in five), every
// cycle holding a reply in flight: 2n edges, no deadlock, and a channel
// for each request (delivered) and each reply (in flight).
func deadlockFreeGlobal(n int) *snapshot.Global {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	g := &snapshot.Global{ID: 1, Start: end.Add(-time.Second), End: end}
	id := func(i int) snapshot.ProcessID { return snapshot.ProcessID(fmt.Sprintf("actor-%07d", i)) }
	pos := r.Perm(n)
	type reply struct{ from, to int }
	var replies []reply
	var requests []snapshot.Channel
	for i := range n {
		w := &snapshot.Waits{Any: r.IntN(5) == 0}
		back := -1
		for k := range 2 {
			j := r.IntN(n)
			w.Edges = append(w.Edges, snapshot.Wait{To: id(j), Request: uint64(k + 1), Type: "*main.Get", Since: end.Add(-time.Second)})
			requests = append(requests, snapshot.Channel{From: id(i), To: id(j)})
			if pos[j] <= pos[i] {
				back = j
			}
		}
		if back >= 0 {
			replies = append(replies, reply{back, i})
		}
		g.Participants = append(g.Participants, snapshot.Participant{ID: id(i), Waits: w})
	}
	chans := make(map[snapshot.Channel]*snapshot.ChannelState)
	for _, c := range requests {
		chans[c] = &snapshot.ChannelState{Channel: c, Sent: 3, Received: 3}
	}
	for _, rp := range replies {
		c := snapshot.Channel{From: id(rp.from), To: id(rp.to)}
		cs := chans[c]
		if cs == nil {
			cs = &snapshot.ChannelState{Channel: c, Sent: 3, Received: 3}
			chans[c] = cs
		}
		cs.Sent++
		cs.Messages = append(cs.Messages, snapshot.Message{Seq: cs.Sent, Payload: "reply"})
	}
	for _, cs := range chans {
		g.Channels = append(g.Channels, *cs)
	}
	slices.SortFunc(g.Channels, func(a, b snapshot.ChannelState) int {
		return cmp.Or(cmp.Compare(a.Channel.From, b.Channel.From), cmp.Compare(a.Channel.To, b.Channel.To))
	})
	return g
}

// BenchmarkDeadlocks measures Deadlocks on a Global with no deadlock,
// each participant waiting on two others, against Verify on the same
// Global in the same run: x-verify is Deadlocks' time over Verify's.
func BenchmarkDeadlocks(b *testing.B) {
	for _, n := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("participants=%d", n), func(b *testing.B) {
			g := deadlockFreeGlobal(n)
			if err := g.Verify(); err != nil {
				b.Fatal(err)
			}
			if d := snapshot.Deadlocks(g); d != nil {
				b.Fatal(d)
			}
			var verify float64 // ns per Verify
			b.Run("op=verify", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := g.Verify(); err != nil {
						b.Fatal(err)
					}
				}
				verify = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
			b.Run("op=deadlocks", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if d := snapshot.Deadlocks(g); d != nil {
						b.Fatal(d)
					}
				}
				if verify > 0 {
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/verify, "x-verify")
				}
			})
		})
	}
}
