package actors

import (
	"context"
	"sync/atomic"
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

// Periodic snapshots in a bubble: one a second, so five and a half
// seconds hold exactly five.
func TestPeriodicSnapshotsInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys, _, _ := probes(t, 3, WithInterval(time.Second))
		var completed atomic.Int64
		sub := sys.ActorSystem().EventStream.Subscribe(func(evt interface{}) {
			if _, ok := evt.(*SnapshotCompleted); ok {
				completed.Add(1)
			}
		})
		time.Sleep(5*time.Second + 500*time.Millisecond) // bubble time: advances when all wait
		synctest.Wait()
		assert.EqualValues(t, 5, completed.Load())
		sys.ActorSystem().EventStream.Unsubscribe(sub)
		require.NoError(t, sys.Shutdown(context.Background()))
	})
}
