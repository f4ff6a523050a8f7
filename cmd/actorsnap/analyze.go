package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/snapshot"
)

func analyzeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "analyze ID|latest",
		Short: "Show a snapshot's wait-for graph, its deadlocks, whether it is quiescent, and the invariants it broke",
		Long: `analyze reads what a snapshot's participants waited for when they recorded
(requests not answered, and waits an actor declares) and reports:

  - the wait-for graph: each participant that waits, and each edge: whom it
    waits for, the request's number and type, and how long it had waited;
  - the deadlocks: each cycle (or, for participants that wait for any one
    of their waits, each knot) with its edges, and the participants
    blocked on it. A request whose answer is in flight is never part of
    one: the snapshot is a consistent cut, so no deadlock is reported that
    was not there;
  - quiescence: whether the snapshot shows a system that has terminated,
    or the channels in flight, requests not answered and timers set that
    say it has not;
  - the invariants the snapshot broke (actors.WithInvariant), as stored
    with it.

It exits 0 whatever it finds, unless --fail-on-deadlock is given and the
snapshot shows a deadlock: then it exits 1 after the report, with a
one-line error. --format json writes the same report as JSON.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, _ := cmd.Flags().GetString("format")
			if format != "text" && format != "json" {
				return fmt.Errorf("unknown --format %q: want text or json", format)
			}
			g, err := loadArg(cmd, args[0])
			if err != nil {
				return err
			}
			a := analyze(g)
			w := cmd.OutOrStdout()
			if format == "json" {
				err = writeAnalysisJSON(w, a)
			} else {
				err = writeAnalysis(w, a)
			}
			if err != nil {
				return err
			}
			if fail, _ := cmd.Flags().GetBool("fail-on-deadlock"); fail && len(a.deadlocks) > 0 {
				return a.deadlockError()
			}
			return nil
		},
	}
	cmd.Flags().String("format", "text", "text or json")
	cmd.Flags().Bool("fail-on-deadlock", false, "exit 1 if the snapshot shows a deadlock")
	return cmd
}

// analysis is what analyze reports of one snapshot.
type analysis struct {
	g         *snapshot.Global
	waiting   int // participants that wait for something or have a timer set
	deadlocks []snapshot.Deadlock
	busy      *snapshot.NotQuiescentError // nil when the snapshot is quiescent
}

// analyze runs the analyses on g.
func analyze(g *snapshot.Global) analysis {
	a := analysis{g: g, deadlocks: snapshot.Deadlocks(g)}
	for _, p := range g.Participants {
		if !p.Waits.Empty() {
			a.waiting++
		}
	}
	errors.As(snapshot.Quiescent(g), &a.busy)
	return a
}

// deadlockError is analyze's error under --fail-on-deadlock.
func (a analysis) deadlockError() error {
	d := a.deadlocks[0]
	msg := fmt.Sprintf("snapshot %d: %s: %s", a.g.ID, count(len(a.deadlocks), "deadlock"), ids(d.Participants))
	if len(d.Blocked) > 0 {
		msg += fmt.Sprintf(" (blocked on them: %s)", ids(d.Blocked))
	}
	if len(a.deadlocks) > 1 {
		msg += fmt.Sprintf(" and %d more", len(a.deadlocks)-1)
	}
	return errors.New(msg)
}

// named is how many channels, requests or timers a line of the text
// report names before it says how many more there are.
const named = 3

// writeAnalysis writes a as text: a line on the snapshot, then a section
// each for the wait-for graph, the deadlocks, quiescence and the
// invariants.
func writeAnalysis(w io.Writer, a analysis) error {
	g := a.g
	fmt.Fprintf(w, "snapshot %d (%s): %s, taken %s\n", g.ID, g.Mode, count(len(g.Participants), "participant"), g.End.Local().Format(time.DateTime))

	fmt.Fprintln(w)
	if a.waiting == 0 {
		fmt.Fprintln(w, "wait-for graph: no participant waits")
	} else {
		fmt.Fprintf(w, "wait-for graph: %s %s\n", count(a.waiting, "participant"), verb(a.waiting, "waits", "wait"))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PARTICIPANT\tWAITS FOR\tREQUEST\tTYPE\tWAITED")
		for _, p := range g.Participants {
			if p.Waits.Empty() {
				continue
			}
			who := string(p.ID)
			if p.Waits.Any && len(p.Waits.Edges) > 1 {
				who += " (any one)"
			}
			for _, e := range p.Waits.Edges {
				req := "-"
				if e.Request != 0 {
					req = fmt.Sprint(e.Request)
				}
				long := "-"
				if d := since(e.Since, g.End); d != 0 {
					long = d.Round(time.Millisecond).String()
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", who, e.To, req, dash(e.Type), long)
			}
			if p.Waits.Timer {
				fmt.Fprintf(tw, "  %s\t(a timer or queued input)\t-\t-\t-\n", who)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	if len(a.deadlocks) == 0 {
		fmt.Fprintln(w, "deadlocks: no deadlock")
	} else {
		fmt.Fprintf(w, "deadlocks: %d\n", len(a.deadlocks))
		for _, d := range a.deadlocks {
			if len(d.Participants) == 1 {
				fmt.Fprintf(w, "  %s waits for itself", d.Participants[0])
			} else {
				fmt.Fprintf(w, "  %s wait for one another", ids(d.Participants))
			}
			if len(d.Blocked) > 0 {
				fmt.Fprintf(w, "; blocked on them: %s", ids(d.Blocked))
			}
			fmt.Fprintln(w)
			// The cycle first, then the other waits among its participants.
			indent := "    "
			for i, e := range d.Edges {
				if i == d.Cycle {
					fmt.Fprintln(w, "    other waits among them:")
					indent = "      "
				}
				fmt.Fprintf(w, "%s%s\n", indent, edge(e))
			}
		}
	}

	fmt.Fprintln(w)
	if q := a.busy; q == nil {
		fmt.Fprintln(w, "quiescence: quiescent")
	} else {
		fmt.Fprintln(w, "quiescence: not quiescent")
		if len(q.InFlight) > 0 {
			fmt.Fprintf(w, "  %s in flight on %s: %s\n", count(int(q.Messages), "message"), count(len(q.InFlight), "channel"), some(q.InFlight, snapshot.Channel.String))
		}
		if len(q.Requests) > 0 {
			fmt.Fprintf(w, "  %s not answered: %s\n", count(len(q.Requests), "request"), some(q.Requests, edge))
		}
		if len(q.Timers) > 0 {
			fmt.Fprintf(w, "  %d woken from outside the cut (a timer or queued input): %s\n", len(q.Timers), some(q.Timers, func(id snapshot.ProcessID) string { return string(id) }))
		}
	}

	fmt.Fprintln(w)
	if len(g.Violations) == 0 {
		_, err := fmt.Fprintln(w, "invariants: no violation recorded")
		return err
	}
	fmt.Fprintf(w, "invariants: %d violated\n", len(g.Violations))
	for _, v := range g.Violations {
		fmt.Fprintf(w, "  %s: %s\n", v.Invariant, v.Err)
	}
	return nil
}

// edge returns "a waits for b (request 7, *main.Ping, 1.204s)"; a
// declared wait has no request number ("p1 waits for p2 (fork, 1s)").
func edge(e snapshot.WaitEdge) string {
	var parts []string
	if e.Request != 0 {
		parts = append(parts, fmt.Sprintf("request %d", e.Request))
	}
	if e.Type != "" {
		parts = append(parts, e.Type)
	}
	if e.Waited != 0 {
		parts = append(parts, e.Waited.Round(time.Millisecond).String())
	}
	s := fmt.Sprintf("%s waits for %s", e.From, e.To)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// some lists the first few of xs, and how many more there are.
func some[T any](xs []T, str func(T) string) string {
	parts := make([]string, 0, named+1)
	for _, x := range xs[:min(len(xs), named)] {
		parts = append(parts, str(x))
	}
	s := strings.Join(parts, ", ")
	if more := len(xs) - named; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

func ids(xs []snapshot.ProcessID) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = string(x)
	}
	return strings.Join(parts, ", ")
}

// count returns "1 word" or "n words".
func count(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// verb returns one for a count of 1 and many otherwise.
func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// The JSON form of analyze's report. Field names are stable (docs/architecture.md
// lists them); lists are never null.
type (
	jsonAnalysis struct {
		ID           uint64          `json:"id"`
		Mode         string          `json:"mode"`
		Start        time.Time       `json:"start"`
		End          time.Time       `json:"end"`
		Participants int             `json:"participants"`
		Waits        []jsonWaits     `json:"waits"`
		Deadlocks    []jsonDeadlock  `json:"deadlocks"`
		Quiescence   jsonQuiescence  `json:"quiescence"`
		Violations   []jsonViolation `json:"violations"`
	}
	// jsonWaits is what one participant waits for.
	jsonWaits struct {
		Participant string     `json:"participant"`
		Any         bool       `json:"any"`
		Timer       bool       `json:"timer"`
		Edges       []jsonWait `json:"edges"`
	}
	// jsonWait is one wait-for edge. Request is 0 for a declared wait;
	// Since is absent when unknown, and WaitedNS is then 0.
	jsonWait struct {
		From     string    `json:"from"`
		To       string    `json:"to"`
		Request  uint64    `json:"request"`
		Type     string    `json:"type"`
		Since    time.Time `json:"since,omitzero"`
		WaitedNS int64     `json:"waited_ns"`
	}
	// jsonDeadlock is one deadlock: Cycle goes once around a shortest
	// cycle through its first participant; OtherEdges are the rest of
	// the waits among its participants.
	jsonDeadlock struct {
		Participants []string   `json:"participants"`
		Cycle        []jsonWait `json:"cycle"`
		OtherEdges   []jsonWait `json:"other_edges"`
		Blocked      []string   `json:"blocked"`
	}
	jsonQuiescence struct {
		Quiescent        bool             `json:"quiescent"`
		MessagesInFlight uint64           `json:"messages_in_flight"`
		ChannelsInFlight []jsonChannelRef `json:"channels_in_flight"`
		Requests         []jsonWait       `json:"requests"`
		Timers           []string         `json:"timers"`
	}
	jsonChannelRef struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	jsonViolation struct {
		Invariant string `json:"invariant"`
		Error     string `json:"error"`
	}
)

func writeAnalysisJSON(w io.Writer, a analysis) error {
	g := a.g
	out := jsonAnalysis{
		ID: uint64(g.ID), Mode: g.Mode.String(), Start: g.Start, End: g.End, Participants: len(g.Participants),
		Waits: []jsonWaits{}, Deadlocks: []jsonDeadlock{}, Violations: []jsonViolation{},
		Quiescence: jsonQuiescence{Quiescent: a.busy == nil, ChannelsInFlight: []jsonChannelRef{}, Requests: []jsonWait{}, Timers: []string{}},
	}
	for _, p := range g.Participants {
		if p.Waits.Empty() {
			continue
		}
		jw := jsonWaits{Participant: string(p.ID), Any: p.Waits.Any, Timer: p.Waits.Timer, Edges: []jsonWait{}}
		for _, e := range p.Waits.Edges {
			jw.Edges = append(jw.Edges, jsonEdge(snapshot.WaitEdge{From: p.ID, Wait: e, Waited: since(e.Since, g.End)}))
		}
		out.Waits = append(out.Waits, jw)
	}
	for _, d := range a.deadlocks {
		jd := jsonDeadlock{Participants: strs(d.Participants), Blocked: strs(d.Blocked), Cycle: []jsonWait{}, OtherEdges: []jsonWait{}}
		for i, e := range d.Edges {
			if i < d.Cycle {
				jd.Cycle = append(jd.Cycle, jsonEdge(e))
			} else {
				jd.OtherEdges = append(jd.OtherEdges, jsonEdge(e))
			}
		}
		out.Deadlocks = append(out.Deadlocks, jd)
	}
	if q := a.busy; q != nil {
		out.Quiescence.MessagesInFlight = q.Messages
		for _, c := range q.InFlight {
			out.Quiescence.ChannelsInFlight = append(out.Quiescence.ChannelsInFlight, jsonChannelRef{From: string(c.From), To: string(c.To)})
		}
		for _, e := range q.Requests {
			out.Quiescence.Requests = append(out.Quiescence.Requests, jsonEdge(e))
		}
		out.Quiescence.Timers = strs(q.Timers)
	}
	for _, v := range g.Violations {
		out.Violations = append(out.Violations, jsonViolation{Invariant: v.Invariant, Error: v.Err})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func jsonEdge(e snapshot.WaitEdge) jsonWait {
	return jsonWait{From: string(e.From), To: string(e.To), Request: e.Request, Type: e.Type, Since: e.Since, WaitedNS: int64(e.Waited)}
}

// since returns end - t, or zero when either is unknown, as the
// snapshot package times the edges it reports.
func since(t, end time.Time) time.Duration {
	if t.IsZero() || end.IsZero() {
		return 0
	}
	return end.Sub(t)
}

// strs returns ids as strings, never nil.
func strs(ids []snapshot.ProcessID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}
