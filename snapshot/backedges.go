package snapshot

import (
	"cmp"
	"slices"
)

// BackEdges returns a set of channels whose removal leaves the channel
// graph chans without a cycle (a feedback arc set): the back edges of a
// depth-first search. In the aligned mode these are the channels a process
// must not wait for (Config.BackEdges), or processes on a cycle would each
// wait for the other's barrier.
//
// The search starts from roots, in the order given, then from every
// process without an incoming channel, in name order, then from the rest,
// those with the most more outgoing than incoming channels first (a
// heuristic for few back edges), ties in name order; successors are
// visited in name order, so the answer is deterministic. Starting from where snapshots enter the graph (the
// initiator, or the sources) makes the back edges the ones that close
// loops back towards them, as in a dataflow's feedback edges. A channel
// from a process to itself is always a back edge.
func BackEdges(chans []Channel, roots []ProcessID) []Channel {
	g := newChanGraph(chans, roots)
	back := g.dfsBack()
	out := make([]Channel, 0, len(back))
	for _, e := range back {
		out = append(out, g.channel(e))
	}
	slices.SortFunc(out, Channel.compare)
	return out
}

// ShallowBackEdges, like BackEdges, returns channels whose removal leaves
// chans without a cycle, chosen so that no long chain of channels is left:
// the channels inside a cycle that do not lead further from where the
// cycle is entered. It finds the strongly connected parts of the graph
// (Tarjan's depth-first search); within each, levels are those of a
// breadth-first search from its entry points (processes with a channel
// from outside it, and roots; for a part without any, the process
// BackEdges would start from), and a channel inside the part is left only
// if it goes from one level to a higher one. Channels between parts, and
// so every channel of an acyclic graph, are left. The awaited hops an
// aligned snapshot's barriers cross inside a part are then at most its
// depth: on a ring of n processes with random chords about log n, where
// BackEdges can leave a path through most of the n (it found one of 670
// hops on a ring of 1,000). The price is more channels logged instead of
// awaited. The actors package uses it by default.
func ShallowBackEdges(chans []Channel, roots []ProcessID) []Channel {
	g := newChanGraph(chans, roots)
	comp := g.components()
	level := g.levels(comp)
	var out []Channel
	for _, e := range g.es {
		if comp[e.from] == comp[e.to] && level[e.to] <= level[e.from] {
			out = append(out, g.channel(e))
		}
	}
	slices.SortFunc(out, Channel.compare)
	return out
}

// cgEdge is a channel between two numbered processes.
type cgEdge struct{ from, to int }

// chanGraph is a channel graph in compressed form: successors of node i
// are es[start[i]:start[i+1]], in name order; order is where searches
// start.
type chanGraph struct {
	names []ProcessID
	es    []cgEdge
	start []int
	order []int
	roots int // order[:roots] are the roots given
}

func (g *chanGraph) channel(e cgEdge) Channel {
	return Channel{From: g.names[e.from], To: g.names[e.to]}
}

func newChanGraph(chans []Channel, roots []ProcessID) *chanGraph {
	idx := make(map[ProcessID]int)
	var names []ProcessID
	node := func(id ProcessID) int {
		i, ok := idx[id]
		if !ok {
			i = len(names)
			idx[id] = i
			names = append(names, id)
		}
		return i
	}
	for _, r := range roots {
		node(r)
	}
	es := make([]cgEdge, 0, len(chans))
	for _, c := range chans {
		es = append(es, cgEdge{node(c.From), node(c.To)})
	}
	n := len(names)
	// Adjacency in CSR form, successors in name order.
	slices.SortFunc(es, func(a, b cgEdge) int {
		if a.from != b.from {
			return cmp.Compare(a.from, b.from)
		}
		return cmp.Compare(names[a.to], names[b.to])
	})
	es = slices.Compact(es)
	start := make([]int, n+1)
	indeg := make([]int, n)
	for _, e := range es {
		start[e.from+1]++
		if e.from != e.to {
			indeg[e.to]++
		}
	}
	for i := range n {
		start[i+1] += start[i]
	}

	order := make([]int, 0, n)
	for _, r := range roots {
		order = append(order, idx[r])
	}
	byName := make([]int, n)
	for i := range byName {
		byName[i] = i
	}
	slices.SortFunc(byName, func(a, b int) int { return cmp.Compare(names[a], names[b]) })
	for _, i := range byName {
		if indeg[i] == 0 {
			order = append(order, i)
		}
	}
	// The rest: those that feed more than they are fed first (the
	// heuristic of Eades, Lin and Smyth for a small feedback arc set).
	delta := func(i int) int { return start[i+1] - start[i] - indeg[i] }
	slices.SortStableFunc(byName, func(a, b int) int { return cmp.Compare(delta(b), delta(a)) })
	order = append(order, byName...)
	return &chanGraph{names: names, es: es, start: start, order: order, roots: len(roots)}
}

// dfsBack returns the back edges of a depth-first search from g.order.
func (g *chanGraph) dfsBack() []cgEdge {
	n, es, start := len(g.names), g.es, g.start
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	next := make([]int, n) // next successor to look at, as an offset into es
	var back []cgEdge
	var stack []int
	for _, root := range g.order {
		if color[root] != white {
			continue
		}
		color[root] = grey
		next[root] = start[root]
		stack = append(stack[:0], root)
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			if next[u] == start[u+1] {
				color[u] = black
				stack = stack[:len(stack)-1]
				continue
			}
			v := es[next[u]].to
			next[u]++
			switch color[v] {
			case white:
				color[v] = grey
				next[v] = start[v]
				stack = append(stack, v)
			case grey:
				back = append(back, es[next[u]-1])
			}
		}
	}
	return back
}

// components returns each node's strongly connected component (Tarjan's
// algorithm, without recursion).
func (g *chanGraph) components() []int {
	n := len(g.names)
	index, low, comp := make([]int, n), make([]int, n), make([]int, n)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	next := make([]int, n)
	var stack, call []int
	onStack := make([]bool, n)
	counter, ncomp := 0, 0
	for _, root := range g.order {
		if index[root] >= 0 {
			continue
		}
		index[root], low[root] = counter, counter
		counter++
		stack, onStack[root] = append(stack, root), true
		next[root] = g.start[root]
		call = append(call[:0], root)
		for len(call) > 0 {
			u := call[len(call)-1]
			if next[u] < g.start[u+1] {
				v := g.es[next[u]].to
				next[u]++
				switch {
				case index[v] < 0:
					index[v], low[v] = counter, counter
					counter++
					stack, onStack[v] = append(stack, v), true
					next[v] = g.start[v]
					call = append(call, v)
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
			if low[u] == index[u] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = ncomp
					if w == u {
						break
					}
				}
				ncomp++
			}
		}
	}
	return comp
}

// levels returns each node's level in a breadth-first search inside its
// component, from the component's entry points: roots, and nodes with a
// channel from another component; for a component without any, from its
// first node in g.order.
func (g *chanGraph) levels(comp []int) []int {
	n := len(g.names)
	level := make([]int, n)
	for i := range level {
		level[i] = -1
	}
	var queue []int
	seed := func(u int) {
		if level[u] < 0 {
			level[u] = 0
			queue = append(queue, u)
		}
	}
	for _, u := range g.order[:g.roots] {
		seed(u)
	}
	for _, e := range g.es {
		if comp[e.from] != comp[e.to] {
			seed(e.to)
		}
	}
	run := func() {
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, e := range g.es[g.start[u]:g.start[u+1]] {
				if comp[e.to] == comp[u] && level[e.to] < 0 {
					level[e.to] = level[u] + 1
					queue = append(queue, e.to)
				}
			}
		}
	}
	run()
	for _, u := range g.order {
		if level[u] < 0 {
			seed(u)
			run()
		}
	}
	return level
}
