package snapshot

import "fmt"

// Capturing the messages queued for a process (Epochs mode).
//
// A message from an older epoch that a process receives after its record
// is channel state; the process would report it when it receives it,
// after every message queued before it, which under load is a pass over
// every busy mailbox after the records. The messages queued for a process
// when it records are already known to be received after the record: a
// caller that can read its queue hands them over right after the record
// (Capture), and the process reports those from older epochs at once, as
// Flink's unaligned checkpoints persist the buffers a barrier overtakes.
// When such a message is received later it is not reported again for the
// snapshots it was reported for; it is for those recorded since.
//
// What captures reported is kept per channel as segments of consecutive
// sequence numbers, each reported for the snapshots in (from, through]:
// from is the epoch before the record that first captured its messages
// (zero once a capture with since zero took them), through the epoch at
// their last capture. A message stays queued from
// its capture to its receipt, so a later capture reports it for the
// snapshots recorded since its last (every one of them was recorded
// while it was queued), and its range stays an interval.

// Queued is a message queued for a process and not received yet, as its
// sender stamped it (Stamp.Epoch), for Capture.
type Queued struct {
	Epoch   SnapshotID
	Payload any
}

// capSeg says that the messages after the segment before, up to sequence
// number upTo, were reported for the snapshots in (from, through].
type capSeg struct {
	upTo          uint64
	from, through SnapshotID
}

// capOwed is what Capture reports a queued message for: the snapshots
// above lo and outside (from, through].
type capOwed struct{ lo, from, through SnapshotID }

// Capture takes, in the Epochs mode, the messages queued for this process
// on the channel from from (through h, as ReceiveNextOn) as channel state
// now, rather than when they are received: each is reported (Ready's
// Channels) for every snapshot recorded since since that it is in flight
// for, and for those recorded since an earlier capture of it. After its
// records, since is the epoch before them (Epoch then), and the capture
// costs the snapshots just recorded; with since zero, at any moment
// between two receipts, it reports every queued message for every
// snapshot in progress it is in flight for and no capture reported it
// for (Ready.Recapture: what a snapshot every participant recorded is
// still owed). queued must be the next messages the process will receive
// on the channel, in order; it may be fewer than are queued (a prefix).
// An epoch out of order is a protocol error: nothing is captured.
func (p *Process) Capture(h *InHandle, from ProcessID, since SnapshotID, queued []Queued) error {
	if p.mode != Epochs || since >= p.epoch || len(queued) == 0 {
		return nil
	}
	if p.sums && queued[0].Epoch >= p.epoch {
		// Nothing older than this process's epoch, and epochs never go
		// back on a channel: no entry for it.
		return nil
	}
	c := h.c
	if c == nil || c.dropped || c.from != from {
		c = p.inChannel(from)
		h.c = c
	}
	last := c.epoch
	n := 0 // the prefix from older epochs than this process's
	for i, q := range queued {
		if q.Epoch < last {
			return fmt.Errorf("%w: channel %s: queued message %d from epoch %d after one from epoch %d", ErrProtocol, Channel{From: from, To: p.id}, c.received+uint64(i)+1, q.Epoch, last)
		}
		last = q.Epoch
		if q.Epoch < p.epoch {
			n = i + 1
		}
	}
	if n == 0 {
		return nil
	}
	c.pruneCapture()
	// owed[i] says which snapshots queued[i] is reported for now: those
	// above lo, but those in (from, through] that an earlier capture
	// reported it for. Every snapshot recorded is recorded before its
	// receipt, so one in progress above its epoch is owed it.
	var buf [16]capOwed
	owed := buf[:0]
	if n > len(buf) {
		owed = make([]capOwed, 0, n)
	}
	k := 0
	for i := range n {
		seq := c.received + uint64(i) + 1
		for k < len(c.capt) && c.capt[k].upTo < seq {
			k++
		}
		o := capOwed{lo: since}
		if k < len(c.capt) {
			g := c.capt[k]
			o = capOwed{lo: min(since, g.from), from: g.from, through: g.through}
		}
		owed = append(owed, o)
	}
	for _, s := range p.snaps {
		if s.discarded || s.id > p.epoch {
			continue
		}
		var msgs []Message
		for i, q := range queued[:n] {
			if o := owed[i]; s.id > o.lo && s.id > q.Epoch && (s.id <= o.from || s.id > o.through) {
				if msgs == nil {
					msgs = make([]Message, 0, n-i)
				}
				msgs = append(msgs, Message{Seq: c.received + uint64(i) + 1, Payload: q.Payload})
			}
		}
		if len(msgs) > 0 {
			p.ready.Channels = append(p.ready.Channels, ChannelRecord{Snapshot: s.id, Channel: Channel{From: from, To: p.id}, Messages: msgs})
		}
	}
	// The first n are reported through this epoch now. The new segments
	// are built in the Process's scratch, then copied over the channel's.
	upTo := c.received + uint64(n)
	segs := p.segs[:0]
	for _, g := range c.capt {
		switch {
		case g.upTo <= upTo:
			g.from, g.through = min(g.from, since), p.epoch
			segs = append(segs, g)
		default:
			prev := c.received
			if len(segs) > 0 {
				prev = segs[len(segs)-1].upTo
			}
			if prev < upTo {
				segs = append(segs, capSeg{upTo: upTo, from: min(g.from, since), through: p.epoch})
			}
			segs = append(segs, g)
		}
	}
	if len(segs) == 0 || segs[len(segs)-1].upTo < upTo {
		segs = append(segs, capSeg{upTo: upTo, from: since, through: p.epoch})
	}
	c.capt = append(c.capt[:0], segs...)
	p.segs = segs[:0]
	return nil
}

// pruneCapture forgets the segments of messages received already.
func (c *inChan) pruneCapture() {
	i := 0
	for i < len(c.capt) && c.capt[i].upTo <= c.received {
		i++
	}
	c.dropSegs(i)
}

// dropSegs forgets c's first i capture segments, in place: the array
// stays the channel's for its next capture.
func (c *inChan) dropSegs(i int) {
	if i > 0 {
		c.capt = c.capt[:copy(c.capt, c.capt[i:])]
	}
}

// reported returns the snapshots a capture reported the message with
// sequence number seq on c for, (from, through], and forgets what the
// captures kept of the messages up to it; both are zero if none did.
func (c *inChan) reported(seq uint64) (from, through SnapshotID) {
	i := 0
	for i < len(c.capt) && c.capt[i].upTo < seq {
		i++
	}
	if i == len(c.capt) {
		c.dropSegs(i)
		return 0, 0
	}
	g := c.capt[i]
	if g.upTo == seq {
		i++
	}
	c.dropSegs(i)
	if seq <= g.upTo {
		return g.from, g.through
	}
	return 0, 0
}
