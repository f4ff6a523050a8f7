package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorsnap/actorsnap/decoded"
	"github.com/actorsnap/actorsnap/internal/testenv"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// webCLI runs actorsnap with args in this process, as main does, and
// returns what it wrote to stdout; the command must succeed.
func webCLI(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	root.SetArgs(args)
	require.NoError(t, root.ExecuteContext(ctx), "actorsnap %s: %s", strings.Join(args, " "), errb.String())
	return out.String()
}

// urlWriter collects a command's output and hands over the first URL
// written to it.
type urlWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	url  chan string
	sent bool
}

var urlRE = regexp.MustCompile(`http://[^ /]+/`)

func (w *urlWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if u := urlRE.FindString(w.buf.String()); u != "" && !w.sent {
		w.sent = true
		w.url <- u
	}
	return len(p), nil
}

// startServe runs `actorsnap serve` on store at a free loopback port and
// returns its URL; the server is stopped, and must stop cleanly, when the
// test ends.
func startServe(t testing.TB, store string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &urlWriter{url: make(chan string, 1)}
	var errb bytes.Buffer
	root := newRoot(out, &errb)
	root.SetArgs([]string{"serve", "--store", store, "--addr", "127.0.0.1:0"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "serve stopping")
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s of its context's end")
		}
	})
	select {
	case u := <-out.url:
		return u
	case err := <-done:
		t.Fatalf("serve ended before serving: %v: %s", err, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve printed no URL within 30s")
	}
	return ""
}

func TestServeAddress(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"127.0.0.2:0", false, true},
		{"[::1]:8080", false, true},
		{"localhost:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"192.0.2.1:8080", false, false},
		{"example.com:8080", false, false},
		{"0.0.0.0:8080", true, true},
		{"8080", true, false},
	} {
		err := checkServeAddr(tc.addr, tc.public)
		if tc.ok {
			assert.NoError(t, err, tc.addr)
			continue
		}
		if assert.Error(t, err, tc.addr) && tc.public == false && strings.Contains(tc.addr, ":") {
			assert.Contains(t, err.Error(), "--public", "%s: the refusal says how to serve there anyway", tc.addr)
		}
	}
}

// serve answers on its address until its context ends, then stops; it
// refuses a store that is not there rather than make one.
func TestServeStopsOnCancel(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	root.SetArgs([]string{"serve", "--store", missing, "--addr", "127.0.0.1:0"})
	err := root.ExecuteContext(context.Background())
	require.ErrorIs(t, err, persistence.ErrNoStore)
	assert.NoDirExists(t, missing, "serve made no store")

	store := filepath.Join(dir, "snaps")
	runSmallBank(t, store)
	ids := storedIDs(t, store)

	u := startServe(t, store)
	resp, err := http.Get(u + "api/snapshots")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		Snapshots []struct{ ID uint64 } `json:"snapshots"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	assert.Len(t, list.Snapshots, len(ids))

	resp, err = http.Post(u+"api/snapshots", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// lsRow is one row of `actorsnap ls`.
type lsRow struct {
	ID, Taken, Duration, Mode, Participants, InFlight, StateBytes string
}

// parseLs reads the rows of `actorsnap ls`.
func parseLs(t testing.TB, out string) []lsRow {
	t.Helper()
	var rows []lsRow
	cols := regexp.MustCompile(`\s{2,}`)
	header := false
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "ID ") {
			header = true
			continue
		}
		if !header || strings.TrimSpace(line) == "" {
			continue
		}
		f := cols.Split(strings.TrimSpace(line), -1)
		require.Len(t, f, 7, "ls row %q", line)
		rows = append(rows, lsRow{f[0], f[1], f[2], f[3], f[4], f[5], f[6]})
	}
	require.NotEmpty(t, rows, "ls listed no snapshot:\n%s", out)
	return rows
}

// newBrowser starts headless Chromium for the test, with a viewport of
// width by height.
func newBrowser(t testing.TB, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testenv.Chromium(t)),
		chromedp.WindowSize(width, height),
	)
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root (CI runs as root).
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx), "starting Chromium")
	return ctx
}

// browserDeadline bounds each step of a browser test.
const browserDeadline = time.Minute

// browserDo runs browser actions, each step within browserDeadline.
func browserDo(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, browserDeadline)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

// browserGet runs a browser action that reads something, within browserDeadline.
func browserGet[T any](t testing.TB, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, browserDeadline)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

// browserAttr reads an attribute of the element sel selects.
func browserAttr(t testing.TB, ctx context.Context, sel, name string) string {
	t.Helper()
	return browserGet(t, ctx, chromedp.AttributeValue(chromedp.CSS(sel), name)).Value
}

// browserText reads the text of the element sel selects.
func browserText(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	return browserGet(t, ctx, chromedp.TextContent(chromedp.CSS(sel)))
}

// pageRow is a row of the page's list as shown.
type pageRow lsRow

const readListJS = `[...document.querySelectorAll('#snapshots tbody tr:not(.damaged)')].map(tr => {
  const c = (name) => tr.querySelector('[data-col="' + name + '"]').textContent;
  return {ID: c("id"), Taken: c("taken"), Duration: c("duration"), Mode: c("mode"),
    Participants: c("participants"), InFlight: c("in-flight"), StateBytes: c("state-bytes")};
})`

// The page, in Chromium, shows what ls and show print, draws the graph,
// filters by a field, diffs against the previous snapshot, and follows
// new snapshots as they are saved. It saves a screenshot: to
// $ACTORSNAP_SCREENSHOT when set (the README's picture), else to the
// test's temporary directory.
func TestWebViewInBrowser(t *testing.T) {
	testenv.Chromium(t)
	store := filepath.Join(t.TempDir(), "snaps")
	webCLI(t, "run", "bank", "--store", store, "--actors", "200", "--interval", "100ms", "--duration", "2s")
	rows := parseLs(t, webCLI(t, "ls", "--store", store))
	require.GreaterOrEqual(t, len(rows), 2)
	u := startServe(t, store)
	ctx := newBrowser(t, 1400, 1400)

	// The list: every row as ls prints it, newest first, and the charts.
	browserDo(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(`#snapshots[data-ready="1"]`)))
	shown := browserGet(t, ctx, chromedp.Evaluate[[]pageRow](readListJS))
	require.Len(t, shown, len(rows))
	for i, r := range rows {
		assert.Equal(t, pageRow(r), shown[len(shown)-1-i], "row of snapshot %s", r.ID)
	}
	assert.Equal(t, strconv.Itoa(len(rows)), browserAttr(t, ctx, "#chart-duration", "data-points"), "the charts plot every snapshot")

	// One snapshot, the latest: its numbers as show prints them, its
	// graph, and its decoded states.
	last := rows[len(rows)-1]
	showOut := webCLI(t, "show", last.ID, "--store", store)
	m := regexp.MustCompile(`(\d+) participants, (\d+) messages in flight`).FindStringSubmatch(showOut)
	require.NotNil(t, m, "show's first line:\n%s", showOut)
	browserDo(t, ctx, chromedp.Navigate(u+"#/snapshot/"+last.ID), chromedp.WaitVisible(chromedp.CSS(`#snapshot-view[data-ready="1"]`)))
	assert.Equal(t, m[1], browserText(t, ctx, `[data-field="participants"] dd`))
	assert.Equal(t, m[2], browserText(t, ctx, `[data-field="in-flight"] dd`))
	assert.Equal(t, m[1], browserAttr(t, ctx, "#graph", "data-nodes"), "the graph has a node per participant")
	assert.Equal(t, "50", browserAttr(t, ctx, "#participants", "data-rows"), "the first page of participants")
	assert.Contains(t, showOut, "acct-00000")

	png := browserGet(t, ctx, chromedp.CaptureScreenshot())
	shot := filepath.Join(t.TempDir(), "webview.png")
	if p := os.Getenv("ACTORSNAP_SCREENSHOT"); p != "" {
		shot = p
	}
	require.NoError(t, os.WriteFile(shot, png, 0o644))
	t.Logf("screenshot: %s", shot)

	// The decoded state, the diff and a where filter, against the store.
	g, prev := loadTwo(t, store, last.ID, rows[len(rows)-2].ID)
	balance, ok := decoded.Lookup(decoded.State(g.Participants[0]), "Balance")
	require.True(t, ok)
	assert.Contains(t, browserText(t, ctx, `#participants tbody tr[data-id="acct-00000"] td.value`), fmt.Sprintf("Balance: %v", balance))
	changed := 0
	for _, p := range g.Participants {
		if old, ok := prev.Participant(p.ID); ok && !bytes.Equal(old.State, p.State) {
			changed++
		}
	}
	assert.Equal(t, strconv.Itoa(changed), browserAttr(t, ctx, `#diff[data-ready="1"]`, "data-changed"))
	q, err := decoded.ParseQuery("Balance < 800")
	require.NoError(t, err)
	want := 0
	for _, p := range g.Participants {
		if q.Match(decoded.State(p)) {
			want++
		}
	}
	require.Less(t, want, len(g.Participants), "the filter leaves some out")
	browserDo(t, ctx,
		chromedp.SetValue(chromedp.CSS(`#participant-where`), "Balance < 800"),
		chromedp.Click(chromedp.CSS(`#participant-filter button`)),
		chromedp.WaitVisible(chromedp.CSS(`#participants[data-ready="1"][data-matched="`+strconv.Itoa(want)+`"]`)),
	)

	// New snapshots appear in the list without a reload.
	browserDo(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(`#snapshots[data-ready="1"]`)))
	webCLI(t, "restore", "latest", "--store", store, "--interval", "50ms", "--duration", "300ms")
	newest := parseLs(t, webCLI(t, "ls", "--store", store))
	top := newest[len(newest)-1].ID
	require.NotEqual(t, last.ID, top, "restore saved snapshots")
	browserDo(t, ctx, chromedp.WaitVisible(chromedp.CSS(`#snapshots tbody tr[data-id="`+top+`"]`)))
}

// loadTwo loads snapshots a and b of the store.
func loadTwo(t testing.TB, store, a, b string) (*snapshot.Global, *snapshot.Global) {
	t.Helper()
	ctx := context.Background()
	s, err := persistence.OpenURL(ctx, store, persistence.MustExist())
	require.NoError(t, err)
	defer closeStore(s)
	load := func(arg string) *snapshot.Global {
		n, err := strconv.ParseUint(arg, 10, 64)
		require.NoError(t, err)
		g, err := s.Load(ctx, snapshot.SnapshotID(n))
		require.NoError(t, err)
		return g
	}
	return load(a), load(b)
}

// BenchmarkWebView measures, in Chromium, the time from navigating to
// the page to its being rendered (performance.now() when the page marks
// itself ready): the list of a store of about 100 snapshots of 1,000
// accounts, and the view of a 10,000-participant snapshot (summary,
// collapsed graph, first pages of participants and channels, diff
// against the snapshot before it). "cold" is a new server, which reads
// the snapshots from the store; "warm" the same server again.
//
//	ACTORSNAP_REQUIRE_CHROMIUM=1 go test ./cmd/actorsnap -run '^$' -bench WebView -benchtime 5x
func BenchmarkWebView(b *testing.B) {
	testenv.Chromium(b)
	dir := b.TempDir()
	many := filepath.Join(dir, "many")
	webCLI(b, "run", "bank", "--store", many, "--actors", "1000", "--interval", "10ms", "--duration", "6s", "--retain", "100")
	big := filepath.Join(dir, "big")
	webCLI(b, "run", "bank", "--store", big, "--actors", "10000", "--interval", "1s", "--duration", "2500ms")
	bigRows := parseLs(b, webCLI(b, "ls", "--store", big))
	bigID := bigRows[len(bigRows)-1].ID
	b.Logf("list: %d snapshots of 1000 accounts; snapshot %s of %s participants", len(parseLs(b, webCLI(b, "ls", "--store", many))), bigID, bigRows[len(bigRows)-1].Participants)
	ctx := newBrowser(b, 1400, 1000)

	// open navigates afresh to u and returns the page's time to ready.
	open := func(u, ready, mark string) float64 {
		browserDo(b, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(ready)))
		ms, err := strconv.ParseFloat(browserAttr(b, ctx, "body", mark), 64)
		require.NoError(b, err)
		return ms
	}
	var listCold, listWarm, snapCold, snapWarm []float64
	b.ResetTimer()
	for range b.N {
		u := startServe(b, many)
		listCold = append(listCold, open(u, `#snapshots[data-ready="1"]`, "data-list-ms"))
		listWarm = append(listWarm, open(u, `#snapshots[data-ready="1"]`, "data-list-ms"))
		u = startServe(b, big)
		page := u + "#/snapshot/" + bigID
		snapCold = append(snapCold, open(page, `#snapshot-view[data-ready="1"]`, "data-snapshot-ms"))
		snapWarm = append(snapWarm, open(page, `#snapshot-view[data-ready="1"]`, "data-snapshot-ms"))
	}
	b.ReportMetric(testenv.Median(listCold), "list-cold-ms")
	b.ReportMetric(testenv.Median(listWarm), "list-warm-ms")
	b.ReportMetric(testenv.Median(snapCold), "snapshot10k-cold-ms")
	b.ReportMetric(testenv.Median(snapWarm), "snapshot10k-warm-ms")
}
