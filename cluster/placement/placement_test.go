package placement_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/cluster/placement"
)

func members(n int) []string {
	var ms []string
	for i := range n {
		ms = append(ms, fmt.Sprintf("127.0.0.1:%d", 9000+i))
	}
	return ms
}

// The same name goes to the same member whatever the order of the list,
// and the answer is fixed across processes (a known value).
func TestOwnerIsDeterministic(t *testing.T) {
	ms := members(5)
	rev := slices.Clone(ms)
	slices.Reverse(rev)
	for i := range 1000 {
		name := fmt.Sprintf("acct-%04d", i)
		assert.Equal(t, placement.Owner(name, ms), placement.Owner(name, rev))
	}
	assert.Equal(t, "127.0.0.1:9003", placement.Owner("acct-0000", ms), "fixed across processes and Go versions")
	assert.Empty(t, placement.Owner("a", nil))
	assert.Equal(t, "only", placement.Owner("a", []string{"only"}))
}

// Names spread evenly, and a member leaving moves only the names it held;
// one joining takes about 1/n of them, from every member.
func TestOwnerBalancesAndMovesLittle(t *testing.T) {
	const names = 30000
	ms := members(5)
	count := map[string]int{}
	before := make([]string, names)
	for i := range names {
		before[i] = placement.Owner(fmt.Sprintf("acct-%05d", i), ms)
		count[before[i]]++
	}
	for _, m := range ms {
		assert.InDelta(t, names/5, count[m], names/5*0.05, "member %s", m)
	}

	gone := ms[2]
	left := slices.Delete(slices.Clone(ms), 2, 3)
	for i := range names {
		after := placement.Owner(fmt.Sprintf("acct-%05d", i), left)
		if before[i] != gone {
			require.Equal(t, before[i], after, "a name moved off a member that stayed")
		}
	}

	joined := append(slices.Clone(ms), "127.0.0.1:9100")
	moved := 0
	for i := range names {
		after := placement.Owner(fmt.Sprintf("acct-%05d", i), joined)
		if after != before[i] {
			require.Equal(t, "127.0.0.1:9100", after, "a name moved between old members")
			moved++
		}
	}
	assert.InDelta(t, names/6, moved, names/6*0.05)
}
