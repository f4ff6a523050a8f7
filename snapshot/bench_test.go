package snapshot_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

var sink snapshot.Stamp

// BenchmarkSend measures the per-message cost of stamping a send, with no
// snapshot in progress and with one recorded.
func BenchmarkSend(b *testing.B) {
	for _, recording := range []bool{false, true} {
		b.Run(fmt.Sprintf("recording=%v", recording), func(b *testing.B) {
			p, _ := snapshot.NewProcess(snapshot.Config{ID: "a", Outgoing: []snapshot.ProcessID{"b", "c"}, Incoming: []snapshot.ProcessID{"b"}})
			p.Send("b")
			if recording {
				_ = p.Initiate(1)
				p.Advance()
			}
			b.ReportAllocs()
			for b.Loop() {
				sink = p.Send("b")
			}
		})
	}
}

// BenchmarkReceive measures the per-message cost of a receipt, with no
// snapshot in progress and with one recording the channel (each recording
// is closed and a new one begun every 4096 messages, as back-to-back
// snapshots would).
func BenchmarkReceive(b *testing.B) {
	payload := &struct{ n int }{}
	for _, recording := range []bool{false, true} {
		b.Run(fmt.Sprintf("recording=%v", recording), func(b *testing.B) {
			p, _ := snapshot.NewProcess(snapshot.Config{ID: "b", Outgoing: []snapshot.ProcessID{"c"}, Incoming: []snapshot.ProcessID{"a", "c"}})
			var id snapshot.SnapshotID
			next := func() {
				if id > 0 {
					_ = p.Marker("a", id)
					p.Forget(id)
				}
				id++
				_ = p.Marker("c", id)
				p.Advance()
			}
			if recording {
				next()
			}
			seq := uint64(0)
			b.ReportAllocs()
			for b.Loop() {
				seq++
				if err := p.Receive("a", snapshot.Stamp{Seq: seq}, payload); err != nil {
					b.Fatal(err)
				}
				if recording && seq%4096 == 0 {
					next()
				}
			}
		})
	}
}

// BenchmarkSimulatedSnapshot measures one whole broadcast snapshot on the
// simulated network, ring plus random chords, under bank traffic: the
// algorithm's cost without Proto.Actor, per snapshot.
func BenchmarkSimulatedSnapshot(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("processes=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			g := snapshottest.RingWithChords(r, n, 2)
			bank := snapshottest.NewBank(g, 1000, n/10)
			net, err := snapshottest.NewNetwork(snapshottest.Config{Seed: 1, Graph: g, MaxDelay: 4}, bank)
			if err != nil {
				b.Fatal(err)
			}
			for range 20 { // traffic on every channel before measuring
				net.Tick(true)
			}
			ticks := 0
			b.ReportAllocs()
			for b.Loop() {
				net.StartSnapshot(-1)
				for len(net.Pending()) > 0 {
					net.Tick(true)
					ticks++
				}
			}
			if err := net.Err(); err != nil {
				b.Fatal(err)
			}
			if len(net.Aborted()) > 0 {
				b.Fatal(net.Aborted()[0])
			}
			last := net.Completed()[len(net.Completed())-1]
			b.ReportMetric(float64(ticks)/float64(b.N), "ticks/snapshot")
			b.ReportMetric(float64(last.TotalInFlight()), "inflight/snapshot")
		})
	}
}

// BenchmarkCoordinatorEpoch measures the coordinator's share of an Epochs
// snapshot, the guardian's work without actors: n participants on a ring
// with two chords each, every one recording its counters (all changed
// since its last record, as on a bank under load) and reporting the one
// message in flight to it that it captured. Each op is a whole snapshot, from Start to
// the Global; ns/participant is what the guardian's goroutine spends per
// participant, its records and reports alike. In the rows named
// growing, one participant in a hundred adds a chord before each
// snapshot, as on a workload still making the channels it will use: each
// snapshot numbers new channels, and hands the next a Numbering that has
// them. In the rows named kept, records are handed over
// (Coordinator.RecordKept), as the guardian does, rather than copied.
// ns/completion is the time of the report that completes each snapshot:
// the sweep of the last channel, the Global built and the Numbering for
// the next made.
func BenchmarkCoordinatorEpoch(b *testing.B) {
	for _, row := range []struct {
		n          int
		grow, kept bool
	}{{1000, false, false}, {10000, false, false}, {10000, false, true}, {10000, true, false}, {100000, true, false}, {100000, true, true}} {
		n := row.n
		name := fmt.Sprintf("participants=%d", n)
		if row.grow {
			name += "-growing"
		}
		if row.kept {
			name += "-kept"
		}
		b.Run(name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			ids := make([]snapshot.ProcessID, n)
			for i := range ids {
				ids[i] = snapshot.ProcessID(fmt.Sprintf("acct-%05d", i))
			}
			// out[i] are i's peers: the next on the ring, then two chords;
			// in[j] the senders to j, the ring's first.
			out := make([][]int, n)
			in := make([][]int, n)
			for i := range n {
				out[i] = []int{(i + 1) % n}
				for len(out[i]) < 3 {
					if j := r.IntN(n); j != i && !slices.Contains(out[i], j) {
						out[i] = append(out[i], j)
					}
				}
			}
			for i := range n {
				for _, j := range out[i] {
					in[j] = append(in[j], i)
				}
			}
			c, err := snapshot.NewCoordinator(snapshot.CoordinatorConfig{Mode: snapshot.Epochs})
			if err != nil {
				b.Fatal(err)
			}
			now := time.Unix(100, 0)
			var k uint64
			var prevID snapshot.SnapshotID // the last round's: each record follows it
			listed := make([]int, n)       // how many of out[i] the last round listed
			recs := make([]snapshot.LocalRecord, n)
			chans := make([]snapshot.ChannelRecord, n)
			// prepare makes the next round's records and reports, outside
			// the time measured: every channel carried 10 messages since
			// the last round, and the ring's last one to each receiver is
			// in flight.
			prepare := func() {
				k++
				for x := 0; row.grow && x < n/100; {
					i, j := r.IntN(n), r.IntN(n)
					if j != i && !slices.Contains(out[i], j) {
						out[i] = append(out[i], j)
						in[j] = append(in[j], i)
						x++
					}
				}
				for i := range n {
					sent := make([]snapshot.PeerCount, len(out[i]))
					prior := make([]uint64, len(out[i]))
					for x, j := range out[i] {
						sent[x] = snapshot.PeerCount{Peer: ids[j], N: 10 * k * uint64(x+1)}
						if x < listed[i] {
							prior[x] = 10 * (k - 1) * uint64(x+1)
						}
					}
					listed[i] = len(out[i])
					received := make([]snapshot.PeerCount, len(in[i]))
					for x, j := range in[i] {
						y := slices.Index(out[j], i)
						got := 10 * k * uint64(y+1)
						if y == 0 {
							got--
						}
						received[x] = snapshot.PeerCount{Peer: ids[j], N: got}
					}
					recs[i] = snapshot.LocalRecord{Process: ids[i], State: []byte{1}, Sent: sent, Received: received, Prior: prior}
					chans[i] = snapshot.ChannelRecord{Channel: snapshot.Channel{From: ids[(i+n-1)%n], To: ids[i]},
						Messages: []snapshot.Message{{Seq: 10 * k, Payload: k}}}
				}
			}
			var completion time.Duration
			round := func() {
				id := benchStart(b, c, now, ids)
				// A participant's record, then what it captured, as its
				// reports come.
				for i := range recs {
					recs[i].Snapshot, recs[i].Prev = id, prevID
					record := c.Record
					if row.kept {
						record = func(now time.Time, r snapshot.LocalRecord) error { return c.RecordKept(now, &recs[i]) }
					}
					if err := record(now, recs[i]); err != nil {
						b.Fatal(err)
					}
					chans[i].Snapshot = id
					var start time.Time
					if i == len(recs)-1 {
						start = time.Now()
					}
					if err := c.Channels(now, chans[i:i+1]); err != nil {
						b.Fatal(err)
					}
					if i == len(recs)-1 {
						completion += time.Since(start)
					}
				}
				benchComplete(b, c, id)
				prevID = id
			}
			for range 3 { // the Numbering of a complete snapshot, as under load
				prepare()
				round()
			}
			completion = 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				prepare()
				b.StartTimer()
				round()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/participant")
			b.ReportMetric(float64(completion.Nanoseconds())/float64(b.N), "ns/completion")
		})
	}
}

// BenchmarkCoordinatorDense runs the guardian's share of epoch snapshots
// of a dense graph, without actors: between two snapshots each of 1,000
// participants sends to 50 peers drawn at random, most of them a pair
// never used before (the dense bank's accounts meet new pairs for
// seconds), and every record after the first lists only the channels
// whose counters changed (LocalRecord.Changes): the sent counts of those
// channels, each with its count as of the last record, and what the
// participant received in all. What it prices is the coordinator's work
// per channel that changed, which the Ledger adds to its receiver's sum,
// keeping nothing per pair. Nothing is in flight at the cut. ns/channel
// is the time a snapshot over the channels whose counts changed.
func BenchmarkCoordinatorDense(b *testing.B) {
	const n, fanout = 1000, 50
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]snapshot.ProcessID, n)
	for i := range ids {
		ids[i] = snapshot.ProcessID(fmt.Sprintf("acct-%05d", i))
	}
	c, err := snapshot.NewCoordinator(snapshot.CoordinatorConfig{Mode: snapshot.Epochs})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(100, 0)
	sent := make([]map[int]uint64, n)   // by sender: count by receiver
	listed := make([]map[int]uint64, n) // as of the sender's last record
	received := make([]map[int]uint64, n)
	for i := range n {
		sent[i], listed[i], received[i] = map[int]uint64{}, map[int]uint64{}, map[int]uint64{}
	}
	recs := make([]snapshot.LocalRecord, n)
	var prev snapshot.SnapshotID
	entries := 0
	// prepare makes the next round's records outside the time measured.
	prepare := func() {
		outs := make([][]int, n)
		ins := make([][]int, n)
		for i := range n {
			for range fanout {
				j := r.IntN(n)
				if j == i {
					continue
				}
				if !slices.Contains(outs[i], j) {
					outs[i] = append(outs[i], j)
					ins[j] = append(ins[j], i)
				}
				sent[i][j]++
				received[j][i]++
			}
		}
		entries = 0
		for i := range n {
			rec := snapshot.LocalRecord{Process: ids[i], State: []byte{1}, Prev: prev, Changes: prev != 0}
			for _, j := range outs[i] {
				rec.Sent = append(rec.Sent, snapshot.PeerCount{Peer: ids[j], N: sent[i][j]})
				rec.Prior = append(rec.Prior, listed[i][j])
				listed[i][j] = sent[i][j]
			}
			for j, got := range received[i] {
				if prev == 0 { // the first record lists every counter
					rec.Received = append(rec.Received, snapshot.PeerCount{Peer: ids[j], N: got})
				}
				rec.ReceivedTotal += got
			}
			entries += len(rec.Sent)
			recs[i] = rec
		}
	}
	round := func() {
		id := benchStart(b, c, now, ids)
		for i := range recs {
			recs[i].Snapshot = id
			if err := c.RecordKept(now, &recs[i]); err != nil {
				b.Fatal(err)
			}
		}
		benchComplete(b, c, id)
		prev = id
	}
	for range 3 {
		prepare()
		round()
	}
	b.ReportAllocs()
	total := 0
	for b.Loop() {
		b.StopTimer()
		prepare()
		total += entries
		b.StartTimer()
		round()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/channel")
	b.ReportMetric(float64(total)/float64(b.N), "channels/snapshot")
}

// benchStart starts a snapshot of ids on c and takes the start's
// actions.
func benchStart(b *testing.B, c *snapshot.Coordinator, now time.Time, ids []snapshot.ProcessID) snapshot.SnapshotID {
	id, err := c.Start(now, ids, "")
	if err != nil {
		b.Fatal(err)
	}
	c.Ready()
	return id
}

// benchComplete fails b unless snapshot id is the one over, complete.
func benchComplete(b *testing.B, c *snapshot.Coordinator, id snapshot.SnapshotID) {
	rd := c.Ready()
	if len(rd.Over) != 1 || rd.Over[0].Global == nil {
		b.Fatalf("snapshot %d not complete: %+v", id, rd.Over)
	}
}

// BenchmarkEpochRecord measures one record of the Epochs mode by a
// process with many outgoing channels of which a few changed since its
// last record (a dense bank's account: 1,000 peers, 30 sent to between
// snapshots, in random order), with the 30 sends before it: the record
// lists only those channels, in their order.
func BenchmarkEpochRecord(b *testing.B) {
	const peers, changed = 1000, 30
	ids := make([]snapshot.ProcessID, peers)
	for i := range ids {
		ids[i] = snapshot.ProcessID(fmt.Sprintf("acct-%05d", i))
	}
	p, err := snapshot.NewProcess(snapshot.Config{ID: "me", Mode: snapshot.Epochs, Outgoing: ids, DeltaMin: 64})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	rounds := make([][]int, 64)
	for i := range rounds {
		rounds[i] = r.Perm(peers)[:changed]
	}
	var id snapshot.SnapshotID
	record := func(round []int) int {
		for _, k := range round {
			p.Send(ids[k])
		}
		id++
		if err := p.Initiate(id); err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, rec := range p.Ready().Records {
			n += len(rec.Sent)
		}
		p.Advance()
		p.Forget(id)
		return n
	}
	record(rounds[0]) // the first record lists every channel
	listed, records := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		listed += record(rounds[records%len(rounds)])
		records++
	}
	b.ReportMetric(float64(listed)/float64(records), "listed/record")
}
