package link

import (
	"errors"
	"fmt"
	"time"
)

// Config configures a Sender.
type Config struct {
	// Session is the sender's session, above 0, larger at each start of
	// its member (its start time in nanoseconds, say).
	Session uint64
	// Window and WindowBytes bound the messages, and their bytes, sent
	// and not yet acknowledged: Send refuses more with ErrFull. A message
	// larger than WindowBytes alone is refused with ErrTooLarge.
	Window      int
	WindowBytes int
	// Batch and BatchBytes bound a frame (a frame holds at least one
	// message, however large).
	Batch      int
	BatchBytes int
	// Resend is how long the oldest message not acknowledged may go
	// without progress before the Sender sends it, and all after it,
	// again.
	Resend time.Duration
}

// DefaultConfig returns a configuration for session: 4,096 messages or
// 8 MiB in flight, frames of 256 messages or 1 MiB (well under gRPC's
// 4 MiB), resent after a second without progress.
func DefaultConfig(session uint64) Config {
	return Config{Session: session, Window: 4096, WindowBytes: 8 << 20, Batch: 256, BatchBytes: 1 << 20, Resend: time.Second}
}

// Frame is what a Sender transmits: consecutive messages from First.
type Frame struct {
	Session  uint64
	First    uint64
	Messages [][]byte
}

// Ack is what a Receiver answers: every message of Session through
// Through was delivered.
type Ack struct {
	Session uint64
	Through uint64
}

var (
	// ErrFull is returned by Send when the window is full: send again
	// once acknowledgements come.
	ErrFull = errors.New("link: window full")
	// ErrTooLarge is returned by Send for a message larger than the
	// window's bytes.
	ErrTooLarge = errors.New("link: message larger than the window")
	// ErrAck is returned by Sender.Ack for an acknowledgement of messages
	// never sent: the peer is broken.
	ErrAck = errors.New("link: acknowledgement of messages never sent")
)

// Sender is the sending end of a link.
type Sender struct {
	cfg      Config
	acked    uint64 // every message through acked is acknowledged
	next     uint64 // the next message to transmit
	sent     uint64 // the highest message ever transmitted
	queue    ring   // messages acked+1 .. acked+queue.n, not acknowledged
	bytes    int    // in queue
	waiting  int    // bytes in queue from next on: not transmitted
	progress time.Time
	backoff  time.Duration // the wait before the next resend: Resend, doubled at each without progress
	resends  int
}

// maxBackoff bounds the doubling of the resend interval, in Resends.
const maxBackoff = 64

// NewSender returns the sending end of a link.
func NewSender(cfg Config) (*Sender, error) {
	switch {
	case cfg.Session == 0:
		return nil, errors.New("link: session 0")
	case cfg.Window < 1 || cfg.WindowBytes < 1 || cfg.Batch < 1 || cfg.BatchBytes < 1:
		return nil, fmt.Errorf("link: window %d/%d bytes and batch %d/%d bytes must be positive", cfg.Window, cfg.WindowBytes, cfg.Batch, cfg.BatchBytes)
	case cfg.Resend <= 0:
		return nil, fmt.Errorf("link: resend interval %v must be positive", cfg.Resend)
	}
	return &Sender{cfg: cfg, next: 1, backoff: cfg.Resend}, nil
}

// Send queues a message. It returns ErrFull when the window is full (the
// message is not queued) and ErrTooLarge for a message no window holds.
func (s *Sender) Send(msg []byte) error {
	switch {
	case len(msg) > s.cfg.WindowBytes:
		return fmt.Errorf("%w: %d bytes, window %d", ErrTooLarge, len(msg), s.cfg.WindowBytes)
	case s.queue.n >= s.cfg.Window || s.bytes+len(msg) > s.cfg.WindowBytes:
		return ErrFull
	}
	s.queue.push(msg)
	s.bytes += len(msg)
	s.waiting += len(msg)
	return nil
}

// Due reports whether the caller should transmit (Ready) now: messages
// wait and either none is in flight, or a whole frame's worth waits
// (Config.Batch messages or Config.BatchBytes bytes). A caller that
// otherwise transmits on acknowledgements sends each message at once
// when the link is idle, as Nagle's algorithm does, full frames at once
// under load, and what is left with the next acknowledgement: the
// window, not the acknowledgements' pace, bounds what is in flight.
func (s *Sender) Due() bool {
	n := int(s.acked + uint64(s.queue.n) + 1 - s.next) // waiting
	return n > 0 && (s.next == s.acked+1 || n >= s.cfg.Batch || s.waiting >= s.cfg.BatchBytes)
}

// Ready returns the frames to transmit now, in order: the messages not
// transmitted yet, or transmitted again after a Resend or a Reset.
func (s *Sender) Ready(now time.Time) []Frame {
	last := s.acked + uint64(s.queue.n)
	if s.next > last {
		return nil
	}
	if s.next == s.acked+1 {
		s.progress = now // the oldest goes out now
	}
	var frames []Frame
	for s.next <= last {
		f := Frame{Session: s.cfg.Session, First: s.next}
		size := 0
		for s.next <= last && len(f.Messages) < s.cfg.Batch {
			m := s.queue.at(int(s.next - s.acked - 1))
			if len(f.Messages) > 0 && size+len(m) > s.cfg.BatchBytes {
				break
			}
			f.Messages = append(f.Messages, m)
			size += len(m)
			s.waiting -= len(m)
			s.next++
		}
		s.sent = max(s.sent, s.next-1)
		frames = append(frames, f)
	}
	return frames
}

// Ack takes the peer's acknowledgement: the messages it covers leave the
// window. One of another session is ignored.
func (s *Sender) Ack(a Ack, now time.Time) error {
	if a.Session != s.cfg.Session || a.Through <= s.acked {
		return nil
	}
	if a.Through > s.sent {
		return fmt.Errorf("%w: through %d, sent through %d", ErrAck, a.Through, s.sent)
	}
	n := int(a.Through - s.acked)
	for i := range n {
		m := len(s.queue.at(i))
		s.bytes -= m
		if s.acked+uint64(i)+1 >= s.next {
			s.waiting -= m // sent before a Reset, and delivered
		}
	}
	s.queue.drop(n)
	s.acked = a.Through
	s.next = max(s.next, s.acked+1)
	s.progress = now
	s.backoff = s.cfg.Resend
	return nil
}

// Tick advances the Sender's time: if the oldest message not acknowledged
// went Resend without progress, everything from it is transmitted again
// (Ready). Each resend without progress since doubles the wait before the
// next, up to 64 times Resend, so that a slow peer is not flooded with
// copies of what it has yet to read.
func (s *Sender) Tick(now time.Time) {
	if s.next > s.acked+1 && now.Sub(s.progress) >= s.backoff {
		s.Reset(now)
		s.backoff = min(2*s.backoff, maxBackoff*s.cfg.Resend)
	}
}

// Reset says the connection was made again, or the peer asked for a
// resend: everything not acknowledged is transmitted again (Ready).
func (s *Sender) Reset(now time.Time) {
	if s.next > s.acked+1 {
		s.resends++
	}
	s.next = s.acked + 1
	s.waiting = s.bytes
	s.progress = now
}

// InFlight returns the messages transmitted and not yet acknowledged.
func (s *Sender) InFlight() int { return int(s.next - s.acked - 1) }

// Unacked returns the messages and bytes sent or queued and not yet
// acknowledged.
func (s *Sender) Unacked() (msgs, bytes int) { return s.queue.n, s.bytes }

// Resends returns how many times the Sender went back to resend.
func (s *Sender) Resends() int { return s.resends }

// Receiver is the receiving end of a link.
type Receiver struct {
	session   uint64
	delivered uint64
}

// Receive takes a frame and returns the messages to deliver, in order,
// and the acknowledgement to send back. A frame of a newer session starts
// the count again; one of an older session delivers nothing; duplicates
// and messages after a gap are dropped (the Sender sends them again).
func (r *Receiver) Receive(f Frame) (deliver [][]byte, ack Ack) {
	switch {
	case f.Session > r.session:
		r.session, r.delivered = f.Session, 0
	case f.Session < r.session:
		return nil, Ack{Session: r.session, Through: r.delivered}
	}
	// The messages to deliver are one run of the frame's: from the first
	// not delivered yet, if the frame reaches it without a gap.
	if f.First <= r.delivered+1 && f.First+uint64(len(f.Messages)) > r.delivered+1 {
		deliver = f.Messages[r.delivered+1-f.First:]
		r.delivered += uint64(len(deliver))
	}
	return deliver, Ack{Session: r.session, Through: r.delivered}
}

// Delivered returns the session and the last message delivered.
func (r *Receiver) Delivered() (session, through uint64) { return r.session, r.delivered }

// ring is a FIFO of messages in a circular buffer, grown by doubling.
type ring struct {
	buf  [][]byte // len a power of two, or 0
	head int
	n    int
}

func (q *ring) push(m []byte) {
	if q.n == len(q.buf) {
		grown := make([][]byte, max(16, 2*len(q.buf)))
		for i := range q.n {
			grown[i] = q.at(i)
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = m
	q.n++
}

func (q *ring) at(i int) []byte { return q.buf[(q.head+i)&(len(q.buf)-1)] }

// drop removes the first n messages.
func (q *ring) drop(n int) {
	for i := range n {
		q.buf[(q.head+i)&(len(q.buf)-1)] = nil
	}
	q.head = (q.head + n) & (len(q.buf) - 1)
	q.n -= n
}
