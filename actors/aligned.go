package actors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/actorsnap/actorsnap/snapshot"
)

// The guardian's part of the aligned mode: it hands every participant
// the senders whose barriers it awaits, as the Coordinator computes them
// from the channels complete snapshots showed, and names what an aligned
// snapshot still waits for when it times out.

// handAwaited hands each participant its set from a.From on, if it
// changed since the last it was handed. It runs before a.From's start is
// posted: see participant.awaits.
func (g *guardian) handAwaited(a *snapshot.Awaited, parts []*participant) {
	old := g.awaited
	// Every participant's set, other members' too: the sources of a
	// flooding start and the reasons of a stalled snapshot read them.
	g.awaited = make(map[snapshot.ProcessID][]snapshot.ProcessID, len(a.Sets)+len(parts))
	for id, from := range a.Sets {
		g.awaited[id] = from
	}
	for _, p := range parts {
		from := a.Sets[p.id]
		g.awaited[p.id] = from
		if prev, ok := old[p.id]; ok && slices.Equal(prev, from) {
			continue
		}
		p.handAwaited(awaitHandover{id: a.From, from: from})
	}
}

// maxStalled bounds the channels an abort reason names.
const maxStalled = 16

// stalled returns, for an aligned snapshot still pending at its deadline,
// a timeout reason naming the channels whose barriers its participants
// still wait for: from a participant that has not recorded either (a
// cycle without a back edge, or a sender stuck in a handler). It returns
// nil otherwise.
func (g *guardian) stalled(id snapshot.SnapshotID) error {
	if g.s.cfg.mode != snapshot.Aligned {
		return nil
	}
	m, _ := g.coord.Missing(id)
	missing := m.Participants
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
