package snapshot

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A deadlock is a stable property: once a set of participants wait for
// one another with nothing on its way to wake any of them, they wait for
// good. A consistent cut therefore shows every deadlock that had formed
// when its snapshot began, and none that had not formed by its end: a
// wait whose answer is in flight is in the cut as a message in a
// channel's state, and that message wakes the waiter.
//
// The wait-for graph has an edge from each participant to each one it
// waits for (Waits.Edges). The models are those of Chandy, Misra and Haas
// ("Distributed Deadlock Detection", ACM TOCS 1(2), 1983): in the AND
// model (their resource model) a participant needs every one it waits
// for, so a cycle of waits is a deadlock; in the OR model (their
// communication model, Waits.Any) one answer frees it, so only a knot is:
// a strongly connected set from which every wait leads back into the
// set. Both are found here by reducing the graph: start from the
// participants that are active; free each waiter once all it waits for
// (AND), or one of them (OR), is free; repeat until nothing changes.
// Those never freed are exactly the ones the paper's definitions call
// deadlocked: in the AND model those from which a path of waits through
// participants not active reaches a cycle of such participants, in the
// OR model those from which no path of waits reaches an active one. A
// graph may mix the two models, one per participant.

// WaitEdge is one edge of a deadlock: From waits for Wait.To.
type WaitEdge struct {
	From ProcessID
	Wait
	// Waited is how long From had waited when the cut was taken: its
	// end (or FindDeadlocks' now) less Wait.Since; zero when either is
	// unknown.
	Waited time.Duration
}

// String returns "from waits for to (request 7, *main.Ping, 3.2s)"; a
// declared wait has no request number ("p1 waits for p2 (fork, 1.0s)").
func (e WaitEdge) String() string {
	var b strings.Builder
	e.appendTo(&b)
	return b.String()
}

func (e WaitEdge) appendTo(b *strings.Builder) {
	b.WriteString(string(e.From))
	b.WriteString(" waits for ")
	b.WriteString(string(e.To))
	var parts []string
	if e.Request != 0 {
		parts = append(parts, fmt.Sprintf("request %d", e.Request))
	}
	if e.Type != "" {
		parts = append(parts, e.Type)
	}
	if !e.Since.IsZero() {
		parts = append(parts, waitedString(e.Waited))
	}
	if len(parts) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString(")")
	}
}

// Deadlock is one deadlock: a strongly connected set of deadlocked
// participants with a cycle of waits among them, and the participants
// stuck behind it. In the AND model the cycle alone holds its members; in
// the OR model a knot does, and a strongly connected set whose members
// also wait for another deadlock is reported on its own as well (the
// waits that leave it are not in Edges).
type Deadlock struct {
	// Participants are the members, sorted by ID.
	Participants []ProcessID
	// Edges are every wait from a member to a member. The first Cycle of
	// them go once around a shortest cycle through the first participant
	// (each edge's To is the next edge's From, and the last leads back);
	// the rest follow, by From and then oldest first.
	Edges []WaitEdge
	// Cycle is the length of the cycle that Edges begin with: 1 for a
	// participant that waits for itself.
	Cycle int
	// Blocked are the deadlocked participants in no cycle of their own
	// that wait for a member, directly or through other such
	// participants, sorted by ID. One waiting on two deadlocks is in both.
	Blocked []ProcessID
}

// String returns the deadlock's edges, cycle first, then who is blocked
// on it: "a waits for b (request 7, *main.Ping, 3.2s), b waits for a
// (request 9, *main.Pong, 3.1s); blocked on it: c, d".
func (d Deadlock) String() string {
	var b strings.Builder
	for i, e := range d.Edges {
		if i > 0 {
			b.WriteString(", ")
		}
		e.appendTo(&b)
	}
	if len(d.Blocked) > 0 {
		b.WriteString("; blocked on it: ")
		for i, id := range d.Blocked {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(string(id))
		}
	}
	return b.String()
}

// Deadlocks returns the deadlocks in g, one for each strongly connected
// set of deadlocked participants that holds a cycle, ordered by their
// first participant; nil when there is none.
//
// A participant is active, and so can still answer, when it waits for
// nothing, when a timer it set will wake it (Waits.Timer), or when a
// channel to it has messages in flight in g: whatever is on its way may
// be the answer it waits for. A participant that is not in g, or is
// Departed, is taken as active too, since nothing says it will not
// answer. Because of the in-flight rule a request whose reply is on its
// way is never part of a deadlock: the report has no false positives.
// Deadlocks reduces the wait-for graph from the active participants
// (FindDeadlocks), with waits timed against g.End.
//
// Its cost is mostly hashing: a map of the waiting participants, one
// look-up per channel in flight and per wait of a participant not active;
// the reduction itself is linear. On 100,000 participants each waiting
// for two others, with no deadlock, it takes about 0.6 of the time Verify
// takes on the same Global (BenchmarkDeadlocks).
func Deadlocks(g *Global) []Deadlock {
	ids := make([]ProcessID, 0, len(g.Participants))
	waits := make([]*Waits, 0, len(g.Participants))
	for i := range g.Participants {
		p := &g.Participants[i]
		if p.Departed || p.Waits.Empty() {
			continue
		}
		ids = append(ids, p.ID)
		waits = append(waits, p.Waits)
	}
	if len(ids) == 0 {
		return nil
	}
	index := make(map[ProcessID]int32, len(ids))
	for i, id := range ids {
		index[id] = int32(i)
	}
	active := make([]bool, len(ids))
	for i, w := range waits {
		active[i] = w.Timer
	}
	for i := range g.Channels {
		c := &g.Channels[i]
		if len(c.Messages) == 0 {
			continue
		}
		if j, ok := index[c.Channel.To]; ok {
			active[j] = true
		}
	}
	return findDeadlocks(ids, waits, index, active, g.End)
}

// FindDeadlocks is Deadlocks on a wait-for graph given directly: waits
// holds what each participant waits for (nil, or a participant not in
// it, waits for nothing), and active says which of those that wait can
// still answer all the same (nil: none can). A timer (Waits.Timer) makes
// a participant active whatever active says. Waits are timed against now.
//
// It serves books kept outside a snapshot too, such as those of the
// participants that did not record before a snapshot timed out: there
// active says which are not blocked, and a participant blocked on its own
// goroutine for a result waits (AND, one edge) for the one it asked.
// Books read live are not a consistent cut, so there a report can show a
// wait that is about to end; Deadlocks' cannot.
func FindDeadlocks(waits map[ProcessID]*Waits, active func(ProcessID) bool, now time.Time) []Deadlock {
	ids := make([]ProcessID, 0, len(waits))
	for id, w := range waits {
		if !w.Empty() {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	ws := make([]*Waits, len(ids))
	index := make(map[ProcessID]int32, len(ids))
	act := make([]bool, len(ids))
	for i, id := range ids {
		ws[i] = waits[id]
		index[id] = int32(i)
		act[i] = ws[i].Timer || (active != nil && active(id))
	}
	return findDeadlocks(ids, ws, index, act, now)
}

// findDeadlocks reduces the wait-for graph of the waiting participants
// ids (waits[i] is what ids[i] waits for; index maps an id to its i;
// active[i] says it is free to start with) and reports what is left.
// Nothing depends on the order of ids: the report is sorted by name.
func findDeadlocks(ids []ProcessID, waits []*Waits, index map[ProcessID]int32, active []bool, now time.Time) []Deadlock {
	n := len(ids)
	free := slices.Clone(active)
	// The edges still to be satisfied: from a participant not active to
	// one not active, as successor lists (off, to) with the index in
	// Waits.Edges of each (at). An edge to one that is active or unknown
	// is satisfied already.
	edges := 0
	for u, w := range waits {
		if !free[u] {
			edges += len(w.Edges)
		}
	}
	off := make([]int32, n+1)
	to, at := make([]int32, 0, edges), make([]int32, 0, edges)
	need := make([]int32, n) // AND: edges still to be satisfied; OR: 1
	var queue []int32        // freed, still to tell its waiters
	for u := range n {
		off[u] = int32(len(to))
		if free[u] {
			continue
		}
		w := waits[u]
		satisfied := false
		for j := range w.Edges {
			v, ok := index[w.Edges[j].To]
			if !ok || active[v] {
				if w.Any {
					satisfied = true
					break
				}
				continue
			}
			to = append(to, v)
			at = append(at, int32(j))
		}
		pending := int32(len(to)) - off[u]
		if satisfied || pending == 0 {
			to, at = to[:off[u]], at[:off[u]]
			free[u] = true
			queue = append(queue, int32(u))
			continue
		}
		if w.Any {
			need[u] = 1
		} else {
			need[u] = pending
		}
	}
	off[n] = int32(len(to))
	if len(to) == 0 {
		return nil // every waiter waits only for active ones
	}

	// Waiters of each participant (the edges reversed), then the
	// reduction: each one freed frees those waiting for it that need
	// nothing more.
	roff := make([]int32, n+1)
	for _, v := range to {
		roff[v+1]++
	}
	for i := range n {
		roff[i+1] += roff[i]
	}
	from := make([]int32, len(to))
	fill := slices.Clone(roff[:n])
	for u := range n {
		for _, v := range to[off[u]:off[u+1]] {
			from[fill[v]] = int32(u)
			fill[v]++
		}
	}
	for len(queue) > 0 {
		v := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, u := range from[roff[v]:roff[v+1]] {
			if free[u] {
				continue
			}
			if need[u]--; need[u] == 0 {
				free[u] = true
				queue = append(queue, u)
			}
		}
	}
	var stuck []int32
	for u := range n {
		if !free[u] {
			stuck = append(stuck, int32(u))
		}
	}
	if len(stuck) == 0 {
		return nil
	}
	r := report{ids: ids, waits: waits, off: off, to: to, at: at, free: free, now: now}
	return r.deadlocks(stuck)
}

// report turns the participants a reduction left into Deadlocks.
type report struct {
	ids     []ProcessID
	waits   []*Waits
	off     []int32
	to, at  []int32
	free    []bool // true for every participant not deadlocked
	now     time.Time
	comp    []int32 // strongly connected component of each deadlocked one
	members [][]int32
	cyclic  []bool
}

// succ returns the deadlocked participants u waits for (with repeats).
func (r *report) succ(u int32, yield func(v int32, at int32)) {
	for k := r.off[u]; k < r.off[u+1]; k++ {
		if v := r.to[k]; !r.free[v] {
			yield(v, r.at[k])
		}
	}
}

func (r *report) deadlocks(stuck []int32) []Deadlock {
	r.components(stuck)
	// Components come out of Tarjan's search with every component a
	// member waits for before it, so the deadlocks each participant in no
	// cycle is blocked on are known by the time it is reached: those its
	// waits lead to, stopping at the first cycle on each path.
	blockedOn := make([][]int32, len(r.members)) // by component
	var blocked [][]int32                        // by cyclic component: who is blocked on it
	cyc := make([]int32, len(r.members))         // component -> index into blocked, or -1
	for c, ms := range r.members {
		cyc[c] = -1
		if r.cyclic[c] {
			cyc[c] = int32(len(blocked))
			blocked = append(blocked, nil)
			continue
		}
		u := ms[0]
		var on []int32
		r.succ(u, func(v, _ int32) {
			if cv := r.comp[v]; r.cyclic[cv] {
				on = append(on, cyc[cv])
			} else {
				on = append(on, blockedOn[cv]...)
			}
		})
		slices.Sort(on)
		on = slices.Compact(on)
		blockedOn[c] = on
		for _, d := range on {
			blocked[d] = append(blocked[d], u)
		}
	}

	out := make([]Deadlock, 0, len(blocked))
	for c, ms := range r.members {
		if !r.cyclic[c] {
			continue
		}
		d := r.deadlock(int32(c), ms)
		for _, u := range blocked[cyc[c]] {
			d.Blocked = append(d.Blocked, r.ids[u])
		}
		slices.Sort(d.Blocked)
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Deadlock) int { return cmp.Compare(a.Participants[0], b.Participants[0]) })
	return out
}

// components finds the strongly connected components of the deadlocked
// participants (Tarjan's algorithm, with an explicit stack so that a long
// chain of waits cannot exhaust the goroutine's).
func (r *report) components(stuck []int32) {
	n := len(r.ids)
	const unseen = -1
	index := make([]int32, n)
	low := make([]int32, n)
	next := make([]int32, n) // next edge to look at, an offset into to
	r.comp = make([]int32, n)
	for _, u := range stuck {
		index[u], r.comp[u] = unseen, unseen
	}
	onStack := make([]bool, n)
	var stack, call []int32
	counter := int32(0)
	visit := func(u int32) {
		index[u], low[u] = counter, counter
		counter++
		stack = append(stack, u)
		onStack[u] = true
		next[u] = r.off[u]
		call = append(call, u)
	}
	for _, root := range stuck {
		if index[root] != unseen {
			continue
		}
		visit(root)
		for len(call) > 0 {
			u := call[len(call)-1]
			if k := next[u]; k < r.off[u+1] {
				next[u]++
				v := r.to[k]
				switch {
				case r.free[v]:
				case index[v] == unseen:
					visit(v)
				case onStack[v]:
					low[u] = min(low[u], index[v])
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1]
				low[p] = min(low[p], low[u])
			}
			if low[u] != index[u] {
				continue
			}
			c := int32(len(r.members))
			i := len(stack) - 1
			for stack[i] != u {
				i--
			}
			ms := slices.Clone(stack[i:])
			stack = stack[:i]
			for _, w := range ms {
				onStack[w] = false
				r.comp[w] = c
			}
			cyclic := len(ms) > 1
			if !cyclic {
				r.succ(u, func(v, _ int32) { cyclic = cyclic || v == u })
			}
			r.members = append(r.members, ms)
			r.cyclic = append(r.cyclic, cyclic)
		}
	}
}

// deadlock builds the report of cyclic component c, members ms.
func (r *report) deadlock(c int32, ms []int32) Deadlock {
	byName := func(a, b int32) int { return cmp.Compare(r.ids[a], r.ids[b]) }
	slices.SortFunc(ms, byName)
	d := Deadlock{Participants: make([]ProcessID, len(ms))}
	for i, u := range ms {
		d.Participants[i] = r.ids[u]
	}
	type edge struct{ u, v, at int32 }
	// out returns u's edges inside the component, by name of the
	// participant waited for, then oldest first.
	out := func(u int32) []edge {
		var es []edge
		r.succ(u, func(v, at int32) {
			if r.comp[v] == c {
				es = append(es, edge{u, v, at})
			}
		})
		slices.SortStableFunc(es, func(a, b edge) int { return byName(a.v, b.v) })
		return es
	}
	// A breadth-first search from the first member finds a shortest
	// cycle through it: the first edge found back to it closes one.
	s := ms[0]
	parent := map[int32]edge{s: {}}
	var last edge
	found := false
	for queue := []int32{s}; !found; queue = queue[1:] {
		for _, e := range out(queue[0]) {
			if e.v == s {
				last, found = e, true
				break
			}
			if _, seen := parent[e.v]; !seen {
				parent[e.v] = e
				queue = append(queue, e.v)
			}
		}
	}
	cycle := []edge{last}
	for e := last; e.u != s; {
		e = parent[e.u]
		cycle = append(cycle, e)
	}
	slices.Reverse(cycle)
	inCycle := make(map[edge]bool, len(cycle))
	for _, e := range cycle {
		inCycle[e] = true
	}
	d.Cycle = len(cycle)
	edges := cycle
	for _, u := range ms {
		first := len(edges)
		for _, e := range out(u) {
			if !inCycle[e] {
				edges = append(edges, e)
			}
		}
		slices.SortFunc(edges[first:], func(a, b edge) int { return cmp.Compare(a.at, b.at) })
	}
	d.Edges = make([]WaitEdge, len(edges))
	for i, e := range edges {
		w := r.waits[e.u].Edges[e.at]
		d.Edges[i] = WaitEdge{From: r.ids[e.u], Wait: w, Waited: waitedSince(w.Since, r.now)}
	}
	return d
}

// waitedSince returns now - since, or zero when either is unknown.
func waitedSince(since, now time.Time) time.Duration {
	if since.IsZero() || now.IsZero() {
		return 0
	}
	return now.Sub(since)
}

// waitedString prints a wait to a tenth of a second from a second on
// ("3.2s"), and in milliseconds below ("33ms"): a deadlock found soon
// after it formed does not read "0.0s".
func waitedString(d time.Duration) string {
	if d >= time.Second || d <= -time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Millisecond).String()
}
