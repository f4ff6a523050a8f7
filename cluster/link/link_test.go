package link_test

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/cluster/link"
)

var seeds = flag.Int("link-seeds", 2000, "seeded randomized runs of TestRandomizedLink")

// wire is the transport between a Sender and a Receiver, as Proto.Actor
// remote behaves: FIFO both ways while a connection lives; a break loses
// everything in flight both ways. It can also play a worse network: an
// old frame or ack delivered again later.
type wire struct {
	frames []link.Frame
	acks   []link.Ack
	old    []link.Frame // frames seen, for stale redeliveries
}

func msg(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// runLink drives one seeded run: the application sends numbered messages
// as fast as the window lets it, the wire breaks at random, delays at
// random and redelivers stale frames; at the end the wire heals. Every
// message must be delivered once, in order, and the sender never holds
// more than its window. Half the seeds transmit at every step; the
// others as the endpoint does: on a send when Due, and on every
// acknowledgement and tick.
func runLink(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	cfg := link.Config{Session: 1 + rng.Uint64N(1000), Window: 1 + rng.IntN(64), WindowBytes: 8 * (1 + rng.IntN(512)),
		Batch: 1 + rng.IntN(16), BatchBytes: 8 * (1 + rng.IntN(32)), Resend: time.Duration(1+rng.IntN(20)) * time.Millisecond}
	if cfg.WindowBytes < 8 {
		cfg.WindowBytes = 8
	}
	s, err := link.NewSender(cfg)
	require.NoError(t, err)
	var r link.Receiver
	var w wire
	now := time.Unix(0, 0)
	total := uint64(200 + rng.IntN(2000))
	var queued, delivered uint64
	breakP, staleP := rng.Float64()*0.05, rng.Float64()*0.05
	due := rng.IntN(2) == 0
	for step := 0; delivered < total; step++ {
		require.Less(t, step, 1_000_000, "seed %d: no progress: delivered %d of %d", seed, delivered, total)
		healed := step > 20_000 // the network recovers: the run must finish
		now = now.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
		for queued < total && rng.IntN(3) > 0 {
			if err := s.Send(msg(queued + 1)); err != nil {
				require.ErrorIs(t, err, link.ErrFull, "seed %d", seed)
				break
			}
			queued++
			if due && s.Due() {
				w.frames = append(w.frames, s.Ready(now)...)
				require.False(t, s.Due(), "seed %d: due after Ready", seed)
			}
		}
		msgs, bytes := s.Unacked()
		require.LessOrEqual(t, msgs, cfg.Window, "seed %d", seed)
		require.LessOrEqual(t, bytes, cfg.WindowBytes, "seed %d", seed)
		if !due {
			w.frames = append(w.frames, s.Ready(now)...)
		}
		switch {
		case !healed && rng.Float64() < breakP:
			w.frames, w.acks = nil, nil
			if rng.IntN(2) == 0 {
				s.Reset(now) // the caller noticed the reconnection
			}
		case !healed && rng.Float64() < staleP && len(w.old) > 0:
			w.frames = append(w.frames, w.old[rng.IntN(len(w.old))])
		}
		for n := rng.IntN(4); n > 0 && len(w.frames) > 0; n-- {
			f := w.frames[0]
			w.frames = w.frames[1:]
			w.old = append(w.old, f)
			if len(w.old) > 64 {
				w.old = w.old[1:]
			}
			got, ack := r.Receive(f)
			for _, m := range got {
				delivered++
				require.Equal(t, delivered, binary.BigEndian.Uint64(m), "seed %d: delivered out of order or twice", seed)
			}
			w.acks = append(w.acks, ack)
		}
		for n := rng.IntN(4); n > 0 && len(w.acks) > 0; n-- {
			require.NoError(t, s.Ack(w.acks[0], now), "seed %d", seed)
			w.acks = w.acks[1:]
			if due {
				w.frames = append(w.frames, s.Ready(now)...)
			}
		}
		s.Tick(now)
		if due {
			w.frames = append(w.frames, s.Ready(now)...)
		}
	}
	require.Equal(t, total, delivered)
}

func TestRandomizedLink(t *testing.T) {
	for seed := range uint64(*seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			runLink(t, seed)
		})
	}
}

// A sender that starts again (a new session) is heard from 1 again; the
// frames of its old session are dropped.
func TestNewSessionStartsAgain(t *testing.T) {
	now := time.Unix(0, 0)
	old, err := link.NewSender(link.DefaultConfig(1))
	require.NoError(t, err)
	require.NoError(t, old.Send([]byte("a")))
	require.NoError(t, old.Send([]byte("b")))
	var r link.Receiver
	oldFrames := old.Ready(now)
	got, ack := r.Receive(oldFrames[0])
	require.Len(t, got, 2)
	require.Equal(t, link.Ack{Session: 1, Through: 2}, ack)

	restarted, err := link.NewSender(link.DefaultConfig(2))
	require.NoError(t, err)
	require.NoError(t, restarted.Send([]byte("c")))
	got, ack = r.Receive(restarted.Ready(now)[0])
	require.Equal(t, [][]byte{[]byte("c")}, got)
	require.Equal(t, link.Ack{Session: 2, Through: 1}, ack)
	got, ack = r.Receive(oldFrames[0])
	require.Empty(t, got, "a stale session's frame")
	require.Equal(t, link.Ack{Session: 2, Through: 1}, ack)
	require.NoError(t, old.Ack(ack, now), "another session's ack is ignored")
	msgs, _ := old.Unacked()
	require.Equal(t, 2, msgs)
}

// The window pushes back, by messages and by bytes; a message no window
// holds is refused outright; an ack of what was never sent is an error.
func TestWindowAndErrors(t *testing.T) {
	now := time.Unix(0, 0)
	s, err := link.NewSender(link.Config{Session: 1, Window: 2, WindowBytes: 10, Batch: 8, BatchBytes: 100, Resend: time.Second})
	require.NoError(t, err)
	require.NoError(t, s.Send(make([]byte, 4)))
	require.NoError(t, s.Send(make([]byte, 4)))
	require.ErrorIs(t, s.Send(nil), link.ErrFull, "two messages")
	require.NoError(t, s.Ack(link.Ack{Session: 1, Through: 0}, now))
	require.Len(t, s.Ready(now), 1)
	require.NoError(t, s.Ack(link.Ack{Session: 1, Through: 1}, now))
	require.ErrorIs(t, s.Send(make([]byte, 7)), link.ErrFull, "4+7 bytes")
	require.NoError(t, s.Send(make([]byte, 6)))
	require.ErrorIs(t, s.Send(make([]byte, 11)), link.ErrTooLarge)
	require.ErrorIs(t, s.Ack(link.Ack{Session: 1, Through: 3}, now), link.ErrAck, "3 was queued, never sent")
	require.Len(t, s.Ready(now), 1, "the third goes")

	// Resend after a second without progress, from the first not acked;
	// the next resend waits twice as long.
	s.Tick(now.Add(999 * time.Millisecond))
	require.Empty(t, s.Ready(now))
	s.Tick(now.Add(time.Second))
	fs := s.Ready(now.Add(time.Second))
	require.Len(t, fs, 1)
	require.Equal(t, uint64(2), fs[0].First, "go back to the first not acknowledged")
	require.Equal(t, 1, s.Resends())
	s.Tick(now.Add(2999 * time.Millisecond))
	require.Empty(t, s.Ready(now), "backing off: 2 s now")
	s.Tick(now.Add(3 * time.Second))
	require.Len(t, s.Ready(now), 1)
	require.Equal(t, 2, s.Resends())

	for _, bad := range []link.Config{{}, {Session: 1}, {Session: 1, Window: 1, WindowBytes: 1, Batch: 1, BatchBytes: 1}} {
		_, err := link.NewSender(bad)
		require.Error(t, err)
	}
}

// Whatever frames arrive, a Receiver delivers consecutive messages once.
func FuzzReceiver(f *testing.F) {
	f.Add([]byte{1, 1, 3, 1, 2, 1, 1, 2, 5})
	f.Fuzz(func(t *testing.T, script []byte) {
		var r link.Receiver
		var session uint64
		next := uint64(1)
		for len(script) >= 3 {
			f := link.Frame{Session: uint64(script[0] % 4), First: uint64(script[1] % 16)}
			for i := range int(script[2] % 8) {
				f.Messages = append(f.Messages, msg(f.First+uint64(i)))
			}
			script = script[3:]
			if f.Session > session {
				session, next = f.Session, 1
			}
			got, ack := r.Receive(f)
			for _, m := range got {
				require.Equal(t, next, binary.BigEndian.Uint64(m))
				next++
			}
			require.Equal(t, session, ack.Session)
			require.Equal(t, next-1, ack.Through)
		}
	})
}

// Due says when to transmit: at once on an idle link; with messages in
// flight, only once a frame's worth waits, by messages or by bytes; never
// with nothing waiting. After a Reset everything not acknowledged waits
// again, and an acknowledgement of it stops its waiting.
func TestDue(t *testing.T) {
	now := time.Unix(0, 0)
	s, err := link.NewSender(link.Config{Session: 1, Window: 64, WindowBytes: 1 << 10, Batch: 3, BatchBytes: 10, Resend: time.Second})
	require.NoError(t, err)
	require.False(t, s.Due(), "nothing waits")
	require.NoError(t, s.Send([]byte("a")))
	require.True(t, s.Due(), "idle link: at once")
	require.Len(t, s.Ready(now), 1)
	require.False(t, s.Due())

	require.NoError(t, s.Send([]byte("b")))
	require.NoError(t, s.Send([]byte("c")))
	require.False(t, s.Due(), "one in flight, two of a frame of three wait")
	require.NoError(t, s.Send([]byte("d")))
	require.True(t, s.Due(), "a frame's worth of messages waits")
	fs := s.Ready(now)
	require.Len(t, fs, 1)
	require.Len(t, fs[0].Messages, 3)
	require.Equal(t, 4, s.InFlight(), "frames pipeline: two in flight")

	require.NoError(t, s.Send(make([]byte, 9)))
	require.False(t, s.Due(), "9 of 10 bytes")
	require.NoError(t, s.Send(make([]byte, 1)))
	require.True(t, s.Due(), "a frame's worth of bytes waits")
	require.Len(t, s.Ready(now), 1)

	require.NoError(t, s.Ack(link.Ack{Session: 1, Through: 2}, now))
	require.False(t, s.Due(), "all transmitted")
	s.Reset(now)
	require.True(t, s.Due(), "after a reset the four not acknowledged wait, 12 bytes")
	require.NoError(t, s.Ack(link.Ack{Session: 1, Through: 6}, now))
	require.False(t, s.Due(), "acknowledged while waiting to go again")
	require.NoError(t, s.Send([]byte("e")))
	require.True(t, s.Due(), "idle again")
}
