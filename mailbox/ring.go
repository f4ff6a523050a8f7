package mailbox

// ring is a growable FIFO ring buffer. Its capacity is zero or a power of two
// so that wrapping is a mask. It is not safe for concurrent use: every ring in
// this package is owned by one goroutine at a time or guarded by a mutex.
type ring[T any] struct {
	buf  []T
	head int // index of the oldest element
	n    int // number of elements
	high int // most elements held since the ring was last empty
}

// minRing is the first capacity of a ring: big enough that a sender with a
// few messages in flight never grows it, small enough to cost little for
// many senders.
const minRing = 8

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
	r.high = max(r.high, r.n)
}

// pop removes and returns the oldest element; the ring must not be empty.
func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero // let the element be collected
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

// grow doubles the buffer; it is called only when the ring is full, so the
// elements are buf[head:] followed by buf[:head].
func (r *ring[T]) grow() {
	size := 2 * len(r.buf)
	if size == 0 {
		size = minRing
	}
	buf := make([]T, size)
	k := copy(buf, r.buf[r.head:])
	copy(buf[k:], r.buf[:r.head])
	r.buf, r.head = buf, 0
}

// emptied is called when the ring has become empty. It drops a buffer that
// has grown past limit if the ring used less than a quarter of it since it
// was last empty: a past burst does not pin its memory for the mailbox's
// lifetime, and a steady flood does not reallocate at every turn.
func (r *ring[T]) emptied(limit int) {
	if len(r.buf) > limit && r.high < len(r.buf)/4 {
		r.buf, r.head = nil, 0
	}
	r.high = 0
}
