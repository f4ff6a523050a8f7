package snapshot_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/actorsnap/actorsnap/snapshot"
)

// An abort of a snapshot of thousands names a few of what is missing and
// counts the rest, so that it reads as one line of a log; the full lists
// stay in Missing.
func TestMissingStringIsBounded(t *testing.T) {
	var m snapshot.Missing
	for i := range 1000 {
		m.Participants = append(m.Participants, snapshot.ProcessID(fmt.Sprintf("p%03d", i)))
	}
	for i := range 12 {
		m.Channels = append(m.Channels, snapshot.ChannelGap{Channel: snapshot.Channel{From: "a", To: snapshot.ProcessID(fmt.Sprintf("b%02d", i))}, Sent: 2, Received: 1, Open: true})
	}
	s := m.String()
	assert.True(t, strings.HasPrefix(s, "not recorded: p000, p001, p002, p003, p004, p005, p006, p007, p008, p009 and 990 more; channel a->b00 open: sent 2, received 1, recorded 0;"), s)
	assert.True(t, strings.HasSuffix(s, "channel a->b09 open: sent 2, received 1, recorded 0 and 2 more channels"), s)
	assert.Less(t, len(s), 700)
	few := snapshot.Missing{Participants: []snapshot.ProcessID{"a", "b"}}
	assert.Equal(t, "not recorded: a, b", few.String())
}

// With a Ledger, build lists the channels in flight from those with a
// recording: it lists what a look at every channel of every process
// finds (ScanChannels), and what the counters made say is in flight.
// Snapshots run two at once, each process recording one then the other,
// with records that list only what changed and channel states reported
// in parts, in random orders, on random graphs that grow.
func TestAssemblerLedgerListsInFlight(t *testing.T) {
	first, count := seedRange(400, 40)
	for s := first; s < first+count; s++ {
		if err := ledgerListRun(s); err != nil {
			t.Fatalf("seed %d (rerun with -seed %d): %v", s, s, err)
		}
	}
}

func ledgerListRun(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x1ed9))
	n := 2 + rng.IntN(30)
	perm := rng.Perm(n) // names out of number order
	name := func(i int) snapshot.ProcessID { return snapshot.ProcessID(fmt.Sprintf("q%03d", perm[i])) }
	var parts []snapshot.ProcessID
	for _, i := range rng.Perm(n) {
		parts = append(parts, name(i))
	}
	type edge struct{ from, to int }
	var edges []edge
	sent, received := map[edge]uint64{}, map[edge]uint64{}
	// Each process's sent counts as its last record had them, and that
	// record.
	lastSent := map[edge]uint64{}
	last := make([]snapshot.SnapshotID, n)
	l := snapshot.NewLedger()
	var nb *snapshot.Numbering
	type event struct {
		rec *snapshot.LocalRecord
		ch  *snapshot.ChannelRecord
	}
	type cut struct {
		id     snapshot.SnapshotID
		a      *snapshot.Assembler
		want   []snapshot.ChannelState
		recs   []snapshot.LocalRecord // by process
		others []event
	}
	// take makes snapshot id's cut after some traffic.
	take := func(id snapshot.SnapshotID) (*cut, error) {
		for range rng.IntN(n + 1) {
			e := edge{rng.IntN(n), rng.IntN(n)}
			if e.from != e.to && !slices.Contains(edges, e) {
				edges = append(edges, e)
			}
		}
		for _, e := range edges {
			if rng.IntN(3) == 0 {
				sent[e] += uint64(rng.IntN(4))
			}
			if rng.IntN(2) == 0 {
				received[e] += uint64(rng.IntN(int(sent[e]-received[e]) + 1))
			}
		}
		a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: id, Mode: snapshot.Epochs, Participants: parts, Ledger: l, Numbering: nb})
		if err != nil {
			return nil, err
		}
		c := &cut{id: id, a: a}
		for i := range n {
			full := last[i] == 0 || rng.IntN(4) == 0
			// Each record follows the last, whose counts it gives
			// (Prior); a record of changes lists only those.
			r := snapshot.LocalRecord{Snapshot: id, Process: name(i), State: []byte{byte(i)}, Prev: last[i], Changes: !full}
			for _, e := range edges {
				if e.from == i && (full || sent[e] != lastSent[e]) {
					r.Sent = append(r.Sent, pc(name(e.to), sent[e]))
					r.Prior = append(r.Prior, lastSent[e])
					lastSent[e] = sent[e]
				}
				if e.to == i {
					// A record of changes lists no received count: its
					// total stands for them.
					r.ReceivedTotal += received[e]
					if full {
						r.Received = append(r.Received, pc(name(e.from), received[e]))
					}
				}
			}
			last[i] = id
			c.recs = append(c.recs, r)
		}
		for _, e := range edges {
			ch := snapshot.Channel{From: name(e.from), To: name(e.to)}
			var msgs []snapshot.Message
			for q := received[e] + 1; q <= sent[e]; q++ {
				msgs = append(msgs, snapshot.Message{Seq: q, Payload: int(q)})
			}
			if len(msgs) > 0 {
				c.want = append(c.want, snapshot.ChannelState{Channel: ch, Sent: sent[e], Received: received[e], Messages: msgs})
			} else if rng.IntN(4) != 0 {
				continue // a recording of nothing, now and then
			}
			// In one part or two.
			k := rng.IntN(len(msgs) + 1)
			for _, part := range [][]snapshot.Message{msgs[:k], msgs[k:]} {
				if len(part) > 0 || len(msgs) == 0 {
					c.others = append(c.others, event{ch: &snapshot.ChannelRecord{Snapshot: id, Channel: ch, Messages: part}})
					if len(msgs) == 0 {
						break
					}
				}
			}
		}
		slices.SortFunc(c.want, func(x, y snapshot.ChannelState) int {
			return strings.Compare(x.Channel.String(), y.Channel.String())
		})
		return c, nil
	}
	for id := snapshot.SnapshotID(1); id <= 8; id += 2 {
		c1, err := take(id)
		if err != nil {
			return err
		}
		c2, err := take(id + 1)
		if err != nil {
			return err
		}
		// Each process records c1 before c2; recordings come any time,
		// each channel's parts in order.
		var order []event
		for i := range n {
			order = append(order, event{rec: &c1.recs[i]}, event{rec: &c2.recs[i]})
		}
		rng.Shuffle(len(order), func(x, y int) { order[x], order[y] = order[y], order[x] })
		for i := range n { // c1's record of each process first
			x := slices.IndexFunc(order, func(e event) bool { return e.rec != nil && e.rec.Process == name(i) })
			if order[x].rec.Snapshot != id {
				y := x + 1 + slices.IndexFunc(order[x+1:], func(e event) bool { return e.rec != nil && e.rec.Process == name(i) })
				order[x], order[y] = order[y], order[x]
			}
		}
		for _, o := range append(slices.Clone(c1.others), c2.others...) {
			at := rng.IntN(len(order) + 1)
			order = slices.Insert(order, at, o)
		}
		cuts := map[snapshot.SnapshotID]*cut{id: c1, id + 1: c2}
		for k, ch := range order { // a channel's parts in the order made
			if ch.ch == nil {
				continue
			}
			for j := k + 1; j < len(order); j++ {
				if o := order[j].ch; o != nil && o.Snapshot == ch.ch.Snapshot && o.Channel == ch.ch.Channel &&
					len(o.Messages) > 0 && len(ch.ch.Messages) > 0 && o.Messages[0].Seq < ch.ch.Messages[0].Seq {
					order[k], order[j] = order[j], order[k]
					ch = order[k]
				}
			}
		}
		for _, ev := range order {
			if ev.rec != nil {
				var runs []*snapshot.Assembler
				if ev.rec.Snapshot == id+1 {
					runs = []*snapshot.Assembler{c1.a} // the runs before, as the Coordinator
				}
				if err := l.Apply(ev.rec, runs); err != nil {
					return err
				}
				if err := cuts[ev.rec.Snapshot].a.AddRecord(*ev.rec); err != nil {
					return err
				}
			} else if err := cuts[ev.ch.Snapshot].a.AddChannel(*ev.ch); err != nil {
				return err
			}
			for _, c := range []*cut{c1, c2} {
				if c.a.Status(time.Unix(100, 0)).State == snapshot.Complete && c.a.Numbering() != nil {
					nb = c.a.Numbering() // the last to complete, as the Coordinator
				}
			}
		}
		for _, c := range []*cut{c1, c2} {
			if st := c.a.Status(time.Unix(100, 0)); st.State != snapshot.Complete {
				return fmt.Errorf("snapshot %d: %v: %v", c.id, st.State, c.a.Missing())
			}
			g, err := c.a.Global()
			if err != nil {
				return err
			}
			var listed []snapshot.Channel
			for _, cs := range g.Channels {
				listed = append(listed, cs.Channel)
			}
			if scan := snapshot.ScanChannels(c.a); !slices.Equal(listed, scan) {
				return fmt.Errorf("snapshot %d: Global lists %v, a scan of every channel %v", c.id, listed, scan)
			}
			if !reflect.DeepEqual(g.Channels, c.want) && (len(g.Channels) > 0 || len(c.want) > 0) {
				return fmt.Errorf("snapshot %d: Global lists %+v, want %+v", c.id, g.Channels, c.want)
			}
		}
	}
	return nil
}
