package actors

import "github.com/actorsnap/actorsnap/snapshot"

// lateChannels is the channel state a participant records during one
// mailbox turn after the snapshot is over here (recorded and finished):
// in the epoch mode every message from an older epoch that comes after
// the record, most often one message a channel and a few channels a
// turn. Each message is encoded as it comes, into a buffer of its own
// (a record in the same turn uses the participant's encoder), and the
// turn's channels go to the guardian at its end (turnEnd) in one report
// per snapshot, their messages sharing one allocation of bytes, one of
// messages and one of payloads: encoded one channel at a time they
// would take three allocations a channel, and a receiver many senders
// hurry toward a report for each of their messages in flight.
//
// A record whose snapshot is over here at once waits in it too (hold):
// the channel state captured with it (the older epochs' messages queued
// at the record) goes in the same report, so that the guardian takes one
// message per participant rather than two.
type lateChannels struct {
	// What every turn's end reads comes first, beside the participant's
	// other fields a record reads (participant).
	chans []lateChan
	recs  []*reportMsg // records held for the turn's end, in the order recorded
	seqs  []uint64     // the messages' sequence numbers, in the order encoded
	enc   encoder
}

// lateChan is a channel's share of the turn's messages: the next n.
type lateChan struct {
	snap snapshot.SnapshotID
	ch   snapshot.Channel
	n    int
}

// add encodes c's messages at the end of the turn's. On an error it
// adds none of them.
func (l *lateChannels) add(c snapshot.ChannelRecord) error {
	e := &l.enc
	if e.enc == nil {
		e.reset()
	}
	size, names := e.buf.Len(), len(e.names)
	for _, m := range c.Messages {
		if err := e.add(m.Payload); err != nil {
			e.buf.Truncate(size)
			e.names, e.ends = e.names[:names], e.ends[:names]
			l.seqs = l.seqs[:names]
			return err
		}
		l.seqs = append(l.seqs, m.Seq)
	}
	l.chans = append(l.chans, lateChan{snap: c.Snapshot, ch: c.Channel, n: len(c.Messages)})
	return nil
}

// hold keeps rep, a record report, for the turn's end.
func (l *lateChannels) hold(rep *reportMsg) { l.recs = append(l.recs, rep) }

// flush hands report the records held, each with the turn's channels of
// its snapshot, then the other channels, one report per snapshot in the
// order each first came, and empties l.
func (l *lateChannels) flush(report func(*reportMsg)) {
	reps := l.recs
	defer func() {
		clear(reps)
		l.recs = reps[:0]
	}()
	if len(l.chans) == 0 {
		for _, rep := range reps {
			report(rep)
		}
		return
	}
	e := &l.enc
	msgs := e.encoded(func(i int) uint64 { return l.seqs[i] })
	chans := make([]snapshot.ChannelRecord, len(l.chans))
	off := 0
	one := true // most turns report to one snapshot
	for i, lc := range l.chans {
		chans[i] = snapshot.ChannelRecord{Snapshot: lc.snap, Channel: lc.ch, Messages: msgs[off : off+lc.n : off+lc.n]}
		off += lc.n
		one = one && lc.snap == l.chans[0].snap
	}
	e.reset()
	e.names = e.names[:0]
	l.chans, l.seqs = l.chans[:0], l.seqs[:0]
	if one && len(reps) <= 1 {
		if len(reps) == 1 && reps[0].id == chans[0].Snapshot {
			reps[0].channels = chans
			report(reps[0])
			return
		}
		for _, rep := range reps {
			report(rep)
		}
		report(&reportMsg{id: chans[0].Snapshot, channels: chans})
		return
	}
next:
	for _, c := range chans {
		for _, rep := range reps {
			if rep.id == c.Snapshot {
				rep.channels = append(rep.channels, c)
				continue next
			}
		}
		reps = append(reps, &reportMsg{id: c.Snapshot, channels: []snapshot.ChannelRecord{c}})
	}
	for _, rep := range reps {
		report(rep)
	}
}
