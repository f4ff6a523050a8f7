package actors

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/snapshot"
)

// registry is the system's membership: the live participants by name and
// by sender key, the stopped ones not yet dropped, and the snapshots in
// progress. Its lock also orders snapshot starts against spawns from
// outside every participant, so that such a spawn is either a participant a
// snapshot starts with (it gets the start) or joins it at birth (it
// records its state at birth).
type registry struct {
	mu      sync.RWMutex
	byID    map[snapshot.ProcessID]*participant
	byKey   map[mailbox.SenderKey]*participant
	version uint64                // changes whenever byID does
	pending []snapshot.SnapshotID // snapshots in progress, or being saved, in start order
	started snapshot.SnapshotID   // the last snapshot started
	// view is pending and started as of their last change, for
	// isPending: every participant asks at every record and report, and
	// the read lock's shared counter is a cache line the workers fight
	// over.
	view atomic.Pointer[pendingView]
	// probes are the snapshots in progress that are cuts for an analysis
	// (System.Deadlocks, AwaitQuiescence): counters and waits, no state,
	// never stored.
	probes  map[snapshot.SnapshotID]bool
	probing atomic.Int64 // len(probes), read without the lock
	// stopped holds the sender keys of the participants that stopped and
	// are not dropped yet. byKey keeps each such key naming a stopped
	// entry (a participant value with nothing but its name and key):
	// messages it sent may still wait in receivers' queues, and they must
	// count on its channels.
	stopped map[snapshot.ProcessID]mailbox.SenderKey
	// senders holds, per stopped participant, the participants that sent
	// to it since it stopped: their channels to it count (lookupOrStopped),
	// so they drop it too, though no snapshot may show them as its peers.
	senders map[snapshot.ProcessID]map[*participant]struct{}
	// remotes holds the stand-ins of other members' participants
	// (WithTransport): their keys are in byKey too.
	remotes map[snapshot.ProcessID]*participant
	// unheard holds the participants, here or on another member, that
	// left the live ones and whose stop the guardian has not heard yet
	// (stoppingLocked): another member's until the coordinator takes its
	// stop frame, or the participant is dropped. round is the last round
	// of drops handed over here (drop; a round is its drops' After).
	unheard map[snapshot.ProcessID]bool
	round   snapshot.SnapshotID
	// early holds what other members' participants sent to a name
	// placed here before a participant of that name was born (its spawn
	// lags their start), for at most the system's timeout.
	early map[snapshot.ProcessID][]earlyMsg
	// freeing holds the names of this member's participants dropped in a
	// round that other members may not have applied yet: a new
	// participant under such a name could reach their participants
	// before the drop does, and be counted on the channels of the one
	// before, which the drop then forgets. The name is refused
	// (ErrNameStopped) until every member it waits for has said it
	// applied that round or a later one (applied), or has left.
	freeing map[snapshot.ProcessID]freeingName
	// applied holds, per other member, the last round of drops it said
	// it applied: the coordinator's own with the drops it sends.
	applied map[string]snapshot.SnapshotID
}

// freeingName is a dropped name's round and the members whose word that
// they applied it is awaited.
type freeingName struct {
	round snapshot.SnapshotID
	wait  []string
}

// earlyMsg is a message for a participant not born yet, from the stand-in
// whose key it carries.
type earlyMsg struct {
	key mailbox.SenderKey
	tag uint64 // the epoch it carries (mailbox.PostTagged)
	msg interface{}
}

func newRegistry() registry {
	return registry{
		byID:    make(map[snapshot.ProcessID]*participant),
		byKey:   make(map[mailbox.SenderKey]*participant),
		stopped: make(map[snapshot.ProcessID]mailbox.SenderKey),
		senders: make(map[snapshot.ProcessID]map[*participant]struct{}),
		remotes: make(map[snapshot.ProcessID]*participant),
		unheard: make(map[snapshot.ProcessID]bool),
		early:   make(map[snapshot.ProcessID][]earlyMsg),
		freeing: make(map[snapshot.ProcessID]freeingName),
		applied: make(map[string]snapshot.SnapshotID),
		probes:  make(map[snapshot.SnapshotID]bool),
	}
}

// setProbeLocked marks snapshot id as a cut for an analysis, or with false no
// longer. The caller holds r.mu.
func (r *registry) setProbeLocked(id snapshot.SnapshotID, on bool) {
	if on && !r.probes[id] {
		r.probes[id] = true
		r.probing.Add(1)
	} else if !on && r.probes[id] {
		delete(r.probes, id)
		r.probing.Add(-1)
	}
}

// isProbe reports whether snapshot id is a cut for an analysis, whose
// records carry no state.
func (r *registry) isProbe(id snapshot.SnapshotID) bool {
	if r.probing.Load() == 0 {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.probes[id]
}

// isPending reports whether snapshot id is in progress (or being saved).
func (r *registry) isPending(id snapshot.SnapshotID) bool {
	v := r.view.Load()
	if v == nil {
		return id > 0 // none started yet
	}
	// An id after the last started is one the cluster's coordinator has
	// started and whose start has not reached this member yet: a marker
	// of it overtook the start.
	return slices.Contains(v.pending, id) || id > v.started
}

// newestPending returns the newest snapshot in (lo, hi] that is in
// progress, or 0 if none is. Recording it records every older one the
// participant has not recorded, so a hurried start asked for several
// overlapping snapshots records those still running when the newest
// was aborted meanwhile.
func (r *registry) newestPending(lo, hi snapshot.SnapshotID) snapshot.SnapshotID {
	if hi <= lo {
		return 0
	}
	v := r.view.Load()
	if v == nil || hi > v.started {
		return hi // see isPending
	}
	var newest snapshot.SnapshotID
	for _, id := range v.pending {
		if id > lo && id <= hi {
			newest = max(newest, id)
		}
	}
	return newest
}

// pendingView is a copy of the registry's pending and started.
type pendingView struct {
	pending []snapshot.SnapshotID
	started snapshot.SnapshotID
}

// addPendingLocked notes snapshot id as started and in progress. The
// caller holds r.mu.
func (r *registry) addPendingLocked(id snapshot.SnapshotID) {
	if !slices.Contains(r.pending, id) {
		r.pending = append(r.pending, id)
	}
	r.started = max(r.started, id)
	r.publishLocked()
}

// endPendingLocked notes snapshot id as over (and started, if its start
// never came here). The caller holds r.mu.
func (r *registry) endPendingLocked(id snapshot.SnapshotID) {
	r.pending = slices.DeleteFunc(r.pending, func(p snapshot.SnapshotID) bool { return p == id })
	r.started = max(r.started, id)
	r.publishLocked()
}

// clearPendingLocked lets every snapshot in progress go. The caller
// holds r.mu.
func (r *registry) clearPendingLocked() {
	r.pending = nil
	r.publishLocked()
}

func (r *registry) publishLocked() {
	r.view.Store(&pendingView{pending: slices.Clone(r.pending), started: r.started})
}

// stop moves a participant that stopped from the live ones to the
// stopped ones: its sender key keeps naming it, through a stopped entry,
// and its name is refused (ErrNameStopped) until it is dropped (drop).
//
// It returns the last snapshot started before: those after do not have p
// among their participants; and the last round of drops handed over
// before (drop): those after are not handed to p.
func (r *registry) stop(p *participant) (after, round snapshot.SnapshotID) {
	entry := &participant{id: p.id, key: p.key, finalEpoch: p.finalEpoch, parent: p.parent}
	entry.stopped.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[p.id] == p {
		delete(r.byID, p.id)
		r.version++
	}
	r.byKey[p.key] = entry
	r.stopped[p.id] = p.key
	r.unheard[p.id] = true
	return r.started, r.round
}

// remove unregisters a participant that never ran.
func (r *registry) remove(p *participant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[p.id] == p {
		delete(r.byID, p.id)
		r.version++
	}
	delete(r.byKey, p.key)
}

// drop hands the coordinator's drops to the participants here that are
// to forget them, their peers, those that sent to them since they
// stopped, and their parents; then it notes their round as handed over
// (a participant that stops from then on names none of them in its final
// counters, once it has taken what it holds), and gives the names again:
// no participant counts a channel with them once it has taken the word,
// and a new one under a name finds the word handed. Their stopped
// entries go too: everything they sent has been received, so no queue
// holds a message under their keys that its receiver has not already
// named; so do their stand-ins, whether or not their member's word of
// their stop came yet.
//
// The names of this member's participants are given again only once
// every member in wait has applied the round too (freeing); with none,
// at once. It returns the round.
func (r *registry) drop(drops []snapshot.Drop, wait []string) snapshot.SnapshotID {
	r.mu.Lock()
	defer r.mu.Unlock()
	hand := make(map[*participant][]snapshot.ProcessID)
	var round snapshot.SnapshotID
	for _, d := range drops {
		round = max(round, d.After)
		for _, id := range d.Peers {
			if p := r.byID[id]; p != nil {
				hand[p] = append(hand[p], d.Process)
			}
		}
		for q := range r.senders[d.Process] {
			hand[q] = append(hand[q], d.Process)
		}
		if k, ok := r.stopped[d.Process]; ok {
			// Its parent, if still here, names it among its children
			// until its Terminated comes, and a snapshot that requires a
			// child dropped waits for ever. The parent may be in neither
			// list: counting in sums, no record names a peer.
			if e := r.byKey[k]; e != nil && e.parent != nil && r.byID[e.parent.id] == e.parent {
				hand[e.parent] = append(hand[e.parent], d.Process)
			}
		}
	}
	for p, ids := range hand {
		p.handDrops(ids)
	}
	r.round = max(r.round, round)
	for _, d := range drops {
		id := d.Process
		delete(r.senders, id)
		delete(r.unheard, id)
		if k, ok := r.stopped[id]; ok {
			if e := r.byKey[k]; e != nil && e.stopped.Load() {
				delete(r.byKey, k)
			}
			delete(r.stopped, id)
			if len(wait) > 0 {
				r.freeing[id] = freeingName{round: round, wait: wait}
			}
		}
		if e := r.remotes[id]; e != nil {
			// Dropped, it stopped; a new participant under its name is
			// born only once this member applied the drop (freeing).
			e.stopped.Store(true)
			delete(r.byKey, e.key)
			delete(r.remotes, id)
			r.version++
		}
	}
	return round
}

// appliedBy notes that member m applied every round of drops up to
// round, and gives the names that waited for no one else.
func (r *registry) appliedBy(m string, round snapshot.SnapshotID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if round <= r.applied[m] {
		return
	}
	r.applied[m] = round
	r.freeLocked()
}

// freeLocked gives the names whose rounds every member they wait for has
// applied. The caller holds r.mu.
func (r *registry) freeLocked() {
	for id, f := range r.freeing {
		if !slices.ContainsFunc(f.wait, func(m string) bool { return r.applied[m] < f.round }) {
			delete(r.freeing, id)
		}
	}
}

// membersNow takes the cluster's members: no word that it applied a
// round of drops comes from one that is not among them, so the names
// waiting for it wait for the others only, and one that comes back
// starts with no rounds applied. Every member not among them counts,
// one that left before this member knew it too.
func (r *registry) membersNow(members []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := func(m string) bool { return !slices.Contains(members, m) }
	for id, f := range r.freeing {
		if slices.ContainsFunc(f.wait, gone) {
			f.wait = slices.DeleteFunc(slices.Clone(f.wait), gone)
			r.freeing[id] = f
		}
	}
	maps.DeleteFunc(r.applied, func(m string, _ snapshot.SnapshotID) bool { return gone(m) })
	r.freeLocked()
}

// nameFreeLocked reports whether a participant may be born under name id
// as far as drops go: it is neither stopped and not dropped, nor dropped
// in a round some other member has not applied yet. The caller holds
// r.mu.
func (r *registry) nameFreeLocked(id snapshot.ProcessID) bool {
	_, stopped := r.stopped[id]
	_, freeing := r.freeing[id]
	return !stopped && !freeing
}

// lookupOrStopped returns the live participant id or, if id stopped and
// is not yet dropped, its stopped entry: sends to it from from still
// count on their channel, and from is noted to drop it with the others
// (drop).
func (r *registry) lookupOrStopped(id snapshot.ProcessID, from *participant) *participant {
	r.mu.RLock()
	p := r.byID[id]
	k, stopped := r.stopped[id]
	_, noted := r.senders[id][from]
	if stopped && noted {
		p = r.byKey[k]
	}
	r.mu.RUnlock()
	if p != nil || !stopped {
		return p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, stopped = r.stopped[id]; !stopped {
		return r.byID[id] // dropped meanwhile
	}
	if r.senders[id] == nil {
		r.senders[id] = make(map[*participant]struct{})
	}
	r.senders[id][from] = struct{}{}
	return r.byKey[k]
}

// isStopped reports whether participant id has stopped and is not
// dropped yet.
func (r *registry) isStopped(id snapshot.ProcessID) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.stopped[id]
	return ok
}

func (r *registry) lookup(id snapshot.ProcessID) *participant {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

func (r *registry) lookupKey(k mailbox.SenderKey) *participant {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byKey[k]
}

// stoppingLocked calls f with every participant whose stop has not
// reached the coordinator (snapshot.Coordinator.Stopping). The caller
// holds r.mu.
func (r *registry) stoppingLocked(f func(snapshot.ProcessID)) {
	for id := range r.unheard {
		f(id)
	}
}

// heard notes that participant id's stop reached the guardian.
func (r *registry) heard(id snapshot.ProcessID) {
	r.mu.Lock()
	delete(r.unheard, id)
	r.mu.Unlock()
}

// unheardRemoteGone forgets the other members' participants whose stop
// frames went to a coordinator before this one: they will not come here.
func (r *registry) unheardRemoteGone() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.unheard {
		if r.remotes[id] != nil {
			delete(r.unheard, id)
		}
	}
}

// live returns the participants in id order.
func (r *registry) live() []*participant {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.liveLocked()
}

// liveLocked is live for a caller that holds r.mu.
func (r *registry) liveLocked() []*participant {
	ps := make([]*participant, 0, len(r.byID))
	for _, p := range r.byID {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *participant) int { return strings.Compare(string(a.id), string(b.id)) })
	return ps
}
