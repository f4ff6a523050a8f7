package postgres_test

import (
	"context"
	"testing"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// BenchmarkStore measures the PostgreSQL store's Save and Load against the
// file store's as the baseline, on the same snapshot and in the same run.
// Throughput is in MB/s of the snapshot's encoded size (EncodeGlobal), the
// same for both, so the ratio postgres/file reads directly. The file
// store fsyncs; the server's durability is whatever it is configured with
// (.ci/postgres.sh keeps PostgreSQL's defaults: fsync on, synchronous
// commit).
//
//	eval "$(bash .ci/postgres.sh)"
//	go test ./persistence/postgres -run '^$' -bench BenchmarkStore -count 5
func BenchmarkStore(b *testing.B) {
	serverURL(b)
	ctx := context.Background()
	g := storetest.NewGlobal(1, storetest.BenchShape)
	enc, err := persistence.EncodeGlobal(g)
	if err != nil {
		b.Fatal(err)
	}
	size := int64(len(enc))
	b.Logf("participants=%d in-flight=%d encoded=%d bytes", len(g.Participants), g.TotalInFlight(), size)

	stores := []struct {
		name string
		open func(b *testing.B) persistence.Store
	}{
		{"postgres", func(b *testing.B) persistence.Store { return open(b, freshSchema(b)) }},
		{"file", func(b *testing.B) persistence.Store {
			s, err := persistence.Open(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, st := range stores {
		b.Run("op=save/store="+st.name, func(b *testing.B) {
			s := st.open(b)
			b.SetBytes(size)
			b.ReportAllocs()
			for i := range b.N {
				gi := *g
				gi.ID = snapshot.SnapshotID(i + 1)
				if err := s.Save(ctx, &gi); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := s.Delete(ctx, gi.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
	for _, st := range stores {
		b.Run("op=load/store="+st.name, func(b *testing.B) {
			s := st.open(b)
			if err := s.Save(ctx, g); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Load(ctx, g.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
