package actors

import (
	"github.com/actorsnap/actorsnap/mailbox"
	"github.com/actorsnap/actorsnap/snapshot"
)

// queueCapture holds a participant's buffers for captureQueued, reused
// from one capture to the next.
type queueCapture struct {
	senders []queuedSender
	// index finds a sender's entry once more than linearSenders have
	// messages queued (a fan-in), and names counts their names; both are
	// kept, emptied, from one capture to the next.
	index   map[mailbox.SenderKey]int
	names   map[snapshot.ProcessID]int
	indexed bool // index holds every sender
}

// queuedSender is one sender's part of a participant's queue.
type queuedSender struct {
	key    mailbox.SenderKey
	ref    *peerRef // nil until heard from
	name   snapshot.ProcessID
	queued []snapshot.Queued
	done   bool // its channel stopped at a message that is not plain
}

// linearSenders is how many senders a capture finds by scanning its list
// rather than through a map: a mailbox under load holds messages from a
// few senders, and a scan of a few keys costs less than a map's hashing.
const linearSenders = 16

// sender returns the index of key's entry, made if it has none.
func (c *queueCapture) sender(key mailbox.SenderKey) int {
	if c.indexed {
		if i, ok := c.index[key]; ok {
			return i
		}
	} else {
		for i := range c.senders {
			if c.senders[i].key == key {
				return i
			}
		}
	}
	i := len(c.senders)
	if i < cap(c.senders) {
		c.senders = c.senders[:i+1]
		c.senders[i].key = key
	} else {
		c.senders = append(c.senders, queuedSender{key: key})
	}
	if c.indexed {
		c.index[key] = i
	} else if i+1 > linearSenders {
		if c.index == nil {
			c.index = make(map[mailbox.SenderKey]int, 2*linearSenders)
		}
		for j := range c.senders {
			c.index[c.senders[j].key] = j
		}
		c.indexed = true
	}
	return i
}

// shared reports whether another sender in the capture has sender i's
// name.
func (c *queueCapture) shared(i int) bool {
	if c.indexed {
		return c.names[c.senders[i].name] > 1
	}
	for j := range c.senders {
		if j != i && c.senders[j].name == c.senders[i].name {
			return true
		}
	}
	return false
}

// reset empties the capture, keeping its arrays.
func (c *queueCapture) reset() {
	for i := range c.senders {
		s := &c.senders[i]
		clear(s.queued)
		*s = queuedSender{queued: s.queued[:0]}
	}
	c.senders = c.senders[:0]
	if c.indexed {
		clear(c.index)
		clear(c.names)
		c.indexed = false
	}
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
	if p.sums {
		// What comes from an older epoch after this capture is what a
		// recapture is for (guardian.carry asks only those it came to).
		p.mb.SetFloor(uint64(p.proc.Epoch()))
	}
	c := &p.capture
	ok := p.mb.Queued(func(key mailbox.SenderKey, keyed bool, tag uint64, msg interface{}) bool {
		if !keyed || key == controlKey {
			return true
		}
		s := &c.senders[c.sender(key)]
		if s.done {
			return true
		}
		switch msg.(type) {
		case *firstMsg, *markerMsg, *departedMsg:
			s.done = true
			return true
		}
		s.queued = append(s.queued, snapshot.Queued{Epoch: snapshot.SnapshotID(tag), Payload: msg})
		return true
	})
	if ok {
		// Two senders under one name (a stopped one and the new one that
		// took its name) may share the name's channel as they are
		// received: neither is captured.
		for i := range c.senders {
			s := &c.senders[i]
			if s.ref = p.peers[s.key]; s.ref != nil {
				s.name = s.ref.from
			} else if t := p.sys.reg.lookupKey(s.key); t != nil {
				s.name = t.id
			}
		}
		if c.indexed {
			if c.names == nil {
				c.names = make(map[snapshot.ProcessID]int, len(c.senders))
			}
			for i := range c.senders {
				c.names[c.senders[i].name]++
			}
		}
		for i := range c.senders {
			s := &c.senders[i]
			if s.name == "" || len(s.queued) == 0 || c.shared(i) {
				continue // gone before it was heard from, or sharing its name: read as it comes
			}
			if s.ref == nil {
				// Not heard from yet: its first message, queued, makes it a
				// peer now rather than at its receipt, so that a channel's
				// first messages are channel state as soon as the others.
				s.ref = p.peer(s.key)
			}
			// An error is the channel's order broken; its receipt says so.
			_ = p.proc.Capture(&s.ref.in, s.ref.from, since, s.queued)
		}
	}
	c.reset()
}
