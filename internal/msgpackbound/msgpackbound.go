// Package msgpackbound checks msgpack from another process before it is
// decoded: no array or map may claim more elements than the bytes left
// could hold, no string, binary or extension more bytes than are left,
// and nesting is at most MaxDepth deep.
//
// The decoder (github.com/vmihailenco/msgpack/v5, v5.4.1) makes a slice
// of the length an array claims before it reads one element: its own cap
// on that length is never applied (vmihailenco/msgpack#401), so five
// bytes claiming 2^32-1 elements make it allocate tens of gigabytes.
// Once Len accepts a value, every length in it is at most its size, so
// what decoding it allocates is proportional to its size.
package msgpackbound

import (
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// MaxDepth bounds the nesting of arrays and maps in a value, far beyond
// what the messages between members nest: the decoder recurses once per
// level.
const MaxDepth = 64

// ErrMalformed is returned (wrapped) by Len and Unmarshal for bytes that
// are not one msgpack value within the bounds: a value cut short, a
// length or a count beyond the bytes left, nesting deeper than MaxDepth,
// the unused code 0xc1, or (Unmarshal) bytes after the value.
var ErrMalformed = errors.New("msgpackbound: malformed msgpack")

// Len returns the size of the msgpack value b starts with, having
// checked that nothing in it claims more than b holds.
func Len(b []byte) (int, error) {
	var (
		open    [MaxDepth]uint64 // the elements still to read of each open array or map
		depth   int
		pending uint64 // of all open arrays and maps
		i       int
	)
	fail := func(format string, args ...any) (int, error) {
		return 0, fmt.Errorf("%w: at byte %d: %s", ErrMalformed, i, fmt.Sprintf(format, args...))
	}
	// length reads a big-endian length of k bytes at i.
	length := func(k int) (uint64, bool) {
		if len(b)-i < k {
			return 0, false
		}
		var n uint64
		for _, c := range b[i : i+k] {
			n = n<<8 | uint64(c)
		}
		i += k
		return n, true
	}
	for {
		if i >= len(b) {
			return fail("the value is cut short")
		}
		c := b[i]
		i++
		var (
			skip, count uint64 // bytes to skip; elements of an array or map (2 a map entry)
			ok          = true
		)
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
			// fixint, nil, false, true
		case c <= 0x8f:
			count = 2 * uint64(c&0x0f)
		case c <= 0x9f:
			count = uint64(c & 0x0f)
		case c <= 0xbf:
			skip = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin8, str8
			skip, ok = length(1)
		case c == 0xc5 || c == 0xda: // bin16, str16
			skip, ok = length(2)
		case c == 0xc6 || c == 0xdb: // bin32, str32
			skip, ok = length(4)
		case c == 0xc7 || c == 0xc8 || c == 0xc9: // ext8, ext16, ext32: the type follows the length
			skip, ok = length(1 << (c - 0xc7))
			skip++
		case c == 0xcc || c == 0xd0:
			skip = 1
		case c == 0xcd || c == 0xd1:
			skip = 2
		case c == 0xca || c == 0xce || c == 0xd2:
			skip = 4
		case c == 0xcb || c == 0xcf || c == 0xd3:
			skip = 8
		case c >= 0xd4 && c <= 0xd8: // fixext 1 to 16, and the type
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc || c == 0xdd: // array16, array32
			count, ok = length(2 << (c - 0xdc))
		case c == 0xde || c == 0xdf: // map16, map32
			count, ok = length(2 << (c - 0xde))
			count *= 2
		default:
			return fail("code 0x%02x is never used", c)
		}
		if !ok {
			return fail("the length of code 0x%02x is cut short", c)
		}
		left := uint64(len(b) - i)
		if skip > left {
			return fail("code 0x%02x claims %d bytes, %d are left", c, skip, left)
		}
		i += int(skip)
		left -= skip
		if depth > 0 {
			open[depth-1]--
			pending--
		}
		if count > 0 {
			if depth == MaxDepth {
				return fail("nested more than %d deep", MaxDepth)
			}
			// Every element takes a byte at least.
			if pending+count > left {
				return fail("code 0x%02x claims %d elements, %d bytes are left for them and %d others", c, count, left, pending)
			}
			open[depth] = count
			depth++
			pending += count
		}
		for depth > 0 && open[depth-1] == 0 {
			depth--
		}
		if depth == 0 {
			return i, nil
		}
	}
}

// Unmarshal decodes b, which must hold one msgpack value and nothing
// after it, into v as msgpack.Unmarshal does, once Len has checked it.
func Unmarshal(b []byte, v any) error {
	n, err := Len(b)
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("%w: %d bytes after the value", ErrMalformed, len(b)-n)
	}
	return msgpack.Unmarshal(b, v)
}
