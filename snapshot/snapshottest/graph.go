package snapshottest

import (
	"fmt"
	"math/rand/v2"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Graph is a directed graph of named processes. Edges are the channels the
// application sends on.
type Graph struct {
	Names []snapshot.ProcessID
	Edges []Edge
}

// Edge is a channel between two processes, by index into Graph.Names.
type Edge struct{ From, To int }

// Len returns the number of processes.
func (g Graph) Len() int { return len(g.Names) }

// names returns p0..p(n-1).
func names(n int) []snapshot.ProcessID {
	ids := make([]snapshot.ProcessID, n)
	for i := range ids {
		ids[i] = snapshot.ProcessID(fmt.Sprintf("p%d", i))
	}
	return ids
}

// Ring returns a one-way ring of n processes: i -> i+1 mod n.
func Ring(n int) Graph {
	g := Graph{Names: names(n)}
	for i := range n {
		g.Edges = append(g.Edges, Edge{i, (i + 1) % n})
	}
	return g
}

// TwoRings returns two one-way rings of n processes each, joined by an
// edge from the first ring to the second and one back, so that the whole
// graph is strongly connected.
func TwoRings(n int) Graph {
	g := Graph{Names: names(2 * n)}
	for i := range n {
		g.Edges = append(g.Edges, Edge{i, (i + 1) % n}, Edge{n + i, n + (i+1)%n})
	}
	g.Edges = append(g.Edges, Edge{0, n}, Edge{n, 0})
	return g
}

// RingWithChords returns a one-way ring of n processes plus extra random
// edges, about extra per process.
func RingWithChords(r *rand.Rand, n int, extra float64) Graph {
	g := Ring(n)
	add := int(extra * float64(n))
	seen := make(map[Edge]bool, len(g.Edges)+add)
	for _, e := range g.Edges {
		seen[e] = true
	}
	for range add {
		e := Edge{r.IntN(n), r.IntN(n)}
		if e.From == e.To || seen[e] {
			continue
		}
		seen[e] = true
		g.Edges = append(g.Edges, e)
	}
	return g
}

// RandomGraph returns a random graph of n processes with cycles. When
// strong is true it is strongly connected (a ring through a random
// permutation plus random edges); otherwise it is a random graph with at
// least one cycle that is, in general, not strongly connected.
func RandomGraph(r *rand.Rand, n int, strong bool) Graph {
	g := Graph{Names: names(n)}
	seen := make(map[Edge]bool)
	add := func(e Edge) {
		if e.From != e.To && !seen[e] {
			seen[e] = true
			g.Edges = append(g.Edges, e)
		}
	}
	perm := r.Perm(n)
	if strong {
		for i := range n {
			add(Edge{perm[i], perm[(i+1)%n]})
		}
	} else {
		// One cycle over part of the processes, a path through the rest.
		k := 2 + r.IntN(n-1)
		for i := range k {
			add(Edge{perm[i], perm[(i+1)%k]})
		}
		for i := k; i < n; i++ {
			add(Edge{perm[r.IntN(i)], perm[i]})
		}
	}
	for range r.IntN(2*n + 1) {
		add(Edge{r.IntN(n), r.IntN(n)})
	}
	return g
}

// BackEdges returns the back edges find (snapshot.BackEdges or
// snapshot.ShallowBackEdges) chooses in g.
func (g Graph) BackEdges(find func([]snapshot.Channel, []snapshot.ProcessID) []snapshot.Channel) []Edge {
	chans := make([]snapshot.Channel, len(g.Edges))
	for i, e := range g.Edges {
		chans[i] = snapshot.Channel{From: g.Names[e.From], To: g.Names[e.To]}
	}
	index := make(map[snapshot.ProcessID]int, len(g.Names))
	for i, name := range g.Names {
		index[name] = i
	}
	var out []Edge
	for _, c := range find(chans, nil) {
		out = append(out, Edge{From: index[c.From], To: index[c.To]})
	}
	return out
}

// RandomDAG returns a random acyclic graph of n processes: every edge goes
// forward in a random order of them, and every process but the first has
// at least one incoming edge.
func RandomDAG(r *rand.Rand, n int) Graph {
	g := Graph{Names: names(n)}
	seen := make(map[Edge]bool)
	add := func(e Edge) {
		if !seen[e] {
			seen[e] = true
			g.Edges = append(g.Edges, e)
		}
	}
	perm := r.Perm(n)
	for i := 1; i < n; i++ {
		add(Edge{perm[r.IntN(i)], perm[i]})
	}
	for range r.IntN(2*n + 1) {
		a, b := r.IntN(n), r.IntN(n)
		if a == b {
			continue
		}
		if a > b {
			a, b = b, a
		}
		add(Edge{perm[a], perm[b]})
	}
	return g
}
