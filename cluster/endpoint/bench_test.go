package endpoint_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/actorsnap/actorsnap/cluster/endpoint"
	"github.com/actorsnap/actorsnap/cluster/link"
)

// BenchmarkRemote sends 64-byte messages from one member process to
// another on loopback: through the Endpoint's reliable link, and bare,
// each message a protobuf Any sent with Proto.Actor remote to a counting
// actor (what remote costs with nothing of ours). One op is one message,
// timed from the first send to the receiver's count reaching b.N.
func BenchmarkRemote(b *testing.B) {
	for _, mode := range []string{"bare", "endpoint"} {
		b.Run(mode, func(b *testing.B) { benchRemote(b, mode) })
	}
}

func benchRemote(b *testing.B, mode string) {
	senderPort, sinkPort := freePort(b), freePort(b)
	senderAddr, sinkAddr := fmt.Sprintf("127.0.0.1:%d", senderPort), fmt.Sprintf("127.0.0.1:%d", sinkPort)
	b.Setenv("CHILD_MODE", mode)
	sink, sinkOut, _ := member(b, "bench-sink", sinkPort, sinkAddr, senderAddr, b.N)
	require.True(b, sinkOut.Scan())
	require.Equal(b, "ready", sinkOut.Text())

	send := exec.Command(os.Args[0], "-test.run=^$")
	send.Env = append(os.Environ(), childEnv+"=bench-sender", fmt.Sprintf("CHILD_PORT=%d", senderPort),
		"CHILD_ADVERTISED="+senderAddr, "CHILD_PEER="+sinkAddr, fmt.Sprintf("CHILD_N=%d", b.N))
	in, err := send.StdinPipe()
	require.NoError(b, err)
	out, err := send.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, send.Start())
	b.Cleanup(func() { _ = send.Process.Kill(); _ = send.Wait() })
	sendOut := bufio.NewScanner(out)
	require.True(b, sendOut.Scan())
	require.Equal(b, "ready", sendOut.Text())

	b.ResetTimer()
	_, err = io.WriteString(in, "go\n")
	require.NoError(b, err)
	require.True(b, sinkOut.Scan(), "the sink reports")
	b.StopTimer()
	require.Equal(b, "done", sinkOut.Text())
	require.NoError(b, in.Close())
	require.NoError(b, sink.Wait())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// payload is every benchmark message's content.
var payload = make([]byte, 64)

// benchSink counts the messages it gets and says "done" at CHILD_N.
func benchSink() int {
	port, _ := strconv.Atoi(os.Getenv("CHILD_PORT"))
	n, _ := strconv.Atoi(os.Getenv("CHILD_N"))
	sys, _ := startMember(port, os.Getenv("CHILD_ADVERTISED"))
	done := make(chan struct{})
	count := 0
	tally := func() {
		if count++; count == n {
			close(done)
		}
	}
	if os.Getenv("CHILD_MODE") == "endpoint" {
		if _, err := endpoint.Start(sys, link.DefaultConfig(uint64(time.Now().UnixNano())), func(string, []byte) { tally() }); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	} else if _, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*anypb.Any); ok {
			tally()
		}
	}), "sink"); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	<-done
	fmt.Println("done")
	return 0
}

// benchSender sends CHILD_N messages when told "go" on stdin, and stays
// up (its connection with it) until stdin closes.
func benchSender() int {
	port, _ := strconv.Atoi(os.Getenv("CHILD_PORT"))
	n, _ := strconv.Atoi(os.Getenv("CHILD_N"))
	to := os.Getenv("CHILD_PEER")
	sys, _ := startMember(port, os.Getenv("CHILD_ADVERTISED"))
	var ep *endpoint.Endpoint
	if os.Getenv("CHILD_MODE") == "endpoint" {
		var err error
		if ep, err = endpoint.Start(sys, link.DefaultConfig(uint64(time.Now().UnixNano())), func(string, []byte) {}); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	}
	fmt.Println("ready")
	stdin := bufio.NewScanner(os.Stdin)
	if !stdin.Scan() {
		return 1
	}
	sink := actor.NewPID(to, "sink")
	for range n {
		if ep != nil {
			if err := ep.SendWait(context.Background(), to, payload); err != nil {
				fmt.Println("error:", err)
				return 1
			}
		} else {
			sys.Root.Send(sink, &anypb.Any{TypeUrl: "bench", Value: payload})
		}
	}
	fmt.Println("sent")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
