package snapshot

import "fmt"

// Counting in sums (Config.Sums), the Epochs mode's second discipline.
//
// Mattern's sum counters: a snapshot is complete when the messages every
// process sent before its record equal those every process received
// before its record plus those recorded in flight. Each term counts a set
// of distinct messages, all of them sent before their senders' records
// (the epoch rule: no message sent after its sender's record is received
// before its receiver's), so the sums cannot balance early.
//
// So a process keeps two totals and no count per channel. The epoch in
// each message's stamp still says which messages are channel state, and
// the receiver knows their sender when it reports them. The coordinator
// numbers each channel's messages in flight in the order the receiver
// reports them, which is the order it took them in and the order a
// restore replays them in; the sender numbers nothing. A channel has an
// entry (an inChan) at the receiver only while a capture reported
// messages on it that have not been received yet (capture.go): the entry
// numbers the channel's messages from the capture on, so that each
// receipt finds whether a capture reported it, and goes once none is
// left. A receipt looks an entry up only while some exist.
//
// A process that stops never receives what is still queued for it. Its
// caller hands that over (Lose): each message is reported for the
// snapshots in progress that this process recorded and that it is in
// flight for (as a capture with since zero), and counted by its epoch in
// the final record (LocalRecord.Lost), so that the snapshots this process
// stands in departed count it as received. A message that reaches the
// process after that (a post to its closed mailbox) is the coordinator's
// to hear of (Coordinator.Lost).

// checkSums checks a Config that counts in sums.
func (cfg *Config) checkSums() error {
	switch {
	case cfg.Mode != Epochs:
		return fmt.Errorf("%w: counting in sums needs the %s mode, not %s", ErrConfig, Epochs, cfg.Mode)
	case len(cfg.Sent) > 0 || len(cfg.Received) > 0:
		return fmt.Errorf("%w: a process counting in sums keeps no count per channel to restore", ErrConfig)
	}
	return nil
}

// Sums reports whether the process counts in sums (Config.Sums).
func (p *Process) Sums() bool { return p.sums }

// entry returns the entry of the channel from from, through h if it holds
// it, or nil when the channel has none.
func (p *Process) entry(h *InHandle, from ProcessID) *inChan {
	if h != nil {
		if c := h.c; c != nil && !c.dropped && c.from == from {
			return c
		}
	}
	var c *inChan
	if len(p.ins) > 0 { // the slice's length, in the Process: a map's is behind its pointer
		c = p.in[from]
	}
	if h != nil {
		h.c = c
	}
	return c
}

// receiveSums is Receive, and ReceiveNextOn through h when it is not nil,
// counting in sums.
func (p *Process) receiveSums(h *InHandle, from ProcessID, st Stamp, payload any) error {
	c := p.entry(h, from)
	if c != nil && st.Epoch < c.epoch {
		// A sender's epoch never goes back, and its channel keeps order.
		return fmt.Errorf("%w: channel %s: message from epoch %d after one from epoch %d", ErrProtocol, Channel{From: from, To: p.id}, st.Epoch, c.epoch)
	}
	if st.Epoch > p.epoch {
		if err := p.advance(st.Epoch); err != nil {
			return err
		}
	}
	p.receivedTotal++
	if c == nil {
		if st.Epoch < p.epoch {
			// In flight: numbered by the coordinator.
			p.inFlightOn(Channel{From: from, To: p.id}, st.Epoch, 0, 0, Message{Payload: payload})
		}
		return nil
	}
	c.epoch = st.Epoch
	c.received++
	st.Seq = c.received
	p.inFlight(c, &st, payload)
	if len(c.capt) == 0 {
		// Nothing a capture reported is still to come on it.
		p.dropEntry(c)
		if h != nil {
			h.c = nil
		}
	}
	return nil
}

// dropEntry lets the entry c go.
func (p *Process) dropEntry(c *inChan) {
	c.dropped = true
	delete(p.in, c.from)
	last := p.ins[len(p.ins)-1]
	p.ins[c.slot], last.slot = last, c.slot
	p.ins[len(p.ins)-1] = nil
	p.ins = p.ins[:len(p.ins)-1]
	if p.lastIn == c {
		p.lastIn = nil
	}
}

// dropEntries lets every channel entry go, once no snapshot is in
// progress here: the handles on them find them gone. (Most go before, at
// the receipt of the last message a capture reported: receiveSums.)
func (p *Process) dropEntries() {
	if len(p.ins) == 0 {
		return
	}
	for _, c := range p.ins {
		c.dropped = true
	}
	clear(p.in)
	clear(p.ins)
	p.ins = p.ins[:0]
	p.lastIn = nil
}

// Lose takes, counting in sums, the messages queued for this process on
// the channel from from that it will never receive, because it stops:
// each is reported (Ready's Channels) for every snapshot in progress here
// that it is in flight for and that no capture reported it for, and
// counted by its epoch among the messages lost (Counters' Lost). queued
// must be what is left of the channel, in order; call Lose once per
// sender, before Counters, and deliver nothing after.
func (p *Process) Lose(from ProcessID, queued []Queued) error {
	if !p.sums {
		return fmt.Errorf("%w: Lose counts messages lost in sums, and %s counts per channel", ErrConfig, p.id)
	}
	for _, q := range queued {
		p.lost = p.lost.add(q.Epoch, 1)
	}
	if len(queued) == 0 {
		return nil
	}
	// Counted lost whatever comes of the capture: an error (an epoch
	// going back) leaves the snapshots it was owed to abort or time out,
	// not every later one unbalanced.
	var h InHandle
	err := p.Capture(&h, from, 0, queued)
	if c := p.entry(&h, from); c != nil {
		// Numbered, so that nothing after them reuses their numbers.
		c.received += uint64(len(queued))
		c.epoch = max(c.epoch, queued[len(queued)-1].Epoch)
		c.pruneCapture()
	}
	return err
}
