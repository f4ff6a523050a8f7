package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/snapshot"
)

// A round of drops reaches, whole, the peers of each participant dropped
// and those that sent to it after its stop; a participant that leaves
// the registry afterwards names that round with its stop, and one that
// left before names the round before it, so that the coordinator strikes
// the names dropped since off its final counters. The stops of the
// registry's own participants are unheard until the guardian hears them.
func TestRegistryStopNamesTheRoundHandedOut(t *testing.T) {
	r := newRegistry()
	add := func(id snapshot.ProcessID, key mailbox.SenderKey) *participant {
		p := &participant{id: id, key: key}
		r.byID[id], r.byKey[key] = p, p
		return p
	}
	a, b, c, d := add("a", 1), add("b", 2), add("c", 3), add("d", 4)
	_, round := r.stop(b)
	assert.Zero(t, round)
	require.NotNil(t, r.lookupOrStopped("b", c), "c sends to b, stopped: its channel counts")
	_, round = r.stop(d) // d leaves before the round below
	assert.Zero(t, round)

	r.drop([]snapshot.Drop{{Process: "b", Peers: []snapshot.ProcessID{"a", "d"}, After: 4}}, nil)
	assert.Equal(t, []snapshot.ProcessID{"b"}, a.drops, "a peer")
	assert.Equal(t, []snapshot.ProcessID{"b"}, c.drops, "a sender since the stop")
	assert.Empty(t, d.drops, "d had left: its stop names round 0, and b is struck off its final")
	assert.True(t, a.awaitsNew.Load())

	_, round = r.stop(c)
	assert.Equal(t, snapshot.SnapshotID(4), round, "c took round 4 before its final")
	var unheard []snapshot.ProcessID
	r.mu.Lock()
	r.stoppingLocked(func(id snapshot.ProcessID) { unheard = append(unheard, id) })
	r.mu.Unlock()
	assert.ElementsMatch(t, []snapshot.ProcessID{"c", "d"}, unheard, "b, dropped, is not unheard")
	r.heard("c")
	unheard = nil
	r.mu.Lock()
	r.stoppingLocked(func(id snapshot.ProcessID) { unheard = append(unheard, id) })
	r.mu.Unlock()
	assert.Equal(t, []snapshot.ProcessID{"d"}, unheard)
}

// A dropped participant's parent is handed the drop though it is in
// neither list (counting in sums, no record names a peer): its records
// name the child until the child's Terminated comes, which may be after
// the drop, and a snapshot that required a child dropped would wait for
// ever. A parent that stopped is handed nothing.
func TestRegistryDropReachesTheParent(t *testing.T) {
	r := newRegistry()
	add := func(id snapshot.ProcessID, key mailbox.SenderKey, parent *participant) *participant {
		p := &participant{id: id, key: key, parent: parent}
		r.byID[id], r.byKey[key] = p, p
		return p
	}
	hub := add("hub", 1, nil)
	courier := add("hub/courier", 2, hub)
	gone := add("gone", 3, nil)
	orphan := add("gone/courier", 4, gone)
	r.stop(courier)
	r.stop(gone)
	r.stop(orphan)

	r.drop([]snapshot.Drop{{Process: "hub/courier", After: 1}, {Process: "gone/courier", After: 1}}, nil)
	assert.Equal(t, []snapshot.ProcessID{"hub/courier"}, hub.drops, "the parent")
	assert.True(t, hub.awaitsNew.Load())
	assert.Empty(t, gone.drops, "a parent that stopped")

	hub.children = map[snapshot.ProcessID]bool{"hub/courier": true}
	var err error
	hub.proc, err = snapshot.NewProcess(snapshot.Config{ID: "hub", Mode: snapshot.Epochs, Sums: true})
	require.NoError(t, err)
	hub.takeDrops()
	assert.Empty(t, hub.children, "its records no longer name the child")
}

// In a cluster, the name of a participant dropped here is given again
// only once every other member said it applied the round (or a later
// one), or left: before that, a new participant under the name could
// reach another member's participants before the drop does, and be
// counted on the channels of the one before, which the drop then
// forgets.
func TestRegistryNameWaitsForEveryMember(t *testing.T) {
	r := newRegistry()
	for _, id := range []snapshot.ProcessID{"x", "y"} {
		p := &participant{id: id, key: mailbox.SenderKey(len(r.byKey) + 1)}
		r.byID[id], r.byKey[p.key] = p, p
		r.stop(p)
	}
	free := func(id snapshot.ProcessID) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.nameFreeLocked(id)
	}
	assert.False(t, free("x"), "stopped, not dropped")

	round := r.drop([]snapshot.Drop{{Process: "x", After: 5}, {Process: "y", After: 6}}, []string{"m1", "m2"})
	require.Equal(t, snapshot.SnapshotID(6), round)
	assert.False(t, free("x"), "no member applied it yet")
	r.appliedBy("m1", 6)
	r.appliedBy("m2", 5)
	assert.False(t, free("x"), "m2 applied only an earlier round")
	r.appliedBy("m2", 7)
	assert.True(t, free("x"))
	assert.True(t, free("y"))
	assert.Empty(t, r.freeing, "nothing kept once given")

	z := &participant{id: "z", key: 9}
	r.byID["z"], r.byKey[9] = z, z
	r.stop(z)
	r.drop([]snapshot.Drop{{Process: "z", After: 8}}, []string{"m1", "m2"})
	r.appliedBy("m1", 8)
	assert.False(t, free("z"))
	r.membersNow([]string{"m0", "m1"})
	assert.True(t, free("z"), "a member that left is not waited for")
	r.appliedBy("m2", 1)
	assert.Equal(t, snapshot.SnapshotID(1), r.applied["m2"], "back, it starts with no rounds")

	w := &participant{id: "w", key: 10}
	r.byID["w"], r.byKey[10] = w, w
	r.stop(w)
	r.drop([]snapshot.Drop{{Process: "w", After: 9}}, nil)
	assert.True(t, free("w"), "alone, a name is given at once")
}
