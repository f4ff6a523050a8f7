package snapshot_test

import (
	"errors"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

// FuzzProcess drives three fully connected processes with an arbitrary
// sequence of events: sends, FIFO deliveries, initiations, forgets, and
// faults (markers and messages that no real sender produced). Processes may
// reject inputs with errors but must never panic, and an assembler must
// never report a complete snapshot that fails Verify. When no fault was
// injected, every complete snapshot must also pass the trace checkers.
//
//	go test ./snapshot -run '^$' -fuzz FuzzProcess -fuzztime 1m
func FuzzProcess(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 1, 0, 2, 3, 1, 0, 1, 1, 1, 2, 1, 5, 1, 7, 1, 1})
	f.Add([]byte{2, 0, 0, 1, 0, 5, 1, 1, 1, 4, 1, 3, 1, 2, 1, 0, 7, 0})
	f.Add([]byte{6, 1, 1, 1, 0, 4, 1, 2, 5, 3, 3, 1, 6, 2, 2, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		aligned := len(ops)%2 == 1 // odd length: the aligned mode
		h := newHarness(t, aligned)
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

type fuzzMsg struct {
	marker  bool
	id      snapshot.SnapshotID
	stamp   snapshot.Stamp
	payload int
}

type harness struct {
	t       *testing.T
	names   []snapshot.ProcessID
	procs   []*snapshot.Process
	links   [3][3][]fuzzMsg
	blocked [3][3]bool // by the receiver (aligned mode)
	aligned bool
	asm     map[snapshot.SnapshotID]*snapshot.Assembler
	trace   *snapshottest.Trace
	faulty  bool
	nextID  snapshot.SnapshotID
	payload int
}

func newHarness(t *testing.T, aligned bool) *harness {
	h := &harness{t: t, names: []snapshot.ProcessID{"a", "b", "c"}, asm: map[snapshot.SnapshotID]*snapshot.Assembler{}, trace: snapshottest.NewTrace(), aligned: aligned}
	for i, id := range h.names {
		cfg := snapshot.Config{ID: id}
		if i != 2 { // c's channels are discovered
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
		a, err = snapshot.NewAssembler(snapshot.AssemblerConfig{Snapshot: id, Participants: h.names})
		if err != nil {
			h.t.Fatal(err)
		}
		h.asm[id] = a
	}
	return a
}

func (h *harness) do(op, arg byte) {
	i, j := int(arg%3), int(arg/3%3)
	switch op % 8 {
	case 0: // send
		if i == j {
			return
		}
		st := h.procs[i].Send(h.names[j])
		h.trace.Sent(snapshot.Channel{From: h.names[i], To: h.names[j]}, st.Seq)
		h.payload++
		h.links[i][j] = append(h.links[i][j], fuzzMsg{stamp: st, payload: h.payload})
	case 1: // deliver the head of a link
		h.deliver(i, j)
	case 2: // initiate a new snapshot, or an existing one
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
			h.procs[i].Discard(id)
			h.step(i, nil)
			return
		}
		for j, p := range h.procs {
			p.Forget(id)
			h.step(j, nil)
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
		h.faulty = true
		h.step(j, h.procs[j].Marker(h.names[i], snapshot.SnapshotID(arg/9)))
	case 6: // fault: a message with an invented stamp
		h.faulty = true
		st := snapshot.Stamp{Seq: uint64(arg / 9 % 4), Horizon: snapshot.SnapshotID(arg >> 6)}
		if arg&0x10 != 0 {
			st.Recorded = []snapshot.SnapshotID{snapshot.SnapshotID(arg/9%3 + 1)}
		}
		h.step(j, h.procs[j].Receive(h.names[i], st, -1))
	case 7:
		h.check()
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
	if m.marker {
		h.step(j, h.procs[j].Marker(from, m.id))
		return true
	}
	err := h.procs[j].Receive(from, m.stamp, m.payload)
	if errors.Is(err, snapshot.ErrHeld) {
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
