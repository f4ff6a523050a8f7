package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/internal/devca"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// clusterRun runs the bank demo over several member processes on this
// machine, which find each other through Proto.Actor's automanaged
// provider and share one store: it starts them (this binary again, as the
// hidden member command), prints the snapshots the coordinating member
// reports, and, when a member dies, restores the bank from its latest
// complete snapshot, as Flink restarts a job from its last checkpoint:
// the members that outlived it restore in their own processes, and a new
// member takes the place of each that died.
type clusterRun struct {
	out, errw io.Writer
	store     persistence.Store
	members   int
	restart   bool
	logs      string   // directory of the members' logs; "" for none
	args      []string // the flags every member takes
	storeArgs string   // " --store URL", and --namespace if given: for the user
	total     int64    // the bank's money
	actors    int      // the bank's accounts
	duration  time.Duration
	maxFailed int

	exe         string
	events      chan memberMsg
	done        chan struct{} // closed at the end: the readers stop
	gen         int           // the members' generation: one per start or restore
	live        []*memberProc // the current generation's members
	name        string        // the cluster's name
	seeds       string        // every member's automanaged host:port, one per member
	next        int           // the number of the next member started
	coordinator string
	early       []memberMsg // snapshots reported before the table was printed
	taken, bad  int
	restores    int
}

// memberProc is a member process.
type memberProc struct {
	n        int // from 1, counting on across restores
	gen      int
	autoPort int // its automanaged port, one of the seeds
	// restoring is set from the line that asks a running member to
	// restore in place until it says it has: what it reports meanwhile
	// is of the cluster it leaves.
	restoring bool
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	addr      string
	failed    string        // the error it reported
	tail      *tail         // the end of its standard error
	exited    chan struct{} // closed once it exited, err set
	err       error
}

// running reports whether p has not exited.
func (p *memberProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// memberMsg is an event of member m; Event "exit" when it exited.
type memberMsg struct {
	m  *memberProc
	ev memberEvent
}

// Timeouts of the members: generous, for a loaded machine.
const (
	memberStartTimeout = 2 * time.Minute
	memberStopTimeout  = 30 * time.Second
	// How long the members that outlived one, or one that failed to
	// start, are given to stop before they are killed: the bank
	// restarts from the store, not from them.
	survivorStopTimeout = 3 * time.Second
	// How long a member's death may take to show in the cluster: the
	// automanaged provider polls every second.
	memberLossTimeout = 15 * time.Second
)

func newClusterRun(out, errw io.Writer, store persistence.Store) (*clusterRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to start the members: %w", err)
	}
	return &clusterRun{out: out, errw: errw, store: store, exe: exe,
		events: make(chan memberMsg, 1024), done: make(chan struct{})}, nil
}

// run starts the members of a new bank, or of a restore of snapshot
// restore, and runs for c.duration. The members talk mutual TLS with a
// throwaway authority made for the run, in a directory removed at its
// end.
func (c *clusterRun) run(ctx context.Context, restore snapshot.SnapshotID, intro func()) error {
	defer close(c.done)
	dir, err := os.MkdirTemp("", "actorsnap-ca-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ca, err := devca.Generate(dir, "127.0.0.1")
	if err != nil {
		return err
	}
	c.args = append(c.args, "--tls-ca", ca.CA, "--tls-cert", ca.Cert, "--tls-key", ca.Key)
	if restore != 0 {
		if err := c.restoreFrom(ctx, restore, time.Now()); err != nil {
			return c.ended(ctx, err)
		}
	} else {
		if err := c.start(ctx, 0); err != nil {
			return c.ended(ctx, err)
		}
		intro()
		c.printMembers()
		c.printHeader()
	}
	ctx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	return c.ended(ctx, c.loop(ctx))
}

// ended stops the members and reports how the run went: err, unless it
// is ctx's end, which ends the run as planned.
func (c *clusterRun) ended(ctx context.Context, err error) error {
	c.stop(memberStopTimeout)
	if err != nil && ctx.Err() == nil {
		return err
	}
	what := fmt.Sprintf("%d snapshots, %d inconsistent", c.taken, c.bad)
	switch c.restores {
	case 0:
	case 1:
		what += "; 1 restore"
	default:
		what += fmt.Sprintf("; %d restores", c.restores)
	}
	fmt.Fprintln(c.out, what)
	if c.bad > 0 {
		return fmt.Errorf("%d inconsistent snapshots", c.bad)
	}
	return nil
}

// loop prints the snapshots until ctx ends, and recovers from a member's
// death.
func (c *clusterRun) loop(ctx context.Context) error {
	failed := 0
	for {
		var msg memberMsg
		if len(c.early) > 0 {
			msg, c.early = c.early[0], c.early[1:]
		} else {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case msg = <-c.events:
			}
		}
		if msg.m.gen != c.gen {
			continue
		}
		ev := msg.ev
		switch ev.Event {
		case "complete":
			failed = 0
			c.printSnapshot(ev)
		case "aborted":
			if p := c.member(ev.Addr); p != nil {
				if err := c.lost(ctx, p, &ev); err != nil {
					return err
				}
				failed = 0
				continue
			}
			fmt.Fprintf(c.errw, "snapshot %d aborted: %s\n", ev.ID, ev.Error)
			if failed++; failed >= c.maxFailed {
				return fmt.Errorf("%d snapshots in a row failed, the last: %s", failed, ev.Error)
			}
		case "coordinator":
			c.coordinator = ev.Addr
		case "error":
			msg.m.failed = ev.Error
		case "exit":
			if err := c.lost(ctx, msg.m, nil); err != nil {
				return err
			}
			failed = 0
		}
	}
}

// lost handles the loss of member p: it died (abort is nil), or the
// cluster found it gone and aborted the snapshot in progress. It shows
// what the cluster makes of it, then restores the bank (in place),
// or, without --restart, stops with an error that says how to.
func (c *clusterRun) lost(ctx context.Context, p *memberProc, abort *memberEvent) error {
	why := "left the cluster"
	select {
	case <-p.exited:
		why = "died: " + exitReason(p)
	default:
		_ = p.cmd.Process.Kill() // it is out of the cluster: it must not write the store
	}
	fmt.Fprintf(c.out, "member %d (pid %d, %s) %s\n", p.n, p.cmd.Process.Pid, p.addr, why)
	wasCoordinator := p.addr == c.coordinator
	if abort != nil {
		c.printAbort(*abort)
	} else {
		c.awaitLoss(ctx, p, wasCoordinator)
	}
	start := time.Now()
	if !c.restart {
		c.stop(survivorStopTimeout)
		restore := "latest"
		if id, err := c.latestWhole(ctx); err == nil {
			restore = strconv.FormatUint(uint64(id), 10)
		}
		return fmt.Errorf("member %d (pid %d, %s) %s; to restore the bank: actorsnap restore %s --members %d%s",
			p.n, p.cmd.Process.Pid, p.addr, why, restore, c.members, c.storeArgs)
	}
	id, err := c.latestWhole(ctx)
	if err != nil {
		return err
	}
	c.restores++
	// Its automanaged port, one of the seeds the others poll, is for the
	// member that takes its place: free once it has exited.
	select {
	case <-p.exited:
	case <-time.After(survivorStopTimeout):
	}
	err = c.restoreInPlace(ctx, id, p, start)
	if err == nil || ctx.Err() != nil {
		return err
	}
	fmt.Fprintf(c.out, "restoring in place failed: %v; stopping the members, restoring onto %d new ones\n", err, c.members)
	c.stop(survivorStopTimeout)
	return c.restoreFrom(ctx, id, start)
}

// restoreInPlace restores snapshot id onto the members still running,
// dead aside, each in its own process (it leaves the cluster that lost a
// member and restores with the others), and onto a new member in place of
// dead and of any other that exited, c.members in all.
func (c *clusterRun) restoreInPlace(ctx context.Context, id snapshot.SnapshotID, dead *memberProc, start time.Time) error {
	if err := c.adopt(ctx, id); err != nil {
		return err
	}
	var survivors []*memberProc
	var ports []int // of the members that exited
	for _, p := range c.live {
		if p != dead && p.running() {
			survivors = append(survivors, p)
		} else {
			ports = append(ports, p.autoPort)
		}
	}
	if len(survivors) == 0 {
		return errors.New("no member is left")
	}
	fmt.Fprintf(c.out, "restoring snapshot %d onto the %d members left, in place, and %d new\n", id, len(survivors), len(ports))
	c.gen++
	c.live = survivors
	// A cluster of a new name: a survivor still leaving the old one must
	// not be taken for a member of the restore.
	c.name = c.clusterName()
	for _, p := range survivors {
		p.gen, p.restoring = c.gen, true
		if _, err := fmt.Fprintf(p.stdin, "restore %d %d %s\n", id, c.members, c.name); err != nil {
			return fmt.Errorf("asking member %d to restore: %w", p.n, err)
		}
	}
	for _, port := range ports {
		if err := c.spawn(port, id); err != nil {
			return err
		}
	}
	if err := c.await(ctx); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "restored from snapshot %d onto %d members, $%d, in %v (%d in place)\n",
		id, c.members, c.total, time.Since(start).Round(time.Millisecond), len(survivors))
	c.printMembers()
	c.printHeader()
	return nil
}

// adopt takes snapshot id's bank as the one every snapshot is held to.
func (c *clusterRun) adopt(ctx context.Context, id snapshot.SnapshotID) error {
	g, err := c.store.Load(ctx, id)
	if err != nil {
		return fmt.Errorf("snapshot %d: %w", id, err)
	}
	if c.total, err = bankdemo.Money(g); err != nil {
		return fmt.Errorf("snapshot %d: %w", id, err)
	}
	c.actors = len(g.Participants)
	return nil
}

// latestWhole returns the latest snapshot that holds the whole bank. One
// that the members left after a death took, without the dead member's
// accounts, would restore a bank that lost their money.
func (c *clusterRun) latestWhole(ctx context.Context) (snapshot.SnapshotID, error) {
	ids, err := c.store.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing the snapshots: %w", err)
	}
	for i := len(ids) - 1; i >= 0; i-- {
		g, err := c.store.Load(ctx, ids[i])
		if err != nil {
			fmt.Fprintf(c.errw, "snapshot %d: %v\n", ids[i], err)
			continue
		}
		if err := bankdemo.Check(g, c.total); err != nil {
			fmt.Fprintf(c.out, "snapshot %d does not hold the whole bank (%v); taking an older one\n", g.ID, err)
			continue
		}
		return g.ID, nil
	}
	return 0, fmt.Errorf("no snapshot in the store holds the whole bank of $%d", c.total)
}

// awaitLoss waits until the cluster shows that p is gone: the
// coordinator aborts the snapshot in progress, naming p, or, if p
// coordinated, another member takes over. Snapshots that complete
// meanwhile are printed: every participant recorded before p died.
func (c *clusterRun) awaitLoss(ctx context.Context, p *memberProc, wasCoordinator bool) {
	deadline := time.NewTimer(memberLossTimeout)
	defer deadline.Stop()
	for {
		var msg memberMsg
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return // no snapshot was in progress
		case msg = <-c.events:
		}
		if msg.m.gen != c.gen {
			continue
		}
		ev := msg.ev
		switch ev.Event {
		case "complete":
			c.printSnapshot(ev)
		case "aborted":
			if ev.Addr == p.addr {
				c.printAbort(ev)
				return
			}
			fmt.Fprintf(c.errw, "snapshot %d aborted: %s\n", ev.ID, ev.Error)
		case "coordinator":
			c.coordinator = ev.Addr
			if wasCoordinator && ev.Addr != p.addr {
				if q := c.member(ev.Addr); q != nil {
					fmt.Fprintf(c.out, "member %d (%s) coordinates now; its cluster lost member %d's participants\n", q.n, q.addr, p.n)
				}
				return
			}
		case "error":
			msg.m.failed = ev.Error
		case "exit":
			if msg.m != p {
				fmt.Fprintf(c.out, "member %d (pid %d, %s) died too: %s\n", msg.m.n, msg.m.cmd.Process.Pid, msg.m.addr, exitReason(msg.m))
			}
		}
	}
}

// restoreFrom starts new members restoring snapshot id.
func (c *clusterRun) restoreFrom(ctx context.Context, id snapshot.SnapshotID, start time.Time) error {
	if err := c.adopt(ctx, id); err != nil {
		return err
	}
	if err := c.start(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "restored from snapshot %d onto %d members, $%d, in %v\n", id, c.members, c.total, time.Since(start).Round(time.Millisecond))
	c.printMembers()
	c.printHeader()
	return nil
}

// start starts c.members members of a new cluster, restoring snapshot
// restore unless it is 0, and waits until each runs its part of the bank.
// If one fails, the others stop at once: a member waiting for the rest
// to join does not hear that it should.
func (c *clusterRun) start(ctx context.Context, restore snapshot.SnapshotID) error {
	err := c.starting(ctx, restore)
	if err != nil {
		c.stop(survivorStopTimeout)
	}
	return err
}

func (c *clusterRun) starting(ctx context.Context, restore snapshot.SnapshotID) error {
	ports, err := freePorts(c.members)
	if err != nil {
		return err
	}
	c.gen++
	c.live = nil
	c.name = c.clusterName()
	var seeds []string
	for _, port := range ports {
		seeds = append(seeds, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	c.seeds = strings.Join(seeds, ",")
	for _, port := range ports {
		if err := c.spawn(port, restore); err != nil {
			return err
		}
	}
	return c.await(ctx)
}

// clusterName names the cluster of the current generation of members.
func (c *clusterRun) clusterName() string { return fmt.Sprintf("actorsnap-%d-%d", os.Getpid(), c.gen) }

// memberArgs are the arguments of a member of the current cluster on
// automanaged port port, restoring snapshot restore unless it is 0.
func (c *clusterRun) memberArgs(port int, restore snapshot.SnapshotID) []string {
	args := []string{"member", "--cluster", c.name, "--automanaged-port", strconv.Itoa(port),
		"--seeds", c.seeds, "--members", strconv.Itoa(c.members),
		"--total", strconv.FormatInt(c.total, 10)}
	if restore != 0 {
		args = append(args, "--restore", strconv.FormatUint(uint64(restore), 10))
	}
	return append(args, c.args...)
}

// await waits until every live member runs its part of the bank, new or
// restored. What a member restoring in place reports before it has is of
// the cluster it left, and dropped.
func (c *clusterRun) await(ctx context.Context) error {
	deadline := time.NewTimer(memberStartTimeout)
	defer deadline.Stop()
	for waiting := len(c.live); waiting > 0; {
		var msg memberMsg
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%d of %d members not running after %v", waiting, c.members, memberStartTimeout)
		case msg = <-c.events:
		}
		if msg.m.gen != c.gen {
			continue
		}
		p, ev := msg.m, msg.ev
		switch ev.Event {
		case "ready", "restored":
			p.addr, p.restoring = ev.Addr, false
			if c.coordinator = ev.Coordinator; c.coordinator == "" {
				c.coordinator = ev.Addr
			}
			waiting--
		case "complete", "aborted", "coordinator":
			if !p.restoring {
				c.early = append(c.early, msg)
			}
		case "warning":
			fmt.Fprintf(c.errw, "member %d: %s\n", p.n, ev.Error)
		case "error":
			p.failed = ev.Error
		case "exit":
			return fmt.Errorf("member %d (pid %d) exited while starting: %s", p.n, p.cmd.Process.Pid, exitReason(p))
		}
	}
	return nil
}

// spawn starts a member process of the current cluster on automanaged
// port port, restoring snapshot restore unless it is 0.
func (c *clusterRun) spawn(port int, restore snapshot.SnapshotID) error {
	c.next++
	p := &memberProc{n: c.next, gen: c.gen, autoPort: port, tail: &tail{}, exited: make(chan struct{})}
	p.cmd = exec.Command(c.exe, c.memberArgs(port, restore)...)
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var logFile *os.File
	p.cmd.Stderr = p.tail
	if c.logs != "" {
		if logFile, err = os.Create(filepath.Join(c.logs, fmt.Sprintf("member-%d.log", p.n))); err != nil {
			return err
		}
		p.cmd.Stderr = io.MultiWriter(logFile, p.tail)
	}
	if err := p.cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return fmt.Errorf("starting member %d: %w", p.n, err)
	}
	c.live = append(c.live, p)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var ev memberEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				c.send(memberMsg{m: p, ev: ev})
			}
		}
		p.err = p.cmd.Wait()
		if logFile != nil {
			_ = logFile.Close()
		}
		close(p.exited)
		c.send(memberMsg{m: p, ev: memberEvent{Event: "exit"}})
	}()
	return nil
}

func (c *clusterRun) send(msg memberMsg) {
	select {
	case c.events <- msg:
	case <-c.done:
	}
}

// stop stops the live members, all at once: each leaves the cluster,
// and one that has not after timeout is killed.
func (c *clusterRun) stop(timeout time.Duration) {
	running := 0
	for _, p := range c.live {
		if p.running() {
			running++
			_ = p.stdin.Close()
		}
	}
	if running == 0 {
		c.live = nil
		return
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, p := range c.live {
		for waiting := true; waiting; {
			select {
			case <-p.exited:
				waiting = false
			case <-c.events: // the members' last words: no one reads them now
			case <-deadline.C:
				for _, q := range c.live {
					_ = q.cmd.Process.Kill()
				}
			}
		}
	}
	c.live = nil
}

// member returns the live member of address addr, or nil.
func (c *clusterRun) member(addr string) *memberProc {
	for _, p := range c.live {
		if addr != "" && p.addr == addr {
			return p
		}
	}
	return nil
}

func (c *clusterRun) printMembers() {
	for _, p := range c.live {
		role := ""
		if p.addr == c.coordinator {
			role = "coordinator"
		}
		fmt.Fprintf(c.out, "  member %-3d pid %-8d %-22s %s\n", p.n, p.cmd.Process.Pid, p.addr, role)
	}
}

func (c *clusterRun) printHeader() {
	fmt.Fprintf(c.out, "%8s %8s %8s %10s %12s  %s\n", "snapshot", "members", "actors", "in-flight", "duration", "consistent")
}

func (c *clusterRun) printSnapshot(ev memberEvent) {
	if ev.Actors < c.actors && ev.Check != "" {
		// Taken by the members a death left: the dead one's accounts
		// are not in it, nor their money.
		fmt.Fprintf(c.out, "%8d %8d %8d %10d %12v  without the accounts of the member that died\n",
			ev.ID, ev.Members, ev.Actors, ev.InFlight, ev.Duration.Round(time.Microsecond))
		return
	}
	c.taken++
	verdict := "yes"
	if ev.Departed > 0 {
		verdict = fmt.Sprintf("yes, with %d accounts stopped", ev.Departed)
	}
	if ev.Check != "" {
		verdict = "NO: " + ev.Check
		c.bad++
	}
	fmt.Fprintf(c.out, "%8d %8d %8d %10d %12v  %s\n", ev.ID, ev.Members, ev.Actors, ev.InFlight, ev.Duration.Round(time.Microsecond), verdict)
}

func (c *clusterRun) printAbort(ev memberEvent) {
	fmt.Fprintf(c.out, "snapshot %d aborted: %s\n", ev.ID, ev.Error)
}

// exitReason says why member p exited: its status, and the error it
// reported or the last line of its log.
func exitReason(p *memberProc) string {
	why := "exited"
	if p.err != nil {
		why = p.err.Error()
	}
	switch {
	case p.failed != "":
		why += ": " + p.failed
	case p.tail.last() != "" && !strings.Contains(why, "signal"):
		why += ": " + p.tail.last()
	}
	return why
}

// freePorts returns n ports free on every interface (the automanaged
// provider listens on all of them).
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail keeps the end of a member's standard error.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

// last returns the last line that is not empty.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
