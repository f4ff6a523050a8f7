package link_test

import (
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/cluster/link"
)

// BenchmarkLink passes messages through a Sender and a Receiver joined
// directly (no loss): the link's own cost per message, batching and
// acknowledgements included. baseline hands the same messages over in
// batches with nothing else: what any transport pays.
func BenchmarkLink(b *testing.B) {
	msg := make([]byte, 64)
	now := time.Unix(0, 0)
	b.Run("link", func(b *testing.B) {
		s, err := link.NewSender(link.DefaultConfig(1))
		if err != nil {
			b.Fatal(err)
		}
		var r link.Receiver
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Send(msg); err != nil {
				b.Fatal(err)
			}
			if n++; n%256 == 0 {
				for _, f := range s.Ready(now) {
					got, ack := r.Receive(f)
					_ = got
					if err := s.Ack(ack, now); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
	b.Run("baseline", func(b *testing.B) {
		batch := make([][]byte, 0, 256)
		delivered := 0
		b.ReportAllocs()
		for b.Loop() {
			batch = append(batch, msg)
			if len(batch) == 256 {
				delivered += len(batch)
				batch = batch[:0]
			}
		}
		_ = delivered
	})
}
