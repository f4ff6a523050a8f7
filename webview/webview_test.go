package webview_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/decoded"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
	"github.com/actorsnap/actorsnap/webview"
)

// bankDir is a file store the bank demo wrote, made once for the tests
// that only read it.
var bankDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "webview-bank")
	if err != nil {
		panic(err)
	}
	bankDir = filepath.Join(dir, "snaps")
	if err := runBank(bankDir, 200, time.Second); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runBank runs the bank demo of n accounts for d, keeping every snapshot
// in a file store at dir. It runs in the unaligned mode, whose snapshots
// list every channel used, empty ones too: the graph and the channel
// queries are checked against the whole topology (an epoch-mode snapshot
// lists only the channels with something in flight).
func runBank(dir string, n int, d time.Duration) error {
	ctx := context.Background()
	store, err := persistence.Open(ctx, dir)
	if err != nil {
		return err
	}
	return bankdemo.Run(ctx, io.Discard, bankdemo.RunConfig{
		Config:   bankdemo.Config{Accounts: n, Initial: 1000, Chords: 2, InFlight: 2, Seed: 1},
		Interval: 100 * time.Millisecond, Duration: d,
		Options: []actors.Option{actors.WithStore(store), actors.WithSystemName("bank"), actors.WithMode(snapshot.Unaligned)},
	})
}

// openBank opens the bank's store for reading.
func openBank(t *testing.T) persistence.Store {
	t.Helper()
	s, err := persistence.OpenURL(context.Background(), bankDir, persistence.MustExist())
	require.NoError(t, err)
	return s
}

// get serves a GET of path and decodes the JSON answer into v; it
// returns the status.
func get(t *testing.T, h http.Handler, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if v != nil {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), v), "%s: %s", path, rec.Body.String())
	}
	return rec.Code
}

type (
	summary struct {
		ID           uint64 `json:"id"`
		Name         string `json:"name"`
		Damaged      string `json:"damaged"`
		Taken        string `json:"taken"`
		Duration     string `json:"duration"`
		Mode         string `json:"mode"`
		Participants int    `json:"participants"`
		Channels     int    `json:"channels"`
		InFlight     int    `json:"in_flight"`
		StateBytes   int    `json:"state_bytes"`
		Deadlocks    int    `json:"deadlocks"`
	}
	list struct {
		Owner     string    `json:"owner"`
		Snapshots []summary `json:"snapshots"`
	}
	page struct {
		Total   int `json:"total"`
		Matched int `json:"matched"`
		Offset  int `json:"offset"`
		Limit   int `json:"limit"`
	}
	participants struct {
		page
		Items []struct {
			ID         string          `json:"id"`
			Kind       string          `json:"kind"`
			StateBytes int             `json:"state_bytes"`
			State      json.RawMessage `json:"state"`
			Deadlock   string          `json:"deadlock"`
		} `json:"items"`
	}
	channels struct {
		page
		Items []struct {
			From     string `json:"from"`
			To       string `json:"to"`
			InFlight int    `json:"in_flight"`
			Messages []struct {
				Seq   uint64         `json:"seq"`
				Type  string         `json:"type"`
				Value map[string]any `json:"value"`
			} `json:"messages"`
		} `json:"items"`
	}
	graph struct {
		Collapsed    bool   `json:"collapsed"`
		Participants int    `json:"participants"`
		Focus        string `json:"focus"`
		Nodes        []struct {
			ID       string `json:"id"`
			Group    bool   `json:"group"`
			Count    int    `json:"count"`
			Deadlock string `json:"deadlock"`
		} `json:"nodes"`
		Edges []struct {
			Source   string `json:"source"`
			Target   string `json:"target"`
			InFlight int    `json:"in_flight"`
			Channels int    `json:"channels"`
			Deadlock bool   `json:"deadlock"`
		} `json:"edges"`
	}
	diff struct {
		page
		From         uint64 `json:"from"`
		To           uint64 `json:"to"`
		Changed      int    `json:"changed"`
		Added        int    `json:"added"`
		Removed      int    `json:"removed"`
		Participants []struct {
			ID      string `json:"id"`
			Change  string `json:"change"`
			Changes []struct {
				Path string  `json:"path"`
				From float64 `json:"from"`
				To   float64 `json:"to"`
				Text string  `json:"text"`
			} `json:"changes"`
		} `json:"participants"`
		Channels []struct {
			Channel string `json:"channel"`
		} `json:"channels"`
	}
	apiError struct {
		Error   string `json:"error"`
		Damaged bool   `json:"damaged"`
	}
)

// The list shows every stored snapshot with the numbers the store holds.
func TestListMatchesStore(t *testing.T) {
	store := openBank(t)
	h := webview.New(store)
	var l list
	require.Equal(t, http.StatusOK, get(t, h, "/api/snapshots", &l))
	ids, err := store.List(context.Background())
	require.NoError(t, err)
	require.Len(t, l.Snapshots, len(ids))
	assert.Contains(t, l.Owner, "bank")
	for i, s := range l.Snapshots {
		g, err := store.Load(context.Background(), ids[i])
		require.NoError(t, err)
		assert.Equal(t, uint64(g.ID), s.ID)
		assert.Empty(t, s.Damaged)
		assert.Equal(t, len(g.Participants), s.Participants)
		assert.Equal(t, len(g.Channels), s.Channels)
		assert.Equal(t, g.TotalInFlight(), s.InFlight)
		assert.Equal(t, g.TotalStateBytes(), s.StateBytes)
		assert.Equal(t, g.Mode.String(), s.Mode)
		assert.Equal(t, g.End.Sub(g.Start).Round(time.Microsecond).String(), s.Duration)
		assert.Equal(t, g.End.Format(time.RFC3339Nano), s.Taken)
	}
}

// Participants come a page at a time with decoded states; q and where
// select them.
func TestParticipantsPagedAndFiltered(t *testing.T) {
	store := openBank(t)
	g, err := store.Latest(context.Background())
	require.NoError(t, err)
	h := webview.New(store)
	base := fmt.Sprintf("/api/snapshots/%d/participants", g.ID)

	var p participants
	require.Equal(t, http.StatusOK, get(t, h, base+"?offset=40&limit=25", &p))
	assert.Equal(t, page{Total: 200, Matched: 200, Offset: 40, Limit: 25}, p.page)
	require.Len(t, p.Items, 25)
	for i, it := range p.Items {
		want := g.Participants[40+i]
		assert.Equal(t, string(want.ID), it.ID)
		assert.Equal(t, len(want.State), it.StateBytes)
		assert.JSONEq(t, jsonOf(t, decoded.JSON(decoded.State(want), false)), string(it.State))
	}
	assert.Contains(t, string(p.Items[0].State), `"Balance":`)

	require.Equal(t, http.StatusOK, get(t, h, base+"?q=acct-0001", &p))
	assert.Equal(t, 10, p.Matched, "acct-00010 to acct-00019")

	q, err := decoded.ParseQuery("Balance < 800")
	require.NoError(t, err)
	want := 0
	for _, pt := range g.Participants {
		if q.Match(decoded.State(pt)) {
			want++
		}
	}
	require.Equal(t, http.StatusOK, get(t, h, base+"?limit=500&where="+urlQuery("Balance < 800"), &p))
	assert.Equal(t, want, p.Matched)
	assert.Len(t, p.Items, want)

	var e apiError
	assert.Equal(t, http.StatusBadRequest, get(t, h, base+"?where="+urlQuery("Balance <"), &e))
	assert.Contains(t, e.Error, "bad where")
	assert.Equal(t, http.StatusBadRequest, get(t, h, base+"?limit=100000", &e))
	assert.Equal(t, http.StatusBadRequest, get(t, h, "/api/snapshots/x/participants", &e))
	assert.Equal(t, http.StatusNotFound, get(t, h, "/api/snapshots/999999/participants", &e))
}

// Channels list their in-flight messages decoded; the total in flight is
// the snapshot's.
func TestChannelsDecoded(t *testing.T) {
	store := openBank(t)
	g, err := store.Latest(context.Background())
	require.NoError(t, err)
	h := webview.New(store)
	var c channels
	require.Equal(t, http.StatusOK, get(t, h, "/api/snapshots/latest/channels?limit=500", &c))
	assert.Equal(t, len(g.Channels), c.Total)
	inFlight := 0
	for _, it := range c.Items {
		assert.NotZero(t, it.InFlight, "only channels with messages in flight, by default")
		inFlight += it.InFlight
		require.NotEmpty(t, it.Messages)
		assert.Equal(t, "bank.transfer", it.Messages[0].Type)
		assert.Contains(t, it.Messages[0].Value, "Amount")
	}
	assert.Equal(t, g.TotalInFlight(), inFlight)

	require.Equal(t, http.StatusOK, get(t, h, "/api/snapshots/latest/channels?empty=1&limit=1&q="+urlQuery("acct-00000->"), &c))
	assert.Equal(t, 3, c.Matched, "the ring and two chords")
}

// The graph has a node per participant and an edge per channel, each
// weighted by its messages in flight.
func TestGraph(t *testing.T) {
	store := openBank(t)
	g, err := store.Latest(context.Background())
	require.NoError(t, err)
	var gr graph
	require.Equal(t, http.StatusOK, get(t, webview.New(store), "/api/snapshots/latest/graph", &gr))
	assert.False(t, gr.Collapsed)
	assert.Len(t, gr.Nodes, len(g.Participants))
	assert.Len(t, gr.Edges, len(g.Channels))
	sum := 0
	for _, e := range gr.Edges {
		sum += e.InFlight
	}
	assert.Equal(t, g.TotalInFlight(), sum)

	// Collapsed, the accounts are one node, with the focus and its
	// neighbours on their own.
	require.Equal(t, http.StatusOK, get(t, webview.New(store, webview.WithGraphLimit(50)), "/api/snapshots/latest/graph?focus=acct-00007", &gr))
	assert.True(t, gr.Collapsed)
	assert.Equal(t, "acct-00007", gr.Focus)
	ids := map[string]int{}
	for _, n := range gr.Nodes {
		ids[n.ID] = n.Count
	}
	assert.Contains(t, ids, "acct-00007")
	assert.Contains(t, ids, "acct-00008", "its successor on the ring")
	assert.Contains(t, ids, "acct-00006", "its predecessor on the ring")
	assert.Equal(t, len(g.Participants)-len(ids)+1, ids["kind: account"], "the rest folded into the kind")
}

// The diff is against the snapshot stored before, field by field.
func TestDiffAgainstPrevious(t *testing.T) {
	store := openBank(t)
	ctx := context.Background()
	ids, err := store.List(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ids), 2)
	a, err := store.Load(ctx, ids[len(ids)-2])
	require.NoError(t, err)
	b, err := store.Load(ctx, ids[len(ids)-1])
	require.NoError(t, err)
	changed := 0
	for _, p := range b.Participants {
		q, _ := a.Participant(p.ID)
		if !bytes.Equal(p.State, q.State) {
			changed++
		}
	}
	h := webview.New(store)
	var d diff
	require.Equal(t, http.StatusOK, get(t, h, "/api/snapshots/latest/diff?limit=500", &d))
	assert.Equal(t, uint64(a.ID), d.From)
	assert.Equal(t, uint64(b.ID), d.To)
	assert.Equal(t, changed, d.Changed)
	assert.Zero(t, d.Added)
	assert.Zero(t, d.Removed)
	require.NotEmpty(t, d.Participants)
	first := d.Participants[0]
	require.NotEmpty(t, first.Changes)
	assert.Equal(t, "Balance", first.Changes[0].Path)
	p, _ := b.Participant(snapshot.ProcessID(first.ID))
	q, _ := a.Participant(snapshot.ProcessID(first.ID))
	from, _ := decoded.Lookup(decoded.State(q), "Balance")
	to, _ := decoded.Lookup(decoded.State(p), "Balance")
	assert.Equal(t, fmt.Sprintf("Balance %v -> %v", from, to), first.Changes[0].Text)

	// The first stored snapshot has nothing to compare with.
	require.Equal(t, http.StatusOK, get(t, h, fmt.Sprintf("/api/snapshots/%d/diff", ids[0]), &d))
	assert.Zero(t, d.From)
	assert.Empty(t, d.Participants)
}

// The handler answers reads only, and reading changes no file of the
// store.
func TestReadOnly(t *testing.T) {
	before := fileSums(t, bankDir)
	store := openBank(t)
	srv := httptest.NewServer(webview.New(store))
	defer srv.Close()
	for _, path := range []string{"/", "/app.js", "/vendor/cytoscape/cytoscape.min.js", "/api/snapshots", "/api/snapshots/latest",
		"/api/snapshots/latest/participants?where=Balance%3E0", "/api/snapshots/latest/channels", "/api/snapshots/latest/graph", "/api/snapshots/latest/diff"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, err := http.NewRequest(method, srv.URL+"/api/snapshots/latest", strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e apiError
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
		assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
		assert.Contains(t, e.Error, "read-only")
	}
	assert.Equal(t, before, fileSums(t, bankDir), "the store's files are as they were")
}

// fileSums returns each file under dir with its mode, time and content.
func fileSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum := ""
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		sums[path] = fmt.Sprintf("%v %v %s", info.Mode(), info.ModTime().UnixNano(), sum)
		return nil
	}))
	return sums
}

// A server on loopback answers only to loopback host names.
func TestLoopbackHosts(t *testing.T) {
	h := webview.New(persistence.NewMemory(), webview.WithLoopbackHosts())
	for host, want := range map[string]int{
		"localhost:8080": http.StatusOK, "127.0.0.1:8080": http.StatusOK, "[::1]:8080": http.StatusOK, "127.0.0.1": http.StatusOK,
		"evil.example:8080": http.StatusForbidden, "10.0.0.1:8080": http.StatusForbidden,
	} {
		req := httptest.NewRequest(http.MethodGet, "/api/snapshots", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, want, rec.Code, host)
	}
}

// A damaged snapshot is listed as damaged, and asking for it says so;
// nothing else fails.
func TestDamagedSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snaps")
	require.NoError(t, os.CopyFS(dir, os.DirFS(bankDir)))
	store, err := persistence.OpenURL(context.Background(), dir, persistence.MustExist())
	require.NoError(t, err)
	ids, err := store.List(context.Background())
	require.NoError(t, err)
	victim := ids[len(ids)/2]
	corruptData(t, dir, victim)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk"), []byte("not a snapshot"), 0o600))

	h := webview.New(store)
	var l list
	require.Equal(t, http.StatusOK, get(t, h, "/api/snapshots", &l))
	damaged := map[string]string{}
	for _, s := range l.Snapshots {
		if s.Damaged != "" {
			damaged[fmt.Sprint(s.ID)+s.Name] = s.Damaged
		} else {
			assert.NotZero(t, s.Participants)
		}
	}
	require.Len(t, damaged, 2, "the corrupt snapshot and the foreign file: %v", damaged)
	var e apiError
	assert.Equal(t, http.StatusInternalServerError, get(t, h, fmt.Sprintf("/api/snapshots/%d", victim), &e))
	assert.True(t, e.Damaged, e.Error)
	assert.Equal(t, http.StatusInternalServerError, get(t, h, fmt.Sprintf("/api/snapshots/%d/participants", victim), &e))
	assert.True(t, e.Damaged, e.Error)
	var d diff
	assert.Equal(t, http.StatusOK, get(t, h, "/api/snapshots/latest/diff", &d), "the latest is intact")
}

// corruptData flips a byte in the middle of each data file of snapshot
// id in the file store at dir.
func corruptData(t *testing.T, dir string, id snapshot.SnapshotID) {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(path)) != fmt.Sprintf("snap-%020d", id) {
			return err
		}
		if strings.Contains(d.Name(), "manifest") || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 2 {
			return err
		}
		b[len(b)/2] ^= 0xff
		n++
		return os.WriteFile(path, b, 0o600)
	}))
	require.NotZero(t, n, "no data file of snapshot %d", id)
}

// A deadlock's cycle is reported with the snapshot and marked in the
// graph, whole or collapsed.
func TestDeadlockInGraph(t *testing.T) {
	store := persistence.NewMemory()
	g := &snapshot.Global{ID: 1, Start: time.Unix(100, 0), End: time.Unix(101, 0)}
	for i := range 400 {
		p := snapshot.Participant{ID: snapshot.ProcessID(fmt.Sprintf("p%03d", i)), Kind: "worker", State: state(t, map[string]any{"N": i})}
		switch i {
		case 1:
			p.Waits = &snapshot.Waits{Edges: []snapshot.Wait{{To: "p002", Request: 7, Type: "Ask"}}}
		case 2:
			p.Waits = &snapshot.Waits{Edges: []snapshot.Wait{{To: "p001", Request: 9, Type: "Ask"}}}
		}
		if i >= 390 {
			p.Kind = "clerk"
		}
		g.Participants = append(g.Participants, p)
	}
	g.Channels = []snapshot.ChannelState{
		{Channel: snapshot.Channel{From: "p001", To: "p002"}, Sent: 1, Received: 1},
		{Channel: snapshot.Channel{From: "p003", To: "p391"}, Sent: 2, Received: 0, Messages: []snapshot.Message{
			{Seq: 1, Payload: persistence.RecordedMessage{Type: "x", Data: state(t, 1)}},
			{Seq: 2, Payload: persistence.RecordedMessage{Type: "x", Data: state(t, 2)}},
		}},
	}
	require.NoError(t, g.Verify())
	require.NoError(t, store.Save(context.Background(), g))
	h := webview.New(store)

	var s struct {
		Deadlocks    int `json:"deadlocks"`
		DeadlockList []struct {
			Participants []string `json:"participants"`
			Text         string   `json:"text"`
		} `json:"deadlock_list"`
	}
	require.Equal(t, http.StatusOK, get(t, h, "/api/snapshots/1", &s))
	require.Equal(t, 1, s.Deadlocks)
	assert.Equal(t, []string{"p001", "p002"}, s.DeadlockList[0].Participants)
	assert.Contains(t, s.DeadlockList[0].Text, "p001 waits for p002 (request 7, Ask")

	var gr graph
	require.Equal(t, http.StatusOK, get(t, h, "/api/snapshots/1/graph", &gr))
	assert.True(t, gr.Collapsed, "400 participants is above the default limit")
	nodes := map[string]string{}
	for _, n := range gr.Nodes {
		nodes[n.ID] = n.Deadlock
	}
	assert.Equal(t, map[string]string{"p001": "member", "p002": "member", "kind: worker": "", "kind: clerk": ""}, nodes)
	deadlock := map[string]bool{}
	flight := map[string]int{}
	for _, e := range gr.Edges {
		deadlock[e.Source+"->"+e.Target] = e.Deadlock
		flight[e.Source+"->"+e.Target] += e.InFlight
	}
	assert.True(t, deadlock["p001->p002"], "the channel under the wait")
	assert.True(t, deadlock["p002->p001"], "the wait with no channel under it")
	assert.Equal(t, 2, flight["kind: worker->kind: clerk"], "the channels between kinds, folded")

	var p participants
	require.Equal(t, http.StatusOK, get(t, h, "/api/snapshots/1/participants?q=p00&limit=3", &p))
	assert.Equal(t, "member", p.Items[1].Deadlock)
}

// state encodes v as msgpack, as an actor's state is.
func state(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	require.NoError(t, err)
	return b
}

// The page and its libraries are served, with their licences.
func TestAssets(t *testing.T) {
	h := webview.New(persistence.NewMemory())
	for path, want := range map[string]string{
		"/":                                  `<script src="app.js">`,
		"/app.js":                            "pollList",
		"/style.css":                         "#graph",
		"/vendor/cytoscape/cytoscape.min.js": "cytoscape",
		"/vendor/cytoscape/LICENSE":          "Permission is hereby granted",
		"/vendor/uplot/uPlot.iife.min.js":    "uPlot",
		"/vendor/uplot/LICENSE":              "MIT License",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		assert.Equal(t, http.StatusOK, rec.Code, path)
		assert.Contains(t, rec.Body.String(), want, path)
	}
	var e apiError
	assert.Equal(t, http.StatusNotFound, get(t, h, "/api/nothing", &e))
	assert.Equal(t, http.StatusNotFound, get(t, h, "/api/snapshots/latest", &e), "an empty store has no latest")
}

func urlQuery(s string) string { return url.QueryEscape(s) }

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
