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
	type edge struct{ from, to int }
	es := make([]edge, 0, len(chans))
	for _, c := range chans {
		es = append(es, edge{node(c.From), node(c.To)})
	}
	n := len(names)
	// Adjacency in CSR form, successors in name order.
	slices.SortFunc(es, func(a, b edge) int {
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

	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	next := make([]int, n) // next successor to look at, as an offset into es
	var back []Channel
	var stack []int
	for _, root := range order {
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
				back = append(back, Channel{From: names[u], To: names[v]})
			}
		}
	}
	slices.SortFunc(back, Channel.compare)
	return back
}
