package actors

import "github.com/actorsnap/actorsnap/snapshot"

// Messages between participants. They travel as user messages in the
// receiver's queue for the sender, so they keep FIFO order with data
// (docs/design.md, decision 1).
type (
	// markerMsg is a Chandy–Lamport marker.
	markerMsg struct{ id snapshot.SnapshotID }
	// firstMsg wraps the first message of a channel when it must say which
	// snapshots its sender had recorded (decision 2).
	firstMsg struct {
		stamp snapshot.Stamp
		msg   interface{}
	}
	// departedMsg is the last message of a participant that stopped.
	departedMsg struct{}
)

// Control messages from the guardian, in each participant's control queue.
type (
	initiateMsg struct {
		id    snapshot.SnapshotID
		start bool // broadcast: Process.Start, not Initiate
	}
	// abortMsg tells a participant that has not recorded a snapshot that
	// it was aborted: an aligned one unblocks what it blocked for it.
	abortMsg struct{ id snapshot.SnapshotID }
	// budgetMsg is posted by a participant's mailbox to the participant
	// when the messages held for its paused senders go over the budget.
	budgetMsg struct{}
)

// heldMsg is a message held behind a barrier (participant.receive).
type heldMsg struct {
	stamp snapshot.Stamp
	msg   interface{}
}
