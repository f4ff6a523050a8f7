package snapshottest

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
)

// Declare says which of a graph's edges the processes declare up front;
// the others are discovered by the first message sent on them.
type Declare uint8

const (
	// DeclareAll declares every edge at both ends.
	DeclareAll Declare = iota
	// DeclareNone declares nothing: every channel is discovered.
	DeclareNone
	// DeclareRandom declares each edge at its receiving end, at both ends,
	// or not at all, at random (a sending end is never declared alone: see
	// snapshot.Config.Outgoing).
	DeclareRandom
)

// Config configures a Network.
type Config struct {
	// Seed makes the run replay exactly: delays, traffic and declarations
	// all come from it.
	Seed uint64
	// Graph is the processes and the channels the application uses.
	Graph Graph
	// MaxDelay, when positive, delivers each message 1 to MaxDelay ticks
	// after it is sent (uniformly at random, FIFO per channel kept). When
	// zero the network is manual: messages wait until Deliver, and the
	// coordinator's control messages arrive at once.
	MaxDelay int
	// Declare says which channels are declared up front.
	Declare Declare
	// Timeout, in ticks, aborts a snapshot not complete by then; 0: never.
	Timeout int
	// SweepAfter, in ticks, makes the coordinator initiate the snapshot at
	// every participant that has not recorded it by then, and again every
	// SweepAfter ticks: flooding alone does not reach a process no channel
	// leads to from the initiator. 0: never.
	SweepAfter int
	// Log, if set, receives one line per event.
	Log func(line string)
	// Mode is the processes' snapshot algorithm.
	Mode snapshot.Mode
	// DeltaMin is the processes' snapshot.Config.DeltaMin.
	DeltaMin int
	// Capture, in the Epochs mode, makes a process that recorded hand over
	// the data messages queued for it on each incoming link
	// (Process.Capture), as actorsnap's participants hand over their
	// mailbox: each link's prefix that its receiver will take next.
	Capture bool
	// BackEdges, in the aligned mode, are the channels the processes do not
	// wait for. When nil, the network computes them with
	// snapshot.ShallowBackEdges from the graph; NoBackEdges leaves them
	// out, to test what a missing back edge does.
	BackEdges   []Edge
	NoBackEdges bool
	// Learn, in the aligned mode, makes the coordinator do what actorsnap's
	// guardian does instead of BackEdges: it learns the channel graph from
	// the snapshots it completes and, before starting a snapshot, tells
	// every process whom to wait for from that snapshot on
	// (Process.SetAwaited), leaving out the back edges
	// snapshot.ShallowBackEdges finds. Until a snapshot has shown it a
	// channel, no one waits on it.
	Learn bool
	// Sums, in the Epochs mode, makes the processes and the coordinator
	// count in sums (snapshot.Config.Sums). The links number the
	// messages, for the trace, and hand each to its receiver as a
	// Traced payload: the numbers a snapshot gives its messages in
	// flight, in the order they were reported, are not the trace's. A process that stops hands over what is on its links
	// (Process.Lose). A send to a stopped process that is not dropped yet
	// is counted and reported lost (Coordinator.Lost), as a post that
	// meets a closed mailbox, when the receiver recorded a snapshot its
	// sender has not (that snapshot needed it) and half the time
	// otherwise; the other half go outside the snapshots.
	Sums bool
	// StopLag, from 0 to 1, is the chance that a stop reaches the
	// coordinator late (Coordinator.Stopped), by up to twice the longest
	// delivery, as in package actors, where a participant leaves the
	// registry (and so the live ones a snapshot starts with) before the
	// guardian hears its stop: snapshots may start in between, without
	// it. Half the time its driver says so at once (Coordinator.Stopping),
	// as that registry does; otherwise it stays among the live ones until
	// its stop comes, as another member's participant does in a cluster
	// until its member's word of the stop arrives. A late stop names the
	// participants dropped in between that it never forgot (Drop.After).
	StopLag float64
	// FailRecords, from 0 to 1, is the chance that a process cannot hand
	// a record on whole, as a participant whose state cannot be encoded:
	// the coordinator hears of it through Coordinator.Failed, and its
	// snapshot aborts with ErrRecordFailed.
	FailRecords float64
}

// ErrRecordFailed is the reason of a snapshot aborted because a process
// could not hand its record on whole (Config.FailRecords).
var ErrRecordFailed = errors.New("snapshottest: record not handed on whole")

// App is the application run by the processes of a Network.
type App interface {
	// Tick is called once per tick while traffic is on; it may Send.
	Tick(n *Network)
	// Receive handles a message delivered to process to; it may Send.
	Receive(n *Network, to, from int, payload any)
	// State encodes process p's state for a snapshot.
	State(p int) []byte
}

type kind uint8

const (
	data kind = iota
	marker
	initiate // control: from the coordinator (Process.Initiate)
	start    // control: from the coordinator (Process.Start)
	forget   // control: from the coordinator
	departed // the sender stopped: after its last message on the link
)

type envelope struct {
	kind    kind
	stamp   snapshot.Stamp
	payload any
	id      snapshot.SnapshotID
	toInc   int // the receiver's incarnation when sent: a later one does not get it
	fromInc int // the sender's
}

// coordinator is the sending index of control links.
const coordinator = -1

type link struct {
	from, to int
	seq      uint64 // Config.Sums: the last message's number
	q        []envelope
	head     int
	last     int64 // delivery tick of the newest message: keeps FIFO
	blocked  bool  // the receiver paused it (aligned mode)
	held     int   // deliveries that came due while blocked
}

func (l *link) empty() bool { return l.head == len(l.q) }

// unpop puts e back at the head of the link.
func (l *link) unpop(e envelope) {
	if l.head > 0 {
		l.head--
		l.q[l.head] = e
		return
	}
	l.q = append([]envelope{e}, l.q...)
}

func (l *link) pop() envelope {
	e := l.q[l.head]
	l.q[l.head] = envelope{}
	l.head++
	if l.head == len(l.q) {
		l.q, l.head = l.q[:0], 0
	}
	return e
}

type event struct {
	at  int64
	seq uint64
	l   *link
}

type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// Network is a deterministic discrete-time network of snapshot.Process
// values on a directed graph, with FIFO links, a seeded random delay per
// message, and a snapshot.Coordinator, whose actions it carries out: it
// starts snapshots, assembles them and says when one is finished. It is
// not safe for concurrent use. A failed protocol step stops it: see Err.
type Network struct {
	cfg   Config
	rng   *rand.Rand
	coord *snapshot.Coordinator
	app   App
	now   int64
	procs []*snapshot.Process
	index map[snapshot.ProcessID]int
	links map[[2]int]*link
	// captured counts the queued messages handed over (Config.Capture);
	// recaptured those of them handed over again at Ready.Recapture.
	captured, recaptured int
	// lagging are the stops that reach the coordinator late (StopLag),
	// in the order they happened.
	lagging []laggedStop
	order   []*link // links in creation order, for deterministic draining
	events  events
	seq     uint64
	trace   *Trace

	held      int // deliveries waiting on blocked links
	completed []*snapshot.Global
	aborted   []error
	failed    int // records not handed on whole (Config.FailRecords)
	err       error

	// Stopped processes (Stop), and the messages that reached them after
	// they stopped, lost. The coordinator drops a stopped process once a
	// complete snapshot started after its stop shows it drained; then it
	// is in droppedAt, with the last snapshot started.
	stopped   []bool
	unheard   []bool              // stopped, and still live to the coordinator (Config.StopLag)
	stopping  []bool              // stopped, said so before each start until the stop comes
	round     snapshot.SnapshotID // the last round of drops handed over (each whole, at once; its After)
	lost      []Lost
	droppedAt map[int]snapshot.SnapshotID

	// Respawn: a new process under a dropped one's name.
	backEdges   [][]snapshot.ProcessID // per process, as configured
	incarnation []int                  // per process: how many times respawned
	unnamed     []window               // snapshots that must not hold a name
}

// window is a name that the snapshots numbered after from and complete
// before the name was given again (the first done of them) must not hold.
type window struct {
	name snapshot.ProcessID
	from snapshot.SnapshotID
	done int
}

// Respawner is an App that learns of a process respawned under a dropped
// one's name, to give it a fresh state.
type Respawner interface {
	Respawned(n *Network, p int)
}

// Respawn starts a new process under the name of process i, which has
// stopped and been dropped, as package actors gives a dropped one's name
// again (a spawn from outside any actor): it declares nothing, its
// channels start afresh, and it takes part in the snapshots in progress
// with its state at birth (the coordinator requires it, and it records
// them at once). It reports false if i is not dropped.
func (n *Network) Respawn(i int) bool {
	at, ok := n.droppedAt[i]
	if !ok || n.err != nil {
		return false
	}
	name := n.name(i)
	pc := snapshot.Config{ID: name, Mode: n.cfg.Mode, BackEdges: n.backEdges[i], DeltaMin: n.cfg.DeltaMin, Sums: n.cfg.Sums}
	if n.cfg.Sums {
		// Born after the cut of every snapshot over: its epoch follows
		// its name's old one, which a receiver may still hold.
		pc.Horizon = n.coord.Last()
		if first, ok := n.coord.Oldest(); ok {
			pc.Horizon = first - 1
		}
		for _, l := range n.order {
			if l.from == i || l.to == i {
				l.seq = 0 // its channels start afresh, as the trace's
			}
		}
	}
	p, err := snapshot.NewProcess(pc)
	if err != nil {
		n.fail(err)
		return false
	}
	if n.cfg.Learn {
		p.SetAwaited(0, nil)
	}
	n.logf("%s: respawned (joins the snapshots in progress: %v)", name, n.coord.Pending())
	n.unnamed = append(n.unnamed, window{name: name, from: at, done: len(n.completed)})
	delete(n.droppedAt, i)
	n.procs[i], n.stopped[i] = p, false
	n.incarnation[i]++
	n.trace.Forget(name)
	if r, ok := n.app.(Respawner); ok {
		r.Respawned(n, i)
	}
	for _, id := range n.coord.Join(name) {
		n.step(i, func(p *snapshot.Process) error { return p.Start(id) })
	}
	return true
}

// Incarnation returns how many times process i was respawned.
func (n *Network) Incarnation(i int) int { return n.incarnation[i] }

// Traced is a payload as a Network counting in sums (Config.Sums) hands
// it to its receiver: with the number its link gave it, which the
// invariant checkers read.
type Traced struct {
	Seq     uint64
	Payload any
}

func (t Traced) String() string { return fmt.Sprintf("%v#%d", t.Payload, t.Seq) }

// handed returns the payload of data envelope e as its receiver's
// process is handed it: Traced when counting in sums.
func (n *Network) handed(e envelope) any {
	if n.cfg.Sums {
		return Traced{Seq: e.stamp.Seq, Payload: e.payload}
	}
	return e.payload
}

// untraced returns payload without its Traced wrapper.
func untraced(payload any) any {
	if t, ok := payload.(Traced); ok {
		return t.Payload
	}
	return payload
}

// Lost is an application message that reached a stopped process and was
// dropped, as a dead letter. One sent once the receiver was dropped is not
// stamped (Seq 0): as in package actors, it goes outside the snapshots;
// At is its place in the sender's order (Trace.Event).
type Lost struct {
	Channel     snapshot.Channel
	Seq         uint64
	At          uint64
	Payload     any
	Incarnation int // the receiver's
	Sender      int // the sender's incarnation
}

// NewNetwork builds the processes of cfg.Graph running app.
func NewNetwork(cfg Config, app App) (*Network, error) {
	if cfg.Graph.Len() == 0 {
		return nil, errors.New("snapshottest: empty graph")
	}
	n := &Network{
		cfg:   cfg,
		rng:   rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		app:   app,
		index: make(map[snapshot.ProcessID]int, cfg.Graph.Len()),
		links: make(map[[2]int]*link),
		trace: NewTrace(),
	}
	coord, err := snapshot.NewCoordinator(snapshot.CoordinatorConfig{
		Mode:       cfg.Mode,
		Sums:       cfg.Sums,
		Timeout:    time.Duration(cfg.Timeout) * tick,
		SweepAfter: time.Duration(cfg.SweepAfter) * tick,
		Learn:      cfg.Learn,
	})
	if err != nil {
		return nil, err
	}
	n.coord = coord
	pcfg := make([]snapshot.Config, cfg.Graph.Len())
	for i, name := range cfg.Graph.Names {
		if _, dup := n.index[name]; dup {
			return nil, fmt.Errorf("snapshottest: duplicate process %q", name)
		}
		n.index[name] = i
		pcfg[i].ID = name
		pcfg[i].Mode = cfg.Mode
		pcfg[i].DeltaMin = cfg.DeltaMin
		pcfg[i].Sums = cfg.Sums
	}
	if cfg.Mode == snapshot.Aligned && !cfg.NoBackEdges && !cfg.Learn {
		back := cfg.BackEdges
		if back == nil {
			back = cfg.Graph.BackEdges(snapshot.ShallowBackEdges)
		}
		for _, e := range back {
			pcfg[e.To].BackEdges = append(pcfg[e.To].BackEdges, cfg.Graph.Names[e.From])
		}
	}
	for _, e := range cfg.Graph.Edges {
		out, in := true, true
		switch cfg.Declare {
		case DeclareNone:
			out, in = false, false
		case DeclareRandom:
			out, in = n.rng.IntN(2) == 0, n.rng.IntN(2) == 0
			if cfg.Mode == snapshot.Aligned && !out {
				in = false // a declared input is awaited: its sender must know it
			}
			if out {
				in = true // as package actors declares a child's channel: both ends (Config.Outgoing)
			}
		}
		if out {
			pcfg[e.From].Outgoing = append(pcfg[e.From].Outgoing, cfg.Graph.Names[e.To])
		}
		if in {
			pcfg[e.To].Incoming = append(pcfg[e.To].Incoming, cfg.Graph.Names[e.From])
		}
	}
	for _, pc := range pcfg {
		p, err := snapshot.NewProcess(pc)
		if err != nil {
			return nil, err
		}
		if cfg.Learn {
			p.SetAwaited(0, nil)
		}
		n.procs = append(n.procs, p)
		n.backEdges = append(n.backEdges, pc.BackEdges)
	}
	n.incarnation = make([]int, len(n.procs))
	n.unheard = make([]bool, len(n.procs))
	n.stopping = make([]bool, len(n.procs))
	n.stopped = make([]bool, len(n.procs))
	n.droppedAt = make(map[int]snapshot.SnapshotID)
	return n, nil
}

// Rand returns the network's seeded source, for the application's choices.
func (n *Network) Rand() *rand.Rand { return n.rng }

// Now returns the current tick.
func (n *Network) Now() int64 { return n.now }

// Graph returns the network's graph.
func (n *Network) Graph() Graph { return n.cfg.Graph }

// Process returns process i's state machine, for inspection.
func (n *Network) Process(i int) *snapshot.Process { return n.procs[i] }

// Index returns the index of the process named id.
func (n *Network) Index(id snapshot.ProcessID) (int, bool) {
	i, ok := n.index[id]
	return i, ok
}

// Trace returns the record of every send, receipt and local record, for
// the invariant checkers.
func (n *Network) Trace() *Trace { return n.trace }

// Err returns the first protocol error met; the network stops at it.
func (n *Network) Err() error { return n.err }

// Completed returns the snapshots completed so far, in completion order.
func (n *Network) Completed() []*snapshot.Global { return n.completed }

// Aborted returns the abort errors of the snapshots aborted so far.
func (n *Network) Aborted() []error { return n.aborted }

// Stopped reports whether process i has stopped.
func (n *Network) Stopped(i int) bool { return n.stopped[i] }

// DroppedAt returns, for every process dropped and not respawned, the last
// snapshot started before its peers forgot it: no later snapshot names it.
func (n *Network) DroppedAt() map[int]snapshot.SnapshotID { return n.droppedAt }

// losing returns the application messages still on their way to stopped
// processes (or to a process since replaced under the name): they will be
// lost.
func (n *Network) losing() []Lost {
	var out []Lost
	for _, l := range n.order {
		if l.to < 0 {
			continue
		}
		for _, e := range l.q[l.head:] {
			if e.kind == data && (n.stopped[l.to] || e.toInc != n.incarnation[l.to]) {
				ch := snapshot.Channel{From: n.name(l.from), To: n.name(l.to)}
				out = append(out, Lost{Channel: ch, Seq: e.stamp.Seq, Payload: e.payload, Incarnation: e.toInc, Sender: e.fromInc})
			}
		}
	}
	return out
}

// Lost returns the application messages that reached stopped processes.
func (n *Network) Lost() []Lost { return n.lost }

// Pending returns the snapshots neither complete nor aborted.
func (n *Network) Pending() []snapshot.SnapshotID { return n.coord.Pending() }

// Missing returns what snapshot id still waits for.
func (n *Network) Missing(id snapshot.SnapshotID) snapshot.Missing {
	m, _ := n.coord.Missing(id)
	return m
}

// epochOf shows a stamp's epoch (Epochs mode) in a log line.
func epochOf(st snapshot.Stamp) string {
	if st.Epoch == 0 {
		return ""
	}
	return fmt.Sprintf(" epoch %d", st.Epoch)
}

func (n *Network) logf(format string, args ...any) {
	if n.cfg.Log != nil {
		n.cfg.Log(fmt.Sprintf(format, args...))
	}
}

func (n *Network) name(i int) snapshot.ProcessID {
	if i == coordinator {
		return "coordinator"
	}
	return n.cfg.Graph.Names[i]
}

func (n *Network) fail(err error) {
	if n.err == nil {
		n.err = err
		n.logf("error: %v", err)
	}
}

func (n *Network) link(from, to int) *link {
	k := [2]int{from, to}
	l := n.links[k]
	if l == nil {
		l = &link{from: from, to: to}
		n.links[k] = l
		n.order = append(n.order, l)
	}
	return l
}

// enqueue puts e on the link from -> to; in the random mode it schedules
// its delivery, no earlier than the message before it on that link.
func (n *Network) enqueue(from, to int, e envelope) {
	e.toInc = n.incarnation[to]
	if from >= 0 {
		e.fromInc = n.incarnation[from]
	}
	if n.cfg.MaxDelay <= 0 && from == coordinator {
		n.deliverEnvelope(coordinator, to, e)
		return
	}
	l := n.link(from, to)
	l.q = append(l.q, e)
	if n.cfg.MaxDelay <= 0 {
		return
	}
	at := max(n.now+1+int64(n.rng.IntN(n.cfg.MaxDelay)), l.last)
	l.last = at
	n.seq++
	heap.Push(&n.events, event{at: at, seq: n.seq, l: l})
}

// Send sends an application message from process from to process to. A
// stopped process sends nothing. What is sent to one is lost (Lost): as in
// package actors, counted on its channel until the process is dropped,
// outside the snapshots after.
func (n *Network) Send(from, to int, payload any) {
	if n.err != nil || n.stopped[from] {
		return
	}
	ch := snapshot.Channel{From: n.name(from), To: n.name(to)}
	if _, dropped := n.droppedAt[to]; dropped {
		n.logf("%s: send to a dropped process, lost %v", ch, payload)
		n.lost = append(n.lost, Lost{Channel: ch, At: n.trace.Event(ch.From), Payload: payload, Incarnation: n.incarnation[to], Sender: n.incarnation[from]})
		return
	}
	race := false
	if n.stopped[to] {
		if n.cfg.Sums {
			// The sender finds its receiver stopped. If the receiver
			// recorded no snapshot the sender has not, none needs the
			// message, and it may go outside the snapshots, uncounted;
			// else, and as a post that meets a closed mailbox, it is
			// counted and the coordinator hears it was lost.
			needed := n.procs[to].Epoch() > n.procs[from].Epoch()
			if race = needed || n.rng.IntN(2) == 0; !race {
				n.logf("%s: send to a stopped process, lost outside the snapshots %v", ch, payload)
				n.lost = append(n.lost, Lost{Channel: ch, At: n.trace.Event(ch.From), Payload: payload, Incarnation: n.incarnation[to], Sender: n.incarnation[from]})
				return
			}
		} else {
			n.coord.SentTo(ch.From, ch.To)
		}
	}
	st := n.procs[from].Send(ch.To)
	if n.cfg.Sums {
		l := n.link(from, to)
		l.seq++
		st.Seq = l.seq
	}
	n.trace.Sent(ch, st.Seq)
	if race {
		n.logf("%s: send seq=%d%s to a stopped process, counted and lost %v", ch, st.Seq, epochOf(st), payload)
		n.lost = append(n.lost, Lost{Channel: ch, Seq: st.Seq, Payload: payload, Incarnation: n.incarnation[to], Sender: n.incarnation[from]})
		n.coord.Lost(tickTime(n.now), ch.To, st.Epoch, 1)
		n.coordinate()
		return
	}
	if st.Seq == 1 && (len(st.Recorded) > 0 || st.Horizon > 0) {
		n.logf("%s: send seq=%d %v (recorded %v, horizon %d)", ch, st.Seq, payload, st.Recorded, st.Horizon)
	} else {
		n.logf("%s: send seq=%d %v%s", ch, st.Seq, payload, epochOf(st))
	}
	n.enqueue(from, to, envelope{kind: data, stamp: st, payload: payload})
}

// StartSnapshot starts a new snapshot, numbered by the coordinator. With
// initiator >= 0 that process initiates it and markers flood the graph;
// with initiator < 0 the coordinator broadcasts it on its control channel
// to every process that has not stopped. A stopped initiator makes it a
// broadcast.
func (n *Network) StartSnapshot(initiator int) snapshot.SnapshotID {
	var by snapshot.ProcessID
	if initiator >= 0 && !n.stopped[initiator] {
		by = n.name(initiator)
	}
	for i, s := range n.stopping {
		if s {
			n.coord.Stopping(n.name(i))
		}
	}
	id, err := n.coord.Start(tickTime(n.now), n.live(), by)
	if err != nil {
		n.fail(err)
		return id
	}
	n.coordinate()
	return id
}

// live returns the names of the processes that have not stopped, or
// whose stop their driver has not heard of (Config.StopLag): the
// participants of a snapshot starting now, as the guardian of package
// actors has them. The stopped stand in when a record names them.
func (n *Network) live() []snapshot.ProcessID {
	names := make([]snapshot.ProcessID, 0, len(n.procs))
	for i, name := range n.cfg.Graph.Names {
		if !n.stopped[i] || n.unheard[i] {
			names = append(names, name)
		}
	}
	return names
}

// Stop stops process i, as package actors carries out an actor's stop:
// its open recordings close with what came and the snapshots it recorded
// hear that it will report nothing more (Assembler.Stopped); each process
// it sent to hears of it after its last message (Process.Departed); the
// snapshots that wait for its record, and those that start later, take
// its final counters instead (Assembler.AddDeparted). Messages that reach
// it from then on are lost (Lost), and it sends nothing more.
func (n *Network) Stop(i int) {
	if n.err != nil || n.stopped[i] {
		return
	}
	id, p := n.name(i), n.procs[i]
	n.logf("%s: stop", id)
	recorded := p.Active()
	if n.cfg.Sums {
		n.lose(i)
		if n.err != nil {
			return
		}
	}
	n.step(i, func(p *snapshot.Process) error { p.Stop(); return nil })
	n.stopped[i] = true
	final := p.Counters()
	for _, pc := range final.Sent {
		n.enqueue(i, n.index[pc.Peer], envelope{kind: departed})
	}
	after, took := n.coord.Last(), n.round
	stopped := func() {
		if err := n.coord.Stopped(tickTime(n.now), id, final, recorded, after, took); err != nil {
			n.logf("%s: stopped: %v", id, err)
		}
	}
	if n.cfg.StopLag > 0 && n.rng.Float64() < n.cfg.StopLag {
		at := n.now + 1 + int64(n.rng.IntN(1+2*max(n.cfg.MaxDelay, 1)))
		n.logf("%s: its stop reaches the coordinator at tick %d", id, at)
		// Its driver holds it live until the stop comes, as the
		// coordinating member of a cluster holds another member's
		// participant until that member's word of the stop; or it knows
		// at once that it stopped, as package actors's registry does,
		// and says so before each start (Coordinator.Stopping).
		until := n.unheard
		if n.rng.IntN(2) == 0 {
			until = n.stopping
		}
		until[i] = true
		n.lagging = append(n.lagging, laggedStop{at: at, stopped: func() {
			until[i] = false
			stopped()
		}})
	} else {
		stopped()
	}
	// What it held blocked comes due, to be lost.
	for _, l := range n.order {
		if l.to == i && l.blocked {
			n.unblock(l)
		}
	}
	n.coordinate()
}

// lose hands stopping process i what is on its links, which it will
// never receive (Process.Lose): it is lost at its delivery.
func (n *Network) lose(i int) {
	for _, l := range n.order {
		if l.to != i || l.from == coordinator || l.empty() {
			continue
		}
		var queued []snapshot.Queued
		for _, e := range l.q[l.head:] {
			if e.kind == data && e.toInc == n.incarnation[i] {
				queued = append(queued, snapshot.Queued{Epoch: e.stamp.Epoch, Payload: n.handed(e)})
			}
		}
		if len(queued) == 0 {
			continue
		}
		from := n.name(l.from)
		n.step(i, func(p *snapshot.Process) error { return p.Lose(from, queued) })
		n.logf("%s: loses %d queued from %s", n.name(i), len(queued), from)
	}
}

// unblock lets the deliveries that came due on l while it was blocked go,
// now.
func (n *Network) unblock(l *link) {
	l.blocked = false
	n.held -= l.held
	for ; l.held > 0; l.held-- {
		n.seq++
		heap.Push(&n.events, event{at: n.now, seq: n.seq, l: l})
	}
}

// step applies one input to process i and carries out its actions.
func (n *Network) step(i int, input func(p *snapshot.Process) error) {
	if n.err != nil {
		return
	}
	p := n.procs[i]
	before := p.Epoch()
	if err := input(p); err != nil {
		n.fail(fmt.Errorf("%s: %w", n.name(i), err))
		return
	}
	if n.cfg.Capture && p.Epoch() > before {
		n.capture(i, before)
	}
	if !p.HasReady() {
		return
	}
	rd := p.Ready()
	var state []byte
	if len(rd.Records) > 0 {
		state = n.app.State(i)
	}
	for _, rec := range rd.Records {
		rec.State, rec.Kind = state, "process"
		n.trace.Recorded(rec.Process, rec.Snapshot)
		switch {
		case n.cfg.Sums:
			n.logf("%s: record %d (sent %d, received %d in all)", rec.Process, rec.Snapshot, rec.SentTotal, rec.ReceivedTotal)
		case rec.Changes:
			n.logf("%s: record %d (changed since %d: sent %s; received %d in all)", rec.Process, rec.Snapshot, rec.Prev, counts(rec.Sent), rec.ReceivedTotal)
		default:
			n.logf("%s: record %d (sent %s; received %s)", rec.Process, rec.Snapshot, counts(rec.Sent), counts(rec.Received))
		}
		if n.cfg.FailRecords > 0 && n.rng.Float64() < n.cfg.FailRecords {
			n.failed++
			n.logf("%s: record %d not handed on whole", rec.Process, rec.Snapshot)
			if err := n.coord.Failed(tickTime(n.now), &rec, fmt.Errorf("%w: %s", ErrRecordFailed, rec.Process)); err != nil {
				n.logf("snapshot %d: %v", rec.Snapshot, err)
			}
			continue
		}
		// Handed over, as the live guardian hands its records.
		if err := n.coord.RecordKept(tickTime(n.now), &rec); err != nil {
			n.logf("snapshot %d: %v", rec.Snapshot, err)
		}
	}
	for _, m := range rd.Markers {
		n.logf("%s: marker %d -> %s", n.name(i), m.Snapshot, m.To)
		to, ok := n.index[m.To]
		if !ok {
			n.fail(fmt.Errorf("%s: marker to unknown process %s", n.name(i), m.To))
			return
		}
		n.enqueue(i, to, envelope{kind: marker, id: m.Snapshot})
	}
	for _, cr := range rd.Channels {
		if n.cfg.Mode == snapshot.Epochs {
			n.logf("%s: in flight on %s for %d: %s", n.name(i), cr.Channel, cr.Snapshot, messages(cr.Messages))
		} else {
			n.logf("%s: channel %s closed for %d: %s", n.name(i), cr.Channel, cr.Snapshot, messages(cr.Messages))
		}
	}
	// All at once, as the live guardian hands over a report's.
	if len(rd.Channels) > 0 {
		if err := n.coord.Channels(tickTime(n.now), rd.Channels); err != nil {
			n.logf("%s: channel state: %v", n.name(i), err)
		}
	}
	for _, id := range rd.Finished {
		n.logf("%s: finished %d", n.name(i), id)
	}
	for _, from := range rd.Pause {
		n.logf("%s->%s: blocked", from, n.name(i))
		n.link(n.index[from], i).blocked = true
	}
	for _, from := range rd.Resume {
		n.logf("%s->%s: unblocked", from, n.name(i))
		n.unblock(n.link(n.index[from], i))
	}
	p.Advance()
	n.coordinate()
}

// capture hands process i the data messages queued for it on each of its
// incoming links, for the snapshots it recorded since since: on each
// link, those it will receive next, in order (a message to an earlier
// incarnation is lost, not received; a marker or a departure ends the
// prefix, and so does a sequence number that does not follow, a sender
// given its name again).
func (n *Network) capture(i int, since snapshot.SnapshotID) {
	p := n.procs[i]
	for _, l := range n.order {
		if l.to != i || l.from == coordinator || l.empty() {
			continue
		}
		from := n.name(l.from)
		next := p.Received(from) + 1
		var queued []snapshot.Queued
		for _, e := range l.q[l.head:] {
			if e.kind != data {
				break
			}
			if e.toInc != n.incarnation[i] {
				continue // lost at its delivery
			}
			if n.cfg.Sums {
				// The link's order is all it needs: the numbers are the
				// coordinator's.
				queued = append(queued, snapshot.Queued{Epoch: e.stamp.Epoch, Payload: n.handed(e)})
				continue
			}
			if e.stamp.Seq != next {
				break
			}
			queued = append(queued, snapshot.Queued{Epoch: e.stamp.Epoch, Payload: e.payload})
			next++
		}
		if len(queued) == 0 {
			continue
		}
		var h snapshot.InHandle
		if err := p.Capture(&h, from, since, queued); err != nil {
			n.fail(fmt.Errorf("%s: capture from %s: %w", n.name(i), from, err))
			return
		}
		n.captured += len(queued)
		n.logf("%s: captured %d queued from %s", n.name(i), len(queued), from)
	}
}

// Captured returns the messages processes handed over from their queues
// (Config.Capture).
func (n *Network) Captured() int { return n.captured }

// Failed returns how many records were not handed on whole
// (Config.FailRecords).
func (n *Network) Failed() int { return n.failed }

// Recaptured returns the queued messages handed over when the coordinator
// named their receiver in Ready.Recapture, of those Captured counts.
func (n *Network) Recaptured() int { return n.recaptured }

// coordinate carries out what the coordinator asks: awaited sets handed
// to every process, starts broadcast on the control channel or initiated,
// sweeps, the snapshots that ended recorded and finished at every live
// process, and the drained stopped processes dropped by their peers.
func (n *Network) coordinate() {
	for n.err == nil && n.coord.HasReady() {
		rd := n.coord.Ready()
		for _, in := range rd.Initiates {
			n.logf("snapshot %d: coordinator initiates at %s", in.Snapshot, in.Process)
			n.enqueue(coordinator, n.index[in.Process], envelope{kind: initiate, id: in.Snapshot})
		}
		for _, o := range rd.Over {
			if o.Global != nil {
				n.completed = append(n.completed, o.Global)
				n.logf("snapshot %d: complete at tick %d", o.Snapshot, n.now)
			} else {
				n.aborted = append(n.aborted, o.Err)
				n.logf("%v", o.Err)
			}
			for i := range n.procs {
				if !n.stopped[i] {
					n.enqueue(coordinator, i, envelope{kind: forget, id: o.Snapshot})
				}
			}
		}
		for _, d := range rd.Drops {
			n.round = max(n.round, d.After)
			i := n.index[d.Process]
			n.droppedAt[i] = d.After
			n.trace.Dropped(d.Process, d.After)
			n.logf("%s: dropped by %v and its senders since its stop", d.Process, d.Peers)
			for j, p := range n.procs {
				if !n.stopped[j] && slices.Contains(d.Peers, p.ID()) {
					n.step(j, func(p *snapshot.Process) error { p.DropPeer(d.Process); return nil })
				}
			}
		}
		if a := rd.Awaited; a != nil {
			for i, p := range n.procs {
				n.logf("%s: await %v from snapshot %d", n.name(i), a.Sets[p.ID()], a.From)
				p.SetAwaited(a.From, a.Sets[p.ID()])
			}
		}
		if rd.ResyncAll {
			n.fail(fmt.Errorf("coordinator asks every participant for all its counters: a record was lost"))
		}
		for _, id := range rd.Resync {
			// Records reach the coordinator in order here: it never
			// loses track of one, so this is a failure of the run.
			n.fail(fmt.Errorf("coordinator asks %s for all its counters: a record was lost", id))
		}
		for _, id := range rd.Recapture {
			// Every participant recorded: what the receiver is owed is
			// on its links now, and a capture reports it at once.
			if i, ok := n.index[id]; ok && n.cfg.Capture && !n.stopped[i] {
				n.logf("%s: captures its queues again", id)
				before := n.captured
				n.step(i, func(*snapshot.Process) error { n.capture(i, 0); return nil })
				n.recaptured += n.captured - before
			}
		}
		for _, st := range rd.Starts {
			if st.Initiator != "" {
				n.logf("snapshot %d: initiated by %s", st.Snapshot, st.Initiator)
				n.step(n.index[st.Initiator], func(p *snapshot.Process) error { return p.Initiate(st.Snapshot) })
				continue
			}
			n.logf("snapshot %d: broadcast", st.Snapshot)
			for _, to := range st.To {
				n.enqueue(coordinator, n.index[to], envelope{kind: start, id: st.Snapshot})
			}
		}
	}
}

func (n *Network) deliverEnvelope(from, to int, e envelope) {
	if n.stopped[to] || e.toInc != n.incarnation[to] {
		if e.kind == data {
			ch := snapshot.Channel{From: n.name(from), To: n.name(to)}
			n.logf("%s: lost seq=%d %v", ch, e.stamp.Seq, e.payload)
			n.lost = append(n.lost, Lost{Channel: ch, Seq: e.stamp.Seq, Payload: e.payload, Incarnation: e.toInc, Sender: e.fromInc})
		}
		return
	}
	switch e.kind {
	case departed:
		n.logf("%s->%s: deliver departed", n.name(from), n.name(to))
		n.step(to, func(p *snapshot.Process) error { p.Departed(n.name(from)); return nil })
	case data:
		ch := snapshot.Channel{From: n.name(from), To: n.name(to)}
		n.logf("%s: deliver seq=%d %v", ch, e.stamp.Seq, e.payload)
		held := false
		payload := n.handed(e)
		n.step(to, func(p *snapshot.Process) error {
			err := p.Receive(ch.From, e.stamp, payload)
			held = err == nil && p.HasReady() && p.Ready().Hold
			return err
		})
		if n.err != nil {
			return
		}
		if held {
			// Back at the head of its link, delivered again when the link
			// is unblocked (at once if it already is).
			n.logf("%s: held seq=%d", ch, e.stamp.Seq)
			if !n.procs[to].IsBlocked(ch.From) {
				n.deliverEnvelope(from, to, e)
				return
			}
			l := n.link(from, to)
			l.unpop(e)
			if n.cfg.MaxDelay > 0 {
				l.held++
				n.held++
			}
			return
		}
		n.trace.Received(ch, e.stamp.Seq)
		n.app.Receive(n, to, from, e.payload)
	case marker:
		n.logf("%s->%s: deliver marker %d", n.name(from), n.name(to), e.id)
		n.step(to, func(p *snapshot.Process) error { return p.Marker(n.name(from), e.id) })
	case initiate, start:
		n.step(to, func(p *snapshot.Process) error {
			begin := p.Initiate
			if e.kind == start {
				begin = p.Start
			}
			if err := begin(e.id); err != nil && !errors.Is(err, snapshot.ErrFinished) {
				return err
			}
			return nil
		})
	case forget:
		// Forgetting an aligned snapshot still pending unblocks channels
		// and may begin a queued one: carry out what it asks.
		n.step(to, func(p *snapshot.Process) error { p.Forget(e.id); return nil })
	}
}

// Deliver delivers the oldest message on the channel from -> to, in a
// manual network. It reports false if there is none.
func (n *Network) Deliver(from, to int) bool {
	l := n.links[[2]int{from, to}]
	if l == nil || l.empty() || l.blocked || n.err != nil {
		return false
	}
	n.deliverEnvelope(from, to, l.pop())
	return true
}

// Blocked reports whether the receiver holds the channel from -> to
// blocked (aligned mode).
func (n *Network) Blocked(from, to int) bool {
	l := n.links[[2]int{from, to}]
	return l != nil && l.blocked
}

// DeliverAll delivers every queued message of a manual network, one per
// channel in turn, until none is left. It reports how many it delivered.
func (n *Network) DeliverAll() int {
	count := 0
	for progress := true; progress && n.err == nil; {
		progress = false
		for _, l := range n.order {
			if !l.empty() && n.Deliver(l.from, l.to) {
				count++
				progress = true
			}
		}
	}
	return count
}

// Tick advances time by one tick: the application's traffic (when traffic
// is true), then every delivery due, then the coordinator's sweeps and
// deadlines.
func (n *Network) Tick(traffic bool) {
	if n.err != nil {
		return
	}
	n.now++
	if traffic {
		n.app.Tick(n)
	}
	for len(n.events) > 0 && n.events[0].at <= n.now && n.err == nil {
		ev := heap.Pop(&n.events).(event)
		if ev.l.blocked {
			ev.l.held++
			n.held++
			continue
		}
		n.deliverEnvelope(ev.l.from, ev.l.to, ev.l.pop())
	}
	// Late stops in the order they happened, each once its tick came.
	for len(n.lagging) > 0 && n.lagging[0].at <= n.now && n.err == nil {
		l := n.lagging[0]
		n.lagging = n.lagging[1:]
		l.stopped()
		n.coordinate()
	}
	n.coord.Tick(tickTime(n.now))
	n.coordinate()
}

// laggedStop is a stop on its way to the coordinator (Config.StopLag).
type laggedStop struct {
	at      int64
	stopped func()
}

// Quiet reports whether no message is in flight and no snapshot pending.
func (n *Network) Quiet() bool {
	return len(n.events) == 0 && n.held == 0 && len(n.coord.Pending()) == 0 && len(n.lagging) == 0
}

// Drain ticks without traffic until the network is quiet, for at most
// limit ticks. It returns an error naming what is still pending if the
// limit is reached, or the network's protocol error.
func (n *Network) Drain(limit int) error {
	for range limit {
		if n.err != nil || n.Quiet() {
			break
		}
		n.Tick(false)
	}
	if n.err != nil {
		return n.err
	}
	if !n.Quiet() {
		var b strings.Builder
		fmt.Fprintf(&b, "snapshottest: not quiet after %d ticks: %d messages in flight, %d held on blocked channels", limit, len(n.events)+n.held, n.held)
		for _, id := range n.coord.Pending() {
			fmt.Fprintf(&b, "; snapshot %d: %s", id, n.Missing(id))
		}
		return errors.New(b.String())
	}
	return nil
}

// tick is the length of a tick in the coordinator's time.
const tick = time.Millisecond

// tickTime maps a tick to the coordinator's time.
func tickTime(t int64) time.Time { return time.Unix(0, t*int64(tick)).UTC() }

func counts(pcs []snapshot.PeerCount) string {
	if len(pcs) == 0 {
		return "-"
	}
	parts := make([]string, len(pcs))
	for i, pc := range pcs {
		parts[i] = fmt.Sprintf("%s:%d", pc.Peer, pc.N)
	}
	return strings.Join(parts, " ")
}

func messages(ms []snapshot.Message) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%d:%v", m.Seq, m.Payload)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
