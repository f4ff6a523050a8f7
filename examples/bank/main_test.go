package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/internal/testenv"
)

func TestMain(m *testing.M) {
	// Proto.Actor's dead-letter throttle sleeps for a second after the
	// first dead letter, which a shutdown mid-run makes.
	goleak.VerifyTestMain(m, testenv.ProtoActorTimers)
}

// TestRunAndRestore runs a bank, then continues it from its latest
// snapshot: every snapshot of both runs holds all the money, and the
// second run is refused as a new bank but accepted as a restore.
func TestRunAndRestore(t *testing.T) {
	ctx := context.Background()
	c := config{store: t.TempDir(), accounts: 30, interval: 20 * time.Millisecond, duration: 300 * time.Millisecond}
	var out bytes.Buffer
	require.NoError(t, run(ctx, &out, c))
	assert.Contains(t, out.String(), "30 accounts")
	assert.Contains(t, out.String(), "$30000 in all")

	out.Reset()
	err := run(ctx, &out, c)
	require.Error(t, err, "a new bank into a store that holds one")
	assert.Contains(t, err.Error(), `system "example-bank"`)

	out.Reset()
	c.restore = true
	require.NoError(t, run(ctx, &out, c))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 2, out.String())
	assert.Contains(t, lines[0], "restored 30 accounts from snapshot")
	assert.Contains(t, lines[1], "$30000 in all")
}
