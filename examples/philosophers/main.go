// Command philosophers seats dining philosophers at a table of actorsnap
// participants and lets the periodic deadlock check
// (actors.WithDeadlockCheck) find the deadlock that the naive protocol
// walks into.
//
// Philosophers and forks are both participants. A fork is a resource
// with a queue: it serializes who eats with it, and a philosopher asks it
// (Take), is granted it (Granted), and gives it back (Put). That is the
// usual actor design (Akka's dining hakkers have chopstick actors too),
// and it makes the wait-for graph the textbook resource allocation graph:
// a hungry philosopher waits for the fork it asked for, and a fork that
// someone waits for waits for its holder to put it down. A cycle in it
// is a deadlock, and the report names every philosopher and fork in it.
// Both declare their waits through actors.Waiter rather than through
// Request: a fork grants a queued Take later, while it handles its
// holder's Put, and the glue matches an answer only to the request whose
// handler sends it.
//
// Naive, each philosopher takes its left fork, reaches for a moment, then
// asks for its right one. Sooner or later all of them hold their left
// fork and wait for their right one, which their neighbour holds: the
// check reports the cycle, and the program exits with status 3. Ordered
// (--ordered), each takes its lower-numbered fork first, no cycle of
// waits can form, and the program prints the meals eaten and "no
// deadlock".
//
//	go run ./examples/philosophers
//	go run ./examples/philosophers --store /tmp/dinner --interval 200ms
//	go run ./examples/philosophers --ordered --duration 5s
//
// Thinking, reaching and eating take random times, exponentially
// distributed with the means --think, --reach and --eat. The seed fixes
// the times each philosopher draws; the interleaving of messages still
// varies from run to run, and so does when the naive dinner deadlocks.
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
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// config is what the flags set.
type config struct {
	N int
	// Mean times to think, to reach for the second fork, and to eat;
	// each is drawn from an exponential distribution.
	Think, Reach, Eat time.Duration
	Ordered           bool
	Seed              uint64        // 0: from the clock
	Check             time.Duration // between deadlock checks
	Duration          time.Duration // how long to dine without a deadlock
	Meals             int           // or until every philosopher has eaten this many; 0: no limit
	Store             string        // a directory for snapshots; "" for memory
	Interval          time.Duration // between stored snapshots; 0 for none
}

// exitDeadlock is the exit status of a run that deadlocked.
const exitDeadlock = 3

func main() {
	var c config
	flag.IntVar(&c.N, "n", 5, "number of philosophers (and forks)")
	flag.DurationVar(&c.Think, "think", 4*time.Millisecond, "mean time a philosopher thinks")
	flag.DurationVar(&c.Reach, "reach", time.Millisecond, "mean time a philosopher takes to reach for its second fork, holding the first")
	flag.DurationVar(&c.Eat, "eat", 4*time.Millisecond, "mean time a philosopher eats")
	flag.BoolVar(&c.Ordered, "ordered", false, "take the lower-numbered fork first: no deadlock")
	flag.Uint64Var(&c.Seed, "seed", 0, "seed of the think and eat times (default: from the clock)")
	flag.DurationVar(&c.Check, "check", 100*time.Millisecond, "time between deadlock checks")
	flag.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to dine if nothing deadlocks")
	flag.IntVar(&c.Meals, "meals", 0, "stop once every philosopher has eaten this many meals (default: no limit)")
	flag.StringVar(&c.Store, "store", "", "a directory to store snapshots in, for actorsnap analyze (default: in memory)")
	flag.DurationVar(&c.Interval, "interval", 0, "time between stored snapshots (default: none)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	o, err := run(ctx, os.Stdout, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "philosophers:", err)
		os.Exit(1)
	}
	if o.Deadlock != nil {
		os.Exit(exitDeadlock)
	}
}

// outcome is what a run found.
type outcome struct {
	Seed     uint64
	Meals    []int              // by philosopher
	Deadlock *snapshot.Deadlock // nil if none was found
	// Formed is when the deadlock formed: the latest of its waits began.
	Formed time.Time
	// Found is when the check published it.
	Found time.Time
	// LastMeal is when the latest meal ended.
	LastMeal time.Time
	Stored   snapshot.SnapshotID // a stored snapshot that shows the deadlock; 0 for none
}

// run seats the philosophers as c says, printing to w, until the check
// finds a deadlock, every philosopher has eaten c.Meals meals, c.Duration
// has passed, or ctx ends.
func run(ctx context.Context, w io.Writer, c config) (outcome, error) {
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	o := outcome{Seed: c.Seed}
	if err := c.check(); err != nil {
		return o, err
	}
	store := persistence.Store(persistence.NewMemory())
	if c.Store != "" {
		fs, err := persistence.Open(ctx, c.Store)
		if err != nil {
			return o, err
		}
		store = fs
	}
	protocol := "naive: left fork first, then right"
	if c.Ordered {
		protocol = "ordered: lower-numbered fork first"
	}
	fmt.Fprintf(w, "%d philosophers, %s; mean think %v, reach %v, eat %v; seed %d\n", c.N, protocol, c.Think, c.Reach, c.Eat, c.Seed)

	tb := newTable(c.N, c.Meals)
	found := make(chan sighting, 1)
	sys, err := start(c, store, tb, found)
	if err != nil {
		if errors.Is(err, persistence.ErrOwned) {
			err = fmt.Errorf("--store %s holds the snapshots of an earlier run; give each run an empty directory: %w", c.Store, err)
		}
		return o, err
	}
	began := time.Now()
	var end <-chan time.Time
	if c.Duration > 0 {
		t := time.NewTimer(c.Duration)
		defer t.Stop()
		end = t.C
	}
	var full <-chan struct{}
	if c.Meals > 0 {
		full = tb.full
	}
	var f sighting
	select {
	case f = <-found:
	case err = <-tb.broken:
	case <-full:
	case <-end:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if f.deadlock != nil && err == nil {
		o.Deadlock, o.Found = f.deadlock, f.at
		o.Formed = formed(*f.deadlock)
		if c.Store != "" {
			// A deadlock lasts: a snapshot taken now shows it, whenever the
			// last periodic one was taken.
			var g *snapshot.Global
			if g, err = sys.Snapshot(ctx); err == nil {
				o.Stored = g.ID
			}
		}
	}
	// A periodic snapshot may be in progress: Shutdown aborts it and says so.
	if serr := sys.Shutdown(context.Background()); serr != nil && !errors.Is(serr, actors.ErrShutdown) {
		err = errors.Join(err, serr)
	}
	o.Meals = tb.counts()
	if n := tb.lastMeal.Load(); n != 0 {
		o.LastMeal = time.Unix(0, n)
	}
	if err != nil {
		return o, err
	}
	total := 0
	for _, m := range o.Meals {
		total += m
	}
	if o.Deadlock != nil {
		fmt.Fprintf(w, "deadlock after %v and %d meals, found %v after it formed:\n", o.Formed.Sub(began).Round(time.Millisecond), total, o.Found.Sub(o.Formed).Round(time.Millisecond))
		fmt.Fprintf(w, "  %s\n", o.Deadlock)
	}
	fmt.Fprintf(w, "meals: %s\n", mealList(o.Meals))
	if o.Deadlock == nil {
		fmt.Fprintf(w, "no deadlock in %v\n", time.Since(began).Round(time.Millisecond))
	}
	if o.Stored != 0 {
		fmt.Fprintf(w, "stored snapshots show it from %d on: actorsnap analyze latest --store %s\n", o.Stored, c.Store)
	}
	return o, nil
}

// check refuses what the flags cannot mean; NewSystem enforces the
// bounds of the check's interval.
func (c config) check() error {
	switch {
	case c.N < 2:
		return fmt.Errorf("--n %d: need at least 2 philosophers", c.N)
	case c.Think < 0:
		return fmt.Errorf("--think %v: below 0", c.Think)
	case c.Reach < 0:
		return fmt.Errorf("--reach %v: below 0", c.Reach)
	case c.Eat < 0:
		return fmt.Errorf("--eat %v: below 0", c.Eat)
	case c.Check <= 0:
		return fmt.Errorf("--check %v: the check needs an interval", c.Check)
	}
	return nil
}

// sighting is a deadlock the check published, and when.
type sighting struct {
	deadlock *snapshot.Deadlock
	at       time.Time
}

// start seats c.N philosophers and forks. The first deadlock the check
// finds goes to found.
func start(c config, store persistence.Store, tb *table, found chan<- sighting) (*actors.System, error) {
	n := c.N
	opts := append(slices.Clone(messages),
		actors.WithSystemName("philosophers"),
		actors.WithStore(store),
		actors.WithDeadlockCheck(c.Check),
		actors.WithKind("fork", func() actor.Actor { return &Fork{table: tb} }),
	)
	for i := range n {
		opts = append(opts, actors.WithKind(seatKind(i), func() actor.Actor { return newPhilosopher(i, n, c, tb) }))
	}
	if c.Interval > 0 {
		opts = append(opts, actors.WithInterval(c.Interval))
	}
	sys, err := actors.NewSystem(opts...)
	if err != nil {
		return nil, err
	}
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actors.DeadlockFound); ok {
			select {
			case found <- sighting{deadlock: &e.Deadlock, at: time.Now()}:
			default:
			}
		}
	})
	// The forks first: a philosopher may get hungry as soon as it sits.
	for i := range n {
		if _, err = sys.Spawn("fork", forkName(i)); err != nil {
			break
		}
	}
	for i := range n {
		if err != nil {
			break
		}
		_, err = sys.Spawn(seatKind(i), philosopherName(i))
	}
	if err != nil {
		_ = sys.Shutdown(context.Background())
		return nil, err
	}
	return sys, nil
}

// seatKind is the kind of philosopher i: each seat has its own, since a
// producer is told no name.
func seatKind(i int) string { return fmt.Sprintf("philosopher%d", i) }

// formed is when d formed: once the latest of its waits began, nothing
// could change any more.
func formed(d snapshot.Deadlock) time.Time {
	var t time.Time
	for _, e := range d.Edges {
		if e.Since.After(t) {
			t = e.Since
		}
	}
	return t
}

// mealList is "p0 12  p1 11  ...".
func mealList(meals []int) string {
	parts := make([]string, len(meals))
	for i, m := range meals {
		parts[i] = fmt.Sprintf("%s %d", philosopherName(i), m)
	}
	return strings.Join(parts, "  ")
}
