// Command pipeline runs an iterative computation with a feedback loop on
// actorsnap participants, takes aligned snapshots of it (Flink's barriers)
// while it runs, and resumes it from one of them with exactly the result
// an uninterrupted run has.
//
// A source deals the items out to the workers; each round every worker
// advances its items and sends the aggregator its largest change, and the
// aggregator sends the next round back, until no value moves by 1e-12.
// The channels agg->w0, agg->w1, ... close the loop: they are declared back
// edges, so no one waits for a barrier on them and what crosses them
// during a snapshot is its channel state; every other channel is aligned
// and holds nothing.
//
//	go run ./examples/pipeline --store /tmp/pipe --interval 50ms
//	go run ./examples/pipeline --store /tmp/pipe --restore latest
//
// Both print the same rounds, SHA-256 of the values and sample values.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// config is what the flags set.
type config struct {
	Items, Workers int
	Work           int // Euler steps per item and round
	Seed           uint64
	Store          string        // a directory or store URL; "" for memory
	Interval       time.Duration // between snapshots; 0 for none
	Restore        string        // a snapshot id or "latest"; "" to start afresh
}

func main() {
	var c config
	flag.IntVar(&c.Items, "items", 20000, "number of items")
	flag.IntVar(&c.Workers, "workers", 4, "number of workers")
	flag.IntVar(&c.Work, "work", 64, "Euler steps per item and round: the work of a round")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed of the items")
	flag.StringVar(&c.Store, "store", "", "where snapshots are saved: a directory or a store URL (default: in memory)")
	flag.DurationVar(&c.Interval, "interval", 0, "time between snapshots (default: none)")
	flag.StringVar(&c.Restore, "restore", "", "resume from this stored snapshot: an id, or latest")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	_, err := run(ctx, os.Stdout, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}

// run runs the computation as c says, printing to w, and returns its output.
func run(ctx context.Context, w io.Writer, c config) (Output, error) {
	w = &lockedWriter{w: w} // snapshot events are printed from the guardian
	store := persistence.Store(persistence.NewMemory())
	if c.Store != "" {
		var err error
		if store, err = persistence.OpenURL(ctx, c.Store); err != nil {
			return Output{}, err
		}
	}
	out := make(chan Output, 1)
	var sys *actors.System
	var err error
	if c.Restore == "" {
		fmt.Fprintf(w, "%d items on %d workers, seed %d, %d steps a round\n", c.Items, c.Workers, c.Seed, c.Work)
		sys, err = start(c, store, out, func(sys *actors.System) { watch(sys, w) })
	} else {
		sys, err = resume(ctx, w, c, store, out)
	}
	if err != nil {
		return Output{}, err
	}
	var o Output
	select {
	case o = <-out:
	case <-ctx.Done():
		err = ctx.Err()
	}
	// A periodic snapshot may be in progress: Shutdown aborts it and says so.
	if serr := sys.Shutdown(context.Background()); serr != nil && !errors.Is(serr, actors.ErrShutdown) {
		err = errors.Join(err, serr)
	}
	if err == nil {
		err = o.Err
	}
	if err != nil {
		return o, err
	}
	fmt.Fprintf(w, "converged after %d rounds: %d values, sha256 %x\n", o.Rounds, len(o.Values), digest(o.Values))
	if n := len(o.Values); n > 0 {
		fmt.Fprintf(w, "x[0] = %.17g  x[%d] = %.17g  x[%d] = %.17g\n", o.Values[0], n/2, o.Values[n/2], n-1, o.Values[n-1])
	}
	return o, nil
}

// options configures a pipeline system of c.Workers workers that hands its
// output to out. A restore overwrites the state the producers set.
func options(c config, store persistence.Store, out chan<- Output) []actors.Option {
	opts := append(slices.Clone(messages),
		actors.WithMode(snapshot.Aligned),
		actors.WithStore(store),
		// A barrier waits behind a round in progress; on a loaded machine
		// that can take a while, and this computation is in no hurry.
		actors.WithTimeout(time.Minute),
		actors.WithKind("source", func() actor.Actor { return &source{Items: c.Items, Workers: c.Workers, Seed: c.Seed} }),
		actors.WithKind("worker", func() actor.Actor { return &worker{Steps: c.Work} }),
		actors.WithKind("agg", func() actor.Actor { return &aggregator{Items: c.Items, Workers: c.Workers, out: out} }),
	)
	for i := range c.Workers {
		opts = append(opts, actors.WithBackEdges(snapshot.Channel{From: aggName, To: snapshot.ProcessID(workerName(i))}))
	}
	if c.Interval > 0 {
		opts = append(opts, actors.WithInterval(c.Interval))
	}
	return opts
}

// start starts a fresh pipeline, calling before, if set, before the
// actors start. The source deals the items out as it starts, so it comes
// last.
func start(c config, store persistence.Store, out chan<- Output, before func(*actors.System)) (*actors.System, error) {
	if c.Items < 1 || c.Workers < 1 || c.Work < 1 {
		return nil, fmt.Errorf("need at least 1 item, 1 worker and 1 step a round")
	}
	sys, err := actors.NewSystem(options(c, store, out)...)
	if err != nil {
		return nil, err
	}
	if before != nil {
		before(sys)
	}
	spawn := func(kind, name string) {
		if err == nil {
			_, err = sys.Spawn(kind, name)
		}
	}
	spawn("agg", aggName)
	for i := range c.Workers {
		spawn("worker", workerName(i))
	}
	spawn("source", sourceName)
	if err != nil {
		_ = sys.Shutdown(context.Background())
		return nil, err
	}
	return sys, nil
}

// resume restores the pipeline from the snapshot c.Restore names: the
// replayed messages in flight drive it on from there.
func resume(ctx context.Context, w io.Writer, c config, store persistence.Store, out chan<- Output) (*actors.System, error) {
	var id snapshot.SnapshotID
	if c.Restore != "latest" {
		n, err := strconv.ParseUint(c.Restore, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("--restore %q: want a snapshot id or latest", c.Restore)
		}
		id = snapshot.SnapshotID(n)
	}
	g, err := load(ctx, store, id)
	if err != nil {
		return nil, err
	}
	// The snapshot says how many workers there are: their back edges.
	c.Workers = 0
	for _, p := range g.Participants {
		if p.Kind == "worker" {
			c.Workers++
		}
	}
	agg, err := aggregatorIn(g)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "resuming from snapshot %d: round %d, %d messages in flight\n", g.ID, agg.Round, g.TotalInFlight())
	began := time.Now()
	sys, err := actors.Restore(ctx, store, g.ID, options(c, store, out)...)
	if err != nil {
		return nil, err
	}
	// Restore took the first snapshot before it returned.
	fmt.Fprintf(w, "restored in %v; the restored system's first snapshot holds the restored state\n", time.Since(began).Round(time.Millisecond))
	watch(sys, w)
	return sys, nil
}

// load returns snapshot id of store, or the latest if id is 0.
func load(ctx context.Context, store persistence.Store, id snapshot.SnapshotID) (*snapshot.Global, error) {
	if id == 0 {
		return store.Latest(ctx)
	}
	return store.Load(ctx, id)
}

// aggregatorIn decodes the aggregator's state in g.
func aggregatorIn(g *snapshot.Global) (*aggregator, error) {
	state, ok := g.State(aggName)
	if !ok {
		return nil, fmt.Errorf("snapshot %d has no %s: not a pipeline", g.ID, aggName)
	}
	var a aggregator
	if err := msgpack.Unmarshal(state, &a); err != nil {
		return nil, fmt.Errorf("snapshot %d: state of %s: %w", g.ID, aggName, err)
	}
	return &a, nil
}

// watch prints a line to w for each snapshot sys completes or aborts.
func watch(sys *actors.System, w io.Writer) {
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *actors.SnapshotCompleted:
			g := e.Global
			fmt.Fprintf(w, "snapshot %3d  %s  %d participants  %3d in flight  %6d B channel state  %v\n",
				g.ID, g.Mode, len(g.Participants), g.TotalInFlight(), channelBytes(g), e.Duration.Round(10*time.Microsecond))
		case *actors.SnapshotAborted:
			if !errors.Is(e.Err, actors.ErrShutdown) { // the one in progress at the end
				fmt.Fprintln(w, e.Err)
			}
		}
	})
}

// channelBytes is the size of g's channel state.
func channelBytes(g *snapshot.Global) int {
	n := 0
	for _, c := range g.Channels {
		for _, m := range c.Messages {
			if rm, ok := m.Payload.(actors.RecordedMessage); ok {
				n += len(rm.Data)
			}
		}
	}
	return n
}

// digest is the SHA-256 of the values' bits.
func digest(xs []float64) [sha256.Size]byte {
	h := sha256.New()
	var b [8]byte
	for _, x := range xs {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
		h.Write(b[:])
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// lockedWriter serializes writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
