package actors

import (
	"slices"
	"strings"
	"sync"

	"github.com/actorsnap/actorsnap/snapshot"
)

// departedBook keeps the final records of stopped participants: receivers
// keep naming their channels in their records, and senders their own, so
// every later snapshot that a record names one in needs it. The guardian
// writes it; assemblers read it on the participants' goroutines
// (AssemblerConfig.Departed), so that a snapshot adds only the departed
// its records name.
type departedBook struct {
	mu sync.RWMutex
	m  map[snapshot.ProcessID]departure
}

// departure is a stopped participant's final record, for the snapshots
// started after it stopped.
type departure struct {
	final   snapshot.LocalRecord
	after   snapshot.SnapshotID // the last snapshot started when it stopped
	drained bool                // a complete snapshot counted all it sent: it is to be dropped
}

func (b *departedBook) add(p snapshot.ProcessID, final snapshot.LocalRecord, after snapshot.SnapshotID) {
	b.mu.Lock()
	b.m[p] = departure{final: final, after: after}
	b.mu.Unlock()
}

// drained lists the departed that a complete snapshot, gl, shows drained:
// started after they stopped (they stand in it from its start), every
// message they sent received before its receiver recorded (none in
// flight). It marks them, so that each is listed once.
func (b *departedBook) drained(gl *snapshot.Global) []snapshot.ProcessID {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []snapshot.ProcessID
	for id, d := range b.m {
		if d.drained || d.after >= gl.ID || !sentAllReceived(gl, id) {
			continue
		}
		d.drained = true
		b.m[id] = d
		out = append(out, id)
	}
	return out
}

// sentAllReceived reports whether every channel from p in gl balances
// with nothing in flight.
func sentAllReceived(gl *snapshot.Global, p snapshot.ProcessID) bool {
	i, _ := slices.BinarySearchFunc(gl.Channels, p, func(c snapshot.ChannelState, p snapshot.ProcessID) int {
		return strings.Compare(string(c.Channel.From), string(p))
	})
	for ; i < len(gl.Channels) && gl.Channels[i].Channel.From == p; i++ {
		if c := &gl.Channels[i]; c.Sent != c.Received || len(c.Messages) > 0 {
			return false
		}
	}
	return true
}

// remove forgets the departed in gone, and their names in the final
// records of the others (copies: assemblers may hold the old ones).
func (b *departedBook) remove(gone map[snapshot.ProcessID]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range gone {
		delete(b.m, id)
	}
	named := func(pc snapshot.PeerCount) bool { return gone[pc.Peer] }
	for id, d := range b.m {
		if !slices.ContainsFunc(d.final.Sent, named) && !slices.ContainsFunc(d.final.Received, named) {
			continue
		}
		d.final.Sent = slices.DeleteFunc(slices.Clone(d.final.Sent), named)
		d.final.Received = slices.DeleteFunc(slices.Clone(d.final.Received), named)
		b.m[id] = d
	}
}

// undrained lists the departed that no complete snapshot has shown drained
// yet: a message of theirs may still be on its way to a participant that
// records before it arrives and so names them in no record (with remote
// delivery, or a later start overtaking it), so each snapshot takes them
// from its start.
func (b *departedBook) undrained() []snapshot.ProcessID {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []snapshot.ProcessID
	for id, d := range b.m {
		if !d.drained {
			out = append(out, id)
		}
	}
	return out
}

// before returns p's final record if p left the registry before snapshot
// id began. One that left after is among id's participants: the guardian
// settles it there when it hears of the stop (guardian.stopped).
func (b *departedBook) before(id snapshot.SnapshotID, p snapshot.ProcessID) (snapshot.LocalRecord, bool) {
	b.mu.RLock()
	d, ok := b.m[p]
	b.mu.RUnlock()
	if !ok || d.after >= id {
		return snapshot.LocalRecord{}, false
	}
	return d.final, true
}
