package boxed_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/internal/boxed"
)

type pair struct {
	Name string
	Data []byte
}

func TestBoxHoldsTheValue(t *testing.T) {
	b := boxed.New[pair]()
	block := []pair{{"a", []byte{1}}, {"b", []byte{2, 3}}}
	vs := []any{b.Box(&block[0]), b.Box(&block[1])}
	block = nil
	runtime.GC() // the interfaces alone keep the block alive
	for i, want := range []pair{{"a", []byte{1}}, {"b", []byte{2, 3}}} {
		got, ok := vs[i].(pair)
		require.True(t, ok)
		require.Equal(t, want, got)
		require.Equal(t, any(want), vs[i], "compares as a boxed copy does")
	}
	_, ok := vs[0].(*pair)
	require.False(t, ok)
}

func TestBoxDoesNotAllocate(t *testing.T) {
	b := boxed.New[pair]()
	block := make([]pair, 64)
	var sink any
	n := testing.AllocsPerRun(100, func() {
		for i := range block {
			sink = b.Box(&block[i])
		}
	})
	_ = sink
	require.Zero(t, n)
}

func TestNewRefusesWordSizedTypes(t *testing.T) {
	require.Panics(t, func() { boxed.New[*pair]() })
	require.Panics(t, func() { boxed.New[int]() })
}
