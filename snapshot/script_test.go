package snapshot_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

// TestScripts runs the golden scenarios under testdata/. Each file builds a
// manual network (messages wait until delivered) running the bank, and
// drives it step by step; the expected output is every event the step
// caused. Regenerate the expectations with:
//
//	go test ./snapshot -run TestScripts -rewrite
//
// Commands:
//
//	topology [declare=all|none] [initial=N] [timeout=T] [ring=N | tworings=N] [mode=aligned|epoch] [delta=N] [sums]
//	         edges "a -> b" as input, or a ring of N (p0..) or two rings of N;
//	         in the aligned mode the back edges are ShallowBackEdges's
//	send from=a to=b amount=N
//	snapshot at=a | snapshot broadcast
//	deliver from=a to=b [count=N]
//	deliver-all
//	tick [n=N]
//	pending
//	snapshots
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.Contains(filepath.ToSlash(path), "testdata/fuzz/") {
			return // inputs the fuzz tests saved: theirs to run
		}
		s := &script{}
		datadriven.RunTest(t, path, s.run)
	})
}

type script struct {
	net   *snapshottest.Network
	bank  *snapshottest.Bank
	total int64
	out   strings.Builder
	// verdicts of the snapshots printed, as first checked: a name given
	// again forgets the traces an older snapshot is checked against.
	verdicts map[snapshot.SnapshotID]string
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	s.out.Reset()
	if d.Cmd != "topology" && s.net == nil {
		d.Fatalf(t, "topology first")
	}
	switch d.Cmd {
	case "topology":
		s.topology(t, d)
	case "send":
		var from, to string
		var amount int64
		d.ScanArgs(t, "from", &from)
		d.ScanArgs(t, "to", &to)
		d.ScanArgs(t, "amount", &amount)
		s.bank.Send(s.net, s.index(t, d, from), s.index(t, d, to), amount)
	case "snapshot":
		who := -1
		if !d.HasArg("broadcast") {
			var at string
			d.ScanArgs(t, "at", &at)
			who = s.index(t, d, at)
		}
		s.net.StartSnapshot(who)
	case "deliver":
		var from, to string
		count := 1
		d.ScanArgs(t, "from", &from)
		d.ScanArgs(t, "to", &to)
		d.MaybeScanArgs(t, "count", &count)
		for range count {
			if s.net.Blocked(s.index(t, d, from), s.index(t, d, to)) {
				fmt.Fprintf(&s.out, "%s->%s is blocked\n", from, to)
				break
			}
			if !s.net.Deliver(s.index(t, d, from), s.index(t, d, to)) {
				fmt.Fprintf(&s.out, "nothing to deliver on %s->%s\n", from, to)
				break
			}
		}
	case "deliver-all":
		s.net.DeliverAll()
	case "stop":
		var at string
		d.ScanArgs(t, "at", &at)
		s.net.Stop(s.index(t, d, at))
	case "respawn":
		var at string
		d.ScanArgs(t, "at", &at)
		if !s.net.Respawn(s.index(t, d, at)) {
			fmt.Fprintf(&s.out, "%s is not dropped\n", at)
		}
	case "tick":
		n := 1
		d.MaybeScanArgs(t, "n", &n)
		for range n {
			s.net.Tick(false)
		}
	case "pending":
		for _, id := range s.net.Pending() {
			fmt.Fprintf(&s.out, "snapshot %d: %s\n", id, s.net.Missing(id))
		}
	case "snapshots":
		for _, g := range s.net.Completed() {
			s.print(g)
		}
		for _, err := range s.net.Aborted() {
			fmt.Fprintf(&s.out, "%v\n", err)
		}
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if err := s.net.Err(); err != nil {
		fmt.Fprintf(&s.out, "network stopped: %v\n", err)
	}
	return s.out.String()
}

func (s *script) topology(t *testing.T, d *datadriven.TestData) {
	var g snapshottest.Graph
	idx := map[string]int{}
	node := func(name string) int {
		if i, ok := idx[name]; ok {
			return i
		}
		idx[name] = len(g.Names)
		g.Names = append(g.Names, snapshot.ProcessID(name))
		return idx[name]
	}
	var ring, rings int
	d.MaybeScanArgs(t, "ring", &ring)
	d.MaybeScanArgs(t, "tworings", &rings)
	switch {
	case ring > 0:
		g = snapshottest.Ring(ring)
	case rings > 0:
		g = snapshottest.TwoRings(rings)
	default:
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			from, to, ok := strings.Cut(line, "->")
			if !ok {
				d.Fatalf(t, "bad edge %q", line)
			}
			g.Edges = append(g.Edges, snapshottest.Edge{From: node(strings.TrimSpace(from)), To: node(strings.TrimSpace(to))})
		}
	}
	declare := "all"
	var initial int64 = 10
	timeout := 0
	d.MaybeScanArgs(t, "declare", &declare)
	d.MaybeScanArgs(t, "initial", &initial)
	d.MaybeScanArgs(t, "timeout", &timeout)
	cfg := snapshottest.Config{Graph: g, Timeout: timeout, Log: func(l string) { s.out.WriteString(l + "\n") }}
	mode := "unaligned"
	d.MaybeScanArgs(t, "mode", &mode)
	m, err := snapshot.ParseMode(mode)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	cfg.Mode = m
	d.MaybeScanArgs(t, "delta", &cfg.DeltaMin)
	cfg.Sums = d.HasArg("sums")
	switch declare {
	case "all":
		cfg.Declare = snapshottest.DeclareAll
	case "none":
		cfg.Declare = snapshottest.DeclareNone
	default:
		d.Fatalf(t, "declare=all|none")
	}
	s.bank = snapshottest.NewBank(g, initial, 0)
	s.total = s.bank.Total()
	net, err := snapshottest.NewNetwork(cfg, s.bank)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	s.net = net
	fmt.Fprintf(&s.out, "%d processes, %d channels, $%d\n", g.Len(), len(g.Edges), s.total)
	if m == snapshot.Aligned {
		for _, e := range g.BackEdges(snapshot.ShallowBackEdges) {
			fmt.Fprintf(&s.out, "back edge %s->%s\n", g.Names[e.From], g.Names[e.To])
		}
	}
}

func (s *script) index(t *testing.T, d *datadriven.TestData, name string) int {
	i, ok := s.net.Index(snapshot.ProcessID(name))
	if !ok {
		d.Fatalf(t, "unknown process %q", name)
	}
	return i
}

// print shows a completed snapshot as a table, and the verdict of every
// invariant checker on it.
func (s *script) print(g *snapshot.Global) {
	fmt.Fprintf(&s.out, "snapshot %d:\n", g.ID)
	for _, p := range g.Participants {
		if p.Departed {
			fmt.Fprintf(&s.out, "  %-4s departed\n", p.ID)
			continue
		}
		v, _ := snapshottest.BalanceOf(p.State)
		fmt.Fprintf(&s.out, "  %-4s $%d\n", p.ID, v)
	}
	for _, c := range g.Channels {
		var ms []string
		for _, m := range c.Messages {
			ms = append(ms, fmt.Sprintf("%d:%v", m.Seq, m.Payload))
		}
		fmt.Fprintf(&s.out, "  %-8s sent %d received %d in flight [%s]\n", c.Channel, c.Sent, c.Received, strings.Join(ms, " "))
	}
	if sc := g.Sums; sc != nil {
		fmt.Fprintf(&s.out, "  sums: sent %d, received %d\n", sc.Sent, sc.Received)
	}
	verdict, ok := s.verdicts[g.ID]
	if !ok {
		// The money that left with stopped processes before the cut is not
		// the snapshot's to hold.
		res := &snapshottest.BankResult{Network: s.net, Bank: s.bank, Total: s.total}
		verdict = "consistent"
		if err := snapshottest.CheckAll(g, s.net.Trace(), s.total-res.LeftBefore(g)); err != nil {
			verdict = "INCONSISTENT: " + err.Error()
		}
		if s.verdicts == nil {
			s.verdicts = make(map[snapshot.SnapshotID]string)
		}
		s.verdicts[g.ID] = verdict
	}
	fmt.Fprintf(&s.out, "  %s\n", verdict)
}
