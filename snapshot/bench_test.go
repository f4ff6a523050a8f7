package snapshot_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

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
