// Command epidemic runs an agent-based SIR epidemic on a grid of regions,
// one actorsnap participant each, takes snapshots of it while it runs,
// resumes it from any of them to the very result an uninterrupted run
// has, and forks what-if runs from them with changed parameters.
//
//	go run ./examples/epidemic --store /tmp/epi --interval 1s
//	go run ./examples/epidemic --store /tmp/epi --restore latest
//	go run ./examples/epidemic --restore 40 --from /tmp/epi --store /tmp/vacc --set vaccination=0.02
//	go run ./examples/epidemic render --store /tmp/epi --grid grid.png --curves curves.png
//
// A run ends with the line "final tick T: S=… I=… R=… sha256 …", the hash
// of every region's final state: the same for a run killed and resumed
// any number of times as for one never interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// config is what the flags set.
type config struct {
	Side     int // regions per side of the grid
	Agents   int // agents per region at tick 0
	Infected int // agents infected at tick 0, in the centre region
	Ticks    int // the run ends at this tick
	Seed     uint64
	Params   Params

	Store    string        // a directory or store URL; "" for memory
	Interval time.Duration // between snapshots; 0 for none
	Retain   int           // keep the newest this many snapshots; 0 for all
	Mode     snapshot.Mode
	ModeSet  bool      // --mode was given; a restore takes the snapshot's otherwise
	Restore  string    // a snapshot id or "latest"; "" to start afresh
	From     string    // the store to restore from, if not Store
	Set      []Setting // parameters a restore changes: a fork
}

// defaults is the configuration of a plain `go run ./examples/epidemic`.
var defaults = config{
	Side: 16, Agents: 25000, Infected: 20, Ticks: 2000, Seed: 1,
	Params: Params{Infection: 0.15, Recovery: 0.1, Move: 0.0005},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "render" {
		if err := render(context.Background(), os.Stdout, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "epidemic render:", err)
			os.Exit(1)
		}
		return
	}
	c := defaults
	flag.IntVar(&c.Side, "side", c.Side, "regions per side of the grid")
	flag.IntVar(&c.Agents, "agents", c.Agents, "agents per region")
	flag.IntVar(&c.Infected, "infected", c.Infected, "agents infected at tick 0, in the centre region")
	flag.IntVar(&c.Ticks, "ticks", c.Ticks, "ticks to run")
	flag.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the regions' generators")
	flag.Float64Var(&c.Params.Infection, "infection", c.Params.Infection, "infection rate β")
	flag.Float64Var(&c.Params.Recovery, "recovery", c.Params.Recovery, "recovery probability γ per tick")
	flag.Float64Var(&c.Params.Move, "move", c.Params.Move, "probability per tick that an agent moves to a neighbouring region")
	flag.Float64Var(&c.Params.Vaccination, "vaccination", c.Params.Vaccination, "probability per tick that a susceptible agent is vaccinated")
	flag.StringVar(&c.Store, "store", "", "where snapshots are saved: a directory or a store URL (default: in memory)")
	flag.DurationVar(&c.Interval, "interval", 0, "time between snapshots (default: none)")
	flag.IntVar(&c.Retain, "retain", 0, "keep only the newest N snapshots (default: all)")
	flag.Func("mode", "snapshot mode: epoch, unaligned or aligned (default epoch; a restore takes the snapshot's)", func(s string) error {
		m, err := snapshot.ParseMode(s)
		c.Mode, c.ModeSet = m, true
		return err
	})
	flag.StringVar(&c.Restore, "restore", "", "resume from this stored snapshot: an id, or latest")
	flag.StringVar(&c.From, "from", "", "with --restore: the store to read the snapshot from (default: --store); it is not changed")
	flag.Func("set", "with --restore: change a parameter from the snapshot on, key=value (repeatable)", func(s string) error {
		st, err := parseSetting(s)
		c.Set = append(c.Set, st)
		return err
	})
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	_, err := run(ctx, os.Stdout, c)
	stop()
	switch {
	case errors.Is(err, context.Canceled): // interrupted: run said how to go on
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "epidemic:", err)
		os.Exit(1)
	}
}

// parseSetting parses key=value.
func parseSetting(s string) (Setting, error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return Setting{}, fmt.Errorf("%q: want key=value", s)
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return Setting{}, fmt.Errorf("%q: %w", s, err)
	}
	var p Params
	if err := p.set(key, v); err != nil {
		return Setting{}, err
	}
	if err := p.check(); err != nil {
		return Setting{}, err
	}
	return Setting{Key: key, Value: v}, nil
}

// check says what is wrong with c, for a fresh run.
func (c config) check() error {
	switch {
	case c.Side < 1 || c.Side > 100:
		return fmt.Errorf("--side %d outside 1..100", c.Side)
	case c.Agents < 0 || c.Side*c.Side*c.Agents > 1<<30:
		return fmt.Errorf("--agents %d: want 0 to %d per region", c.Agents, (1<<30)/(c.Side*c.Side))
	case c.Ticks < 0:
		return fmt.Errorf("--ticks %d below 0", c.Ticks)
	case c.Infected < 0:
		return fmt.Errorf("--infected %d below 0", c.Infected)
	case len(c.Set) > 0:
		return errors.New("--set changes a restored run: give --restore (set a fresh run's parameters with their flags)")
	case c.From != "":
		return errors.New("--from needs --restore")
	}
	return c.Params.check()
}

// run runs the epidemic as c says, printing to w, and returns its output.
func run(ctx context.Context, w io.Writer, c config) (Output, error) {
	tty := isTerminal(w)
	w = &lockedWriter{w: w} // snapshot events are printed from the guardian
	store, err := openStore(ctx, c.Store)
	if err != nil {
		return Output{}, err
	}
	defer closeStore(store)
	var sys *actors.System
	var t *tally
	var pr *progress
	var settled <-chan struct{}
	if c.Restore == "" {
		if err := c.check(); err != nil {
			return Output{}, err
		}
		p := c.Params
		fmt.Fprintf(w, "%dx%d regions of %d agents, %d infected, %d ticks, seed %d; infection %g, recovery %g, move %g, vaccination %g\n",
			c.Side, c.Side, c.Agents, c.Infected, c.Ticks, c.Seed, p.Infection, p.Recovery, p.Move, p.Vaccination)
		t = newTally(c.Side * c.Side)
		if sys, err = actors.NewSystem(options(c, store, t)...); err != nil {
			return Output{}, err
		}
		pr = newProgress(w, tty, t, 0, c.Ticks)
		settled = watch(sys, pr)
		err = start(sys)
	} else {
		var first int // the lowest tick restored
		if sys, t, c.Ticks, first, err = resume(ctx, w, c, store); err == nil {
			pr = newProgress(w, tty, t, first, c.Ticks)
			settled = watch(sys, pr)
		}
	}
	if err != nil {
		if pr != nil {
			pr.end()
		}
		if sys != nil {
			_ = sys.Shutdown(context.Background())
		}
		return Output{}, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	pr.end()
	if err == nil && c.Store != "" {
		err = finalSnapshot(ctx, sys, settled)
	}
	// A periodic snapshot may be in progress: Shutdown aborts it and says so.
	if serr := sys.Shutdown(context.Background()); serr != nil && !errors.Is(serr, actors.ErrShutdown) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		if ctx.Err() != nil && c.Store != "" {
			fmt.Fprintf(w, "stopped; continue with --store %s --restore latest\n", c.Store)
		}
		return Output{}, err
	}
	o, err := t.output()
	if err != nil {
		return Output{}, err
	}
	fmt.Fprintf(w, "final tick %d: S=%d I=%d R=%d sha256 %x\n", o.Tick, o.Counts.S, o.Counts.I, o.Counts.R, o.Hash)
	return o, nil
}

// options configures an epidemic system that saves into store and tells
// t how its regions fare (t may be nil). A restore overwrites the state
// the producers set, but not the tally, nor c.Set: a fork's changes,
// which each region applies at its first message.
func options(c config, store persistence.Store, t *tally) []actors.Option {
	opts := append(slices.Clone(messages),
		actors.WithStore(store),
		actors.WithSystemName("epidemic"),
		// A snapshot waits behind ticks in progress; on a loaded machine
		// that can take a while, and the epidemic is in no hurry.
		actors.WithTimeout(time.Minute),
		actors.WithKind(gridKind, func() actor.Actor {
			return &grid{Side: c.Side, Agents: c.Agents, Infected: c.Infected, Ticks: c.Ticks, Seed: c.Seed, Params: c.Params, tally: t}
		}),
		actors.WithKind(regionKind, func() actor.Actor { return &region{tally: t, set: c.Set} }),
	)
	if c.ModeSet {
		opts = append(opts, actors.WithMode(c.Mode))
	}
	if c.Interval > 0 {
		opts = append(opts, actors.WithInterval(c.Interval))
	}
	if c.Retain > 0 {
		opts = append(opts, actors.WithRetain(c.Retain))
	}
	return opts
}

// start starts a fresh run in sys, built with options: it spawns the
// grid, which spawns the regions as its producer's configuration says.
func start(sys *actors.System) error {
	_, err := sys.Spawn(gridKind, gridName)
	return err
}

// resume restores the run from the snapshot c.Restore names, in c.From
// or else in store, into a system saving into store. It returns the
// system, its tally, the run's last tick and the lowest tick restored.
func resume(ctx context.Context, w io.Writer, c config, store persistence.Store) (sys *actors.System, t *tally, ticks, first int, err error) {
	var id snapshot.SnapshotID
	if c.Restore != "latest" {
		n, err := strconv.ParseUint(c.Restore, 10, 64)
		if err != nil || n == 0 {
			return nil, nil, 0, 0, fmt.Errorf("--restore %q: want a snapshot id or latest", c.Restore)
		}
		id = snapshot.SnapshotID(n)
	}
	from := store
	if c.From != "" {
		if from, err = persistence.OpenURL(ctx, c.From, persistence.MustExist()); err != nil {
			return nil, nil, 0, 0, err
		}
		defer closeStore(from)
	}
	g, err := load(ctx, from, id)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	s, err := decodeRun(g)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	first, last := s.ticks()
	what := "resuming from"
	if c.From != "" {
		what = "forking " + c.From + " at"
	}
	fmt.Fprintf(w, "%s snapshot %d: regions at ticks %d..%d of %d, %d moves in flight", what, g.ID, first, last, s.Grid.Ticks, g.TotalInFlight())
	for _, st := range c.Set {
		fmt.Fprintf(w, "; %s=%g", st.Key, st.Value)
	}
	fmt.Fprintln(w)
	t = newTally(s.Grid.Side * s.Grid.Side)
	began := time.Now()
	if sys, err = actors.Restore(ctx, from, g.ID, options(c, store, t)...); err != nil {
		return nil, nil, 0, 0, err
	}
	// Restore took the first snapshot, of the restored state, before it
	// returned.
	fmt.Fprintf(w, "restored in %v\n", time.Since(began).Round(time.Millisecond))
	return sys, t, s.Grid.Ticks, first, nil
}

// openStore opens the store at url, or a store in memory if url is "".
func openStore(ctx context.Context, url string) (persistence.Store, error) {
	if url == "" {
		return persistence.NewMemory(), nil
	}
	return persistence.OpenURL(ctx, url)
}

// closeStore releases s, for the stores that hold something to release.
func closeStore(s persistence.Store) {
	if c, ok := s.(io.Closer); ok {
		_ = c.Close()
	}
}

// load returns snapshot id of store, or the latest if id is 0.
func load(ctx context.Context, store persistence.Store, id snapshot.SnapshotID) (*snapshot.Global, error) {
	if id == 0 {
		return store.Latest(ctx)
	}
	return store.Load(ctx, id)
}

// finalSnapshot stores a snapshot of the finished run, so that the
// store's latest holds it: render draws the run whole, and a restore of
// it ends at once. Periodic snapshots stop first; while those still in
// progress leave no room for it, it waits for one of them to end
// (settled).
func finalSnapshot(ctx context.Context, sys *actors.System, settled <-chan struct{}) error {
	if err := sys.SnapshotEvery(0); err != nil {
		return err
	}
	for {
		_, err := sys.Snapshot(ctx)
		if !errors.Is(err, actors.ErrBusy) {
			return err
		}
		select {
		case <-settled:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watch shows each snapshot sys completes or aborts on pr. The channel it
// returns receives a value when a snapshot ends, unless one is waiting.
func watch(sys *actors.System, pr *progress) <-chan struct{} {
	settled := make(chan struct{}, 1)
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *actors.SnapshotCompleted:
			pr.stored(e.Global, e.Duration)
		case *actors.SnapshotAborted:
			if !errors.Is(e.Err, actors.ErrShutdown) { // the one in progress at the end
				pr.println(e.Err.Error())
			}
		default:
			return
		}
		select {
		case settled <- struct{}{}:
		default:
		}
	})
	return settled
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
