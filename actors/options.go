package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Initiation says how the guardian starts a snapshot.
type Initiation uint8

const (
	// Broadcast: the guardian sends the start to every participant on its
	// control channel; a snapshot takes O(1) hops. The default. In the
	// epoch mode each participant records it ahead of the messages
	// queued for it, at once if it is not handling one, else right after
	// (InOrder otherwise): its records take one pass over the
	// participants rather than over every message queued, and what is
	// queued from older epochs is the channels' state.
	Broadcast Initiation = iota
	// Flooding: the guardian starts the snapshot at one participant and
	// markers flood the channel graph from there (classic Chandy–Lamport);
	// participants no channel reaches are started by the guardian after a
	// quarter of the timeout. In the aligned mode it starts at every
	// participant that waits for no one's barrier, the sources of the
	// graph of awaited channels, as Flink injects barriers at its sources.
	// In the epoch mode nothing floods: the snapshot spreads with the
	// epochs that application messages carry.
	Flooding
	// Lazy (epoch mode only): the guardian publishes the snapshot and
	// starts no one; each participant records at its next message, and
	// the guardian starts those that stay silent after WithLazyStart's
	// delay. Busy participants then cost no start message at all.
	Lazy
	// InOrder is Broadcast with each participant's start read in its
	// turn, behind the messages queued for it before the start: the cut
	// falls where the start is read, as in the unaligned and aligned
	// modes, which always start so.
	InOrder
)

// Counting is how the epoch mode counts messages to decide that a
// snapshot is complete (WithCounting).
type Counting uint8

const (
	// PerChannel counts the messages of each channel at both ends: a
	// record lists the counts that changed since the last, and the
	// guardian checks every receiver, and the order of every channel's
	// messages in flight. Its cost per message grows with the pairs of
	// participants that ever exchanged one. The default in a cluster
	// (WithTransport).
	PerChannel Counting = iota
	// InSums keeps two totals per participant, the messages it sent and
	// those it received, as Mattern's sum counters do: a send and a
	// receipt touch no table, a record carries two numbers, and a
	// snapshot is complete when everything sent before the records was
	// received before them or is in flight. A channel is known only
	// while it has messages in flight at a snapshot. What it gives up:
	// no check of each channel's order, and a snapshot that waits for
	// its messages in flight asks every participant that was posted one
	// from an older epoch since its capture to look at its queue again,
	// not only the receivers it is owed by. The default within one
	// member; refused in a cluster, for now.
	InSums
)

// String returns the counting's name, as ParseCounting and the command
// line take it.
func (c Counting) String() string {
	switch c {
	case PerChannel:
		return "per-channel"
	case InSums:
		return "sums"
	}
	return fmt.Sprintf("Counting(%d)", uint8(c))
}

// ParseCounting returns the counting that String names: "per-channel" or
// "sums".
func ParseCounting(s string) (Counting, error) {
	for _, c := range []Counting{PerChannel, InSums} {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown counting %q (want sums or per-channel)", ErrConfig, s)
}

// WithCounting selects how the epoch mode counts messages: PerChannel or
// InSums. Without it, a system counts in sums, which costs least and
// least depends on how many pairs of participants talk, unless it has a
// transport (WithTransport), where it counts per channel. The other
// modes count per channel.
//
// Restore counts as the snapshot it restores was counted unless
// WithCounting is given: in sums when it keeps sums (snapshot.Global.Sums),
// per channel when it keeps receiver counts, and as a new system would
// otherwise.
func WithCounting(c Counting) Option {
	return func(cfg *config) { cfg.counting, cfg.countingSet = c, true }
}

// broadcasts reports whether the guardian starts every participant.
func (c *config) broadcasts() bool { return c.initiation == Broadcast || c.initiation == InOrder }

// sums reports whether participants count in sums: as WithCounting
// says, else whenever the epoch mode runs without a transport.
func (c *config) sums() bool {
	if c.countingSet {
		return c.counting == InSums
	}
	return c.mode == snapshot.Epochs && c.transport == nil
}

// hurried reports whether a start is recorded ahead of the queue
// (Broadcast in the epoch mode).
func (c *config) hurried() bool { return c.initiation == Broadcast && c.mode == snapshot.Epochs }

// Option configures a System.
type Option func(*config)

type config struct {
	mode        snapshot.Mode
	modeSet     bool
	backEdges   []snapshot.Channel
	search      BackEdgeSearch
	initiation  Initiation
	counting    Counting
	countingSet bool
	lazyAfter   time.Duration // Lazy: before the guardian starts the silent
	timeout     time.Duration
	concurrent  int
	store       persistence.Store
	name        string
	nameSet     bool
	retain      int
	maxRecorded int
	interval    time.Duration
	logger      *slog.Logger
	meter       metric.MeterProvider
	clock       clock
	deltaMin    int // snapshot.Config.DeltaMin of the participants; tests only
	// initiator picks a flooding start's initiator among the live
	// participants, sorted by id; nil: one at random. Tests only.
	initiator   func(live []snapshot.ProcessID) snapshot.ProcessID
	actorConfig []actor.ConfigOption
	kinds       []*kind
	messages    []messageReg
	types       *messageTypes // built from messages
	storeSet    bool          // WithStore was given
	transport   Transport     // WithTransport: a member of a cluster
	hold        bool          // hold other members' frames until the restore replayed
	invariants  []invariant   // WithInvariant
	deadlocks   time.Duration // WithDeadlockCheck: between checks; zero: none
	checkHook   func()        // tests: called after each deadlock check
}

// Defaults and bounds of the options.
const (
	DefaultTimeout    = 10 * time.Second // WithTimeout's default
	MinTimeout        = time.Millisecond // WithTimeout's lower bound
	DefaultConcurrent = 4                // WithMaxConcurrent's default
	MaxConcurrent     = 64               // WithMaxConcurrent's upper bound
	MinInterval       = time.Millisecond // WithInterval's lower bound, when set
	// DefaultMaxRecorded is WithMaxRecorded's default.
	DefaultMaxRecorded = 1 << 20
	// DefaultSystemName is WithSystemName's default.
	DefaultSystemName = "default"
)

// WithMode selects the snapshot algorithm. Default: snapshot.Epochs, or
// for Restore the mode of the snapshot restored.
//
// In the epoch mode (snapshot.Epochs, the default) no marker is sent:
// every message carries its sender's epoch, the newest snapshot it
// recorded, in the receiver's queue entry (no wrapper, no allocation).
// A message from a newer epoch makes its receiver record first; one
// from an older epoch that arrives after the receiver recorded is
// channel state, reported to the guardian once per mailbox turn; and the
// guardian completes the snapshot when every channel's counters balance.
// A snapshot costs a start and a record per participant plus the
// messages in flight, whatever the number of channels.
// WithInitiation(Lazy) saves the starts of participants that are busy
// anyway.
//
// In the unaligned mode (snapshot.Unaligned, Chandy–Lamport as
// published) a participant records at the first marker and sends a
// marker on every channel it has used; a later marker on a channel
// closes its recording. Its cost grows with the channels used.
//
// In the aligned mode (snapshot.Aligned) a participant blocks each sender
// whose barrier came and records once barriers came from every sender it
// waits for; only back edges, and channels the guardian has not yet seen,
// get channel state. The guardian learns the channel graph from each
// completed snapshot and tells each participant which senders to wait
// for: those of the channels it has seen, minus the back edges that
// WithBackEdges declares and those WithBackEdgeSearch finds. Until a
// snapshot has shown the guardian a channel, nobody waits on it (the
// first snapshot of a system waits for nothing and stores what is in
// flight, as the unaligned mode does), so a channel that appears during a
// snapshot can never make processes on a cycle wait for each other.
func WithMode(m snapshot.Mode) Option {
	return func(c *config) { c.mode, c.modeSet = m, true }
}

// WithBackEdges declares channels as back edges of the aligned mode: no
// participant waits for a barrier on them, and what arrives on them
// between the receiver's record and the barrier is their channel state.
// Names are participant ids. The guardian's search (WithBackEdgeSearch)
// adds the back edges still needed to break every cycle.
func WithBackEdges(chans ...snapshot.Channel) Option {
	return func(c *config) { c.backEdges = append(c.backEdges, chans...) }
}

// BackEdgeSearch chooses back edges in a channel graph: channels whose
// removal leaves no cycle. snapshot.ShallowBackEdges and
// snapshot.BackEdges are two.
type BackEdgeSearch func(chans []snapshot.Channel, roots []snapshot.ProcessID) []snapshot.Channel

// WithBackEdgeSearch sets how the guardian finds the back edges that the
// declared ones (WithBackEdges) leave to find. The default,
// snapshot.ShallowBackEdges, leaves no long chain of awaited channels, so
// barriers cross few hops; snapshot.BackEdges (a plain depth-first search)
// removes fewer channels but can leave chains through most of a cyclic
// graph, and an aligned snapshot waits along the longest. nil searches
// for none: a cycle left without a declared back edge then makes its
// participants wait for each other, and the snapshot is aborted at its
// timeout with a reason naming the channels still awaited.
func WithBackEdgeSearch(f BackEdgeSearch) Option { return func(c *config) { c.search = f } }

// WithInitiation selects broadcast (default), flooding, lazy or in-order
// initiation.
func WithInitiation(i Initiation) Option { return func(c *config) { c.initiation = i } }

// DefaultLazyStart is WithLazyStart's default.
const DefaultLazyStart = 5 * time.Millisecond

// WithLazyStart sets how long a lazy start (WithInitiation(Lazy)) leaves
// participants to notice a snapshot at their next message before the
// guardian starts those that have not: the longest a snapshot waits for
// a participant with nothing to do. Positive; default DefaultLazyStart.
func WithLazyStart(d time.Duration) Option { return func(c *config) { c.lazyAfter = d } }

// WithTimeout bounds how long a snapshot may take before it is aborted
// (docs/design.md, decision 6). Default 10s; at least 1ms.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMaxConcurrent bounds the snapshots in progress at once; a request
// beyond it fails with ErrBusy. Default 4; 1 to 64.
func WithMaxConcurrent(n int) Option { return func(c *config) { c.concurrent = n } }

// WithStore sets where complete snapshots are saved; a nil store is
// refused (ErrConfig). Default: an in-memory store that keeps the newest
// persistence.DefaultMemoryKeep snapshots, gone when the process ends.
// The system claims the store (persistence.Store.Claim) as it
// starts and holds the lease until Shutdown: NewSystem is refused a store
// that holds or has held snapshots (persistence.ErrOwned: Restore that
// system instead, or give the new one a namespace of its own) and one
// that another writer holds (persistence.ErrLocked).
func WithStore(s persistence.Store) Option {
	return func(c *config) { c.store, c.storeSet = s, true }
}

// WithSystemName names the system: the name is recorded in its store as
// the store's owner (persistence.Store.Claim), so that the store says
// whose snapshots it holds and a new system refused it is told whose they
// are. Keep it stable across runs of one system. Default:
// DefaultSystemName ("default"), or for Restore the name of the store's
// recorded owner. It must pass persistence.CheckSystemName: non-empty,
// valid UTF-8 of at most persistence.MaxSystemName (255) bytes, without
// control characters.
func WithSystemName(name string) Option {
	return func(c *config) { c.name, c.nameSet = name, true }
}

// WithRetain keeps only the newest n snapshots in the store after each
// save. Default 0: keep all.
func WithRetain(n int) Option { return func(c *config) { c.retain = n } }

// WithMaxRecorded bounds the messages the snapshots in progress hold, all
// participants together (docs/design.md, decision 8): recorded as channel state,
// first in the receivers' recordings (a message recorded for several
// concurrent snapshots is counted once there), then in the snapshot's
// assembly until it ends, and, in the aligned mode, held for senders
// paused behind their barriers. A snapshot of a system with slow
// receivers, or a slow input to align with, and a flood in flight cannot
// exhaust memory. A participant whose part grows while the count is over
// the bound fails the snapshots it records or aligns with ErrOverBudget
// and lets go of what it held for them (paused senders are resumed); a
// snapshot whose reported channel state takes the count over is aborted
// with ErrOverBudget. Default 1<<20; at least 1.
func WithMaxRecorded(n int) Option { return func(c *config) { c.maxRecorded = n } }

// WithInterval takes a snapshot every d, starting d after NewSystem.
// Default 0: none; otherwise at least 1ms. System.SnapshotEvery changes it
// while the system runs.
func WithInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// checkInterval enforces the bound of WithInterval and SnapshotEvery.
func checkInterval(d time.Duration) error {
	if d != 0 && d < MinInterval {
		return fmt.Errorf("%w: interval %v below the minimum %v", ErrConfig, d, MinInterval)
	}
	return nil
}

// WithLogger sets the logger of actorsnap and of the Proto.Actor system
// under it (unless WithActorSystemConfig gives Proto.Actor a logger
// factory of its own): one logger for both. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMeterProvider sets the OpenTelemetry meter provider for the
// snapshot metrics. Default: no-op.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.meter = mp } }

// WithKind registers an actor kind as the system is built, as RegisterKind
// does. Restore needs the kinds of a snapshot's participants given this way.
func WithKind(name string, producer func() actor.Actor, opts ...actor.PropsOption) Option {
	return func(c *config) { c.kinds = append(c.kinds, &kind{name: name, producer: producer, opts: opts}) }
}

// WithActorSystemConfig passes options to the Proto.Actor system.
func WithActorSystemConfig(opts ...actor.ConfigOption) Option {
	return func(c *config) { c.actorConfig = append(c.actorConfig, opts...) }
}

func newConfig(opts []Option) (config, error) {
	c := config{mode: snapshot.Epochs, timeout: DefaultTimeout, concurrent: DefaultConcurrent, search: snapshot.ShallowBackEdges, lazyAfter: DefaultLazyStart}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case !c.mode.Valid():
		return c, fmt.Errorf("%w: mode %s not supported", ErrConfig, c.mode)
	case c.initiation > InOrder:
		return c, fmt.Errorf("%w: unknown initiation %d", ErrConfig, c.initiation)
	case c.initiation == Lazy && c.mode != snapshot.Epochs:
		return c, fmt.Errorf("%w: lazy starts need the epoch mode (WithMode(snapshot.Epochs)), not %s", ErrConfig, c.mode)
	case c.counting > InSums:
		return c, fmt.Errorf("%w: unknown counting %d", ErrConfig, c.counting)
	case c.counting == InSums && c.mode != snapshot.Epochs:
		return c, fmt.Errorf("%w: counting in sums needs the epoch mode (WithMode(snapshot.Epochs)), not %s", ErrConfig, c.mode)
	case c.counting == InSums && c.transport != nil:
		return c, fmt.Errorf("%w: counting in sums works within one member only, not in a cluster (WithTransport)", ErrConfig)
	case c.lazyAfter <= 0:
		return c, fmt.Errorf("%w: lazy start delay %v must be positive", ErrConfig, c.lazyAfter)
	case c.timeout < MinTimeout:
		return c, fmt.Errorf("%w: timeout %v below the minimum %v", ErrConfig, c.timeout, MinTimeout)
	case c.concurrent < 1 || c.concurrent > MaxConcurrent:
		return c, fmt.Errorf("%w: max concurrent snapshots %d outside 1..%d", ErrConfig, c.concurrent, MaxConcurrent)
	case checkInterval(c.interval) != nil:
		return c, checkInterval(c.interval)
	case c.retain < 0:
		return c, fmt.Errorf("%w: retain %d below 0", ErrConfig, c.retain)
	case c.deadlocks < 0 || (c.deadlocks > 0 && c.deadlocks < MinInterval):
		return c, fmt.Errorf("%w: deadlock check interval %v below the minimum %v", ErrConfig, c.deadlocks, MinInterval)
	case c.maxRecorded < 0:
		return c, fmt.Errorf("%w: max recorded messages %d below 1", ErrConfig, c.maxRecorded)
	}
	if c.nameSet {
		if err := persistence.CheckSystemName(c.name); err != nil {
			return c, fmt.Errorf("%w: WithSystemName: %w", ErrConfig, err)
		}
	} else {
		c.name = DefaultSystemName
	}
	if c.maxRecorded == 0 {
		c.maxRecorded = DefaultMaxRecorded
	}
	for _, e := range c.backEdges {
		if e.From == "" || e.To == "" {
			return c, fmt.Errorf("%w: back edge %s names no participant", ErrConfig, e)
		}
	}
	var err error
	if c.types, err = c.messageTypes(); err != nil {
		return c, err
	}
	switch {
	case c.storeSet && c.store == nil:
		return c, fmt.Errorf("%w: WithStore(nil): give a store (persistence.Open for files, persistence.NewMemory for memory)", ErrConfig)
	case c.store == nil:
		c.store = persistence.NewMemory()
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.meter == nil {
		c.meter = noop.NewMeterProvider()
	}
	return c, nil
}

// withInitiator makes a flooding start's initiator the participant pick
// names among the live ones, rather than one at random: tests that need
// it at a given place.
func withInitiator(pick func(live []snapshot.ProcessID) snapshot.ProcessID) Option {
	return func(cfg *config) { cfg.initiator = pick }
}
