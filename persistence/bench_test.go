package persistence_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/persistence/storetest"
	"github.com/actorsnap/actorsnap/snapshot"
)

// BenchmarkFileStore measures the file store's Save and Load of a 1.5 MB
// snapshot (storetest.BenchShape) against the plain baseline, in the same
// directory and the same run: writing the same number of bytes to one file
// and fsyncing it, and reading them back with os.ReadFile. Each
// iteration's snapshot or file is removed, untimed, before the next, so
// the directory stays small. Throughput is in MB/s of the encoded size, so
// the ratio store/plain reads directly. At this size the fixed cost of a
// durable save (a directory, two files, two rounds of fsync against the
// baseline's one) weighs most; BenchmarkFileStoreLarge measures a 42 MB
// snapshot, where throughput does. They are two functions so that -count
// runs each size's rounds together: interleaved, the small loads ran on
// memory the large ones had just handed back to the system, and took
// twice as long.
//
//	go test ./persistence -run '^$' -bench 'BenchmarkFileStore' -count 5
func BenchmarkFileStore(b *testing.B) { benchFileStore(b, storetest.BenchShape) }

// BenchmarkFileStoreLarge is BenchmarkFileStore on a 42 MB snapshot
// (storetest.LargeShape).
func BenchmarkFileStoreLarge(b *testing.B) { benchFileStore(b, storetest.LargeShape) }

func benchFileStore(b *testing.B, shape storetest.Shape) {
	ctx := context.Background()
	g := storetest.NewGlobal(1, shape)
	enc, err := persistence.EncodeGlobal(g)
	if err != nil {
		b.Fatal(err)
	}
	size := int64(len(enc))
	b.Logf("participants=%d in-flight=%d encoded=%d bytes", len(g.Participants), g.TotalInFlight(), size)
	dir := b.TempDir()
	s := openFile(b, dir)

	b.Run("op=save/store", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := range b.N {
			gi := *g
			gi.ID = snapshot.SnapshotID(i + 2)
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
	b.Run("op=save/plain", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := range b.N {
			name := filepath.Join(dir, fmt.Sprintf("plain-%d", i))
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(enc); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.Remove(name); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	if err := s.Save(ctx, g); err != nil {
		b.Fatal(err)
	}
	b.Run("op=load/store", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Load(ctx, g.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=load/plain", func(b *testing.B) {
		name := filepath.Join(dir, "plain")
		if err := os.WriteFile(name, enc, 0o644); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := os.ReadFile(name); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCodec measures encoding and decoding alone, of a snapshot
// without waits (storetest.BenchShape).
//
//	go test ./persistence -run '^$' -bench 'BenchmarkCodec' -count 5
func BenchmarkCodec(b *testing.B) { benchCodec(b, storetest.BenchShape) }

// BenchmarkCodecWaits is BenchmarkCodec with waits: every participant
// but the departed one has three wait-for edges, two requests to
// participants and a declared wait for a process that is not one.
func BenchmarkCodecWaits(b *testing.B) {
	shape := storetest.BenchShape
	shape.Waiting, shape.Edges = shape.Participants, 3
	benchCodec(b, shape)
}

func benchCodec(b *testing.B, shape storetest.Shape) {
	g := storetest.NewGlobal(1, shape)
	enc, err := persistence.EncodeGlobal(g)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("op=encode", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := persistence.EncodeGlobal(g); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=decode", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := persistence.DecodeGlobal(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
