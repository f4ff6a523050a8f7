package webview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorsnap/actorsnap/decoded"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// summary is one row of the list: a snapshot's numbers, or why its entry
// is damaged.
type summary struct {
	ID           uint64 `json:"id"`
	Name         string `json:"name,omitempty"`
	Damaged      string `json:"damaged,omitempty"`
	Taken        string `json:"taken,omitempty"` // the end of the cut, RFC 3339
	Start        string `json:"start,omitempty"`
	DurationUS   int64  `json:"duration_us"`
	Duration     string `json:"duration,omitempty"` // as actorsnap ls prints it
	Mode         string `json:"mode,omitempty"`
	Participants int    `json:"participants"`
	Departed     int    `json:"departed"`
	Channels     int    `json:"channels"`
	InFlight     int    `json:"in_flight"`
	StateBytes   int    `json:"state_bytes"`
	Waiting      int    `json:"waiting"`
	Deadlocks    int    `json:"deadlocks"`
	Violations   int    `json:"violations"`
}

// view is a loaded snapshot with what the handlers derive from it. The
// snapshot is immutable; the decoded states are computed once, when a
// request first needs them all.
type view struct {
	g         *snapshot.Global
	sum       summary
	deadlocks []snapshot.Deadlock
	role      map[snapshot.ProcessID]string // "member" or "blocked" of a deadlock

	statesOnce sync.Once
	states     atomic.Pointer[[]any] // decoded, by participant index

	diffMu sync.Mutex
	diff   *diffResult // the last diff computed against this snapshot
}

func newView(g *snapshot.Global) *view {
	v := &view{g: g, deadlocks: snapshot.Deadlocks(g), role: map[snapshot.ProcessID]string{}}
	for _, d := range v.deadlocks {
		for _, id := range d.Blocked {
			v.role[id] = "blocked"
		}
		for _, id := range d.Participants {
			v.role[id] = "member"
		}
	}
	v.sum = summarize(g, len(v.deadlocks))
	return v
}

// summarize returns g's row of the list.
func summarize(g *snapshot.Global, deadlocks int) summary {
	d := g.End.Sub(g.Start).Round(time.Microsecond)
	s := summary{
		ID: uint64(g.ID), Taken: g.End.Format(time.RFC3339Nano), Start: g.Start.Format(time.RFC3339Nano),
		DurationUS: d.Microseconds(), Duration: d.String(), Mode: g.Mode.String(),
		Participants: len(g.Participants), Channels: len(g.Channels), InFlight: g.TotalInFlight(),
		StateBytes: g.TotalStateBytes(), Deadlocks: deadlocks, Violations: len(g.Violations),
	}
	for _, p := range g.Participants {
		if p.Departed {
			s.Departed++
		}
		if !p.Waits.Empty() {
			s.Waiting++
		}
	}
	return s
}

// allStates returns every participant's decoded state.
func (v *view) allStates() []any {
	v.statesOnce.Do(func() {
		states := make([]any, len(v.g.Participants))
		for i, p := range v.g.Participants {
			states[i] = decoded.State(p)
		}
		v.states.Store(&states)
	})
	return *v.states.Load()
}

// state returns participant i's decoded state, decoding it unless all
// were.
func (v *view) state(i int) any {
	if states := v.states.Load(); states != nil {
		return (*states)[i]
	}
	return decoded.State(v.g.Participants[i])
}

// viewOf returns the view of the request's {id}.
func (h *handler) viewOf(r *http.Request) (*view, error) {
	id, err := h.resolve(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return h.load(r.Context(), id)
}

// resolve reads a snapshot id, or "latest": the highest complete id.
func (h *handler) resolve(ctx context.Context, arg string) (snapshot.SnapshotID, error) {
	if arg == "latest" {
		ids, err := h.store.List(ctx)
		if err != nil {
			return 0, err
		}
		if len(ids) == 0 {
			return 0, fmt.Errorf("the latest snapshot: %w", persistence.ErrNotFound)
		}
		return ids[len(ids)-1], nil
	}
	n, err := strconv.ParseUint(arg, 10, 64)
	if err != nil || n == 0 || n > math.MaxInt64 {
		return 0, badRequestError{fmt.Sprintf("bad snapshot id %q: want a number from 1 to %d, or \"latest\"", arg, uint64(math.MaxInt64))}
	}
	return snapshot.SnapshotID(n), nil
}

// load returns the view of snapshot id, from the cache or the store.
func (h *handler) load(ctx context.Context, id snapshot.SnapshotID) (*view, error) {
	if v, ok := h.cache.view(id); ok {
		return v, nil
	}
	g, err := h.store.Load(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("snapshot %d: %w", id, err)
	}
	return h.cache.addView(newView(g)), nil
}

// list answers GET /api/snapshots: every entry of the store, oldest
// first, each a summary or the reason it is damaged. Each snapshot is
// read once; its summary is kept.
func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	es, err := h.store.Entries(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	stored := make(map[snapshot.SnapshotID]bool, len(es))
	rows := make([]summary, 0, len(es))
	for _, e := range es {
		if e.Damage != nil {
			// Not cached: an entry may be damaged only until a save or
			// fsck finishes with it.
			rows = append(rows, summary{ID: uint64(e.ID), Name: e.Name, Damaged: e.Damage.Error()})
			continue
		}
		stored[e.ID] = true
		s, ok := h.cache.summary(e.ID)
		if !ok {
			g, err := h.store.Load(ctx, e.ID)
			switch {
			case errors.Is(err, persistence.ErrNotFound):
				delete(stored, e.ID) // deleted meanwhile (retention)
				continue
			case persistence.IsDamage(err):
				s = summary{ID: uint64(e.ID), Name: e.Name, Damaged: err.Error()}
			case err != nil:
				h.fail(w, r, fmt.Errorf("reading snapshot %d: %w", e.ID, err))
				return
			default:
				s = summarize(g, len(snapshot.Deadlocks(g)))
			}
			h.cache.addSummary(s)
		}
		rows = append(rows, s)
	}
	h.cache.prune(stored)
	out := struct {
		Owner     string    `json:"owner"`
		High      uint64    `json:"high"`
		Writer    bool      `json:"writer"`
		Snapshots []summary `json:"snapshots"`
	}{Snapshots: rows}
	if o, err := h.store.Ownership(ctx); err == nil {
		out.Owner, out.High, out.Writer = o.Owner.String(), uint64(o.High), o.Live
		if o.Owner.System == "" && o.High == 0 {
			out.Owner = ""
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// The JSON of a deadlock.
type (
	deadlockJSON struct {
		Participants []snapshot.ProcessID `json:"participants"`
		Edges        []waitJSON           `json:"edges"`
		Cycle        int                  `json:"cycle"`
		Blocked      []snapshot.ProcessID `json:"blocked,omitempty"`
		Text         string               `json:"text"`
	}
	waitJSON struct {
		From     snapshot.ProcessID `json:"from,omitempty"`
		To       snapshot.ProcessID `json:"to"`
		Request  uint64             `json:"request,omitempty"`
		Type     string             `json:"type,omitempty"`
		WaitedMS float64            `json:"waited_ms,omitempty"`
	}
	violationJSON struct {
		Invariant string `json:"invariant"`
		Err       string `json:"error"`
	}
)

// snapshot answers GET /api/snapshots/{id}: its summary, deadlocks and
// broken invariants, and the id of the snapshot stored before it.
func (h *handler) snapshot(w http.ResponseWriter, r *http.Request) {
	v, err := h.viewOf(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	prev, err := h.previous(r.Context(), v.g.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := struct {
		summary
		Previous   uint64          `json:"previous,omitempty"`
		Deadlocks  []deadlockJSON  `json:"deadlock_list"`
		Violations []violationJSON `json:"violation_list"`
	}{summary: v.sum, Previous: uint64(prev), Deadlocks: []deadlockJSON{}, Violations: []violationJSON{}}
	for _, d := range v.deadlocks {
		dj := deadlockJSON{Participants: d.Participants, Cycle: d.Cycle, Blocked: d.Blocked, Text: d.String()}
		for _, e := range d.Edges {
			dj.Edges = append(dj.Edges, waitJSON{From: e.From, To: e.To, Request: e.Request, Type: e.Type, WaitedMS: float64(e.Waited) / float64(time.Millisecond)})
		}
		out.Deadlocks = append(out.Deadlocks, dj)
	}
	for _, vi := range v.g.Violations {
		out.Violations = append(out.Violations, violationJSON{Invariant: vi.Invariant, Err: vi.Err})
	}
	writeJSON(w, http.StatusOK, out)
}

// previous returns the id of the complete snapshot stored before id, or
// 0 when there is none.
func (h *handler) previous(ctx context.Context, id snapshot.SnapshotID) (snapshot.SnapshotID, error) {
	ids, err := h.store.List(ctx)
	if err != nil {
		return 0, err
	}
	var prev snapshot.SnapshotID
	for _, x := range ids {
		if x < id {
			prev = x
		}
	}
	return prev, nil
}

// Paging bounds.
const (
	defaultLimit = 50
	maxLimit     = 500
	// maxMessages is how many of a channel's in-flight messages are
	// shown; the count says how many there are.
	maxMessages = 100
)

// page is the paging of a table's answer.
type page struct {
	Total   int `json:"total"`   // rows in the snapshot
	Matched int `json:"matched"` // rows that pass the filters
	Offset  int `json:"offset"`
	Limit   int `json:"limit"`
}

// paging reads ?offset= and ?limit=.
func paging(r *http.Request) (offset, limit int, err error) {
	offset, limit = 0, defaultLimit
	if s := r.FormValue("offset"); s != "" {
		if offset, err = strconv.Atoi(s); err != nil || offset < 0 {
			return 0, 0, badRequestError{fmt.Sprintf("bad offset %q: want a number from 0", s)}
		}
	}
	if s := r.FormValue("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > maxLimit {
			return 0, 0, badRequestError{fmt.Sprintf("bad limit %q: want a number from 1 to %d", s, maxLimit)}
		}
	}
	return offset, limit, nil
}

// participantJSON is one row of the participants' table.
type participantJSON struct {
	ID         snapshot.ProcessID `json:"id"`
	Kind       string             `json:"kind"`
	Departed   bool               `json:"departed,omitempty"`
	StateBytes int                `json:"state_bytes"`
	State      any                `json:"state"`
	Waits      []waitJSON         `json:"waits,omitempty"`
	Deadlock   string             `json:"deadlock,omitempty"` // "member" or "blocked"
}

// participants answers GET /api/snapshots/{id}/participants: a page of
// participants with decoded states, those whose id contains ?q= and
// whose state matches ?where= (decoded.ParseQuery).
func (h *handler) participants(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := paging(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var where *decoded.Query
	if s := strings.TrimSpace(r.FormValue("where")); s != "" {
		if where, err = decoded.ParseQuery(s); err != nil {
			h.fail(w, r, badRequestError{"bad where: " + err.Error()})
			return
		}
	}
	v, err := h.viewOf(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.FormValue("q")
	var states []any
	if where != nil {
		states = v.allStates()
	}
	out := struct {
		page
		Where string            `json:"where,omitempty"`
		Items []participantJSON `json:"items"`
	}{page: page{Total: len(v.g.Participants), Offset: offset, Limit: limit}, Items: []participantJSON{}}
	if where != nil {
		out.Where = where.String()
	}
	for i, p := range v.g.Participants {
		if q != "" && !strings.Contains(string(p.ID), q) {
			continue
		}
		if where != nil && !where.Match(states[i]) {
			continue
		}
		out.Matched++
		if out.Matched <= offset || len(out.Items) == limit {
			continue
		}
		pj := participantJSON{ID: p.ID, Kind: p.Kind, Departed: p.Departed, StateBytes: len(p.State), State: decoded.JSON(v.state(i), false), Deadlock: v.role[p.ID]}
		if p.Waits != nil {
			for _, e := range p.Waits.Edges {
				pj.Waits = append(pj.Waits, waitJSON{To: e.To, Request: e.Request, Type: e.Type})
			}
		}
		out.Items = append(out.Items, pj)
	}
	writeJSON(w, http.StatusOK, out)
}

// The JSON of a channel and its in-flight messages.
type (
	channelJSON struct {
		From     snapshot.ProcessID `json:"from"`
		To       snapshot.ProcessID `json:"to"`
		Sent     uint64             `json:"sent"`
		Received uint64             `json:"received"`
		InFlight int                `json:"in_flight"`
		Messages []messageJSON      `json:"messages"`
	}
	messageJSON struct {
		Seq    uint64 `json:"seq"`
		Type   string `json:"type"`
		Sender string `json:"sender,omitempty"`
		Size   int    `json:"size"`
		Value  any    `json:"value"`
	}
)

// channels answers GET /api/snapshots/{id}/channels: a page of the
// channels with messages in flight (all channels with ?empty=1), those
// whose "from->to" contains ?q=, each with its first messages decoded.
func (h *handler) channels(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := paging(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v, err := h.viewOf(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q, empty := r.FormValue("q"), r.FormValue("empty") == "1"
	out := struct {
		page
		Items []channelJSON `json:"items"`
	}{page: page{Total: len(v.g.Channels), Offset: offset, Limit: limit}, Items: []channelJSON{}}
	for _, c := range v.g.Channels {
		if !empty && len(c.Messages) == 0 {
			continue
		}
		if q != "" && !strings.Contains(c.Channel.String(), q) {
			continue
		}
		out.Matched++
		if out.Matched <= offset || len(out.Items) == limit {
			continue
		}
		cj := channelJSON{From: c.Channel.From, To: c.Channel.To, Sent: c.Sent, Received: c.Received, InFlight: len(c.Messages), Messages: []messageJSON{}}
		for _, m := range decoded.Messages(c.Messages[:min(len(c.Messages), maxMessages)]) {
			cj.Messages = append(cj.Messages, messageJSON{Seq: m.Seq, Type: m.Type, Sender: m.Sender, Size: m.Size, Value: decoded.JSON(m.Value, false)})
		}
		out.Items = append(out.Items, cj)
	}
	writeJSON(w, http.StatusOK, out)
}
