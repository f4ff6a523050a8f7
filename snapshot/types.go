package snapshot

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ProcessID names one process (in actorsnap, one actor). It must be unique
// among the processes of a system and stable across a restore.
type ProcessID string

// SnapshotID names one global snapshot. Zero is not a valid id. IDs are
// allocated by one allocator, densely and increasingly (1, 2, 3, ...): a
// Process remembers finished ids as a watermark plus the few finished ids
// above it, so sparse ids cost memory until the gaps below them finish.
type SnapshotID uint64

// Channel is the one-way FIFO channel from one process to another.
type Channel struct {
	From, To ProcessID
}

// String returns "from->to".
func (c Channel) String() string { return string(c.From) + "->" + string(c.To) }

// compare orders channels by sender, then receiver.
func (c Channel) compare(d Channel) int {
	if r := strings.Compare(string(c.From), string(d.From)); r != 0 {
		return r
	}
	return strings.Compare(string(c.To), string(d.To))
}

// Mode selects the snapshot algorithm of a Process.
type Mode uint8

const (
	// Unaligned is Chandy–Lamport: a process records its state at the first
	// marker it sees, never blocks, and records the messages that arrive on
	// its other incoming channels until their markers come.
	Unaligned Mode = iota
	// Aligned is Flink's asynchronous barrier snapshotting: a process
	// blocks each incoming channel on which a snapshot's barrier (marker)
	// arrives, records its state once barriers have arrived on every
	// incoming channel that is not a back edge, then unblocks. Only back
	// edges, and channels the process did not wait for, get channel state.
	Aligned
	// Epochs is Lai–Yang's colouring with Mattern's counters: every
	// message carries its sender's epoch, the newest snapshot it has
	// recorded. A message from a newer epoch makes its receiver record
	// first (an implicit marker); a message from an older epoch received
	// after the receiver recorded is channel state, reported at once; and
	// the Assembler decides completion by the channels' counters. No
	// marker is ever sent, so a snapshot costs messages per participant,
	// not per channel.
	Epochs
)

// ParseMode returns the mode named s ("unaligned", "aligned" or "epoch").
func ParseMode(s string) (Mode, error) {
	switch s {
	case "unaligned":
		return Unaligned, nil
	case "aligned":
		return Aligned, nil
	case "epoch":
		return Epochs, nil
	}
	return 0, fmt.Errorf("%w: unknown mode %q (want unaligned, aligned or epoch)", ErrConfig, s)
}

// Valid reports whether m is one of the modes.
func (m Mode) Valid() bool { return m <= Epochs }

// String returns the mode's name as used in stored snapshots and the CLI.
func (m Mode) String() string {
	switch m {
	case Unaligned:
		return "unaligned"
	case Aligned:
		return "aligned"
	case Epochs:
		return "epoch"
	default:
		return fmt.Sprintf("mode(%d)", uint8(m))
	}
}

// Stamp is what a sender attaches to an application message: the channel's
// sequence number and, on the first message of a channel only, which
// snapshots the sender had already recorded (docs/design.md, decision 2). A stamp
// with Seq > 1 never carries anything else but, in the Epochs mode, the
// sender's epoch, so it costs nothing to build.
type Stamp struct {
	// Seq is the message's position on its channel, starting at 1.
	Seq uint64
	// Recorded lists, on the first message of a channel (Seq == 1), the
	// snapshots the sender had recorded or finished when it sent it, in
	// increasing order. For those the message acts as a marker.
	Recorded []SnapshotID
	// Horizon, on the first message of a channel, says every snapshot id up
	// to and including it was finished at the sender.
	Horizon SnapshotID
	// Epoch, in the Epochs mode and on every message, is the newest
	// snapshot its sender had recorded when it sent it: every snapshot up
	// to it was recorded or finished there. Zero in the other modes.
	Epoch SnapshotID
}

// covers reports whether the sender had recorded (or finished) id when it
// sent the message carrying st.
func (st *Stamp) covers(id SnapshotID) bool {
	if id <= st.Horizon {
		return true
	}
	_, found := slices.BinarySearch(st.Recorded, id)
	return found
}

// Message is one application message recorded as channel state. Payload is
// the caller's value, held by reference: a message recorded for several
// concurrent snapshots is stored once.
type Message struct {
	Seq     uint64
	Payload any
}

// PeerCount is a counter kept per channel in a LocalRecord.
type PeerCount struct {
	Peer ProcessID
	N    uint64
}

// LocalRecord is one process's part of a snapshot, produced when it records
// its state. The counters are taken at that moment: Sent holds, per outgoing
// channel, the messages sent before the record; Received holds, per incoming
// channel, the messages received before it. The messages recorded after it
// arrive later as ChannelRecords. The caller fills Kind and State.
type LocalRecord struct {
	Snapshot SnapshotID
	Process  ProcessID
	Kind     string
	State    []byte
	Sent     []PeerCount
	Received []PeerCount
	// Waits is what the process waited for when it recorded (its caller
	// fills it in, as State); nil when nothing.
	Waits *Waits
	// Prev, in the Epochs mode, is the snapshot of the process's previous
	// record (zero before its first), and Prior gives, for each channel
	// of Sent in its order, the count the process had listed for it as of
	// that record (zero for a channel it had not listed): so the Ledger,
	// in step with the process, adds what each record changed to its
	// receivers' sums and keeps no count per channel. Changes says that
	// Sent lists only the channels whose counts changed since Prev, and
	// Received nothing: the coordinator judges each receiver by
	// ReceivedTotal. Without Changes the record lists every channel, as
	// in the other modes (a process's first record, the first after
	// Resync, a final record, or one that changed most of them), and a
	// Ledger out of step with the process takes its counts whole.
	Prev    SnapshotID
	Prior   []uint64
	Changes bool
	// ReceivedTotal, in the Epochs mode, counts the messages the process
	// received before the record on every channel it has (the sum of
	// Received when that lists them all). Completion there is judged per
	// receiver, not per channel: everything sent to a process before its
	// senders' records equals what it received before its own record plus
	// what it reported in flight.
	ReceivedTotal uint64
	// Epoch, on a final record (Process.Counters) in the Epochs mode, is
	// the process's epoch when it stopped: what it sent counts after the
	// cut of every snapshot up to it (it recorded them, or was born after
	// their cut), and before the cut of the others.
	Epoch SnapshotID
	// SentTotal, in the Epochs mode counting in sums (Config.Sums),
	// counts the messages the process sent before the record, to every
	// participant: with ReceivedTotal it is all such a record counts
	// (Sent and Received are empty).
	SentTotal uint64
	// Lost, on a final record counting in sums, counts by epoch the
	// messages that were still queued for the process when it stopped
	// (Process.Lose): sent and never to be received, they count as
	// received in every snapshot above their epoch that the process
	// stands in departed; nil when none was. A pointer, so that a record
	// (one per participant per snapshot) does not grow by a slice that
	// only a final record fills.
	Lost *EpochCounts
}

// lost returns the counts of r.Lost, if any.
func (r *LocalRecord) lost() EpochCounts {
	if r.Lost == nil {
		return nil
	}
	return *r.Lost
}

// EpochCount counts messages by the epoch their sender stamped them with.
type EpochCount struct {
	Epoch SnapshotID
	N     uint64
}

// EpochCounts are counts by epoch, sorted by epoch.
type EpochCounts []EpochCount

// add adds n messages of epoch e to counts, kept sorted by epoch, and
// returns it.
func (counts EpochCounts) add(e SnapshotID, n uint64) EpochCounts {
	i, found := slices.BinarySearchFunc(counts, e, func(c EpochCount, e SnapshotID) int { return cmp.Compare(c.Epoch, e) })
	if found {
		counts[i].N += n
		return counts
	}
	return slices.Insert(counts, i, EpochCount{Epoch: e, N: n})
}

// before returns how many of counts have an epoch below id: the
// messages lost that a snapshot id counted as sent.
func (counts EpochCounts) before(id SnapshotID) uint64 {
	var n uint64
	for _, c := range counts {
		if c.Epoch >= id {
			break
		}
		n += c.N
	}
	return n
}

// ChannelRecord is the closed recording of one incoming channel for one
// snapshot: the messages received on it after the receiver recorded its
// state and before the sender's marker, in FIFO order.
type ChannelRecord struct {
	Snapshot SnapshotID
	Channel  Channel
	Messages []Message
}

// MarkerSend asks the caller to send a marker for Snapshot to To, on the
// same FIFO path as application messages.
type MarkerSend struct {
	Snapshot SnapshotID
	To       ProcessID
}

// Errors returned by Process and Assembler. Each is wrapped with the detail
// of the case; test with errors.Is.
var (
	// ErrInvalidID is returned when a snapshot id is zero.
	ErrInvalidID = errors.New("snapshot: invalid snapshot id 0")
	// ErrFinished is returned by Initiate for a snapshot this process has
	// already been told is finished.
	ErrFinished = errors.New("snapshot: snapshot already finished")
	// ErrSequence is returned by Receive when a stamp's sequence number is
	// not the next one on its channel: a message was lost, duplicated or
	// reordered, which the algorithm cannot tolerate.
	ErrSequence = errors.New("snapshot: channel sequence broken")
	// ErrProtocol is returned when an input contradicts the protocol: a
	// second marker for one snapshot on one channel, or a first message that
	// claims its sender had not recorded a snapshot whose marker it already
	// sent.
	ErrProtocol = errors.New("snapshot: protocol violation")
	// ErrAborted is wrapped by every AbortError.
	ErrAborted = errors.New("snapshot: aborted")
	// ErrTimeout is the reason of a snapshot aborted at its deadline.
	ErrTimeout = errors.New("snapshot: timed out")
	// ErrImbalance is the reason of a snapshot aborted because a channel's
	// counters cannot balance: a message was lost or duplicated.
	ErrImbalance = errors.New("snapshot: channel does not balance")
	// ErrIncomplete is returned by Assembler.Global before completion.
	ErrIncomplete = errors.New("snapshot: not complete")
	// ErrConfig is returned for an invalid Config or AssemblerConfig.
	ErrConfig = errors.New("snapshot: invalid config")
)

// SequenceError is returned by Receive when a stamp is out of sequence.
type SequenceError struct {
	Channel  Channel
	Expected uint64
	Got      uint64
}

func (e *SequenceError) Error() string {
	return fmt.Sprintf("snapshot: channel %s: expected sequence %d, got %d", e.Channel, e.Expected, e.Got)
}

// Unwrap returns ErrSequence.
func (e *SequenceError) Unwrap() error { return ErrSequence }

// BalanceError describes a channel whose counters do not balance:
// Sent != Received + Recorded.
type BalanceError struct {
	Snapshot SnapshotID
	Channel  Channel
	Sent     uint64 // messages sent before the sender recorded
	Received uint64 // messages received before the receiver recorded
	Recorded uint64 // messages recorded as the channel's state
}

func (e *BalanceError) Error() string {
	return fmt.Sprintf("snapshot %d: channel %s does not balance: sent %d before record, received %d before record, recorded %d",
		e.Snapshot, e.Channel, e.Sent, e.Received, e.Recorded)
}

// Unwrap returns ErrImbalance.
func (e *BalanceError) Unwrap() error { return ErrImbalance }

// ReceiverBalanceError describes a receiver whose counts do not balance,
// in the Epochs mode with a Ledger, where channels are judged together
// per receiver: Sent (to it, by every sender before its record) !=
// Received (before its own record, from everyone) + Recorded (reported in
// flight to it).
type ReceiverBalanceError struct {
	Snapshot SnapshotID
	Receiver ProcessID
	Sent     uint64
	Received uint64
	Recorded uint64
}

func (e *ReceiverBalanceError) Error() string {
	return fmt.Sprintf("snapshot %d: receiver %s does not balance: sent to it %d before records, received %d before its record, recorded %d",
		e.Snapshot, e.Receiver, e.Sent, e.Received, e.Recorded)
}

// Unwrap returns ErrImbalance.
func (e *ReceiverBalanceError) Unwrap() error { return ErrImbalance }

// Lost reports whether the imbalance is a shortfall (messages sent and
// neither received nor recorded) rather than a surplus.
func (e *ReceiverBalanceError) Lost() bool { return e.Received+e.Recorded < e.Sent }

// LostError aborts a snapshot counted in sums (Config.Sums) that needed
// messages lost with their receiver: sent before their sender's record,
// to a participant that recorded the snapshot and stopped before they
// reached it (Coordinator.Lost).
type LostError struct {
	Snapshot SnapshotID
	Receiver ProcessID
	N        uint64
}

func (e *LostError) Error() string {
	return fmt.Sprintf("snapshot %d: %d messages in flight to %s at the cut were lost with it: it stopped before they reached it", e.Snapshot, e.N, e.Receiver)
}

// Unwrap returns ErrImbalance.
func (e *LostError) Unwrap() error { return ErrImbalance }

// SumBalanceError aborts a snapshot counted in sums whose totals cannot
// balance: Sent before the records, Received before them (lost
// messages included), Recorded in flight.
type SumBalanceError struct {
	Snapshot                 SnapshotID
	Sent, Received, Recorded uint64
}

func (e *SumBalanceError) Error() string {
	return fmt.Sprintf("snapshot %d: sums do not balance: sent %d before the records, received %d before them, recorded %d in flight", e.Snapshot, e.Sent, e.Received, e.Recorded)
}

// Unwrap returns ErrImbalance.
func (e *SumBalanceError) Unwrap() error { return ErrImbalance }
