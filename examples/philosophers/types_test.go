package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Every message and state type of the dinner comes back from a snapshot
// whole.
func TestTypesRoundTrip(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, v := range []any{
		&Take{By: "p1"},
		&Granted{Fork: "f2"},
		&Put{By: "p3"},
		&Philosopher{Seat: 1, First: "f1", Second: "f2", Think: time.Millisecond, Reach: 2, Eat: 3, Doing: hungry, Holds: 1, Asked: at, Meals: 4},
		&Fork{Holder: "p1", Granted: at, Queue: []Asked{{By: "p0", At: at}}},
	} {
		require.NoError(t, actors.RoundTrip(v))
	}
}

// What philosophers and forks declare they wait for.
func TestWaits(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Second)
	wait := func(to, typ string, since time.Time) snapshot.Waits {
		return snapshot.Waits{Edges: []snapshot.Wait{{To: snapshot.ProcessID(to), Type: typ, Since: since}}}
	}
	for _, tc := range []struct {
		name string
		w    actors.Waiter
		want snapshot.Waits
	}{
		{"thinking", &Philosopher{First: "f1", Second: "f2", Doing: thinking}, snapshot.Waits{Timer: true}},
		{"hungry", &Philosopher{First: "f1", Second: "f2", Doing: hungry, Asked: t0}, wait("f1", "fork", t0)},
		{"reaching", &Philosopher{First: "f1", Second: "f2", Doing: reaching, Holds: 1}, snapshot.Waits{Timer: true}},
		{"hungry with a fork", &Philosopher{First: "f1", Second: "f2", Doing: hungry, Holds: 1, Asked: t1}, wait("f2", "fork", t1)},
		{"eating", &Philosopher{First: "f1", Second: "f2", Doing: eating, Holds: 2}, snapshot.Waits{Timer: true}},
		{"fork on the table", &Fork{}, snapshot.Waits{}},
		{"fork held", &Fork{Holder: "p1", Granted: t0}, snapshot.Waits{}},
		{"fork asked for after it was granted", &Fork{Holder: "p1", Granted: t0, Queue: []Asked{{By: "p0", At: t1}}}, wait("p1", "release", t1)},
		{"fork granted to one who waited", &Fork{Holder: "p1", Granted: t1, Queue: []Asked{{By: "p0", At: t0}}}, wait("p1", "release", t1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.w.Waiting())
		})
	}
}
