package placement

import "hash/fnv"

// Owner returns the member that hosts participant name among members, or
// "" when there is none. The answer depends only on name and the set of
// members, not their order.
func Owner(name string, members []string) string {
	var best string
	var bestWeight uint64
	for _, m := range members {
		if w := weight(name, m); best == "" || w > bestWeight || (w == bestWeight && m < best) {
			best, bestWeight = m, w
		}
	}
	return best
}

// weight is the pseudo-random weight of member m for name: FNV-1a of
// both, mixed (SplitMix64's finalizer) so that similar names spread. It is
// the same in every process and every Go version: members compute it
// apart.
func weight(name, m string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(m))
	h.Write([]byte{0})
	h.Write([]byte(name))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
