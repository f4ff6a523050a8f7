package snapshot_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

// TestCaptureReportsEachMessageOnce runs one channel in the Epochs mode,
// its receiver's queue modelled, with records at both ends, captures of
// the queue (whole or a prefix) after some of the receiver's records and
// none after others, captures between receipts with since zero, receipts
// and snapshots forgotten, in random orders.
// Every snapshot's channel state, captured and reported on receipt
// together, must be exactly the messages sent before the sender's record
// and received after the receiver's, each once and in order.
func TestCaptureReportsEachMessageOnce(t *testing.T) {
	first, n := seedRange(3000, 300)
	for s := first; s < first+n; s++ {
		if err := captureRun(s); err != nil {
			t.Fatalf("seed %d (rerun with -seed %d): %v", s, s, err)
		}
	}
}

type queuedMsg struct {
	st  snapshot.Stamp
	seq uint64
}

func captureRun(seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 0))
	snd, err := snapshot.NewProcess(snapshot.Config{ID: "s", Mode: snapshot.Epochs})
	if err != nil {
		return err
	}
	rcv, err := snapshot.NewProcess(snapshot.Config{ID: "r", Mode: snapshot.Epochs})
	if err != nil {
		return err
	}
	var h snapshot.InHandle
	var queue []queuedMsg
	sent := uint64(0)
	// want[s]: the messages in flight for s, as received; got[s]: as
	// reported, in report order.
	want := map[snapshot.SnapshotID][]uint64{}
	got := map[snapshot.SnapshotID][]uint64{}
	forgotten := map[snapshot.SnapshotID]bool{}
	collect := func() error {
		for rcv.HasReady() {
			for _, c := range rcv.Ready().Channels {
				for _, m := range c.Messages {
					if m.Payload.(uint64) != m.Seq {
						return fmt.Errorf("message %d reported with payload %v", m.Seq, m.Payload)
					}
					got[c.Snapshot] = append(got[c.Snapshot], m.Seq)
				}
			}
			rcv.Advance()
		}
		for snd.HasReady() {
			snd.Ready()
			snd.Advance()
		}
		return nil
	}
	capture := func(since snapshot.SnapshotID) error {
		if r.IntN(4) == 0 {
			return nil // a record the caller took no capture after
		}
		k := len(queue)
		if k > 0 && r.IntN(3) == 0 {
			k = r.IntN(k + 1) // a prefix
		}
		q := make([]snapshot.Queued, k)
		for i := range k {
			q[i] = snapshot.Queued{Epoch: queue[i].st.Epoch, Payload: queue[i].seq}
		}
		return rcv.Capture(&h, "s", since, q)
	}
	// receive takes the queue's head: in flight for every snapshot the
	// receiver recorded above the sender's epoch and not forgotten.
	receive := func() error {
		m := queue[0]
		queue = queue[1:]
		for s := m.st.Epoch + 1; s <= rcv.Epoch(); s++ {
			if !forgotten[s] {
				want[s] = append(want[s], m.seq)
			}
		}
		return rcv.ReceiveNextOn(&h, "s", snapshot.Stamp{Epoch: m.st.Epoch}, m.seq)
	}
	next := snapshot.SnapshotID(1)
	for range 200 + r.IntN(200) {
		switch x := r.IntN(11); {
		case x == 10:
			// A capture at any moment between receipts, of whatever
			// no capture reported for any snapshot in progress
			// (Ready.Recapture).
			if err := capture(0); err != nil {
				return err
			}
		case x < 4:
			st := snd.Send("r")
			sent++
			queue = append(queue, queuedMsg{st: st, seq: sent})
		case x < 7 && len(queue) > 0:
			before := rcv.Epoch()
			if err := receive(); err != nil {
				return err
			}
			if rcv.Epoch() > before {
				// It made the receiver record: a capture may follow, before
				// the next receipt.
				if err := collect(); err != nil {
					return err
				}
				if err := capture(before); err != nil {
					return err
				}
			}
		case x < 8:
			if err := snd.Start(next); err != nil {
				return err
			}
			next++
		case x < 9:
			id := rcv.Epoch() + 1 + snapshot.SnapshotID(r.IntN(2))
			if id >= next {
				next = id + 1
			}
			before := rcv.Epoch()
			if err := rcv.Start(id); err != nil {
				return err
			}
			if err := collect(); err != nil {
				return err
			}
			if err := capture(before); err != nil {
				return err
			}
		default:
			// Forget a snapshot both ends recorded, now and then.
			if e := min(snd.Epoch(), rcv.Epoch()); e > 0 && r.IntN(3) == 0 {
				id := 1 + snapshot.SnapshotID(r.IntN(int(e)))
				if !forgotten[id] {
					forgotten[id] = true
					snd.Forget(id)
					rcv.Forget(id)
					delete(want, id)
					delete(got, id)
				}
			}
		}
		if err := collect(); err != nil {
			return err
		}
	}
	// The rest is received; nothing more may be reported for snapshots
	// forgotten.
	for len(queue) > 0 {
		if err := receive(); err != nil {
			return err
		}
		if err := collect(); err != nil {
			return err
		}
	}
	for s := range forgotten {
		delete(got, s)
	}
	for s := snapshot.SnapshotID(1); s <= rcv.Epoch(); s++ {
		if fmt.Sprint(want[s]) != fmt.Sprint(got[s]) {
			return fmt.Errorf("snapshot %d: channel state %v, want %v", s, got[s], want[s])
		}
	}
	for s := range got {
		if s > rcv.Epoch() {
			return fmt.Errorf("snapshot %d not recorded by the receiver has channel state %v", s, got[s])
		}
	}
	return nil
}

// A capture takes what is queued at once; the same messages received
// later are not reported again for it, but are for a snapshot recorded
// since without a capture.
func TestCaptureThenReceive(t *testing.T) {
	snd := newEpochProcess(t, "s")
	rcv := newEpochProcess(t, "r")
	var h snapshot.InHandle
	st1, st2 := snd.Send("r"), snd.Send("r")
	require.NoError(t, snd.Start(1))
	take(snd)
	st3 := snd.Send("r")
	require.NoError(t, rcv.Start(1))
	take(rcv)
	require.NoError(t, rcv.Capture(&h, "s", 0, []snapshot.Queued{{Epoch: st1.Epoch, Payload: "a"}, {Epoch: st2.Epoch, Payload: "b"}, {Epoch: st3.Epoch, Payload: "c"}}))
	rd := take(rcv)
	require.Equal(t, []snapshot.ChannelRecord{{Snapshot: 1, Channel: snapshot.Channel{From: "s", To: "r"},
		Messages: []snapshot.Message{{Seq: 1, Payload: "a"}, {Seq: 2, Payload: "b"}}}}, rd.Channels, "c comes after the sender's record")

	require.NoError(t, rcv.Start(2)) // recorded without a capture
	take(rcv)
	require.NoError(t, rcv.ReceiveNextOn(&h, "s", snapshot.Stamp{Epoch: st1.Epoch}, "a"))
	rd = take(rcv)
	require.Equal(t, []snapshot.ChannelRecord{{Snapshot: 2, Channel: snapshot.Channel{From: "s", To: "r"},
		Messages: []snapshot.Message{{Seq: 1, Payload: "a"}}}}, rd.Channels, "reported for 2 only")
}
