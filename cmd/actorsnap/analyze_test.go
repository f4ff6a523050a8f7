package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Messages of the holders.
type (
	askPeer  struct{ Peer string } // ask Peer a question, with a Request
	question struct{ N int }
)

// holder asks its peer a question and holds the questions it is asked
// until its own is answered, which never happens: two holders that ask
// each other deadlock (as actors/deadlock_test.go's holder does).
type holder struct {
	Pending []string // questions held, by asker
}

func (h *holder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *askPeer:
		ctx.Request(actors.SystemOf(ctx).PID(m.Peer), &question{N: 1})
	case *question:
		h.Pending = append(h.Pending, ctx.Sender().Id)
	}
}

// unanswered is the invariant "questions answered": no participant has a
// request not answered.
func unanswered(g *snapshot.Global) error {
	n := 0
	for _, p := range g.Participants {
		if p.Waits == nil {
			continue
		}
		for _, w := range p.Waits.Edges {
			if w.Request != 0 {
				n++
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("%s not answered", count(n, "question"))
	}
	return nil
}

// deadlockStore builds a file store holding two snapshots of three
// holders, a, b and c: quiet, taken before any of them asks, and stuck,
// taken once a and b hold each other's question and c's question to a
// waits behind them. stuck breaks the invariant "questions answered";
// quiet breaks none.
func deadlockStore(t *testing.T) (dir string, quiet, stuck snapshot.SnapshotID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir = filepath.Join(t.TempDir(), "snaps")
	store, err := persistence.Open(ctx, dir)
	require.NoError(t, err)
	sys, err := actors.NewSystem(
		actors.WithStore(store),
		actors.WithSystemName("holders"),
		actors.WithMessage[*askPeer]("test.askpeer"),
		actors.WithMessage[*question]("test.question"),
		actors.WithKind("holder", func() actor.Actor { return &holder{} }),
		actors.WithInvariant("questions answered", unanswered),
	)
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			_ = sys.Shutdown(ctx)
		}
	}()
	for _, id := range []string{"a", "b", "c"} {
		_, err := sys.Spawn("holder", id)
		require.NoError(t, err)
	}
	g, err := sys.Snapshot(ctx)
	require.NoError(t, err)
	quiet = g.ID

	sys.Root().Send(sys.PID("a"), &askPeer{Peer: "b"})
	sys.Root().Send(sys.PID("b"), &askPeer{Peer: "a"})
	sys.Root().Send(sys.PID("c"), &askPeer{Peer: "a"})
	// A deadlock is stable: once a cut shows it, every later one does.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ds, err := sys.Deadlocks(ctx)
		require.NoError(t, err)
		if len(ds) == 1 && len(ds[0].Blocked) == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the holders' deadlock did not show: %v", ds)
		case <-tick.C:
		}
	}
	g, err = sys.Snapshot(ctx)
	require.NoError(t, err)
	require.Len(t, snapshot.Deadlocks(g), 1)
	stuck = g.ID
	stopped = true
	require.NoError(t, sys.Shutdown(ctx))

	// What the command reads back: the file store keeps waits and
	// violations from its format version 3.
	s, err := persistence.Open(ctx, dir)
	require.NoError(t, err)
	defer closeStore(s)
	g, err = s.Load(ctx, stuck)
	require.NoError(t, err)
	require.Len(t, g.Violations, 1, "the file store dropped the violations (it keeps them from format version 3)")
	require.Len(t, snapshot.Deadlocks(g), 1, "the file store dropped the waits (it keeps them from format version 3)")
	return dir, quiet, stuck
}

func TestAnalyze(t *testing.T) {
	store, quietID, stuckID := deadlockStore(t)
	quiet, stuck := fmt.Sprint(quietID), fmt.Sprint(stuckID)

	t.Run("deadlock", func(t *testing.T) {
		out, _, err := actorsnap(t, "analyze", stuck, "--store", store)
		require.NoError(t, err)
		t.Logf("actorsnap analyze %s:\n%s", stuck, out)
		for _, want := range []string{
			fmt.Sprintf("snapshot %s (epoch): 3 participants, taken ", stuck),
			"\nwait-for graph: 3 participants wait\n",
			"\ndeadlocks: 1\n  a, b wait for one another; blocked on them: c\n    a waits for b (request 1, *main.question, ",
			"\n    b waits for a (request 1, *main.question, ",
			"\nquiescence: not quiescent\n  3 requests not answered: a waits for b (request 1, *main.question, ",
			"\ninvariants: 1 violated\n  questions answered: 3 questions not answered\n",
		} {
			assert.Contains(t, out, want)
		}
		for _, row := range []string{`a\s+b\s+1`, `b\s+a\s+1`, `c\s+a\s+1`} {
			assert.Regexp(t, regexp.MustCompile(`(?m)^  `+row+`\s+\*main\.question\s+\d[\d.]*m?s$`), out)
		}
		_, deadlocks, _ := strings.Cut(out, "\ndeadlocks:")
		deadlocks, _, _ = strings.Cut(deadlocks, "\nquiescence:")
		assert.NotContains(t, deadlocks, "c waits for a", "c is blocked on the cycle, not in it")

		latest, _, err := actorsnap(t, "analyze", "latest", "--store", store)
		require.NoError(t, err)
		assert.Equal(t, out, latest)
	})

	t.Run("fail-on-deadlock", func(t *testing.T) {
		out, stderr, err := actorsnap(t, "analyze", stuck, "--fail-on-deadlock", "--store", store)
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "want exit 1, got %v", err)
		assert.Equal(t, 1, exit.ExitCode())
		assert.Equal(t, fmt.Sprintf("actorsnap: snapshot %s: 1 deadlock: a, b (blocked on them: c)\n", stuck), stderr)
		assert.Contains(t, out, "deadlocks: 1\n", "the report comes first")

		_, _, err = actorsnap(t, "analyze", quiet, "--fail-on-deadlock", "--store", store)
		assert.NoError(t, err)
	})

	t.Run("json", func(t *testing.T) {
		out, _, err := actorsnap(t, "analyze", stuck, "--format", "json", "--store", store)
		require.NoError(t, err)
		var doc struct {
			ID        uint64                         `json:"id"`
			Waits     []struct{ Participant string } `json:"waits"`
			Deadlocks []struct {
				Participants []string   `json:"participants"`
				Cycle        []jsonWait `json:"cycle"`
				OtherEdges   []jsonWait `json:"other_edges"`
				Blocked      []string   `json:"blocked"`
			} `json:"deadlocks"`
			Quiescence struct {
				Quiescent bool       `json:"quiescent"`
				Requests  []jsonWait `json:"requests"`
			} `json:"quiescence"`
			Violations []jsonViolation `json:"violations"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		assert.Equal(t, uint64(stuckID), doc.ID)
		assert.Len(t, doc.Waits, 3)
		require.Len(t, doc.Deadlocks, 1)
		d := doc.Deadlocks[0]
		assert.Equal(t, []string{"a", "b"}, d.Participants)
		assert.Equal(t, []string{"c"}, d.Blocked)
		assert.Empty(t, d.OtherEdges)
		require.Len(t, d.Cycle, 2)
		for i, want := range [][2]string{{"a", "b"}, {"b", "a"}} {
			e := d.Cycle[i]
			assert.Equal(t, want, [2]string{e.From, e.To})
			assert.Equal(t, uint64(1), e.Request)
			assert.Equal(t, "*main.question", e.Type)
			assert.Positive(t, e.WaitedNS)
			assert.False(t, e.Since.IsZero())
		}
		assert.False(t, doc.Quiescence.Quiescent)
		assert.Len(t, doc.Quiescence.Requests, 3)
		assert.Equal(t, []jsonViolation{{Invariant: "questions answered", Error: "3 questions not answered"}}, doc.Violations)
	})

	t.Run("no waits", func(t *testing.T) {
		out, _, err := actorsnap(t, "analyze", quiet, "--store", store)
		require.NoError(t, err)
		assert.Contains(t, out, "\nwait-for graph: no participant waits\n\ndeadlocks: no deadlock\n\nquiescence: quiescent\n\ninvariants: no violation recorded\n")

		out, _, err = actorsnap(t, "analyze", quiet, "--format", "json", "--store", store)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		for _, key := range []string{"waits", "deadlocks", "violations"} {
			assert.Equal(t, []any{}, doc[key], "%s: an empty list, never null", key)
		}
		assert.Equal(t, true, doc["quiescence"].(map[string]any)["quiescent"])
	})

	t.Run("export dot", func(t *testing.T) {
		out, _, err := actorsnap(t, "export", stuck, "--format", "dot", "--store", store)
		require.NoError(t, err)
		g, err := parseDOT(out)
		require.NoError(t, err, out)
		graphvizReads(t, "export "+stuck, out)
		for _, id := range []string{"a", "b"} {
			assert.Equal(t, "red", g.nodes[id]["color"], "%s is in the deadlock", id)
		}
		assert.Equal(t, "orange", g.nodes["c"]["color"], "c is blocked on it")
		for _, e := range [][2]string{{"a", "b"}, {"b", "a"}} {
			attrs := g.edge(e[0], e[1], "style", "dashed")
			require.NotNil(t, attrs, "no wait-for edge %s -> %s:\n%s", e[0], e[1], out)
			assert.Equal(t, "red", attrs["color"])
			assert.Equal(t, "request 1", attrs["label"])
		}
		attrs := g.edge("c", "a", "style", "dashed")
		require.NotNil(t, attrs, out)
		assert.Equal(t, "blue", attrs["color"], "c's wait is in no cycle")

		// Without waits the graph is what export drew before it drew
		// them: channels alone.
		out, _, err = actorsnap(t, "export", quiet, "--format", "dot", "--store", store)
		require.NoError(t, err)
		assert.NotContains(t, out, "dashed")
		assert.NotContains(t, out, "color=")
	})

	t.Run("verify", func(t *testing.T) {
		out, _, err := actorsnap(t, "verify", stuck, "--store", store)
		require.NoError(t, err, "a broken invariant is reported, the snapshot is not corrupt")
		assert.Contains(t, out, "ok: checksums match")
		assert.Contains(t, out, "; but 1 invariant was violated:\n  invariant questions answered violated: 3 questions not answered\n")

		out, _, err = actorsnap(t, "verify", quiet, "--store", store)
		require.NoError(t, err)
		assert.NotContains(t, out, "violated")
	})

	t.Run("show", func(t *testing.T) {
		out, _, err := actorsnap(t, "show", stuck, "--store", store)
		require.NoError(t, err)
		assert.Contains(t, out, " in flight, taken ")
		assert.Contains(t, out, fmt.Sprintf("\n3 participants wait, 1 deadlock, 1 invariant violated: see actorsnap analyze %s\n\nPARTICIPANT", stuck))

		out, _, err = actorsnap(t, "show", quiet, "--store", store)
		require.NoError(t, err)
		assert.NotContains(t, out, "actorsnap analyze")
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"analyze", "9999", "--store", store}, []string{"snapshot 9999: ", "snapshot not found"}},
			{[]string{"analyze", "abc", "--store", store}, []string{"bad snapshot id \"abc\""}},
			{[]string{"analyze", "0", "--store", store}, []string{"bad snapshot id \"0\""}},
			{[]string{"analyze", "--store", store}, []string{"accepts 1 arg(s)"}},
			{[]string{"analyze", stuck, "--format", "xml", "--store", store}, []string{"unknown --format \"xml\": want text or json"}},
			{[]string{"analyze", "latest", "--store", filepath.Join(store, "missing")}, []string{"no store at"}},
		} {
			fails(t, tc.want, tc.args...)
		}
	})
}

// The text report of a hand-built snapshot with every kind of wait: a
// deadlock of a and b with c behind it (a declared wait), and d, which
// waits for any one of two and has a timer set, so is in none.
func TestAnalysisText(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeAnalysis(&b, analyze(waitsGlobal())))
	_, body, _ := strings.Cut(b.String(), "\n") // the first line has the local time
	assert.Equal(t, `
wait-for graph: 4 participants wait
  PARTICIPANT  WAITS FOR                  REQUEST  TYPE        WAITED
  a            b                          7        *main.Ping  3.2s
  b            a                          9        *main.Pong  3.1s
  c            a                          -        fork        1s
  d (any one)  b                          2        *main.Get   1s
  d (any one)  e                          -        spoon       -
  d (any one)  (a timer or queued input)  -        -           -

deadlocks: 1
  a, b wait for one another; blocked on them: c
    a waits for b (request 7, *main.Ping, 3.2s)
    b waits for a (request 9, *main.Pong, 3.1s)

quiescence: not quiescent
  1 message in flight on 1 channel: b->d
  3 requests not answered: a waits for b (request 7, *main.Ping, 3.2s), b waits for a (request 9, *main.Pong, 3.1s), d waits for b (request 2, *main.Get, 1s)
  1 woken from outside the cut (a timer or queued input): d

invariants: 2 violated
  money: 999, want 1000
  order: a before b
`, body)
}

// waitsGlobal is the hand-built snapshot of TestAnalysisText.
func waitsGlobal() *snapshot.Global {
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return end.Add(-d) }
	return &snapshot.Global{
		ID: 7, End: end, Start: ago(time.Millisecond),
		Participants: []snapshot.Participant{
			{ID: "a", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "b", Request: 7, Type: "*main.Ping", Since: ago(3200 * time.Millisecond)}}}},
			{ID: "b", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "a", Request: 9, Type: "*main.Pong", Since: ago(3100 * time.Millisecond)}}}},
			{ID: "c", Waits: &snapshot.Waits{Edges: []snapshot.Wait{{To: "a", Type: "fork", Since: ago(time.Second)}}}},
			{ID: "d", Waits: &snapshot.Waits{Any: true, Timer: true, Edges: []snapshot.Wait{
				{To: "b", Request: 2, Type: "*main.Get", Since: ago(time.Second)},
				{To: "e", Type: "spoon"},
			}}},
			{ID: "e"},
		},
		Channels: []snapshot.ChannelState{
			{Channel: snapshot.Channel{From: "b", To: "d"}, Sent: 1, Messages: []snapshot.Message{{Seq: 1, Payload: persistence.RecordedMessage{Type: "answer"}}}},
		},
		Violations: []snapshot.Violation{{Invariant: "money", Err: "999, want 1000"}, {Invariant: "order", Err: "a before b"}},
	}
}

// The JSON report's field names are those docs/architecture.md lists.
func TestAnalysisJSONFields(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeAnalysisJSON(&b, analyze(waitsGlobal())))
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.String()), &doc))
	keys := func(v any) []string {
		var ks []string
		for k := range v.(map[string]any) {
			ks = append(ks, k)
		}
		return ks
	}
	assert.ElementsMatch(t, []string{"id", "mode", "start", "end", "participants", "waits", "deadlocks", "quiescence", "violations"}, keys(doc))
	waits := doc["waits"].([]any)
	require.Len(t, waits, 4)
	assert.ElementsMatch(t, []string{"participant", "any", "timer", "edges"}, keys(waits[0]))
	edge := waits[0].(map[string]any)["edges"].([]any)[0]
	assert.ElementsMatch(t, []string{"from", "to", "request", "type", "since", "waited_ns"}, keys(edge))
	noSince := waits[3].(map[string]any)["edges"].([]any)[1]
	assert.ElementsMatch(t, []string{"from", "to", "request", "type", "waited_ns"}, keys(noSince), "since is left out when unknown")
	deadlocks := doc["deadlocks"].([]any)
	require.Len(t, deadlocks, 1)
	assert.ElementsMatch(t, []string{"participants", "cycle", "other_edges", "blocked"}, keys(deadlocks[0]))
	assert.ElementsMatch(t, []string{"quiescent", "messages_in_flight", "channels_in_flight", "requests", "timers"}, keys(doc["quiescence"]))
	assert.ElementsMatch(t, []string{"invariant", "error"}, keys(doc["violations"].([]any)[0]))
}

// Deadlocks in the text report: one whose participants wait for one
// another by more edges than its cycle, and one that waits for itself.
func TestAnalysisTextDeadlocks(t *testing.T) {
	w := func(to snapshot.ProcessID, req uint64) snapshot.Wait {
		return snapshot.Wait{To: to, Request: req, Type: "*main.Q"}
	}
	g := &snapshot.Global{ID: 3, Participants: []snapshot.Participant{
		{ID: "s", Waits: &snapshot.Waits{Edges: []snapshot.Wait{w("s", 1)}}},
		{ID: "x", Waits: &snapshot.Waits{Edges: []snapshot.Wait{w("y", 1), w("z", 2)}}},
		{ID: "y", Waits: &snapshot.Waits{Edges: []snapshot.Wait{w("z", 1)}}},
		{ID: "z", Waits: &snapshot.Waits{Edges: []snapshot.Wait{w("x", 1)}}},
	}}
	var b strings.Builder
	require.NoError(t, writeAnalysis(&b, analyze(g)))
	assert.Contains(t, b.String(), `
deadlocks: 2
  s waits for itself
    s waits for s (request 1, *main.Q)
  x, y, z wait for one another
    x waits for z (request 2, *main.Q)
    z waits for x (request 1, *main.Q)
    other waits among them:
      x waits for y (request 1, *main.Q)
      y waits for z (request 1, *main.Q)
`)
	err := analyze(g).deadlockError()
	assert.EqualError(t, err, "snapshot 3: 2 deadlocks: s and 1 more")
}
