package actors

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/internal/testenv"
)

// flaky is a probe whose state cannot be encoded while failing is set.
type flaky struct {
	probe
	failing *atomic.Bool
}

func (f *flaky) MarshalState() ([]byte, error) {
	if f.failing.Load() {
		return nil, errors.New("flaky: not now")
	}
	return msgpack.Marshal(&f.probe)
}

func (f *flaky) UnmarshalState(b []byte) error { return msgpack.Unmarshal(b, &f.probe) }

// A participant whose state cannot be encoded fails that snapshot, with
// a reason that names it, and only that one: the next completes. In the
// epoch mode its counters still reach the coordinator, so that its next
// record follows the failed one; the coordinator does not lose track of
// it and ask every participant for all their counters again.
func TestStateThatCannotBeEncodedFailsItsSnapshotOnly(t *testing.T) {
	forModes(t, func(t *testing.T, mode Option) {
		var logs testenv.SyncBuffer
		sys, pids, events := probes(t, 2, mode, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		defer shutdown(t, sys)
		var failing atomic.Bool
		require.NoError(t, sys.RegisterKind("flaky", func() actor.Actor { return &flaky{probe: probe{events: events}, failing: &failing} }))
		f, err := sys.Spawn("flaky", "f")
		require.NoError(t, err)
		say := func(text string) {
			t.Helper()
			sys.Root().Send(f, &sendTo{to: pids[0], msg: &note{Text: text}})
			require.Equal(t, text, waitFor(t, events))
		}
		say("before")
		g, err := sys.Snapshot(context.Background())
		require.NoError(t, err)
		require.NoError(t, g.Verify())

		failing.Store(true)
		say("while failing") // f's next record lists a change
		_, err = sys.Snapshot(context.Background())
		require.ErrorIs(t, err, ErrCapture)
		assert.Contains(t, err.Error(), "state of f")

		failing.Store(false)
		say("after")
		for range 2 {
			g, err = sys.Snapshot(context.Background())
			require.NoError(t, err)
			require.NoError(t, g.Verify())
			_, ok := g.Participant("f")
			assert.True(t, ok)
		}
		assert.NotContains(t, logs.String(), "lost a record", "one participant's failure made every participant list all its counters again")
	})
}
