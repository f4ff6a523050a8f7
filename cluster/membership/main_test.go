package membership

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/internal/racereport"
	"github.com/actorsnap/actorsnap/internal/testenv"
)

// childEnv, when set, makes the test binary a cluster member rather than a
// test run: its value is a childSpec as JSON. Several members in
// one process trip data races inside Proto.Actor and gRPC under -race, so
// every member runs in a process of its own, and the test process starts
// no actor system at all.
const childEnv = "ACTORSNAP_MEMBERSHIP_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	goleak.VerifyTestMain(m)
}

// childSpec is what a member process does.
type childSpec struct {
	Config Config
	// JoinTimeout bounds Join (30 s if zero).
	JoinTimeout time.Duration
}

// runChild is a member process. It joins as spec says, then tells on
// standard output, one line each:
//
//	joinerror MESSAGE        if Join failed (and exits with status 3)
//	self ADDRESS JOIN_MS     once joined, with how long Join took
//	members A,B,C            the member list, first and at each change
//	left LEAVE_MS            after Leave, which it does when stdin ends
//
// Errors and Proto.Actor's warnings go to standard error.
func runChild(spec string) int {
	var sp childSpec
	if err := json.Unmarshal([]byte(spec), &sp); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad spec:", err)
		return 2
	}
	if sp.JoinTimeout == 0 {
		sp.JoinTimeout = 30 * time.Second
	}
	as := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), sp.JoinTimeout)
	defer cancel()
	start := time.Now()
	m, err := Join(ctx, as, sp.Config)
	if err != nil {
		fmt.Printf("joinerror %v\n", err)
		return 3
	}
	fmt.Printf("self %s %d\n", m.Self(), time.Since(start).Milliseconds())

	stdinEnded := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinEnded)
	}()
	lists, stop := m.Watch()
	for {
		select {
		case l := <-lists:
			fmt.Printf("members %s\n", strings.Join(l, ","))
			continue
		case <-stdinEnded:
		}
		break
	}
	stop()
	start = time.Now()
	m.Leave()
	fmt.Printf("left %d\n", time.Since(start).Milliseconds())
	return 0
}

// child is a member process seen from the test.
type child struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan line // closed at the end of its standard output
	stderr *testenv.SyncBuffer
	exited chan struct{}
	err    error // of Wait, once exited is closed

	self    string
	joinMS  string
	leaveMS string
	members []string
}

type line struct {
	text string
	at   time.Time
}

// startChild starts a member process with spec. Cleanup kills it if it is
// still running and logs its standard error if the test failed.
func startChild(t *testing.T, name string, spec childSpec) *child {
	t.Helper()
	specJSON, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// halt_on_error=0, whatever the caller's GORACE: Proto.Actor's own
	// races must not stop a member (see races).
	cmd.Env = append(os.Environ(), childEnv+"="+string(specJSON), "GORACE=halt_on_error=0")
	c := &child{
		t: t, name: name, cmd: cmd,
		lines:  make(chan line, 64),
		stderr: &testenv.SyncBuffer{},
		exited: make(chan struct{}),
	}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- line{sc.Text(), time.Now()}
		}
		close(c.lines)
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			t.Logf("%s standard error:\n%s", c.name, c.stderr.String())
		}
	})
	return c
}

// next returns the next line of the child's standard output, failing the
// test at the deadline or when the output ends.
func (c *child) next(deadline time.Time, waitingFor string) line {
	c.t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case l, ok := <-c.lines:
		if !ok {
			<-c.exited
			c.t.Fatalf("%s ended (%v) while the test waited for %s; standard error:\n%s",
				c.name, c.err, waitingFor, c.stderr.String())
		}
		if rest, ok := strings.CutPrefix(l.text, "members "); ok {
			c.members = splitList(rest)
		}
		return l
	case <-timer.C:
		c.t.Fatalf("%s: no %s by the deadline; its last list: %v", c.name, waitingFor, c.members)
	}
	panic("unreachable")
}

func splitList(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// waitJoined waits for the child's self line.
func (c *child) waitJoined(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l := c.next(deadline, "self line")
		if rest, ok := strings.CutPrefix(l.text, "self "); ok {
			c.self, c.joinMS, _ = strings.Cut(rest, " ")
			return
		}
	}
}

// waitMembers waits until the child's member list is want, and returns
// when the test read that list.
func (c *child) waitMembers(want []string, timeout time.Duration) time.Time {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	if slices.Equal(c.members, want) {
		return time.Now()
	}
	for {
		l := c.next(deadline, fmt.Sprintf("member list %v", want))
		if strings.HasPrefix(l.text, "members ") && slices.Equal(c.members, want) {
			return l.at
		}
	}
}

// leave ends the child's standard input, and waits for it to leave and
// exit. An exit status other than 0 (66 is the race detector's) fails the
// test.
func (c *child) leave(timeout time.Duration) {
	c.t.Helper()
	_ = c.stdin.Close()
	deadline := time.Now().Add(timeout)
	for {
		l := c.next(deadline, "left line")
		if rest, ok := strings.CutPrefix(l.text, "left "); ok {
			c.leaveMS = rest
			break
		}
	}
	select {
	case <-c.exited:
	case <-time.After(time.Until(deadline)):
		c.t.Fatalf("%s did not exit after leaving", c.name)
	}
	c.checkExit(0)
}

// checkExit fails the test unless the child, which has exited, exited with
// status want, or with the race detector's status when every race it
// reported is Proto.Actor's own.
func (c *child) checkExit(want int) {
	c.t.Helper()
	ours, theirs := c.races()
	code := 0
	var exit *exec.ExitError
	if errors.As(c.err, &exit) {
		code = exit.ExitCode()
	} else if c.err != nil {
		c.t.Fatalf("%s: %v", c.name, c.err)
	}
	if code == want || (code == racereport.ExitCode && theirs > 0 && ours == 0) {
		return
	}
	c.t.Fatalf("%s exited with status %d, want %d; standard error:\n%s", c.name, code, want, c.stderr.String())
}

// races counts the data race reports on the child's standard error: ours
// (racereport.InOurCode) fail the test; Proto.Actor's own are logged: the
// etcd provider's shutdown flag (written by Shutdown, read by its
// keep-alive goroutine without a lock) and remote.BlockList (IsBlocked
// and BlockedMembers read what Block writes under its lock).
func (c *child) races() (ours, theirs int) {
	c.t.Helper()
	o, th := racereport.Split(c.stderr.String())
	for _, r := range o {
		c.t.Errorf("%s: a data race in this module's code:%s", c.name, r)
	}
	if len(th) > 0 {
		c.t.Logf("%s: data races inside Proto.Actor, not in this module's code (logged, not failed): %s",
			c.name, strings.Join(th, "; "))
	}
	return len(o), len(th)
}

// kill kills the child with SIGKILL and waits for it to be gone.
func (c *child) kill() time.Time {
	c.t.Helper()
	at := time.Now()
	if err := c.cmd.Process.Kill(); err != nil {
		c.t.Fatal(err)
	}
	<-c.exited
	var exit *exec.ExitError
	if !errors.As(c.err, &exit) {
		c.t.Fatalf("%s: killed, but Wait says %v", c.name, c.err)
	}
	c.races()
	return at
}

// freePorts returns n distinct TCP ports free on every interface a moment
// ago (the automanaged provider listens on all of them): held open
// together while they are chosen, so that none is given twice.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
