package endpoint_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/cluster/endpoint"
	"github.com/actorsnap/actorsnap/cluster/link"
	"github.com/actorsnap/actorsnap/internal/tcpproxy"
)

var trials = flag.Int("cut-trials", 3, "seeded trials of TestLinkSurvivesConnectionCuts")

// childEnv makes the test binary a member process: the receiving end.
const childEnv = "ACTORSNAP_ENDPOINT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// window is the links' window in the trials.
const window = 512

func linkConfig() link.Config {
	cfg := link.DefaultConfig(uint64(time.Now().UnixNano()))
	cfg.Window, cfg.Batch, cfg.Resend = window, 64, 100*time.Millisecond
	return cfg
}

// startMember starts an actor system with remote listening on port,
// known to its peers as advertised.
func startMember(port int, advertised string) (*actor.ActorSystem, *remote.Remote) {
	quiet := slog.New(slog.DiscardHandler) // remote logs every connection cut
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", port, remote.WithAdvertisedHost(advertised)))
	r.Start()
	return sys, r
}

// child is a member process: the sender or the receiver of a trial.
func child() int {
	switch os.Getenv(childEnv) {
	case "sender":
		return sender()
	case "bench-sender":
		return benchSender()
	case "bench-sink":
		return benchSink()
	}
	return receiver()
}

// sender sends messages 1..N to the receiver, as fast as the window
// lets it, and says so once all are acknowledged.
func sender() int {
	port, _ := strconv.Atoi(os.Getenv("CHILD_PORT"))
	n, _ := strconv.ParseUint(os.Getenv("CHILD_N"), 10, 64)
	to := os.Getenv("CHILD_PEER")
	sys, _ := startMember(port, os.Getenv("CHILD_ADVERTISED"))
	ep, err := endpoint.Start(sys, linkConfig(), func(string, []byte) {})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range n {
		if err := ep.SendWait(ctx, to, binary.BigEndian.AppendUint64(nil, i+1)); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		if u := ep.Unacked(to); u > window {
			fmt.Println("error: window exceeded:", u)
			return 1
		}
	}
	for {
		// The channel first, then the count: an acknowledgement between
		// the two closes the channel taken, and is not missed.
		space := ep.Space(to)
		if ep.Unacked(to) == 0 {
			break
		}
		select {
		case <-space:
		case <-ctx.Done():
			fmt.Println("error: not acknowledged:", ep.Unacked(to))
			return 1
		}
	}
	fmt.Println("sent", n, "resends", ep.Resends(to))
	return 0
}

// receiver checks that messages 1..N come once and in order, and says so.
func receiver() int {
	port, _ := strconv.Atoi(os.Getenv("CHILD_PORT"))
	n, _ := strconv.ParseUint(os.Getenv("CHILD_N"), 10, 64)
	sys, _ := startMember(port, os.Getenv("CHILD_ADVERTISED"))
	done := make(chan error, 1)
	var next uint64 = 1
	_, err := endpoint.Start(sys, linkConfig(), func(from string, msg []byte) {
		got := binary.BigEndian.Uint64(msg)
		switch {
		case got != next:
			done <- fmt.Errorf("got message %d, expected %d", got, next)
		case next == n:
			done <- nil
		}
		next++
	})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	select {
	case err := <-done:
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("ok", n)
		// Alive until the sender has its acknowledgements: the last ones
		// may be lost to a cut and asked for again.
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case <-time.After(3 * time.Minute):
		fmt.Println("error: timed out at message", next)
		return 1
	}
}

// newProxy starts a proxy to a member's remote port.
func newProxy(t *testing.T, port int) *tcpproxy.Proxy {
	p, err := tcpproxy.Listen(fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Two members, each a process of its own, every connection between them
// through a proxy that cuts all of them at seeded moments: 20,000
// messages arrive once and in order, the sender never holding more than
// its window.
func TestLinkSurvivesConnectionCuts(t *testing.T) {
	for seed := range uint64(*trials) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runCuts(t, seed) })
	}
}

// member starts a member process in role, and returns its stdout lines.
func member(t testing.TB, role string, port int, advertised, peer string, n int) (*exec.Cmd, *bufio.Scanner, io.WriteCloser) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, fmt.Sprintf("CHILD_PORT=%d", port),
		"CHILD_ADVERTISED="+advertised, "CHILD_PEER="+peer, fmt.Sprintf("CHILD_N=%d", n))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out), in
}

func runCuts(t *testing.T, seed uint64) {
	const n = 20000
	rng := rand.New(rand.NewPCG(seed, 7))
	senderPort, receiverPort := freePort(t), freePort(t)
	toReceiver, toSender := newProxy(t, receiverPort), newProxy(t, senderPort)
	receiverAddr, senderAddr := toReceiver.Addr(), toSender.Addr()

	recv, recvOut, recvIn := member(t, "receiver", receiverPort, receiverAddr, senderAddr, n)
	require.True(t, recvOut.Scan(), "the receiver says it is ready")
	require.Equal(t, "ready", recvOut.Text())
	send, sendOut, _ := member(t, "sender", senderPort, senderAddr, receiverAddr, n)

	// Cut every connection at seeded moments while the messages flow.
	stop := tcpproxy.CutAtRandom(rng, 20*time.Millisecond, 80*time.Millisecond, func() {
		if rng.IntN(2) == 0 {
			toReceiver.Cut()
		} else {
			toSender.Cut()
		}
	})

	require.True(t, recvOut.Scan(), "the receiver reports")
	require.Equal(t, fmt.Sprintf("ok %d", n), recvOut.Text())
	require.True(t, sendOut.Scan(), "the sender reports")
	report := sendOut.Text()
	require.NoError(t, send.Wait(), report)
	require.NoError(t, recvIn.Close())
	require.NoError(t, recv.Wait())
	stop()
	require.True(t, strings.HasPrefix(report, fmt.Sprintf("sent %d ", n)), report)
	t.Logf("seed %d: %d messages, connections cut %d times toward the receiver and %d toward the sender; %s",
		seed, n, toReceiver.Cuts(), toSender.Cuts(), report)
	require.Positive(t, toReceiver.Cuts()+toSender.Cuts(), "the run cut connections")
}
