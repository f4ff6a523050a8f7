package actors

import "github.com/actorsnap/actorsnap/snapshot"

// awaitHandover is whose barriers to wait for from snapshot id on.
type awaitHandover struct {
	id   snapshot.SnapshotID
	from []snapshot.ProcessID
}

// handAwaited leaves h for the participant; the guardian calls it.
func (p *participant) handAwaited(h awaitHandover) {
	p.awaitsMu.Lock()
	p.awaits = append(p.awaits, h)
	p.awaitsMu.Unlock()
	p.awaitsNew.Store(true)
}

// handDrops leaves the coordinator's word that the departed participants
// ids are to be forgotten (Process.DropPeer) before the next record.
func (p *participant) handDrops(ids []snapshot.ProcessID) {
	p.awaitsMu.Lock()
	p.drops = append(p.drops, ids...)
	p.awaitsMu.Unlock()
	p.awaitsNew.Store(true)
}

// handResync leaves the coordinator's word that the participant's next
// record must list all its counters (snapshot.Process.Resync): taken
// before that record, whatever else is queued before or after it.
func (p *participant) handResync() {
	p.awaitsMu.Lock()
	p.resync = true
	p.awaitsMu.Unlock()
	p.awaitsNew.Store(true)
}

// takeAwaited applies what the guardian left: whose barriers to wait for,
// in order, and the departed to forget. It runs before anything that can
// make the Process record.
func (p *participant) takeAwaited() { p.takeHandovers(true) }

// takeDrops applies only the departed to forget, in the middle of a
// message: before a send or a spawn that may reach a new participant under
// a dropped one's name, whose channel must start afresh. What dropping
// leaves to do (it can only concern snapshots that are over) waits for
// the next act.
func (p *participant) takeDrops() { p.takeHandovers(false) }

// takeHandovers applies the departed to forget and, with awaits, the
// awaited sets the guardian left.
func (p *participant) takeHandovers(awaits bool) {
	if !p.awaitsNew.Load() {
		return
	}
	p.awaitsMu.Lock()
	drops, resync := p.drops, p.resync
	p.drops, p.resync = nil, false
	var hs []awaitHandover
	if awaits {
		hs, p.awaits = p.awaits, nil
	}
	p.awaitsNew.Store(len(p.awaits) > 0)
	p.awaitsMu.Unlock()
	if resync {
		p.proc.Resync()
	}
	p.drop(drops)
	for _, h := range hs {
		p.proc.SetAwaited(h.id, h.from)
	}
}

// drop forgets the departed participants ids. Their keys stay until their
// departures come (a departure still on its way ends the Process's wait
// for their stale markers), or a new participant under the name sends.
func (p *participant) drop(ids []snapshot.ProcessID) {
	for _, id := range ids {
		p.proc.DropPeer(id)
		delete(p.byID, id)
		delete(p.children, id) // its Terminated may not have come yet
	}
	if len(ids) > 0 {
		p.recount() // what it recorded of their channels is let go
	}
}
