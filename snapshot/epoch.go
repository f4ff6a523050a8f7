package snapshot

import (
	"fmt"
	"slices"
)

// The Epochs mode: Lai and Yang's colouring of messages ("On distributed
// snapshots", Information Processing Letters 25, 1987), with the colour an
// epoch number so that snapshots may overlap, and completion decided by
// counters as in Mattern's algorithm ("Efficient algorithms for
// distributed snapshots and global virtual time approximation", Journal
// of Parallel and Distributed Computing 18, 1993). The rules:
//
//   - A process's epoch is the newest snapshot it has recorded. Recording
//     is monotone: a process that records id records every snapshot below
//     it that it has neither recorded nor finished, at the same moment,
//     with the same state. So every snapshot up to the epoch is recorded
//     or finished, and one number says which snapshots a message follows.
//   - Every message carries its sender's epoch (Stamp.Epoch).
//   - A message whose epoch is newer than the receiver's makes it record
//     up to that epoch before the message is delivered: the message was
//     sent after its sender's record, so it must come after the
//     receiver's too. That is the marker, carried by the message itself.
//   - A message whose epoch is older than a snapshot the receiver has
//     recorded was sent before its sender's record and received after the
//     receiver's: it is that snapshot's channel state, reported at once
//     (Ready.Channels, one message each) rather than held.
//   - No marker is sent. A channel's state is complete when the counters
//     balance: sent before the sender's record = received before the
//     receiver's record + reported (the Assembler's rule in every mode; in
//     this one it adds up partial reports). A snapshot therefore costs its
//     starts and records, one per participant, and one report per message
//     in flight, whatever the number of channels.
//   - Starts may be lazy: a process that never hears of a snapshot from
//     the coordinator records it at the first message from a newer epoch.

// maxEpochJump bounds how far one message may move a receiver's epoch:
// every id in between is recorded, so a stamp from a corrupt or hostile
// peer must not ask for billions of records. Ids are dense, so a real
// jump is at most the number of snapshots started since the receiver's
// last record.
const maxEpochJump = 1 << 16

// Epoch returns the newest snapshot this process has recorded (in the
// Epochs mode; zero in the others before any record): every snapshot up to
// it is recorded or finished here.
func (p *Process) Epoch() SnapshotID { return p.epoch }

// initEpoch sets a new process's epoch from its Config: the snapshots it
// takes no part in are behind it.
func (p *Process) initEpoch(cfg Config) {
	p.epoch = cfg.Horizon
	for _, id := range cfg.Finished {
		p.epoch = max(p.epoch, id)
	}
	// Every id up to the epoch is done here: the epoch says so to every
	// receiver, and a start of one of them must not record it.
	p.done.horizon = max(p.done.horizon, p.epoch)
	for id := range p.done.above {
		if id <= p.done.horizon {
			delete(p.done.above, id)
		}
	}
	p.bornAfter = nil
	p.full = true // the first record lists every channel
	p.deltaMin = cfg.DeltaMin
}

// receiveEpoch is Receive in the Epochs mode.
func (p *Process) receiveEpoch(c *inChan, st *Stamp, payload any) error {
	if st.Epoch < c.epoch {
		// A sender's epoch never goes back, and its channel keeps order.
		return fmt.Errorf("%w: channel %s: message %d from epoch %d after one from epoch %d", ErrProtocol, Channel{From: c.from, To: p.id}, st.Seq, st.Epoch, c.epoch)
	}
	if st.Epoch > p.epoch {
		if err := p.advance(st.Epoch); err != nil {
			return err
		}
	}
	c.epoch = st.Epoch
	c.received = st.Seq
	p.receivedTotal++
	p.inFlight(c, st, payload)
	return nil
}

// inFlight reports the message just received on c, numbered st.Seq, as
// channel state if its epoch is older than this process's: in flight
// for every snapshot in progress here above the sender's epoch, but
// those a capture reported it for already.
func (p *Process) inFlight(c *inChan, st *Stamp, payload any) {
	var from, through SnapshotID // what a capture reported it for
	if len(c.capt) > 0 {
		from, through = c.reported(st.Seq)
	}
	if st.Epoch == p.epoch {
		return
	}
	p.inFlightOn(Channel{From: c.from, To: p.id}, st.Epoch, from, through, Message{Seq: st.Seq, Payload: payload})
}

// inFlightOn reports m, received on ch with epoch, for every snapshot in
// progress here above epoch but those in (from, through].
func (p *Process) inFlightOn(ch Channel, epoch, from, through SnapshotID, m Message) {
	var msgs []Message
	for _, s := range p.snaps {
		if s.id <= epoch || s.discarded || (s.id > from && s.id <= through) {
			continue
		}
		if msgs == nil {
			msgs = []Message{m}
		}
		p.ready.Channels = append(p.ready.Channels, ChannelRecord{Snapshot: s.id, Channel: ch, Messages: msgs})
	}
}

// advance records every snapshot up to id that is neither recorded nor
// finished here, at once and with one state, and makes id the epoch.
func (p *Process) advance(id SnapshotID) error {
	if id-p.epoch > maxEpochJump {
		return fmt.Errorf("%w: epoch %d is %d snapshots past this process's %d", ErrProtocol, id, id-p.epoch, p.epoch)
	}
	var sent, received []PeerCount
	var prior []uint64
	changes := false
	counted := false
	for next := p.epoch + 1; next <= id; next++ {
		if p.done.has(next) {
			continue
		}
		prev := p.lastRecord
		switch {
		case p.sums:
			sent, received, prior, changes = nil, nil, nil, false
		case !counted:
			// The first record taken now lists what changed since the
			// last one; those after it follow it with nothing changed.
			counted = true
			sent, received, prior, changes = p.epochCounters()
		default:
			sent, received, prior, changes = nil, nil, nil, true
		}
		p.lastRecord = next
		s := p.spareSnap
		if s != nil {
			p.spareSnap = nil
		} else {
			s = new(snap)
		}
		*s = snap{id: next, recorded: true, finished: true}
		p.snaps = append(p.snaps, s)
		p.ready.Records = append(p.ready.Records, LocalRecord{Snapshot: next, Process: p.id, Sent: sent, Received: received, Prev: prev, Prior: prior, Changes: changes, ReceivedTotal: p.receivedTotal, SentTotal: p.sentTotal})
		// Nothing is open: what comes in flight is reported as it comes.
		p.ready.Finished = append(p.ready.Finished, next)
	}
	p.epoch = id
	return nil
}

// epochCounters returns the counters of a record in the Epochs mode: the
// sent counts of the outgoing channels that changed since the last
// record, and no received ones (the record's ReceivedTotal stands for
// them), with changes set; or every channel's counts when the record must
// list them all. prior holds each listed channel's count as of the last
// record (LocalRecord.Prior). Either way the channels count as unchanged
// from now on.
func (p *Process) epochCounters() (sent, received []PeerCount, prior []uint64, changes bool) {
	// With a positive DeltaMin: few channels, or more than a quarter of
	// the outgoing ones changed, and the record lists them all. Once the
	// last record listed what changed, more than half must have changed,
	// so that a process whose changes hover about a quarter does not
	// switch at every other record.
	n, changed := len(p.outs)+len(p.ins), len(p.changedOut)
	share := 4
	if p.deltas {
		share = 2
	}
	if p.full || (p.deltaMin > 0 && (n < p.deltaMin || share*changed > len(p.outs))) {
		p.full, p.deltas = false, false
		for _, c := range p.changedOut {
			c.changed = false
		}
		clear(p.changedOut)
		p.changedOut = p.changedOut[:0]
		c := p.Counters()
		for _, o := range p.outs {
			o.listed = o.sent
		}
		return c.Sent, c.Received, c.Prior, false
	}
	// A dropped channel is no longer the process's: its peer is forgotten
	// everywhere, in the Ledger too. In the order of the channels, so that
	// a record naming the same channels as the last names them in the same
	// order, which the Ledger matches without a lookup.
	// Sorted as keys, slot then place in changedOut, each channel read
	// once: a sort that compared the channels read two of them at every
	// step, a quarter of a record's time when 30 of 1,000 changed.
	keys := p.sortKeys[:0]
	for i, c := range p.changedOut {
		keys = append(keys, uint64(c.slot)<<32|uint64(i))
	}
	slices.Sort(keys)
	sent = make([]PeerCount, 0, len(p.changedOut))
	prior = make([]uint64, 0, len(p.changedOut))
	for _, k := range keys {
		c := p.changedOut[uint32(k)]
		c.changed = false
		if !c.dropped {
			sent = append(sent, PeerCount{Peer: c.to, N: c.sent})
			prior = append(prior, c.listed)
			c.listed = c.sent
		}
	}
	p.sortKeys = keys
	clear(p.changedOut)
	p.changedOut = p.changedOut[:0]
	p.deltas = true
	return sent, nil, prior, true
}

// Resync makes the next record in the Epochs mode list every channel's
// counters (LocalRecord.Changes false), as a first record does: the
// coordinator asks for it when its Ledger lost track of this process's
// records (Coordinator's Ready.Resync), and a caller that could not hand
// a record on calls it itself.
func (p *Process) Resync() { p.full = true }

// childConfigEpoch is ChildConfig in the Epochs mode: the child is born at
// its creator's epoch, so its messages follow every snapshot the creator
// had recorded, and it takes part in every later one. Snapshots finished
// at the creator above its epoch (aborted before it recorded them) are
// not passed on: as Finished they would raise the child's epoch past
// snapshots still in progress that it must take part in.
func (p *Process) childConfigEpoch(id ProcessID) Config {
	return Config{ID: id, Mode: Epochs, Incoming: []ProcessID{p.id}, Horizon: max(p.done.horizon, p.epoch), DeltaMin: p.deltaMin, Sums: p.sums}
}
