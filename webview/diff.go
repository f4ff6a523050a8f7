package webview

import (
	"bytes"
	"net/http"

	"github.com/actorsnap/actorsnap/decoded"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Bounds of a diff's answer.
const (
	maxChanges      = 20  // field changes listed per participant
	maxChannelDiffs = 100 // channels listed whose in-flight messages differ
)

// The JSON of a diff between two snapshots.
type (
	diffResult struct {
		From         uint64            `json:"from"`
		To           uint64            `json:"to"`
		Changed      int               `json:"changed"`
		Added        int               `json:"added"`
		Removed      int               `json:"removed"`
		Participants []participantDiff `json:"participants"`
		// Channels are the first maxChannelDiffs of the ChannelsDiffer
		// channels whose in-flight messages differ.
		Channels       []channelDiff `json:"channels"`
		ChannelsDiffer int           `json:"channels_differ"`
	}
	participantDiff struct {
		ID     snapshot.ProcessID `json:"id"`
		Kind   string             `json:"kind"`
		Change string             `json:"change"` // "changed", "added" or "removed"
		// Changes are the state's field changes, at most maxChanges.
		Changes []changeJSON `json:"changes,omitempty"`
		More    bool         `json:"more,omitempty"` // more changes than listed
	}
	changeJSON struct {
		Path    string `json:"path"`
		From    any    `json:"from,omitempty"`
		To      any    `json:"to,omitempty"`
		Added   bool   `json:"added,omitempty"`
		Removed bool   `json:"removed,omitempty"`
		Text    string `json:"text"`
	}
	channelDiff struct {
		Channel string `json:"channel"`
		From    int    `json:"from_in_flight"`
		To      int    `json:"to_in_flight"`
	}
)

// diff answers GET /api/snapshots/{id}/diff: the changes from ?against=
// (by default the snapshot stored before it) to {id}, field by field, a
// page of the participants that changed, appeared or left, and every
// channel whose in-flight messages differ.
func (h *handler) diff(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := paging(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	b, err := h.viewOf(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := r.Context()
	var from snapshot.SnapshotID
	if s := r.FormValue("against"); s != "" {
		from, err = h.resolve(ctx, s)
	} else {
		from, err = h.previous(ctx, b.g.ID)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := struct {
		page
		*diffResult
	}{page: page{Offset: offset, Limit: limit}}
	if from == 0 {
		// The first snapshot stored: nothing to compare with.
		out.diffResult = &diffResult{To: uint64(b.g.ID), Participants: []participantDiff{}, Channels: []channelDiff{}}
		writeJSON(w, http.StatusOK, out)
		return
	}
	a, err := h.load(ctx, from)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := b.diffAgainst(a)
	out.Total, out.Matched = len(d.Participants), len(d.Participants)
	res := *d
	res.Participants = d.Participants[min(offset, len(d.Participants)):min(offset+limit, len(d.Participants))]
	out.diffResult = &res
	writeJSON(w, http.StatusOK, out)
}

// diffAgainst returns the diff from a to v, computing it on first use.
func (v *view) diffAgainst(a *view) *diffResult {
	v.diffMu.Lock()
	defer v.diffMu.Unlock()
	if v.diff != nil && v.diff.From == uint64(a.g.ID) {
		return v.diff
	}
	v.diff = diffViews(a, v)
	return v.diff
}

// diffViews compares snapshot a with snapshot b.
func diffViews(a, b *view) *diffResult {
	d := &diffResult{From: uint64(a.g.ID), To: uint64(b.g.ID), Participants: []participantDiff{}, Channels: []channelDiff{}}
	as, bs := a.allStates(), b.allStates()
	// Both lists are sorted by id: merge them.
	i, j := 0, 0
	for i < len(a.g.Participants) || j < len(b.g.Participants) {
		switch {
		case j == len(b.g.Participants) || (i < len(a.g.Participants) && a.g.Participants[i].ID < b.g.Participants[j].ID):
			p := a.g.Participants[i]
			d.Participants = append(d.Participants, participantDiff{ID: p.ID, Kind: p.Kind, Change: "removed"})
			d.Removed++
			i++
		case i == len(a.g.Participants) || b.g.Participants[j].ID < a.g.Participants[i].ID:
			p := b.g.Participants[j]
			d.Participants = append(d.Participants, participantDiff{ID: p.ID, Kind: p.Kind, Change: "added"})
			d.Added++
			j++
		default:
			p, q := b.g.Participants[j], a.g.Participants[i]
			if !bytes.Equal(p.State, q.State) || p.Departed != q.Departed {
				pd := participantDiff{ID: p.ID, Kind: p.Kind, Change: "changed"}
				for k, c := range decoded.Diff(as[i], bs[j], maxChanges+1) {
					if k == maxChanges {
						pd.More = true
						break
					}
					pd.Changes = append(pd.Changes, changeJSON{Path: c.Path, From: decoded.JSON(c.From, false), To: decoded.JSON(c.To, false), Added: c.Added, Removed: c.Removed, Text: c.String()})
				}
				d.Participants = append(d.Participants, pd)
				d.Changed++
			}
			i++
			j++
		}
	}
	differ := func(c snapshot.Channel, from, to int) {
		d.ChannelsDiffer++
		if len(d.Channels) < maxChannelDiffs {
			d.Channels = append(d.Channels, channelDiff{Channel: c.String(), From: from, To: to})
		}
	}
	for _, c := range b.g.Channels {
		old, _ := a.g.Channel(c.Channel)
		if !sameMessages(old.Messages, c.Messages) {
			differ(c.Channel, len(old.Messages), len(c.Messages))
		}
	}
	for _, c := range a.g.Channels {
		if _, ok := b.g.Channel(c.Channel); !ok && len(c.Messages) > 0 {
			differ(c.Channel, len(c.Messages), 0)
		}
	}
	return d
}

// sameMessages reports whether two channels hold the same messages.
func sameMessages(x, y []snapshot.Message) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		rx, okx := x[i].Payload.(persistence.RecordedMessage)
		ry, oky := y[i].Payload.(persistence.RecordedMessage)
		if !okx || !oky || x[i].Seq != y[i].Seq || rx.Type != ry.Type || !bytes.Equal(rx.Data, ry.Data) {
			return false
		}
	}
	return true
}
