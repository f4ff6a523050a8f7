package actors_test

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/snapshot"
)

// The pipeline of BenchmarkPipelineSlowInput: a fast source keeps
// pipeWindow messages of pipePayload bytes in flight to a merger, which
// acknowledges each (credit-based flow control, so the source sends only
// as fast as the merger takes in); a slow source sends the merger one
// message per slowWork (some milliseconds of hashing). The acknowledgements are a feedback
// channel, declared a back edge.
const (
	pipeWindow     = 32
	pipePayload    = 1024
	pipeSlowRounds = 120000
	pipePeriod     = 20 * time.Millisecond // load between two snapshots
)

type (
	pipeData struct {
		Seq     int64
		Payload []byte
	}
	pipeAck   struct{}
	slowTick  struct{}
	pipeSetup struct {
		merger, fast *actor.PID
		processed    *atomic.Int64
		done         chan<- struct{}
	}
)

type fastSource struct {
	Sent   int64
	merger *actor.PID `msgpack:"-"`
}

func (s *fastSource) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pipeSetup:
		s.merger = m.merger
		for range pipeWindow {
			s.send(ctx)
		}
		m.done <- struct{}{}
	case *pipeAck:
		s.send(ctx)
	}
}

func (s *fastSource) send(ctx actor.Context) {
	s.Sent++
	ctx.Send(s.merger, &pipeData{Seq: s.Sent, Payload: make([]byte, pipePayload)})
}

type slowSource struct {
	Sent   int64
	Digest [sha256.Size]byte
	merger *actor.PID `msgpack:"-"`
}

// slowWork is the slow input's work on each message: pipeSlowRounds
// rounds of SHA-256, some milliseconds of CPU.
func slowWork(d [sha256.Size]byte) [sha256.Size]byte {
	for range pipeSlowRounds {
		d = sha256.Sum256(d[:])
	}
	return d
}

func (s *slowSource) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pipeSetup:
		s.merger = m.merger
		ctx.Send(ctx.Self(), &slowTick{})
		m.done <- struct{}{}
	case *slowTick:
		s.Digest = slowWork(s.Digest) // a barrier for this input waits behind it
		s.Sent++
		ctx.Send(s.merger, &pipeData{Seq: s.Sent})
		ctx.Send(ctx.Self(), &slowTick{})
	}
}

type merger struct {
	Count     int64
	fast      *actor.PID    `msgpack:"-"`
	processed *atomic.Int64 `msgpack:"-"`
}

func (m *merger) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *pipeSetup:
		m.fast, m.processed = msg.fast, msg.processed
		msg.done <- struct{}{}
	case *pipeData:
		m.Count++
		m.processed.Add(1)
		if len(msg.Payload) > 0 {
			ctx.Send(m.fast, &pipeAck{})
		}
	}
}

// BenchmarkPipelineSlowInput compares the two snapshot modes on a pipeline
// with one slow input, in the same run: a snapshot every pipePeriod of
// load, and, as the baseline, the same load without snapshots. It reports
// the merger's throughput (msgs/s; divide by the baseline's for the
// throughput kept), the median snapshot latency, and the bytes of
// recorded messages (channel state) per snapshot. The aligned mode stores
// next to nothing but waits for the slow input's barrier with the fast
// input blocked; the unaligned mode never waits but stores the fast
// input's messages in flight.
//
//	go test ./actors -run '^$' -bench BenchmarkPipelineSlowInput -benchtime 100x -count 5
func BenchmarkPipelineSlowInput(b *testing.B) {
	for _, mode := range []string{"none", "unaligned", "aligned"} {
		b.Run("mode="+mode, func(b *testing.B) { benchPipeline(b, mode) })
	}
}

func benchPipeline(b *testing.B, mode string) {
	opts := append([]actors.Option{actors.WithBackEdges(snapshot.Channel{From: "merger", To: "fast"})}, benchMessages...)
	if mode == "aligned" {
		opts = append(opts, actors.WithMode(snapshot.Aligned))
	}
	sys, err := actors.NewSystem(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
	}()
	for kind, producer := range map[string]func() actor.Actor{
		"fast":   func() actor.Actor { return &fastSource{} },
		"slow":   func() actor.Actor { return &slowSource{} },
		"merger": func() actor.Actor { return &merger{} },
	} {
		if err := sys.RegisterKind(kind, producer); err != nil {
			b.Fatal(err)
		}
	}
	pids := make(map[string]*actor.PID)
	for _, name := range []string{"merger", "fast", "slow"} {
		if pids[name], err = sys.Spawn(name, name); err != nil {
			b.Fatal(err)
		}
	}
	var processed atomic.Int64
	done := make(chan struct{}, 3)
	setup := &pipeSetup{merger: pids["merger"], fast: pids["fast"], processed: &processed, done: done}
	for _, name := range []string{"merger", "fast", "slow"} {
		sys.Root().Send(pids[name], setup)
		await(b, done, name+" set up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchDeadline)
	defer cancel()
	snap := func() *snapshot.Global {
		g, err := sys.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	if mode != "none" {
		snap() // shows the guardian the channels: the aligned mode waits only on those
	}

	var lat []time.Duration
	var stateBytes int
	timer := time.NewTimer(pipePeriod)
	defer timer.Stop()
	b.ResetTimer()
	start, before := time.Now(), processed.Load()
	for range b.N {
		timer.Reset(pipePeriod)
		<-timer.C
		if mode == "none" {
			continue
		}
		t0 := time.Now()
		g := snap()
		lat = append(lat, time.Since(t0))
		for _, c := range g.Channels {
			for _, m := range c.Messages {
				stateBytes += len(m.Payload.(actors.RecordedMessage).Data)
			}
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(processed.Load()-before)/elapsed.Seconds(), "msgs/s")
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "snapshot-ms")
		b.ReportMetric(float64(stateBytes)/float64(len(lat)), "state-B/snapshot")
	}
}
