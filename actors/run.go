package actors

import (
	"fmt"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

// run is the guardian's part of a snapshot in progress, or complete and
// being saved; the Coordinator holds the rest.
type run struct {
	id      snapshot.SnapshotID
	start   time.Time
	waiters []chan<- result
	remote  []remoteWaiter // Snapshot calls of other members
	timers  []timer
	held    int64            // recorded messages reported, counted in System.recorded until it ends
	saving  *snapshot.Global // complete, and being saved: the outcome waits for the store
	probe   bool             // a cut for an analysis: no state, not stored, not published
}

// report hands a participant's report to the Coordinator. The messages
// it holds are this snapshot's until it ends (docs/design.md, decision
// 8); a report for a snapshot already over lets them go at once.
func (g *guardian) report(m *reportMsg) {
	if failed := m.failed(); failed != nil {
		// Its snapshot is over; a malformed frame from another member
		// may carry no record.
		g.s.recorded.Add(-int64(m.held()))
		if m.rec != nil {
			_ = g.coord.Failed(g.now(), m.rec, failed)
		} else {
			g.coord.Abort(g.now(), m.id, failed)
		}
		return
	}
	if m.rec != nil {
		g.s.metrics.record(m.rec)
	}
	r := g.runs[m.id]
	if r == nil || r.saving != nil {
		g.s.recorded.Add(-int64(m.held()))
		if m.rec != nil {
			// In the epoch mode the participant's next record lists what
			// changed since this one: the Coordinator's ledger takes it
			// though its snapshot is over.
			_ = g.coord.RecordKept(g.now(), m.rec)
		}
		return
	}
	now := g.now()
	if m.rec != nil {
		for _, c := range m.children() {
			g.coord.RequireChild(m.id, c)
		}
		_ = g.coord.RecordKept(now, m.rec)
	}
	if len(m.channels) > 0 {
		_ = g.coord.Channels(now, m.channels)
	}
	held := m.held()
	if held == 0 {
		return
	}
	r.held += int64(held)
	if total := g.s.recorded.Load(); g.s.pastBudget(total) {
		g.coord.Abort(now, m.id, fmt.Errorf("%w: snapshot %d has %d recorded messages, %d system-wide, above %d (WithMaxRecorded)",
			ErrOverBudget, m.id, r.held, total, g.s.cfg.maxRecorded))
	}
}
