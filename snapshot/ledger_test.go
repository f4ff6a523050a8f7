package snapshot_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

// A record in the Epochs mode lists only the counters that changed since
// the process's previous one, and the first lists them all.
func TestEpochRecordsListWhatChanged(t *testing.T) {
	a, err := snapshot.NewProcess(snapshot.Config{ID: "a", Mode: snapshot.Epochs, DeltaMin: -1})
	require.NoError(t, err)
	a.Send("b")
	a.Send("c")
	require.NoError(t, a.Start(1))
	rec := take(a).Records[0]
	assert.Zero(t, rec.Prev, "the first record")
	assert.False(t, rec.Changes, "the first record lists every counter")
	assert.ElementsMatch(t, []snapshot.PeerCount{{Peer: "b", N: 1}, {Peer: "c", N: 1}}, rec.Sent)
	assert.Equal(t, []uint64{0, 0}, rec.Prior)

	a.Send("c")
	require.NoError(t, a.Start(2))
	rec = take(a).Records[0]
	assert.Equal(t, snapshot.SnapshotID(1), rec.Prev)
	assert.True(t, rec.Changes)
	assert.Equal(t, []snapshot.PeerCount{{Peer: "c", N: 2}}, rec.Sent, "b did not change")
	assert.Equal(t, []uint64{1}, rec.Prior, "c's count as of record 1")

	require.NoError(t, a.Start(3))
	rec = take(a).Records[0]
	assert.Equal(t, snapshot.SnapshotID(2), rec.Prev)
	assert.True(t, rec.Changes)
	assert.Empty(t, rec.Sent)

	a.Resync()
	require.NoError(t, a.Start(4))
	rec = take(a).Records[0]
	assert.False(t, rec.Changes, "after Resync, every counter again")
	assert.Equal(t, snapshot.SnapshotID(3), rec.Prev, "still following the last")
	require.Len(t, rec.Sent, 2)
	for k, pc := range rec.Sent {
		assert.Equal(t, pc.N, rec.Prior[k], "%s unchanged since record 3", pc.Peer)
	}
	assert.ElementsMatch(t, []snapshot.PeerCount{{Peer: "b", N: 1}, {Peer: "c", N: 2}}, rec.Sent)
}

// Snapshots overlap: a record of a later snapshot that changes a counter
// leaves each earlier snapshot the count of its own cut. Here b records 2
// and then 3, having received more from a in between, before a's record
// of 2 comes: without the count b had at 2, snapshot 2 would find a->b
// received past what a had sent at its cut.
func TestLedgerKeepsEachCutsCounts(t *testing.T) {
	l := snapshot.NewLedger()
	asm := func(id snapshot.SnapshotID) *snapshot.Assembler {
		a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: id, Mode: snapshot.Epochs, Participants: ids("a", "b"), Ledger: l})
		require.NoError(t, err)
		return a
	}
	add := func(r snapshot.LocalRecord, runs ...*snapshot.Assembler) {
		t.Helper()
		require.NoError(t, l.Apply(&r, runs))
		for _, a := range runs {
			if a.Snapshot() == r.Snapshot {
				require.NoError(t, a.AddRecord(r))
			}
		}
	}
	s1 := asm(1)
	add(snapshot.LocalRecord{Snapshot: 1, Process: "a", Sent: []snapshot.PeerCount{{Peer: "b", N: 2}}}, s1)
	add(snapshot.LocalRecord{Snapshot: 1, Process: "b", Received: []snapshot.PeerCount{{Peer: "a", N: 2}}}, s1)
	require.Equal(t, snapshot.Complete, s1.Status(time.Time{}).State)
	g1, err := s1.Global()
	require.NoError(t, err)
	assert.Empty(t, g1.Channels, "a->b balances with nothing in flight: not listed")

	s2, s3 := asm(2), asm(3)
	runs := []*snapshot.Assembler{s2, s3}
	add(snapshot.LocalRecord{Snapshot: 2, Process: "b", Prev: 1, Changes: true, ReceivedTotal: 2}, runs...) // nothing changed at b
	add(snapshot.LocalRecord{Snapshot: 3, Process: "b", Prev: 2, Changes: true, ReceivedTotal: 5}, runs...)
	add(snapshot.LocalRecord{Snapshot: 2, Process: "a", Prev: 1, Changes: true, Sent: []snapshot.PeerCount{{Peer: "b", N: 4}}, Prior: []uint64{2}}, runs...)
	add(snapshot.LocalRecord{Snapshot: 3, Process: "a", Prev: 2, Changes: true, Sent: []snapshot.PeerCount{{Peer: "b", N: 6}}, Prior: []uint64{4}}, runs...)

	require.Equal(t, snapshot.Pending, s2.Status(time.Time{}).State, "b: 4 sent to it at the cut, 2 received: 2 in flight")
	m := s2.Missing()
	assert.Empty(t, m.Channels, "judged per receiver")
	assert.Equal(t, []snapshot.ReceiverGap{{Receiver: "b", Sent: 4, Received: 2}}, m.Receivers, "a's record of 3 is set aside")
	require.NoError(t, s2.AddChannel(snapshot.ChannelRecord{Snapshot: 2, Channel: snapshot.Channel{From: "a", To: "b"},
		Messages: []snapshot.Message{{Seq: 3, Payload: "m3"}, {Seq: 4, Payload: "m4"}}}))
	require.Equal(t, snapshot.Complete, s2.Status(time.Time{}).State)
	g2, err := s2.Global()
	require.NoError(t, err)
	require.NoError(t, g2.Verify())
	require.Len(t, g2.Channels, 1)
	assert.Equal(t, uint64(4), g2.Channels[0].Sent)
	assert.Equal(t, uint64(2), g2.Channels[0].Received)
	assert.True(t, g2.ReceiverCounts)
	b, _ := g2.Participant("b")
	assert.Equal(t, [2]uint64{4, 2}, [2]uint64{b.SentTo, b.Received}, "what b was judged by")

	// Snapshot 3: 6 sent, 5 received, one in flight.
	require.Equal(t, snapshot.Pending, s3.Status(time.Time{}).State)
	require.NoError(t, s3.AddChannel(snapshot.ChannelRecord{Snapshot: 3, Channel: snapshot.Channel{From: "a", To: "b"},
		Messages: []snapshot.Message{{Seq: 6, Payload: "m6"}}}))
	require.Equal(t, snapshot.Complete, s3.Status(time.Time{}).State)

	// Snapshot 4: nobody's counters changed, and the message in flight at
	// 3 still is: the Ledger's sum for b shows it, and no record names
	// the channel.
	s4 := asm(4)
	add(snapshot.LocalRecord{Snapshot: 4, Process: "a", Prev: 3, Changes: true}, s4)
	add(snapshot.LocalRecord{Snapshot: 4, Process: "b", Prev: 3, Changes: true, ReceivedTotal: 5}, s4)
	require.Equal(t, snapshot.Pending, s4.Status(time.Time{}).State, "a->b still carries message 6")
	require.NoError(t, s4.AddChannel(snapshot.ChannelRecord{Snapshot: 4, Channel: snapshot.Channel{From: "a", To: "b"},
		Messages: []snapshot.Message{{Seq: 6, Payload: "m6"}}}))
	require.Equal(t, snapshot.Complete, s4.Status(time.Time{}).State)
}

// A record of changes that follows one the Ledger never applied is
// refused, once with First set; a record listing every counter gives the
// process its share. A record that does not follow the last applied of a
// process in step means one was lost: every sum is reset, every process
// in step before is asked for all its counters, and the sums built again
// from those count nothing twice. A delta record without a Ledger is
// refused too.
func TestLedgerRefusesRecordsOutOfStep(t *testing.T) {
	l := snapshot.NewLedger()
	apply := func(r snapshot.LocalRecord) error { return l.Apply(&r, nil) }
	var oos *snapshot.OutOfStepError
	require.ErrorAs(t, apply(snapshot.LocalRecord{Snapshot: 5, Process: "a", Prev: 4, Changes: true, Sent: []snapshot.PeerCount{{Peer: "b", N: 1}}, Prior: []uint64{0}}), &oos)
	assert.True(t, oos.First)
	assert.False(t, oos.Reset)
	assert.True(t, errors.Is(oos, snapshot.ErrProtocol))
	require.ErrorAs(t, apply(snapshot.LocalRecord{Snapshot: 6, Process: "a", Prev: 5, Changes: true}), &oos)
	assert.False(t, oos.First, "asked for once")
	require.NoError(t, apply(snapshot.LocalRecord{Snapshot: 7, Process: "a", Prev: 6, Sent: []snapshot.PeerCount{{Peer: "b", N: 3}}}))
	delta := snapshot.LocalRecord{Snapshot: 8, Process: "a", Prev: 7, Changes: true, Sent: []snapshot.PeerCount{{Peer: "b", N: 4}}, Prior: []uint64{3}}
	require.NoError(t, apply(delta))
	require.NoError(t, apply(snapshot.LocalRecord{Snapshot: 8, Process: "c", Sent: []snapshot.PeerCount{{Peer: "b", N: 1}}}))

	// a's record 9 is lost on its way.
	require.ErrorAs(t, apply(snapshot.LocalRecord{Snapshot: 10, Process: "a", Prev: 9, Changes: true, Sent: []snapshot.PeerCount{{Peer: "b", N: 6}}, Prior: []uint64{5}}), &oos)
	assert.True(t, oos.Reset)
	require.ErrorAs(t, apply(snapshot.LocalRecord{Snapshot: 9, Process: "c", Prev: 8, Changes: true}), &oos, "no longer in step")
	assert.False(t, oos.First, "asked for with everyone")

	// Built again from records of every counter, the sum for b is what
	// a and c sent it: a snapshot where b received all of it balances.
	asm, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 11, Mode: snapshot.Epochs, Participants: ids("a", "b", "c"), Ledger: l})
	require.NoError(t, err)
	for _, r := range []snapshot.LocalRecord{
		{Snapshot: 11, Process: "a", Prev: 10, Sent: []snapshot.PeerCount{{Peer: "b", N: 6}}, Prior: []uint64{6}},
		{Snapshot: 11, Process: "c", Prev: 8, Sent: []snapshot.PeerCount{{Peer: "b", N: 1}}, Prior: []uint64{1}},
		{Snapshot: 11, Process: "b", Received: []snapshot.PeerCount{{Peer: "a", N: 6}, {Peer: "c", N: 1}}, ReceivedTotal: 7},
	} {
		require.NoError(t, l.Apply(&r, []*snapshot.Assembler{asm}))
		require.NoError(t, asm.AddRecord(r))
	}
	require.Equal(t, snapshot.Complete, asm.Status(time.Time{}).State, "%+v", asm.Missing())

	a, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 8, Mode: snapshot.Epochs})
	require.NoError(t, err)
	require.ErrorIs(t, a.AddRecord(delta), snapshot.ErrProtocol)
}

// The Coordinator asks for every counter of a participant whose records it
// lost track of, and aborts the snapshot of the record it refused.
func TestCoordinatorAsksForCountersAgain(t *testing.T) {
	c, err := snapshot.NewCoordinator(snapshot.CoordinatorConfig{Mode: snapshot.Epochs})
	require.NoError(t, err)
	now := time.Unix(0, 0)
	id, err := c.Start(now, ids("a"), "")
	require.NoError(t, err)
	c.Ready()
	err = c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "a", Prev: 3, Changes: true})
	var oos *snapshot.OutOfStepError
	require.ErrorAs(t, err, &oos)
	rd := c.Ready()
	assert.Equal(t, ids("a"), rd.Resync)
	require.Len(t, rd.Over, 1)
	assert.ErrorAs(t, rd.Over[0].Err, &oos)

	id, err = c.Start(now, ids("a"), "")
	require.NoError(t, err)
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "a"}))
	rd = c.Ready()
	require.Len(t, rd.Over, 1)
	assert.NotNil(t, rd.Over[0].Global, "every counter again: complete")
}

// A record lost on its way from a participant in step: the coordinator
// cannot take that participant's share off its sums, so it resets them,
// asks every participant for all its counters, and aborts the snapshots
// in progress; the next snapshot of records of every counter completes.
func TestCoordinatorResetsAfterALostRecord(t *testing.T) {
	c, err := snapshot.NewCoordinator(snapshot.CoordinatorConfig{Mode: snapshot.Epochs})
	require.NoError(t, err)
	now := time.Unix(0, 0)
	id, err := c.Start(now, ids("a", "b"), "")
	require.NoError(t, err)
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "a", Sent: []snapshot.PeerCount{{Peer: "b", N: 2}}}))
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "b", Received: []snapshot.PeerCount{{Peer: "a", N: 2}}, ReceivedTotal: 2}))
	require.Len(t, c.Ready().Over, 1)

	first := id
	id, err = c.Start(now, ids("a", "b"), "")
	require.NoError(t, err)
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "b", Prev: first, Changes: true, ReceivedTotal: 2}))
	// a's record of id is lost; its next, of a later snapshot, follows it.
	err = c.Record(now, snapshot.LocalRecord{Snapshot: id + 1, Process: "a", Prev: id, Changes: true, Sent: []snapshot.PeerCount{{Peer: "b", N: 5}}, Prior: []uint64{4}})
	var oos *snapshot.OutOfStepError
	require.ErrorAs(t, err, &oos)
	assert.True(t, oos.Reset)
	rd := c.Ready()
	assert.True(t, rd.ResyncAll, "everyone's counters again")
	assert.Empty(t, rd.Resync)
	require.Len(t, rd.Over, 1, "the snapshot in progress is lost with the sums")
	assert.ErrorAs(t, rd.Over[0].Err, &oos)

	id, err = c.Start(now, ids("a", "b"), "")
	require.NoError(t, err)
	c.Ready()
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "a", Prev: id - 1, Sent: []snapshot.PeerCount{{Peer: "b", N: 6}}, Prior: []uint64{5}}))
	require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "b", Prev: first, Received: []snapshot.PeerCount{{Peer: "a", N: 5}}, ReceivedTotal: 5}))
	assert.Empty(t, c.Ready().Over, "message 6 is in flight")
	require.NoError(t, c.Channel(now, snapshot.ChannelRecord{Snapshot: id, Channel: snapshot.Channel{From: "a", To: "b"}, Messages: []snapshot.Message{{Seq: 6}}}))
	rd = c.Ready()
	assert.False(t, rd.ResyncAll)
	require.Len(t, rd.Over, 1)
	require.NoError(t, rd.Over[0].Err)
	g := rd.Over[0].Global
	require.NoError(t, g.Verify())
	b, _ := g.Participant("b")
	assert.Equal(t, [2]uint64{6, 5}, [2]uint64{b.SentTo, b.Received}, "a's counts whole, once")
}

// A stopped process's final record is kept until the process is
// dropped: its share of the sums stays until then, a record after it is
// refused, and the drop takes the share off, as the receiver forgets what
// it received from it.
func TestLedgerKeepsFinalsUntilTheDrop(t *testing.T) {
	l := snapshot.NewLedger()
	apply := func(r snapshot.LocalRecord) error { return l.Apply(&r, nil) }
	complete := func(id snapshot.SnapshotID, r snapshot.LocalRecord) {
		t.Helper()
		asm, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: id, Mode: snapshot.Epochs, Participants: ids("r"), Ledger: l})
		require.NoError(t, err)
		require.NoError(t, l.Apply(&r, []*snapshot.Assembler{asm}))
		require.NoError(t, asm.AddRecord(r))
		require.Equal(t, snapshot.Complete, asm.Status(time.Time{}).State, "%+v", asm.Missing())
	}
	require.NoError(t, apply(snapshot.LocalRecord{Snapshot: 1, Process: "s", Sent: []snapshot.PeerCount{{Peer: "r", N: 2}}}))
	final := snapshot.LocalRecord{Process: "s", Prev: 1, Sent: []snapshot.PeerCount{{Peer: "r", N: 3}}, Prior: []uint64{2}, Epoch: 1}
	require.NoError(t, apply(final))
	require.ErrorIs(t, apply(snapshot.LocalRecord{Snapshot: 2, Process: "s", Prev: 1, Changes: true}), snapshot.ErrProtocol, "after its final")
	complete(2, snapshot.LocalRecord{Snapshot: 2, Process: "r", Received: []snapshot.PeerCount{{Peer: "s", N: 3}}, ReceivedTotal: 3})

	assert.False(t, l.Drop("s"), "its share came off with its final")
	complete(3, snapshot.LocalRecord{Snapshot: 3, Process: "r", Prev: 2, Changes: true}) // r forgot s's 3
}

// A peer that a record's counts name, not among the participants given,
// must record too: a message crossed between it and the process before
// the cut. Records of every counter and records of changes both say so.
func TestLedgerRecordsRequireTheirPeers(t *testing.T) {
	for _, changes := range []bool{false, true} {
		l := snapshot.NewLedger()
		var prev snapshot.SnapshotID
		if changes {
			// a's first record, of every counter, goes before: the next
			// lists only what changed.
			first := snapshot.LocalRecord{Snapshot: 1, Process: "a", Sent: []snapshot.PeerCount{{Peer: "b", N: 1}}}
			require.NoError(t, l.Apply(&first, nil))
			prev = 1
		}
		asm, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 2, Mode: snapshot.Epochs, Participants: ids("a"), Ledger: l})
		require.NoError(t, err)
		rec := snapshot.LocalRecord{Snapshot: 2, Process: "a", Prev: prev, Changes: changes, Sent: []snapshot.PeerCount{{Peer: "b", N: 3}}, Prior: []uint64{uint64(prev)}}
		require.NoError(t, l.Apply(&rec, []*snapshot.Assembler{asm}))
		require.NoError(t, asm.AddRecord(rec))
		assert.Equal(t, snapshot.Pending, asm.Status(time.Time{}).State, "changes %v", changes)
		assert.Equal(t, ids("b"), asm.Missing().Participants, "changes %v", changes)

		b := snapshot.LocalRecord{Snapshot: 2, Process: "b", Received: []snapshot.PeerCount{{Peer: "a", N: 3}}}
		require.NoError(t, l.Apply(&b, []*snapshot.Assembler{asm}))
		require.NoError(t, asm.AddRecord(b))
		assert.Equal(t, snapshot.Complete, asm.Status(time.Time{}).State, "changes %v", changes)
	}
}

// A child born before its parent's record stands in with its final
// counts when it stops before recording, whichever of its stop and its
// birth reaches the coordinator first: what it sent counts at the cut,
// since its epoch had not reached the snapshot. Set aside as if after
// the cut, its message would leave its receiver one over for ever.
func TestFinalRecordBeforeBirthCountsAtTheCut(t *testing.T) {
	for _, birthFirst := range []bool{false, true} {
		c, err := snapshot.NewCoordinator(snapshot.CoordinatorConfig{Mode: snapshot.Epochs})
		require.NoError(t, err)
		now := time.Unix(0, 0)
		id, err := c.Start(now, ids("a", "r"), "")
		require.NoError(t, err)
		require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "a"}))
		require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "r"}))
		require.Len(t, c.Ready().Over, 1)

		id, err = c.Start(now, ids("a", "r"), "")
		require.NoError(t, err)
		c.Ready()
		final := snapshot.LocalRecord{Process: "c", Sent: []snapshot.PeerCount{{Peer: "r", N: 1}}, Epoch: id - 1}
		if birthFirst {
			c.Require(id, "c")
		}
		require.NoError(t, c.Stopped(now, "c", final, nil, 0, 0))
		if !birthFirst {
			c.Require(id, "c")
		}
		require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "a", Prev: id - 1, Changes: true}))
		require.NoError(t, c.Record(now, snapshot.LocalRecord{Snapshot: id, Process: "r", Prev: id - 1, Changes: true, ReceivedTotal: 1}))
		rd := c.Ready()
		require.Len(t, rd.Over, 1, "birth first %v", birthFirst)
		require.NoError(t, rd.Over[0].Err, "birth first %v", birthFirst)
		p, ok := rd.Over[0].Global.Participant("c")
		require.True(t, ok)
		assert.True(t, p.Departed)
	}
}

// A receiver found over (it counted more than the Ledger's sum says was
// sent to it) names the senders of its record of every counter: one the
// snapshot did not know must record, and its record makes up the sum.
func TestLedgerReceiverOverRequiresItsSenders(t *testing.T) {
	l := snapshot.NewLedger()
	asm, err := snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: 1, Mode: snapshot.Epochs, Participants: ids("r"), Ledger: l})
	require.NoError(t, err)
	add := func(rec snapshot.LocalRecord) {
		t.Helper()
		require.NoError(t, l.Apply(&rec, []*snapshot.Assembler{asm}))
		require.NoError(t, asm.AddRecord(rec))
	}
	add(snapshot.LocalRecord{Snapshot: 1, Process: "r", Received: []snapshot.PeerCount{{Peer: "s", N: 1}}})
	assert.Equal(t, snapshot.Pending, asm.Status(time.Time{}).State)
	assert.Equal(t, ids("s"), asm.Missing().Participants, "r counted a message of s")
	add(snapshot.LocalRecord{Snapshot: 1, Process: "s", Sent: []snapshot.PeerCount{{Peer: "r", N: 1}}})
	assert.Equal(t, snapshot.Complete, asm.Status(time.Time{}).State)
}

// A stored epoch snapshot lists only the channels with messages in
// flight; its receiver counts are what let Verify find one left out, or
// a message left off the end of one, which the channels alone cannot.
func TestVerifyChecksReceiverCounts(t *testing.T) {
	good := func() *snapshot.Global {
		return &snapshot.Global{ID: 7, Mode: snapshot.Epochs, ReceiverCounts: true,
			Participants: []snapshot.Participant{
				{ID: "a", SentTo: 1, Received: 1},
				{ID: "b", SentTo: 5, Received: 2},
				{ID: "c", Departed: true},
			},
			Channels: []snapshot.ChannelState{
				{Channel: snapshot.Channel{From: "a", To: "b"}, Sent: 4, Received: 2, Messages: []snapshot.Message{{Seq: 3}, {Seq: 4}}},
				{Channel: snapshot.Channel{From: "c", To: "b"}, Sent: 1, Received: 0, Messages: []snapshot.Message{{Seq: 1}}},
			}}
	}
	require.NoError(t, good().Verify())

	g := good()
	g.Channels = g.Channels[:1] // c->b left out
	var rb *snapshot.ReceiverBalanceError
	require.ErrorAs(t, g.Verify(), &rb)
	assert.Equal(t, snapshot.ReceiverBalanceError{Snapshot: 7, Receiver: "b", Sent: 5, Received: 2, Recorded: 2}, *rb)

	g = good()
	g.Channels[0].Sent, g.Channels[0].Messages = 3, g.Channels[0].Messages[:1] // message 4 left off
	require.ErrorAs(t, g.Verify(), &rb)
	assert.Equal(t, snapshot.ReceiverBalanceError{Snapshot: 7, Receiver: "b", Sent: 5, Received: 2, Recorded: 2}, *rb)

	g = good()
	g.Participants[0].Received = 2 // received more than was sent to it
	require.ErrorAs(t, g.Verify(), &rb)
	assert.Equal(t, snapshot.ProcessID("a"), rb.Receiver)

	g = good()
	g.Participants[2].SentTo = 1
	assert.ErrorContains(t, g.Verify(), "departed participant c has receiver counts")

	// Without receiver counts (other modes, older files), the channels
	// alone are checked.
	g = good()
	g.Channels = g.Channels[:1]
	g.ReceiverCounts = false
	require.NoError(t, g.Verify())
}
