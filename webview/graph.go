package webview

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/actorsnap/actorsnap/snapshot"
)

// The JSON of the channel graph, in the shape cytoscape.js takes.
type (
	graphJSON struct {
		// Collapsed says the participants were folded into a node per
		// kind, but for those shown on their own (deadlocks, the focus
		// and its neighbours).
		Collapsed    bool        `json:"collapsed"`
		Limit        int         `json:"limit"` // participants above which it is collapsed
		Participants int         `json:"participants"`
		Channels     int         `json:"channels"`
		Focus        string      `json:"focus,omitempty"` // the participant searched, if found
		Kinds        []kindCount `json:"kinds"`
		Nodes        []nodeJSON  `json:"nodes"`
		Edges        []edgeJSON  `json:"edges"`
	}
	nodeJSON struct {
		ID         string `json:"id"`
		Label      string `json:"label"`
		Kind       string `json:"kind,omitempty"`
		Group      bool   `json:"group,omitempty"` // a kind's participants folded into one
		Count      int    `json:"count"`           // participants it stands for
		StateBytes int    `json:"state_bytes"`
		Departed   bool   `json:"departed,omitempty"`
		Deadlock   string `json:"deadlock,omitempty"` // "member" or "blocked"
		Focus      bool   `json:"focus,omitempty"`
	}
	edgeJSON struct {
		ID       string `json:"id"`
		Source   string `json:"source"`
		Target   string `json:"target"`
		InFlight int    `json:"in_flight"`
		Channels int    `json:"channels"` // channels it stands for
		// Deadlock marks an edge a deadlock's cycle of waits runs along.
		Deadlock bool `json:"deadlock,omitempty"`
		// Wait marks a deadlock's wait with no channel under it.
		Wait bool `json:"wait,omitempty"`
	}
)

// graph answers GET /api/snapshots/{id}/graph: participants as nodes,
// channels as edges weighted by their in-flight messages, deadlock edges
// marked. Above the graph limit it is collapsed; ?focus=ID then shows
// that participant and its neighbours on their own.
func (h *handler) graph(w http.ResponseWriter, r *http.Request) {
	v, err := h.viewOf(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, buildGraph(v, h.cfg.graphLimit, snapshot.ProcessID(r.FormValue("focus"))))
}

// graphBuilder folds participants into nodes and channels into edges.
type graphBuilder struct {
	v     *view
	out   graphJSON
	nodes map[string]int // node id -> index in out.Nodes
	rep   func(p snapshot.Participant) string
	edges map[[2]string]int
}

// buildGraph returns v's graph: whole up to limit participants,
// collapsed above.
func buildGraph(v *view, limit int, focus snapshot.ProcessID) graphJSON {
	g := v.g
	b := &graphBuilder{v: v, nodes: map[string]int{}, edges: map[[2]string]int{},
		out: graphJSON{Limit: limit, Participants: len(g.Participants), Channels: len(g.Channels), Nodes: []nodeJSON{}, Edges: []edgeJSON{}}}
	b.out.Kinds = sortedKinds(g)
	if _, ok := g.Participant(focus); ok {
		b.out.Focus = string(focus)
	}
	if len(g.Participants) <= limit {
		b.rep = func(p snapshot.Participant) string { return string(p.ID) }
	} else {
		b.out.Collapsed = true
		alone := b.shownAlone(focus, limit)
		groups := b.groupIDs()
		b.rep = func(p snapshot.Participant) string {
			if alone[p.ID] {
				return string(p.ID)
			}
			return groups[kindOf(p)]
		}
	}
	for _, p := range g.Participants {
		b.addParticipant(p)
	}
	for _, c := range g.Channels {
		b.addEdge(b.endpoint(c.Channel.From), b.endpoint(c.Channel.To), len(c.Messages), false)
	}
	for _, d := range v.deadlocks {
		for _, e := range d.Edges {
			b.addEdge(b.endpoint(e.From), b.endpoint(e.To), 0, true)
		}
	}
	return b.out
}

// kindOf is the kind a participant is grouped under.
func kindOf(p snapshot.Participant) string {
	switch {
	case p.Departed:
		return "(stopped)"
	case p.Kind == "":
		return "(no kind)"
	}
	return p.Kind
}

// shownAlone returns the participants a collapsed graph shows on their
// own: the deadlocked ones, then the focus and its neighbours, at most
// limit in all.
func (b *graphBuilder) shownAlone(focus snapshot.ProcessID, limit int) map[snapshot.ProcessID]bool {
	alone := map[snapshot.ProcessID]bool{}
	add := func(id snapshot.ProcessID) {
		if len(alone) < limit {
			if _, ok := b.v.g.Participant(id); ok {
				alone[id] = true
			}
		}
	}
	for _, d := range b.v.deadlocks {
		for _, id := range d.Participants {
			add(id)
		}
	}
	if b.out.Focus == "" {
		return alone
	}
	add(focus)
	for _, c := range b.v.g.Channels {
		switch focus {
		case c.Channel.From:
			add(c.Channel.To)
		case c.Channel.To:
			add(c.Channel.From)
		}
	}
	return alone
}

// groupIDs names a node for each kind, an id no participant has.
func (b *graphBuilder) groupIDs() map[string]string {
	ids := map[string]string{}
	for _, p := range b.v.g.Participants {
		k := kindOf(p)
		if _, ok := ids[k]; ok {
			continue
		}
		id := "kind: " + k
		for {
			if _, taken := b.v.g.Participant(snapshot.ProcessID(id)); !taken {
				break
			}
			id += "'"
		}
		ids[k] = id
	}
	return ids
}

// addParticipant adds p to its node.
func (b *graphBuilder) addParticipant(p snapshot.Participant) {
	id := b.rep(p)
	i, ok := b.nodes[id]
	if !ok {
		n := nodeJSON{ID: id, Label: id, Kind: p.Kind, Departed: p.Departed}
		if id != string(p.ID) {
			n.Group, n.Kind, n.Departed = true, kindOf(p), false
		} else {
			n.Deadlock, n.Focus = b.v.role[p.ID], id == b.out.Focus
		}
		i = len(b.out.Nodes)
		b.nodes[id] = i
		b.out.Nodes = append(b.out.Nodes, n)
	}
	n := &b.out.Nodes[i]
	n.Count++
	n.StateBytes += len(p.State)
	if n.Group {
		n.Label = n.Kind + " ×" + strconv.Itoa(n.Count)
	}
}

// endpoint returns the node of a channel's endpoint, adding one for a
// process that is not a participant (a channel nothing crossed may name
// one).
func (b *graphBuilder) endpoint(id snapshot.ProcessID) string {
	if p, ok := b.v.g.Participant(id); ok {
		return b.rep(p)
	}
	if _, ok := b.nodes[string(id)]; !ok {
		b.nodes[string(id)] = len(b.out.Nodes)
		b.out.Nodes = append(b.out.Nodes, nodeJSON{ID: string(id), Label: string(id), Kind: "(not in the snapshot)"})
	}
	return string(id)
}

// addEdge folds a channel (or a deadlock's wait) from -> to into its edge.
func (b *graphBuilder) addEdge(from, to string, inFlight int, deadlock bool) {
	k := [2]string{from, to}
	i, ok := b.edges[k]
	if !ok {
		if deadlock {
			b.edges[k] = len(b.out.Edges)
			b.out.Edges = append(b.out.Edges, edgeJSON{ID: "e" + strconv.Itoa(len(b.out.Edges)), Source: from, Target: to, Deadlock: true, Wait: true})
			return
		}
		i = len(b.out.Edges)
		b.edges[k] = i
		b.out.Edges = append(b.out.Edges, edgeJSON{ID: "e" + strconv.Itoa(i), Source: from, Target: to})
	}
	e := &b.out.Edges[i]
	if deadlock {
		e.Deadlock = true
		return
	}
	e.InFlight += inFlight
	e.Channels++
}

// sortedKinds returns the kinds of g's participants with their counts,
// most first: the summary a collapsed graph's legend shows.
func sortedKinds(g *snapshot.Global) []kindCount {
	n := map[string]int{}
	for _, p := range g.Participants {
		n[kindOf(p)]++
	}
	out := make([]kindCount, 0, len(n))
	for k, c := range n {
		out = append(out, kindCount{k, c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// kindCount is how many participants are of a kind.
type kindCount struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}
