package actors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/actorsnap/actorsnap/snapshot"
)

// The guardian's part of the aligned mode: it learns the channel graph
// from completed snapshots, finds the back edges, and tells every
// participant whose barriers to wait for. Waiting only on channels it has
// checked for cycles, no participant can wait for itself around a cycle,
// whatever channels appear while a snapshot runs: those are logged, not
// awaited, until a snapshot has shown them.

// learn adds the channels of gl to the graph.
func (g *guardian) learn(gl *snapshot.Global) {
	if g.s.cfg.mode != snapshot.Aligned {
		return
	}
	for _, c := range gl.Channels {
		if !g.graph[c.Channel] {
			g.graph[c.Channel] = true
			g.changed = true
		}
	}
}

// tellAwaited computes, if the graph changed, whom each participant waits
// for from snapshot id on, and tells those whose set changed. It runs
// before id's start is posted: see participant.awaits.
func (g *guardian) tellAwaited(id snapshot.SnapshotID, parts []*participant) {
	if !g.changed {
		return
	}
	g.changed = false
	live := make(map[snapshot.ProcessID]bool, len(parts))
	for _, p := range parts {
		live[p.id] = true
	}
	skip := make(map[snapshot.Channel]bool)
	for _, c := range g.s.cfg.backEdges {
		skip[c] = true
	}
	chans := make([]snapshot.Channel, 0, len(g.graph))
	for c := range g.graph {
		if !skip[c] && live[c.From] && live[c.To] {
			chans = append(chans, c)
		}
	}
	if g.s.cfg.search != nil {
		for _, c := range g.s.cfg.search(chans, nil) {
			skip[c] = true
		}
	}
	in := make(map[snapshot.ProcessID][]snapshot.ProcessID, len(parts))
	for _, c := range chans {
		if !skip[c] {
			in[c.To] = append(in[c.To], c.From)
		}
	}
	for _, p := range parts {
		from := in[p.id]
		slices.Sort(from)
		if old, ok := g.awaited[p.id]; ok && slices.Equal(old, from) {
			continue
		}
		g.awaited[p.id] = from
		p.handAwaited(awaitHandover{id: id, from: from})
	}
	for id := range g.awaited {
		if !live[id] {
			delete(g.awaited, id)
		}
	}
}

// maxStalled bounds the channels an abort reason names.
const maxStalled = 16

// stalled returns, for an aligned snapshot still pending at its deadline,
// a timeout reason naming the channels whose barriers its participants
// still wait for: from a participant that has not recorded either (a
// cycle without a back edge, or a sender stuck in a handler). It returns
// nil otherwise.
func (g *guardian) stalled(r *run) error {
	if g.s.cfg.mode != snapshot.Aligned {
		return nil
	}
	r.mu.Lock()
	missing := r.asm.Missing().Participants
	r.mu.Unlock()
	held := g.held()
	if len(missing) == 0 {
		if held == "" {
			return nil // the assembler says what is missing
		}
		return fmt.Errorf("%w: every participant recorded, %s", snapshot.ErrTimeout, held)
	}
	waiting := make(map[snapshot.ProcessID]bool, len(missing))
	for _, id := range missing {
		waiting[id] = true
	}
	var chans []string
	for _, to := range missing {
		for _, from := range g.awaited[to] {
			if waiting[from] {
				chans = append(chans, snapshot.Channel{From: from, To: to}.String())
			}
		}
	}
	if held != "" {
		held = "; " + held
	}
	if len(chans) == 0 {
		return fmt.Errorf("%w: %d participants did not record: %s%s", snapshot.ErrTimeout, len(missing), names(missing), held)
	}
	slices.Sort(chans)
	more := ""
	if len(chans) > maxStalled {
		more = fmt.Sprintf(" and %d more", len(chans)-maxStalled)
		chans = chans[:maxStalled]
	}
	return fmt.Errorf("%w: aligned barriers still awaited on %s%s (a sender held up, or a cycle without a back edge: WithBackEdges)%s",
		snapshot.ErrTimeout, strings.Join(chans, ", "), more, held)
}

// held names the channels whose senders participants hold paused, as
// "senders held: a->b, ...", or "" when none is.
func (g *guardian) held() string {
	var chans []string
	for _, p := range g.s.reg.live() {
		if h := p.paused.Load(); h != nil {
			for _, from := range *h {
				chans = append(chans, snapshot.Channel{From: from, To: p.id}.String())
			}
		}
	}
	if len(chans) == 0 {
		return ""
	}
	more := ""
	if len(chans) > maxStalled {
		more = fmt.Sprintf(" and %d more", len(chans)-maxStalled)
		chans = chans[:maxStalled]
	}
	return "senders held: " + strings.Join(chans, ", ") + more
}

func names(ids []snapshot.ProcessID) string {
	var b strings.Builder
	for i, id := range ids {
		if i == maxStalled {
			fmt.Fprintf(&b, " and %d more", len(ids)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(id))
	}
	return b.String()
}
