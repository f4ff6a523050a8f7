package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/cluster"
	"github.com/actorsnap/actorsnap/cluster/membership"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/internal/devca"
	"github.com/actorsnap/actorsnap/internal/racereport"
	"github.com/actorsnap/actorsnap/persistence"
	_ "github.com/actorsnap/actorsnap/persistence/postgres" // postgres:// stores
	"github.com/actorsnap/actorsnap/snapshot"
)

// Members run as separate processes: the test binary again, with the
// member's spec in this variable (several members in one process race
// inside Proto.Actor's remote).
const childEnv = "ACTORSNAP_CLUSTER_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// childSpec is one member's part of a cluster bank.
type childSpec struct {
	Cluster  string
	Port     int
	AutoPort int
	Seeds    []string
	Store    string
	Accounts int
	InFlight int
	Members  int // members to wait for before the bank starts
	Interval time.Duration
	Flooding bool // initiate at one participant, markers flood (default: broadcast)
	Aligned  bool // aligned snapshots (default: unaligned)
	Epochs   bool // epoch-mode snapshots
	Lazy     bool // epoch mode: lazy starts
	Timeout  time.Duration
	Restore  bool // restore the latest snapshot onto Members members
	// Advertised is the proxy in front of the member's remote port.
	Advertised string
	// Extra registers one message type more than the others have.
	Extra bool
	// Ask takes one snapshot from each member that does not coordinate.
	Ask bool
	// Snapshots, if set, has every member wait for a line on stdin and
	// count its traffic from there ("counting"); the coordinator then
	// takes that many snapshots, one after another, and prints "taken N".
	Snapshots int
	// Bench, if set, runs the member as a benchmark's: "bare" (plain
	// Proto.Actor remote), "actorsnap", or one of floorModes, measuring
	// for Measure.
	Bench   string
	Measure time.Duration
	Addrs   []string // every member's remote address (bare)
	Parts   string   // the member's own directory for its parts (floor-capture-local-parts)
	// TLS, if set, closes the member's connections with these files
	// (membership.LoadTLS).
	TLS *devca.Files
	// Stranger makes TLS's configuration by hand, unchecked: a
	// certificate of another authority than TLS.CA's.
	Stranger bool
	// JoinTimeout is the member's cluster.Config.JoinTimeout (30 s if
	// zero).
	JoinTimeout time.Duration
	// Etcd, if set, is the etcd endpoint the members find each other
	// through, with Proto.Actor's etcd provider, instead of the
	// automanaged one.
	Etcd string
}

// extraMessage is the message type only an Extra member registers.
type extraMessage struct{ N int }

const (
	initial    = 1000
	systemName = "cluster-bank"
)

// runChild runs one member of a cluster bank until its stdin closes,
// printing a line per event: "member ADDR", "ready", "complete ID
// PARTICIPANTS IN-FLIGHT [departed|missing N] ok|BAD reason", "aborted ID reason",
// "counting", "taken N", "traffic SENDS FRAMES BYTES MARKERS STATE-BYTES" (as it
// leaves: System.Traffic since it was ready, or since "counting", to
// "taken" on the coordinator), "bye".
func runChild(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Println("error", err)
		return 2
	}
	if spec.Bench != "" {
		return runBench(spec)
	}
	out := &lineWriter{w: os.Stdout}
	fail := func(format string, args ...any) int {
		out.printf("error "+format, args...)
		return 1
	}
	ctx := context.Background()
	store, err := persistence.OpenURL(ctx, spec.Store)
	if err != nil {
		return fail("store: %v", err)
	}
	mcfg, err := memberConfig(spec)
	if err != nil {
		return fail("tls: %v", err)
	}
	opts := []actors.Option{bankdemo.Kind(initial), bankdemo.Messages, actors.WithStore(store), actors.WithSystemName(systemName),
		actors.WithTimeout(spec.Timeout), actors.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))}
	if spec.Flooding {
		opts = append(opts, actors.WithInitiation(actors.Flooding))
	}
	mode := snapshot.Unaligned
	switch {
	case spec.Aligned:
		mode = snapshot.Aligned
	case spec.Epochs:
		mode = snapshot.Epochs
		if spec.Lazy {
			opts = append(opts, actors.WithInitiation(actors.Lazy))
		}
	}
	if mode != snapshot.Unaligned || !spec.Restore {
		// A restore in the unaligned mode takes the snapshot's.
		opts = append(opts, actors.WithMode(mode))
	}
	total := int64(spec.Accounts) * initial
	joined := func(m *cluster.Member) {
		out.printf("member %s", m.Self())
		subscribe(m.System(), out, total, mode)
	}
	// restore restores, in this process, the latest snapshot onto n
	// members of the cluster named clusterName: at the start
	// (spec.Restore), or after "restore N" on stdin once this member has
	// left the cluster (serve).
	restore := func(n int, clusterName string) (*cluster.Member, error) {
		ropts := slices.Clone(opts)
		ropts[0] = bankdemo.Kind(0)
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		rcfg := mcfg
		rcfg.ClusterName = clusterName
		m, err := cluster.Restore(rctx, cluster.Config{Membership: rcfg}, store, 0, n, ropts...)
		if err != nil {
			return nil, err
		}
		joined(m)
		out.printf("restored %d", len(m.System().Participants()))
		return m, nil
	}
	if spec.Restore {
		m, err := restore(spec.Members, spec.Cluster)
		if err != nil {
			return fail("start: %v", err)
		}
		return serve(ctx, m, spec, out, restore)
	}
	if spec.Extra {
		opts = append(opts, actors.WithMessage[*extraMessage]("test.extra"))
	}
	m, err := cluster.Start(cluster.Config{Membership: mcfg, Members: spec.Members, JoinTimeout: spec.JoinTimeout}, opts...)
	if err != nil {
		return fail("start: %v", err)
	}
	sys := m.System()
	joined(m)
	deadline := time.Now().Add(30 * time.Second)
	bank, err := bankdemo.Start(sys, bankdemo.Config{Accounts: spec.Accounts, Initial: initial, Chords: 2, Seed: 7}, m.Owns)
	if err != nil {
		return fail("bank: %v", err)
	}
	if !waitFor(deadline, func() bool {
		for i := range spec.Accounts {
			if !sys.Reachable(bankdemo.Name(i)) {
				return false
			}
		}
		return true
	}) {
		return fail("accounts not all reachable")
	}
	for _, pid := range bank.PIDs {
		sys.Root().Send(pid, &bankdemo.Kick{N: spec.InFlight})
	}
	out.printf("ready %d members %v coordinator %s", len(bank.PIDs), m.Members(), m.Coordinator())
	if spec.Ask && m.Coordinator() != m.Self() {
		// Snapshot on a member that does not coordinate: it asks the
		// coordinator and loads the result from the shared store.
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			g, err := sys.Snapshot(ctx)
			if err != nil {
				out.printf("asked failed %v", err)
				return
			}
			verdict := "ok"
			if err := bankdemo.Check(g, total); err != nil {
				verdict = "BAD " + err.Error()
			}
			out.printf("asked %d %s", g.ID, verdict)
		}()
	}
	return serve(ctx, m, spec, out, restore)
}

// subscribe prints a line per snapshot that completes or aborts, checking
// the complete ones, and that they were taken in mode.
func subscribe(sys *actors.System, out *lineWriter, total int64, mode snapshot.Mode) {
	sys.ActorSystem().EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *actors.SnapshotCompleted:
			// One with accounts stopped (their member shut down) says
			// how many; so does one without the accounts of a member
			// that died, checked for consistency alone as well.
			verdict := "ok"
			departed, err := bankdemo.Verdict(e.Global, total)
			missing := int(total/initial) - len(e.Global.Participants)
			switch {
			case departed > 0:
				verdict = fmt.Sprintf("departed %d ok", departed)
			case missing > 0:
				verdict = fmt.Sprintf("missing %d ok", missing)
				err = e.Global.Verify()
			}
			if err != nil {
				verdict = "BAD " + err.Error()
			} else if e.Global.Mode != mode {
				verdict = fmt.Sprintf("BAD mode %s, want %s", e.Global.Mode, mode)
			}
			out.printf("complete %d %d %d %s", e.Global.ID, len(e.Global.Participants), e.Global.TotalInFlight(), verdict)
		case *actors.SnapshotAborted:
			out.printf("aborted %d %s", e.ID, strings.ReplaceAll(e.Err.Error(), "\n", " "))
		}
	})
}

// serve takes snapshots every spec.Interval until stdin closes, then
// shuts the member down. A line "restore N" makes the member leave the
// cluster and restore, in the same process, the latest snapshot onto N
// members (restore), as survivors of a member's death do in place.
func serve(ctx context.Context, m *cluster.Member, spec childSpec, out *lineWriter, restore func(n int, clusterName string) (*cluster.Member, error)) int {
	sys := m.System()
	every := func() bool {
		if spec.Interval > 0 {
			if err := sys.SnapshotEvery(spec.Interval); err != nil {
				out.printf("error every: %v", err)
				return false
			}
		}
		return true
	}
	if !every() {
		return 1
	}
	base := sys.Traffic()
	inPlace := 0 // restores in place so far
	in := bufio.NewReader(os.Stdin)
	if spec.Snapshots > 0 {
		// After a line on stdin, which the parent sends every member once
		// all are ready: a member is ready when it has heard every other
		// member's announcements of its participants, so by then each
		// member has sent all of its own, and the traffic counted from
		// here is the snapshots' alone.
		if _, err := in.ReadString('\n'); err != nil {
			out.printf("error waiting to begin: %v", err)
			return 1
		}
		base = sys.Traffic()
		out.printf("counting")
	}
	// The coordinator's traffic as its snapshots ended: what it sends when
	// other members leave before it (their participants' drops) is not
	// the snapshots'.
	var taken atomic.Pointer[actors.ProtocolTraffic]
	if spec.Snapshots > 0 && m.Coordinator() == m.Self() {
		go func() {
			for range spec.Snapshots {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := sys.Snapshot(ctx)
				cancel()
				if err != nil {
					out.printf("error snapshot: %v", err)
					return
				}
			}
			tr := sys.Traffic()
			taken.Store(&tr)
			out.printf("taken %d", spec.Snapshots)
		}()
	}
	for { // until the parent closes stdin
		line, err := in.ReadString('\n')
		if err != nil {
			break
		}
		var n int
		if _, err := fmt.Sscanf(line, "restore %d", &n); err != nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if err := m.Shutdown(sctx); err != nil {
			out.printf("shutdown %v", err)
		}
		cancel()
		// A cluster of a new name, the same on every survivor: one still
		// leaving the old cluster must not count as one of the n.
		inPlace++
		if m, err = restore(n, fmt.Sprintf("%s-in-place-%d", spec.Cluster, inPlace)); err != nil {
			out.printf("error restoring in place: %v", err)
			return 1
		}
		sys = m.System()
		if !every() {
			return 1
		}
		base = sys.Traffic()
	}
	tr := sys.Traffic()
	if t := taken.Load(); t != nil {
		tr = *t
	}
	out.printf("traffic %d %d %d %d %d", tr.Sends-base.Sends, tr.Frames-base.Frames, tr.Bytes-base.Bytes, tr.Markers-base.Markers, tr.StateBytes-base.StateBytes)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		out.printf("shutdown %v", err)
	}
	out.printf("bye")
	return 0
}

// memberConfig is the membership of the member spec describes: the
// automanaged provider on loopback, polled every second, or etcd's with
// its default lease, with spec.TLS.
func memberConfig(spec childSpec) (membership.Config, error) {
	cfg := membership.Config{ClusterName: spec.Cluster, Host: "127.0.0.1", Port: spec.Port, Advertised: spec.Advertised,
		Provider: membership.Automanaged, Seeds: spec.Seeds, AutomanagedPort: spec.AutoPort, TTL: time.Second}
	if spec.Etcd != "" {
		cfg.Provider, cfg.Etcd, cfg.Seeds, cfg.AutomanagedPort, cfg.TTL = membership.Etcd, []string{spec.Etcd}, nil, 0, 0
	}
	var err error
	switch {
	case spec.TLS == nil:
	case spec.Stranger:
		cfg.TLS, err = strangerTLS(*spec.TLS)
	default:
		cfg.TLS, err = membership.LoadTLS(spec.TLS.CA, spec.TLS.Cert, spec.TLS.Key)
	}
	return cfg, err
}

// waitFor polls cond until it holds or deadline passes: the conditions
// are another process's state, with no signal to wait on.
func waitFor(deadline time.Time, cond func() bool) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// child is a member process seen from the test.
type child struct {
	name  string
	self  string // its address, from its "member" line
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	log   *strings.Builder
	errs  strings.Builder // the whole standard error, for race reports
	mu    sync.Mutex
	done  chan struct{}
	// leaving is shared by the members started together: set while the
	// test stops them or one has died, when their accounts may depart
	// or be missing.
	leaving *atomic.Bool
}

// badComplete says what is wrong with a "complete" line, or "": an
// inconsistent snapshot, or accounts departed or missing while leaving
// is false (every member runs, and none stops its accounts).
func badComplete(l string, leaving bool) string {
	switch {
	case !strings.HasSuffix(l, " ok"):
		return "inconsistent snapshot: " + l
	case (strings.Contains(l, " departed ") || strings.Contains(l, " missing ")) && !leaving:
		return "accounts departed or missing while every member runs: " + l
	}
	return ""
}

func startChild(t testing.TB, name string, spec childSpec) *child {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, lines: make(chan string, 4096), log: &strings.Builder{}, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{c: c}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.log.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		c.mu.Lock()
		ours, theirs := racereport.Split(c.errs.String())
		c.mu.Unlock()
		for _, r := range ours {
			t.Errorf("member %s: a data race in this module's code:%s", c.name, r)
		}
		if len(theirs) > 0 {
			t.Logf("member %s: data races inside Proto.Actor (logged, not failed): %s", c.name, strings.Join(theirs, "; "))
		}
		if t.Failed() {
			c.mu.Lock()
			t.Logf("member %s output:\n%s", c.name, tail(c.log.String(), 60))
			c.mu.Unlock()
		}
	})
	return c
}

// output returns what the member said so far (its lines, and the
// errors and notices on its standard error).
func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type lockedWriter struct{ c *child }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.errs.Write(p)
	// Proto.Actor logs at length; keep stderr's errors only.
	for _, l := range strings.Split(string(p), "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "WARN") || strings.Contains(l, "coordinating") || strings.Contains(l, "panic") || strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "goroutine") {
			w.c.log.WriteString("stderr: " + l + "\n")
		}
	}
	return len(p), nil
}

// expect returns the next line of c that starts with prefix, failing the
// test at the deadline, on an "error" line, or on a snapshot complete and
// inconsistent on the way.
func (c *child) expect(t testing.TB, deadline time.Time, prefix string) string {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case l := <-c.lines:
			if strings.HasPrefix(l, "error") {
				t.Fatalf("member %s: %s", c.name, l)
			}
			if strings.HasPrefix(l, "complete") {
				// Every snapshot that completes is checked, those passed
				// over on the way to prefix too.
				if bad := badComplete(l, c.leaving != nil && c.leaving.Load()); bad != "" {
					t.Fatalf("member %s: %s", c.name, bad)
				}
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-c.done:
			t.Fatalf("member %s exited waiting for %q", c.name, prefix)
		case <-timer.C:
			t.Fatalf("member %s: no %q line in time", c.name, prefix)
		}
	}
}

// stop closes the member's stdin and waits for it to leave.
func (c *child) stop(t testing.TB, deadline time.Time) {
	t.Helper()
	if c.leaving != nil {
		c.leaving.Store(true)
	}
	_ = c.stdin.Close()
	c.expect(t, deadline, "bye")
}

// freePorts returns n free loopback ports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}
