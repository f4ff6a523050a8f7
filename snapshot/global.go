package snapshot

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Global is a complete, consistent global snapshot: the state of every
// participant and the messages in flight on every channel, with the
// counters that prove the cut consistent. Participants are sorted by ID and
// Channels by sender then receiver; the accessors rely on that order, so
// code that builds a Global by hand (a decoder, say) calls Verify.
type Global struct {
	ID           SnapshotID
	Mode         Mode
	Start, End   time.Time
	Participants []Participant
	Channels     []ChannelState
	// Violations are the invariants the snapshot broke, checked when it
	// completed (actors.WithInvariant); none when it broke none or no
	// invariant was given.
	Violations []Violation
	// ReceiverCounts says that each participant's SentTo and Received
	// are kept: the numbers an Epochs snapshot judged per receiver was
	// judged by. Such a snapshot lists only the channels with messages in
	// flight, so these are what lets Verify prove that none is left out.
	// False in the other modes, and in epoch snapshots stored before the
	// counts were (file format 4, PostgreSQL row format 3).
	ReceiverCounts bool
	// Sums, for a snapshot counted in sums, are the totals it was judged
	// by; Verify holds them to Sent = Received + every message in
	// flight, so that a channel left out, or a message left off one,
	// fails it. Nil in the other disciplines, and in snapshots stored
	// before the stores kept them (file format 4, PostgreSQL row format
	// 3).
	Sums *SumCounts
}

// SumCounts are a snapshot's sums: the messages sent before the records
// and those received before them (lost ones included), over every
// participant and every process dropped before it.
type SumCounts struct {
	Sent, Received uint64
}

// Participant is one process's recorded state.
type Participant struct {
	ID    ProcessID
	Kind  string
	State []byte
	// Departed marks a process that had stopped before the snapshot: it has
	// no state, and is listed only because messages it sent were still in
	// flight or counted.
	Departed bool
	// Waits is what it waited for when it recorded; nil when nothing.
	Waits *Waits
	// SentTo counts the messages sent to it before their senders
	// recorded; Received those it received before it recorded. Kept when
	// Global.ReceiverCounts (zero for a departed participant): SentTo
	// then equals Received plus the messages in flight to it.
	SentTo, Received uint64
}

// ChannelState is one channel's part of a snapshot.
type ChannelState struct {
	Channel Channel
	// Sent counts the messages sent on the channel before its sender
	// recorded; Received those received before its receiver recorded.
	Sent, Received uint64
	// Messages are the channel's state: sent before the sender recorded and
	// received after the receiver did, in FIFO order. Their sequence numbers
	// run from Received+1 to Sent.
	Messages []Message
}

// Participant returns the recorded participant id.
func (g *Global) Participant(id ProcessID) (Participant, bool) {
	i, ok := g.index(id)
	if !ok {
		return Participant{}, false
	}
	return g.Participants[i], true
}

// index returns the index of participant id in Participants.
func (g *Global) index(id ProcessID) (int, bool) {
	return slices.BinarySearchFunc(g.Participants, id, func(p Participant, id ProcessID) int {
		return strings.Compare(string(p.ID), string(id))
	})
}

// State returns the recorded state of id.
func (g *Global) State(id ProcessID) ([]byte, bool) {
	p, ok := g.Participant(id)
	return p.State, ok
}

// Channel returns the recorded state of channel c.
func (g *Global) Channel(c Channel) (ChannelState, bool) {
	i, ok := slices.BinarySearchFunc(g.Channels, c, func(cs ChannelState, c Channel) int { return cs.Channel.compare(c) })
	if !ok {
		return ChannelState{}, false
	}
	return g.Channels[i], true
}

// InFlight returns the messages in flight on c when the snapshot was taken.
func (g *Global) InFlight(c Channel) []Message {
	cs, _ := g.Channel(c)
	return cs.Messages
}

// TotalInFlight returns the number of messages in flight on all channels.
func (g *Global) TotalInFlight() int {
	n := 0
	for _, c := range g.Channels {
		n += len(c.Messages)
	}
	return n
}

// TotalStateBytes returns the size of all recorded states.
func (g *Global) TotalStateBytes() int {
	n := 0
	for _, p := range g.Participants {
		n += len(p.State)
	}
	return n
}

// Verify checks the snapshot's consistency proof: participants and
// channels are sorted and unique; every channel balances, Sent = Received +
// len(Messages), its endpoints are participants when anything crossed it,
// and its messages carry the sequence numbers Received+1 to Sent in order.
// With ReceiverCounts, every participant that had not departed balances
// too: SentTo = Received + the messages in flight to it (a
// *ReceiverBalanceError otherwise). With Sums, everything sent before
// the records was received before them or is in flight (VerifySums). The
// error names the first channel or receiver at fault and its counts.
func (g *Global) Verify() error {
	for i := 1; i < len(g.Participants); i++ {
		if strings.Compare(string(g.Participants[i-1].ID), string(g.Participants[i].ID)) >= 0 {
			return fmt.Errorf("snapshot %d: participants not sorted or duplicated at %q", g.ID, g.Participants[i].ID)
		}
	}
	// Receivers are looked up in a set when channels are many (a binary
	// search per channel was the guardian's largest cost at 1,000 actors),
	// by binary search otherwise.
	var receivers map[ProcessID]int
	if len(g.Participants) > 64 && len(g.Channels) >= len(g.Participants)/2 {
		receivers = make(map[ProcessID]int, len(g.Participants))
		for i := range g.Participants {
			receivers[g.Participants[i].ID] = i
		}
	}
	// With receiver counts, what is in flight to each receiver is summed
	// as its channels are checked, where each receiver is found anyway.
	var inFlight []uint64
	if g.ReceiverCounts {
		inFlight = make([]uint64, len(g.Participants))
	}
	from := 0 // cursor into Participants
	for i, c := range g.Channels {
		if i > 0 && g.Channels[i-1].Channel.compare(c.Channel) >= 0 {
			return fmt.Errorf("snapshot %d: channels not sorted or duplicated at %s", g.ID, c.Channel)
		}
		k := uint64(len(c.Messages))
		if c.Received+k != c.Sent || c.Received > c.Sent {
			return &BalanceError{Snapshot: g.ID, Channel: c.Channel, Sent: c.Sent, Received: c.Received, Recorded: k}
		}
		if c.Sent == 0 {
			continue
		}
		// Channels are sorted by sender: a cursor finds senders in one pass.
		for from < len(g.Participants) && g.Participants[from].ID < c.Channel.From {
			from++
		}
		if from == len(g.Participants) || g.Participants[from].ID != c.Channel.From {
			return fmt.Errorf("snapshot %d: channel %s: %s is not a participant", g.ID, c.Channel, c.Channel.From)
		}
		var to int
		ok := false
		if receivers != nil {
			to, ok = receivers[c.Channel.To]
		} else {
			to, ok = g.index(c.Channel.To)
		}
		if !ok {
			return fmt.Errorf("snapshot %d: channel %s: %s is not a participant", g.ID, c.Channel, c.Channel.To)
		}
		for j, m := range c.Messages {
			if want := c.Received + 1 + uint64(j); m.Seq != want {
				return fmt.Errorf("snapshot %d: channel %s: message %d has sequence %d, want %d", g.ID, c.Channel, j, m.Seq, want)
			}
		}
		if inFlight != nil {
			inFlight[to] += k
		}
	}
	if err := g.VerifySums(); err != nil {
		return err
	}
	if inFlight == nil {
		return nil
	}
	return g.receiversBalance(inFlight)
}

// VerifySums is the part of Verify that checks the sums: Sent =
// Received + every message in flight (a *SumBalanceError otherwise); nil
// without them. A decoder that checked the rest as it read calls it
// alone.
func (g *Global) VerifySums() error {
	s := g.Sums
	if s == nil {
		return nil
	}
	if k := uint64(g.TotalInFlight()); s.Received > s.Sent || s.Received+k != s.Sent {
		return &SumBalanceError{Snapshot: g.ID, Sent: s.Sent, Received: s.Received, Recorded: k}
	}
	return nil
}

// VerifyReceivers is the part of Verify that checks the receiver counts;
// nil without them. It takes a channel's receiver to be a participant,
// as the rest of Verify checks: a decoder that checked the rest as it
// read calls it alone.
//
// Each receiver balances: every channel to it is listed when it has
// something in flight, so one left out, or a message left off the end of
// one, shows as a receiver sent more than it received and holds in
// flight.
func (g *Global) VerifyReceivers() error {
	if !g.ReceiverCounts {
		return nil
	}
	inFlight := make([]uint64, len(g.Participants)) // by receiver's index
	for _, c := range g.Channels {
		if len(c.Messages) == 0 {
			continue
		}
		to, ok := g.index(c.Channel.To)
		if !ok {
			return fmt.Errorf("snapshot %d: channel %s: %s is not a participant", g.ID, c.Channel, c.Channel.To)
		}
		inFlight[to] += uint64(len(c.Messages))
	}
	return g.receiversBalance(inFlight)
}

// receiversBalance checks each participant's receiver counts against
// inFlight, the messages in flight to it by its index.
func (g *Global) receiversBalance(inFlight []uint64) error {
	for i := range g.Participants {
		p := &g.Participants[i]
		if p.Departed {
			if p.SentTo != 0 || p.Received != 0 {
				return fmt.Errorf("snapshot %d: departed participant %s has receiver counts", g.ID, p.ID)
			}
			continue
		}
		if k := inFlight[i]; p.Received > p.SentTo || p.Received+k != p.SentTo {
			return &ReceiverBalanceError{Snapshot: g.ID, Receiver: p.ID, Sent: p.SentTo, Received: p.Received, Recorded: k}
		}
	}
	return nil
}
