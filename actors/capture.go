package actors

import (
	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/snapshot"
)

// queueCapture holds a participant's buffers for captureQueued, reused
// from one capture to the next.
type queueCapture struct {
	keys   map[mailbox.SenderKey]int // a sender's index in order
	order  []mailbox.SenderKey
	queued [][]snapshot.Queued
	done   []bool // a sender's channel stopped at a message that is not plain
	names  map[snapshot.ProcessID]int
}

// captureQueued hands the participant's Process, in the epoch mode, the
// messages queued in its mailbox for the snapshots it recorded since
// since (snapshot.Process.Capture): those from older epochs are channel
// state now, reported at the end of the turn, instead of when they are
// received, which under load comes after a pass over every busy mailbox.
// Each sender's messages go in the order they will be received, up to the
// first that is not a plain message on its channel (a first message with
// its stamp, a marker, a departure): those are taken as they come.
// Messages posted without a sender are on no channel.
func (p *participant) captureQueued(since snapshot.SnapshotID) {
	c := &p.capture
	if c.keys == nil {
		c.keys = make(map[mailbox.SenderKey]int)
	}
	ok := p.mb.Queued(func(key mailbox.SenderKey, keyed bool, tag uint64, msg interface{}) bool {
		if !keyed || key == controlKey {
			return true
		}
		i, seen := c.keys[key]
		if !seen {
			i = len(c.order)
			c.keys[key] = i
			c.order = append(c.order, key)
			if i == len(c.queued) {
				c.queued = append(c.queued, nil)
				c.done = append(c.done, false)
			}
		}
		if c.done[i] {
			return true
		}
		switch msg.(type) {
		case *firstMsg, *markerMsg, *departedMsg:
			c.done[i] = true
			return true
		}
		c.queued[i] = append(c.queued[i], snapshot.Queued{Epoch: snapshot.SnapshotID(tag), Payload: msg})
		return true
	})
	if ok {
		// Two senders under one name (a stopped one and the new one that
		// took its name) may share the name's channel as they are
		// received: neither is captured.
		if c.names == nil {
			c.names = make(map[snapshot.ProcessID]int)
		}
		for _, key := range c.order {
			var name snapshot.ProcessID
			if ref := p.peers[key]; ref != nil {
				name = ref.from
			} else if t := p.sys.reg.lookupKey(key); t != nil {
				name = t.id
			}
			c.names[name]++
		}
		for i, key := range c.order {
			ref := p.peers[key]
			if ref == nil || len(c.queued[i]) == 0 || c.names[ref.from] > 1 {
				continue // not heard from yet, or sharing its name: read as it comes
			}
			// An error is the channel's order broken; its receipt says so.
			_ = p.proc.Capture(&ref.in, ref.from, since, c.queued[i])
		}
		clear(c.names)
	}
	for i := range c.order {
		clear(c.queued[i])
		c.queued[i] = c.queued[i][:0]
		c.done[i] = false
	}
	clear(c.keys)
	c.order = c.order[:0]
}
