package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/snapshot"
)

func TestMain(m *testing.M) {
	// Proto.Actor's dead-letter throttle sleeps for a second after the
	// first dead letter: the answers that come after the futures timed
	// out are dead letters.
	goleak.VerifyTestMain(m, testenv.ProtoActorTimers)
}

// deadline bounds the run: generous, for loaded machines.
const deadline = time.Minute

// a and b block in Result on each other: the snapshot times out with a
// reason naming the cycle, request by request, Deadlocks returns the
// same cycle, and both give up once their futures time out.
func TestRequestCycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var out bytes.Buffer
	o, err := run(ctx, &out, config{Timeout: 100 * time.Millisecond, Patience: 2 * time.Second})
	require.NoError(t, err, out.String())
	t.Log(out.String())

	be := o.Blocked
	require.NotNil(t, be)
	assert.ErrorIs(t, be, snapshot.ErrTimeout)
	assert.Equal(t, snapshot.SnapshotID(1), be.Snapshot)
	const line = "snapshot 1 timed out: a waits in Result for b (request 1, *main.Question), b waits in Result for a (request 1, *main.Question)\n"
	assert.Contains(t, out.String(), line)

	for _, ds := range [][]snapshot.Deadlock{be.Deadlocks, o.Deadlocks} {
		require.Len(t, ds, 1)
		d := ds[0]
		assert.Equal(t, []snapshot.ProcessID{"a", "b"}, d.Participants)
		assert.Equal(t, 2, d.Cycle)
		require.Len(t, d.Edges, 2)
		for i, e := range d.Edges {
			assert.Equal(t, d.Edges[1-i].From, e.To)
			assert.Equal(t, uint64(1), e.Request)
			assert.Equal(t, "*main.Question", e.Type)
		}
	}
	for _, e := range o.Deadlocks[0].Edges {
		assert.Positive(t, e.Waited, "Deadlocks says how long each has waited")
	}
	assert.Contains(t, out.String(), "deadlock: a waits for b (request 1, *main.Question, ")
	assert.Contains(t, out.String(), "a gave up waiting for b: future: timeout\n")
	assert.Contains(t, out.String(), "b gave up waiting for a: future: timeout\n")
}

func TestRunRefuses(t *testing.T) {
	for _, c := range []config{
		{Timeout: 0, Patience: time.Second},
		{Timeout: time.Second, Patience: 4 * time.Second},
	} {
		_, err := run(context.Background(), &bytes.Buffer{}, c)
		require.ErrorContains(t, err, "patience of at least 5 timeouts")
	}
}

// The state and the message that crosses between participants come back
// from a snapshot whole.
func TestTypesRoundTrip(t *testing.T) {
	for _, v := range []any{&Question{From: "a"}, &Asker{Answers: 2}} {
		require.NoError(t, actors.RoundTrip(v))
	}
}

// A snapshot that cannot complete because a and b wait for each other
// in Result says so, and Deadlocks says the same.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var out bytes.Buffer
	o, err := run(ctx, &out, config{Timeout: 100 * time.Millisecond, Patience: 2 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(o.Blocked)
	fmt.Println(errors.Is(o.Blocked, snapshot.ErrTimeout))
	for _, d := range o.Deadlocks {
		fmt.Println(d.Participants, "in a cycle of", d.Cycle)
	}
	// Output:
	// snapshot 1 timed out: a waits in Result for b (request 1, *main.Question), b waits in Result for a (request 1, *main.Question)
	// true
	// [a b] in a cycle of 2
}
