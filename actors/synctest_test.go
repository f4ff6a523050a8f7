package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/snapshot"
)

// The glue runs in a testing/synctest bubble on the machine's clock:
// time moves only when every goroutine of the system waits, so a timeout
// is met exactly, however slow the machine.
func TestSnapshotTimesOutInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys, pids, _ := probes(t, 2, WithTimeout(time.Minute))
		release := block(t, sys, pids[0])
		start := time.Now()
		_, err := sys.Snapshot(context.Background())
		require.ErrorIs(t, err, snapshot.ErrTimeout)
		assert.Contains(t, err.Error(), "not recorded: p0")
		assert.Equal(t, time.Minute, time.Since(start), "aborted at its deadline, to the nanosecond")
		release()
		require.NoError(t, sys.Shutdown(context.Background()))
	})
}

// Periodic snapshots in a bubble: one a second, so the fifth completes
// five seconds after the start, to the nanosecond.
func TestPeriodicSnapshotsInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		sys, _, _ := probes(t, 3, WithInterval(time.Second))
		completed := make(chan time.Time, 10)
		sub := sys.ActorSystem().EventStream.Subscribe(func(evt interface{}) {
			if _, ok := evt.(*SnapshotCompleted); ok {
				completed <- time.Now()
			}
		})
		for i := range 5 {
			assert.Equal(t, time.Duration(i+1)*time.Second, (<-completed).Sub(start), "snapshot %d", i+1)
		}
		sys.ActorSystem().EventStream.Unsubscribe(sub)
		require.NoError(t, sys.Shutdown(context.Background()))
	})
}
