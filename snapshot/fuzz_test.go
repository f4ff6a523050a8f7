package snapshot_test

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

// FuzzProcess drives three fully connected processes with an arbitrary
// sequence of events: sends, FIFO deliveries, initiations, forgets, stops
// (as package actors carries them out: the stopped process's recordings
// close, its receivers hear of it after its last message, and snapshots it
// did not record take its final counters), and faults (markers and
// messages that no real sender produced). Processes may reject inputs with
// errors but must never panic, and an assembler must never report a
// complete snapshot that fails Verify. When no fault was injected, every
// complete snapshot must also pass the trace checkers.
//
//	go test ./snapshot -run '^$' -fuzz FuzzProcess -fuzztime 1m
func FuzzProcess(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 1, 0, 2, 3, 1, 0, 1, 1, 1, 2, 1, 5, 1, 7, 1, 1})
	f.Add([]byte{2, 0, 0, 1, 0, 5, 1, 1, 1, 4, 1, 3, 1, 2, 1, 0, 7, 0})
	f.Add([]byte{6, 1, 1, 1, 0, 4, 1, 2, 5, 3, 3, 1, 6, 2, 2, 0})
	// b sends to c and stops while a snapshot runs; then another starts.
	f.Add([]byte{0, 1, 0, 5, 2, 0, 7, 0x81, 1, 7, 1, 5, 1, 1, 2, 9, 0, 2, 1, 2, 1, 0})
	// Epoch mode: c sends to a and stops; a records 1 to 3 after taking
	// the message, its later records listing no change: snapshot 2 must
	// still hold c, departed (the stopped stand in from the start).
	f.Add([]byte("087\xfb0021211820"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		h := newHarness(t, fuzzMode(ops))
		for i := 0; i+1 < len(ops); i += 2 {
			h.do(ops[i], ops[i+1])
		}
		for range 64 { // settle: deliver everything left
			if !h.deliverAny() {
				break
			}
		}
		h.check()
	})
}

// harnessMode is how the harness's processes take snapshots: a mode,
// and in the Epochs mode whether they count in sums.
type harnessMode struct {
	mode snapshot.Mode
	sums bool
}

// fuzzMode is the mode of a run of the harness on ops: the aligned mode
// for an odd length, the Epochs mode for twice an odd number (counting
// in sums for half of those), the unaligned mode for the rest.
func fuzzMode(ops []byte) harnessMode {
	switch {
	case len(ops)%2 == 1:
		return harnessMode{mode: snapshot.Aligned}
	case len(ops)%8 == 2:
		return harnessMode{mode: snapshot.Epochs}
	case len(ops)%8 == 6:
		return harnessMode{mode: snapshot.Epochs, sums: true}
	}
	return harnessMode{mode: snapshot.Unaligned}
}

type fuzzMsg struct {
	marker   bool
	departed bool // the sender stopped: its last message on the link
	id       snapshot.SnapshotID
	stamp    snapshot.Stamp
	payload  int
}

type harness struct {
	t       *testing.T
	names   []snapshot.ProcessID
	procs   []*snapshot.Process
	links   [3][3][]fuzzMsg
	blocked [3][3]bool // by the receiver (aligned mode)
	aligned bool
	mode    snapshot.Mode
	sums    bool         // counting in sums: links number their messages
	seqs    [3][3]uint64 // with sums: the last number each link gave
	asm     map[snapshot.SnapshotID]*snapshot.Assembler
	trace   *snapshottest.Trace
	faulty  bool
	nextID  snapshot.SnapshotID
	payload int
	stopped [3]bool
	final   map[snapshot.ProcessID]snapshot.LocalRecord // of stopped processes
	ledger  *snapshot.Ledger                            // Epochs mode, as the coordinator's
}

func newHarness(t *testing.T, hm harnessMode) *harness {
	mode := hm.mode
	aligned := mode == snapshot.Aligned
	h := &harness{t: t, names: []snapshot.ProcessID{"a", "b", "c"}, asm: map[snapshot.SnapshotID]*snapshot.Assembler{}, trace: snapshottest.NewTrace(), aligned: aligned,
		mode: mode, sums: hm.sums, final: map[snapshot.ProcessID]snapshot.LocalRecord{}}
	if mode == snapshot.Epochs && !hm.sums {
		h.ledger = snapshot.NewLedger()
	}
	for i, id := range h.names {
		cfg := snapshot.Config{ID: id, Mode: mode, DeltaMin: -1, Sums: hm.sums} // records of what changed, on three processes
		if i != 2 {                                                             // c's channels are discovered
			cfg.Outgoing = []snapshot.ProcessID{h.names[(i+1)%3]}
		}
		if aligned {
			// Any pair may talk: every channel into a is a back edge, and
			// b waits only for a: no cycle is left to wait around.
			cfg.Mode = snapshot.Aligned
			switch id {
			case "a":
				cfg.BackEdges = []snapshot.ProcessID{"b", "c"}
			case "b":
				cfg.BackEdges = []snapshot.ProcessID{"c"}
			}
		}
		p, err := snapshot.NewProcess(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h.procs = append(h.procs, p)
	}
	return h
}

func (h *harness) assembler(id snapshot.SnapshotID) *snapshot.Assembler {
	a := h.asm[id]
	if a == nil {
		var err error
		// As the guardian: the live processes take part; the stopped
		// stand in when a record names them.
		var live []snapshot.ProcessID
		for i, n := range h.names {
			if !h.stopped[i] {
				live = append(live, n)
			}
		}
		a, err = snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: id, Mode: h.mode, Participants: live, Ledger: h.ledger, Sums: h.sums,
			Departed: func(p snapshot.ProcessID) (snapshot.LocalRecord, bool) {
				r, ok := h.final[p]
				return r, ok
			}})
		if err != nil {
			h.t.Fatal(err)
		}
		// As the Coordinator: the stopped stand in from the start. A
		// record that lists only what changed does not name a peer it
		// received from long ago, which the cut needs all the same.
		for i, n := range h.names {
			if h.stopped[i] {
				a.Require(n)
			}
		}
		h.asm[id] = a
	}
	return a
}

func (h *harness) do(op, arg byte) {
	i, j := int(arg%3), int(arg/3%3)
	switch op % 8 {
	case 0: // send
		if i == j || h.stopped[i] || (h.sums && h.stopped[j]) {
			return // counting in sums, a sender sends nothing it counts to a stopped process
		}
		st := h.procs[i].Send(h.names[j])
		if h.sums {
			h.seqs[i][j]++
			st.Seq = h.seqs[i][j]
		}
		h.trace.Sent(snapshot.Channel{From: h.names[i], To: h.names[j]}, st.Seq)
		h.payload++
		h.links[i][j] = append(h.links[i][j], fuzzMsg{stamp: st, payload: h.payload})
	case 1: // deliver the head of a link
		h.deliver(i, j)
	case 2: // initiate a new snapshot, or an existing one
		if h.stopped[i] {
			return
		}
		id := snapshot.SnapshotID(arg/9) + 1
		if id > h.nextID {
			h.nextID++
			id = h.nextID
		}
		if h.aligned && arg&0x80 != 0 {
			h.step(i, h.procs[i].Start(id))
		} else {
			h.step(i, h.procs[i].Initiate(id))
		}
	case 3: // forget everywhere, or discard at one process
		id := snapshot.SnapshotID(arg / 9 % 16)
		if arg&0x80 != 0 {
			if !h.stopped[i] {
				h.procs[i].Discard(id)
				h.step(i, nil)
			}
			return
		}
		for j, p := range h.procs {
			if !h.stopped[j] {
				p.Forget(id)
				h.step(j, nil)
			}
		}
	case 4: // fault: drop or duplicate the head of a link
		if l := h.links[i][j]; len(l) > 0 {
			h.faulty = true
			if arg&0x80 != 0 {
				h.links[i][j] = append([]fuzzMsg{l[0]}, l...)
			} else {
				h.links[i][j] = l[1:]
			}
		}
	case 5: // fault: a marker nobody sent
		if h.stopped[j] {
			return
		}
		h.faulty = true
		h.step(j, h.procs[j].Marker(h.names[i], snapshot.SnapshotID(arg/9)))
	case 6: // fault: a message with an invented stamp
		if h.stopped[j] {
			return
		}
		h.faulty = true
		st := snapshot.Stamp{Seq: uint64(arg / 9 % 4), Horizon: snapshot.SnapshotID(arg >> 6)}
		if h.mode == snapshot.Epochs {
			st.Epoch = snapshot.SnapshotID(arg >> 5)
		}
		if arg&0x10 != 0 {
			st.Recorded = []snapshot.SnapshotID{snapshot.SnapshotID(arg/9%3 + 1)}
		}
		h.step(j, h.procs[j].Receive(h.names[i], st, -1))
	case 7:
		if arg&0x80 != 0 {
			h.stop(i)
			return
		}
		h.check()
	}
}

// stop stops process i as package actors does when an actor stops: its
// open recordings close with what came, the snapshots it recorded hear it
// will report nothing more, each receiver hears of it after its last
// message, and the snapshots that wait for its record (and those that
// start later) take its final counters instead.
func (h *harness) stop(i int) {
	if h.stopped[i] {
		return
	}
	h.stopped[i] = true
	p, id := h.procs[i], h.names[i]
	recorded := p.Active()
	if h.sums {
		// What is on its links it will never receive.
		for k := range 3 {
			var queued []snapshot.Queued
			for _, m := range h.links[k][i] {
				if !m.marker && !m.departed {
					queued = append(queued, snapshot.Queued{Epoch: m.stamp.Epoch, Payload: h.handed(m)})
				}
			}
			h.step(i, p.Lose(h.names[k], queued))
		}
	}
	p.Stop()
	h.step(i, nil)
	final := p.Counters()
	h.apply(&final)
	for _, s := range recorded {
		_ = h.assembler(s).Stopped(id)
	}
	for _, pc := range final.Sent {
		k := h.index(pc.Peer)
		h.links[i][k] = append(h.links[i][k], fuzzMsg{departed: true})
	}
	h.final[id] = final
	for s, a := range h.asm {
		if a.AwaitsRecord(id) {
			r := final
			r.Snapshot = s
			_ = a.AddDeparted(r)
		}
	}
}

func (h *harness) deliver(i, j int) bool {
	l := h.links[i][j]
	if len(l) == 0 || h.blocked[i][j] {
		return false
	}
	m := l[0]
	h.links[i][j] = l[1:]
	from := h.names[i]
	if h.stopped[j] {
		return true // lost with its receiver, as a dead letter
	}
	if m.departed {
		h.procs[j].Departed(from)
		h.step(j, nil)
		return true
	}
	if m.marker {
		h.step(j, h.procs[j].Marker(from, m.id))
		return true
	}
	p := h.procs[j]
	err := p.Receive(from, m.stamp, h.handed(m))
	if err == nil && p.HasReady() && p.Ready().Hold {
		// Held behind a barrier: back at the head of its link.
		h.step(j, nil)
		h.links[i][j] = append([]fuzzMsg{m}, h.links[i][j]...)
		return true
	}
	h.step(j, err)
	if err == nil {
		h.trace.Received(snapshot.Channel{From: from, To: h.names[j]}, m.stamp.Seq)
	}
	return true
}

// handed returns the payload of m as its receiver is handed it: with
// its link's number when counting in sums, for the trace checkers.
func (h *harness) handed(m fuzzMsg) any {
	if h.sums {
		return snapshottest.Traced{Seq: m.stamp.Seq, Payload: m.payload}
	}
	return m.payload
}

func (h *harness) deliverAny() bool {
	for i := range 3 {
		for j := range 3 {
			if h.deliver(i, j) {
				return true
			}
		}
	}
	return false
}

// step carries out process j's actions after an input that returned err.
func (h *harness) step(j int, err error) {
	if err != nil {
		h.faulty = true
	}
	p := h.procs[j]
	if !p.HasReady() {
		return
	}
	rd := p.Ready()
	for _, r := range rd.Records {
		h.trace.Recorded(r.Process, r.Snapshot)
		h.apply(&r)
		_ = h.assembler(r.Snapshot).AddRecord(r)
	}
	for _, m := range rd.Markers {
		k := h.index(m.To)
		h.links[j][k] = append(h.links[j][k], fuzzMsg{marker: true, id: m.Snapshot})
	}
	for _, c := range rd.Channels {
		_ = h.assembler(c.Snapshot).AddChannel(c)
	}
	for _, from := range rd.Pause {
		h.blocked[h.index(from)][j] = true
	}
	if err := snapshot.CheckLogged(p); err != nil {
		h.t.Fatal(err)
	}
	for _, from := range rd.Resume {
		h.blocked[h.index(from)][j] = false
	}
	p.Advance()
}

// apply gives a record to the Ledger, in the Epochs mode, before its
// Assembler gets it, with every Assembler of the run to take what it
// changes: records come in order here, so none is ever refused.
func (h *harness) apply(r *snapshot.LocalRecord) {
	if h.ledger == nil {
		return
	}
	runs := make([]*snapshot.Assembler, 0, len(h.asm))
	for _, id := range slices.Sorted(maps.Keys(h.asm)) {
		runs = append(runs, h.asm[id])
	}
	if err := h.ledger.Apply(r, runs); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) index(id snapshot.ProcessID) int {
	for i, n := range h.names {
		if n == id {
			return i
		}
	}
	h.t.Fatalf("marker to unknown process %s", id)
	return -1
}

func (h *harness) check() {
	for id, a := range h.asm {
		if a.Status(time.Time{}).State != snapshot.Complete {
			continue
		}
		g, err := a.Global()
		if err != nil {
			h.t.Fatalf("snapshot %d: complete but Global fails: %v", id, err)
		}
		if err := g.Verify(); err != nil {
			h.t.Fatalf("snapshot %d: complete but fails Verify: %v", id, err)
		}
		// With a Ledger, build looks only at the channels with a
		// recording: it lists what a look at every channel finds.
		if h.ledger != nil || h.sums {
			var listed []snapshot.Channel
			for _, cs := range g.Channels {
				listed = append(listed, cs.Channel)
			}
			if scan := snapshot.ScanChannels(a); !slices.Equal(listed, scan) {
				h.t.Fatalf("snapshot %d: Global lists channels %v, a scan of all finds %v", id, listed, scan)
			}
		}
		if h.faulty {
			continue
		}
		if err := h.trace.CheckCut(g); err != nil {
			h.t.Fatalf("fault-free run: %v", err)
		}
		if err := h.trace.CheckChannels(g); err != nil {
			h.t.Fatalf("fault-free run: %v", err)
		}
	}
}

// A process that stops before it records a snapshot stands in it with its
// final counters: the message it sent that arrives after the receiver
// recorded is channel state, and the trace checkers accept the cut.
func TestHarnessStopBeforeRecord(t *testing.T) {
	h := newHarness(t, harnessMode{mode: snapshot.Unaligned})
	const bToC = 1 + 3*2 // arg: i = b, j = c
	h.do(0, bToC)        // b sends m1 to c
	h.do(1, bToC)        // c receives it
	h.do(0, bToC)        // b sends m2, still in flight
	h.do(7, 0x80+2)      // b stops (0x82 % 3 == 1)
	h.do(2, 0)           // a starts snapshot 1
	h.do(2, 2)           // and so does c (b cannot pass the marker on)
	for h.deliverAny() {
	}
	a := h.asm[1]
	if a == nil || a.Status(time.Time{}).State != snapshot.Complete {
		t.Fatalf("snapshot 1 not complete: %v", a.Missing())
	}
	g, err := a.Global()
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := g.Participant("b"); !ok || !b.Departed {
		t.Fatalf("b stands in as departed: %+v", b)
	}
	cs, ok := g.Channel(snapshot.Channel{From: "b", To: "c"})
	if !ok || len(cs.Messages) != 1 || cs.Messages[0].Seq != 2 {
		t.Fatalf("b->c holds m2: %+v", cs)
	}
	h.check()
}

// TestRandomOps runs the fuzz harness on seeded random event sequences,
// so that every test run covers what FuzzProcess does, stops included:
// the complete snapshots must include some with a process departed and
// some with a process that recorded and then stopped. A failure prints
// the seed and the events.
func TestRandomOps(t *testing.T) {
	first, count := seedRange(20000, 2000)
	var complete, departed, stopped int
	byMode := make(map[snapshot.Mode]int)
	sums := 0
	for s := first; s < first+count; s++ {
		r := rand.New(rand.NewPCG(s, 0xf022))
		ops := make([]byte, 2*(10+r.IntN(40))+r.IntN(2))
		for i := range ops {
			ops[i] = byte(r.IntN(256))
		}
		func() {
			defer func() {
				if t.Failed() {
					t.Logf("seed %d, events %x\nreplay: go test ./snapshot -run 'TestRandomOps$' -seed %d", s, ops, s)
				}
			}()
			h := newHarness(t, fuzzMode(ops))
			for i := 0; i+1 < len(ops); i += 2 {
				h.do(ops[i], ops[i+1])
			}
			for h.deliverAny() {
			}
			h.check()
			for _, a := range h.asm {
				if a.Status(time.Time{}).State != snapshot.Complete {
					continue
				}
				complete++
				g, _ := a.Global()
				byMode[g.Mode]++
				if g.Sums != nil {
					sums++
				}
				for _, p := range g.Participants {
					i := h.index(p.ID)
					switch {
					case p.Departed:
						departed++
					case h.stopped[i]:
						stopped++
					}
				}
			}
		}()
	}
	t.Logf("%d complete snapshots (by mode %v, %d of them counted in sums); %d departed and %d recorded-then-stopped participants in them", complete, byMode, sums, departed, stopped)
	if count > 100 && sums == 0 {
		t.Fatalf("no snapshot counted in sums completes")
	}
	if count > 100 && (departed == 0 || stopped == 0) {
		t.Fatalf("stops are not exercised: %d departed, %d stopped after recording", departed, stopped)
	}
	for _, m := range []snapshot.Mode{snapshot.Unaligned, snapshot.Aligned, snapshot.Epochs} {
		if count > 100 && byMode[m] == 0 {
			t.Fatalf("no snapshot completes in the %s mode", m)
		}
	}
}
