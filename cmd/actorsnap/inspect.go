package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

func lsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the stored snapshots, the store's owner, and any damaged entry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := openStore(cmd, true)
			if err != nil {
				return err
			}
			defer closeStore(store)
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			if err := writeOwner(ctx, w, store); err != nil {
				return err
			}
			es, err := store.Entries(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTAKEN\tDURATION\tMODE\tACTORS\tIN FLIGHT\tSTATE BYTES")
			damaged := 0
			for _, e := range es {
				g, err := loadEntry(ctx, store, e)
				switch {
				case errors.Is(err, persistence.ErrNotFound):
					continue // deleted meanwhile (retention)
				case persistence.IsDamage(err):
					damaged++
					fmt.Fprintf(tw, "%s\tDAMAGED: %v\n", entryID(e), err)
					continue
				case err != nil:
					tw.Flush()
					return fmt.Errorf("reading %s: %w", entryID(e), err)
				}
				fmt.Fprintf(tw, "%d\t%s\t%v\t%s\t%d\t%d\t%d\n", g.ID, g.End.Local().Format(time.DateTime),
					g.End.Sub(g.Start).Round(time.Microsecond), g.Mode, len(g.Participants), g.TotalInFlight(), g.TotalStateBytes())
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if strict, _ := cmd.Flags().GetBool("strict"); strict && damaged > 0 {
				return fmt.Errorf("%d damaged entries (see actorsnap fsck)", damaged)
			}
			return nil
		},
	}
	cmd.Flags().Bool("strict", false, "exit non-zero if any entry is damaged")
	return cmd
}

// writeOwner writes who owns the store, how far its ids got, whether a
// writer holds it now, and its namespaces.
func writeOwner(ctx context.Context, w io.Writer, store persistence.Store) error {
	o, err := store.Ownership(ctx)
	if err != nil {
		return err
	}
	writer := "none"
	if o.Live {
		writer = "running"
	}
	owner := "nobody (never claimed)"
	if o.Owner.System != "" || o.High > 0 {
		owner = o.Owner.String()
	}
	fmt.Fprintf(w, "owner: %s; highest id %d; writer: %s\n", owner, o.High, writer)
	if n, ok := store.(interface {
		Namespaces(context.Context) ([]string, error)
	}); ok {
		names, err := n.Namespaces(ctx)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			fmt.Fprintf(w, "namespaces: %s (see --namespace)\n", strings.Join(names, ", "))
		}
	}
	fmt.Fprintln(w)
	return nil
}

// loadEntry loads the snapshot of entry e, or returns why it cannot.
func loadEntry(ctx context.Context, store persistence.Store, e persistence.Entry) (*snapshot.Global, error) {
	if e.Damage != nil {
		return nil, e.Damage
	}
	return store.Load(ctx, e.ID)
}

// entryID names an entry in a listing: its id, or its name when it has
// none.
func entryID(e persistence.Entry) string {
	if e.ID == 0 {
		return e.Name
	}
	return fmt.Sprint(e.ID)
}

func fsckCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fsck",
		Short: "Check every entry of the store in full, and set damaged ones aside on request",
		Long: `fsck loads every entry of the store, checking its checksums and that every
channel balances, and reports each. With --set-aside, each damaged entry is
moved out of the store's way (a file store keeps it as .damaged-NAME in its
directory) so that it is no longer listed; its id is never used again.
fsck exits non-zero while a damaged entry is left in place.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			aside, _ := cmd.Flags().GetBool("set-aside")
			store, err := openStore(cmd, true)
			if err != nil {
				return err
			}
			defer closeStore(store)
			ctx := cmd.Context()
			es, err := store.Entries(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			ok, left, moved, failed := 0, 0, 0, 0
			for _, e := range es {
				g, err := loadEntry(ctx, store, e)
				if err == nil {
					if err = g.Verify(); err != nil {
						err = fmt.Errorf("%w: %w", persistence.ErrCorrupt, err)
					}
				}
				switch {
				case err == nil:
					ok++
					fmt.Fprintf(w, "%s: ok\n", entryID(e))
				case errors.Is(err, persistence.ErrNotFound):
					// Deleted meanwhile (retention): nothing to check.
				case errors.Is(err, persistence.ErrFormatVersion):
					left++
					fmt.Fprintf(w, "%s: written by another build, left in place: %v\n", entryID(e), err)
				case !persistence.IsDamage(err):
					// Reading failed (a timeout, an I/O error): that says
					// nothing of the entry, which stays where it is.
					failed++
					fmt.Fprintf(w, "%s: NOT CHECKED: %v\n", entryID(e), err)
				case aside:
					if serr := store.SetAside(ctx, e); serr != nil {
						return fmt.Errorf("setting %s aside: %w", entryID(e), serr)
					}
					moved++
					fmt.Fprintf(w, "%s: DAMAGED, set aside: %v\n", entryID(e), err)
				default:
					left++
					fmt.Fprintf(w, "%s: DAMAGED: %v\n", entryID(e), err)
				}
			}
			fmt.Fprintf(w, "%d ok, %d set aside, %d not ok, %d not checked\n", ok, moved, left, failed)
			switch {
			case failed > 0:
				return fmt.Errorf("%d entries could not be checked (see above)", failed)
			case left > 0:
				return fmt.Errorf("%d entries not ok (--set-aside moves damaged ones out of the way)", left)
			}
			return nil
		},
	}
	cmd.Flags().Bool("set-aside", false, "move each damaged entry out of the store's way")
	return cmd
}

func showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID|latest",
		Short: "Show a snapshot's participants and the messages in flight per channel",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := loadArg(cmd, args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "snapshot %d (%s): %d participants, %d messages in flight, taken %s in %v\n",
				g.ID, g.Mode, len(g.Participants), g.TotalInFlight(), g.End.Local().Format(time.DateTime), g.End.Sub(g.Start).Round(time.Microsecond))
			if a := analyze(g); a.waiting > 0 || len(a.deadlocks) > 0 || len(g.Violations) > 0 {
				fmt.Fprintf(w, "%s %s, %s, %s violated: see actorsnap analyze %d\n", count(a.waiting, "participant"), verb(a.waiting, "waits", "wait"),
					count(len(a.deadlocks), "deadlock"), count(len(g.Violations), "invariant"), g.ID)
			}
			fmt.Fprintln(w)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PARTICIPANT\tKIND\tSTATE BYTES")
			for _, p := range g.Participants {
				kind := p.Kind
				if p.Departed {
					kind = "(stopped)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\n", p.ID, kind, len(p.State))
			}
			tw.Flush()
			fmt.Fprintln(w)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "CHANNEL\tSENT\tRECEIVED\tIN FLIGHT\tTYPES")
			for _, c := range g.Channels {
				if len(c.Messages) == 0 {
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", c.Channel, c.Sent, c.Received, len(c.Messages), types(c.Messages))
			}
			return tw.Flush()
		},
	}
}

// types summarises the message types of a channel's state.
func types(ms []snapshot.Message) string {
	count := map[string]int{}
	for _, m := range ms {
		name := fmt.Sprintf("%T", m.Payload)
		if rm, ok := m.Payload.(actors.RecordedMessage); ok {
			name = rm.Type
		}
		count[name]++
	}
	var parts []string
	for name, n := range count {
		parts = append(parts, fmt.Sprintf("%s×%d", name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func loadArg(cmd *cobra.Command, arg string) (*snapshot.Global, error) {
	store, err := openStore(cmd, true)
	if err != nil {
		return nil, err
	}
	defer closeStore(store)
	return load(cmd.Context(), store, arg)
}

func verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify ID|latest",
		Short: "Check a snapshot's checksums, that every channel balances, and that its states and messages decode; list the invariants it broke",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := loadArg(cmd, args[0]) // the store checks the checksums as it loads
			if err != nil {
				return err
			}
			if err := g.Verify(); err != nil {
				return err
			}
			// The demo's kinds and message types are this program's: every
			// state and message of theirs must decode, as a restore would
			// decode them. A snapshot of another program is not decoded.
			decoded := fmt.Sprintf("%d participants and %d messages decode", len(g.Participants), g.TotalInFlight())
			if err := actors.CheckDecodes(g, bankdemo.Kinds()...); errors.Is(err, actors.ErrUnknownKind) {
				decoded = fmt.Sprintf("%d participants; states not decoded: %v", len(g.Participants), errors.Unwrap(err))
			} else if err != nil {
				return err
			}
			// A broken invariant says something of the system the snapshot
			// shows, not of the snapshot: it is reported, and the snapshot
			// is still ok.
			violated := ""
			if n := len(g.Violations); n > 0 {
				violated = fmt.Sprintf("; but %s %s:", count(n, "invariant"), verb(n, "was violated", "were violated"))
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "snapshot %d: ok: checksums match, %d channels balance (sent before = received before + in flight), %s%s\n",
				g.ID, len(g.Channels), decoded, violated)
			for _, v := range g.Violations {
				fmt.Fprintf(w, "  invariant %s violated: %s\n", v.Invariant, v.Err)
			}
			return nil
		},
	}
}

func diffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "List the actors whose state changed and the channels whose contents differ",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := openStore(cmd, true)
			if err != nil {
				return err
			}
			defer closeStore(store)
			a, err := load(cmd.Context(), store, args[0])
			if err != nil {
				return err
			}
			b, err := load(cmd.Context(), store, args[1])
			if err != nil {
				return err
			}
			diff(cmd.OutOrStdout(), a, b)
			return nil
		},
	}
}

// diff writes what changed from a to b.
func diff(w io.Writer, a, b *snapshot.Global) {
	fmt.Fprintf(w, "snapshot %d -> %d\n", a.ID, b.ID)
	changed, added, removed := 0, 0, 0
	for _, p := range b.Participants {
		q, ok := a.Participant(p.ID)
		switch {
		case !ok:
			fmt.Fprintf(w, "+ %s (%s)\n", p.ID, p.Kind)
			added++
		case !bytes.Equal(p.State, q.State):
			fmt.Fprintf(w, "~ %s: state %d -> %d bytes\n", p.ID, len(q.State), len(p.State))
			changed++
		}
	}
	for _, p := range a.Participants {
		if _, ok := b.Participant(p.ID); !ok {
			fmt.Fprintf(w, "- %s (%s)\n", p.ID, p.Kind)
			removed++
		}
	}
	chans := 0
	for _, c := range b.Channels {
		d, _ := a.Channel(c.Channel)
		if !sameMessages(c.Messages, d.Messages) {
			fmt.Fprintf(w, "~ channel %s: %d -> %d in flight\n", c.Channel, len(d.Messages), len(c.Messages))
			chans++
		}
	}
	for _, c := range a.Channels {
		if _, ok := b.Channel(c.Channel); !ok && len(c.Messages) > 0 {
			fmt.Fprintf(w, "~ channel %s: %d -> 0 in flight\n", c.Channel, len(c.Messages))
			chans++
		}
	}
	fmt.Fprintf(w, "%d actors changed, %d added, %d removed; %d channels differ\n", changed, added, removed, chans)
}

func sameMessages(x, y []snapshot.Message) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		rx, okx := x[i].Payload.(persistence.RecordedMessage)
		ry, oky := y[i].Payload.(persistence.RecordedMessage)
		if !okx || !oky || rx.Type != ry.Type || !bytes.Equal(rx.Data, ry.Data) {
			return false
		}
	}
	return true
}

func exportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export ID|latest",
		Short: "Write a snapshot as JSON, or as a Graphviz DOT graph of actors and channels",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, _ := cmd.Flags().GetString("format")
			if format != "json" && format != "dot" {
				return fmt.Errorf("unknown --format %q: want json or dot", format)
			}
			g, err := loadArg(cmd, args[0])
			if err != nil {
				return err
			}
			if format == "dot" {
				return writeDOT(cmd.OutOrStdout(), g)
			}
			return writeJSON(cmd.OutOrStdout(), g)
		},
	}
	cmd.Flags().String("format", "json", "json or dot")
	return cmd
}

// The JSON form of a snapshot. Bytes are base64, as encoding/json does.
type (
	jsonGlobal struct {
		ID           uint64            `json:"id"`
		Mode         string            `json:"mode"`
		Start        time.Time         `json:"start"`
		End          time.Time         `json:"end"`
		Participants []jsonParticipant `json:"participants"`
		Channels     []jsonChannel     `json:"channels"`
	}
	jsonParticipant struct {
		ID       string `json:"id"`
		Kind     string `json:"kind,omitempty"`
		State    []byte `json:"state"`
		Departed bool   `json:"departed,omitempty"`
	}
	jsonChannel struct {
		From     string        `json:"from"`
		To       string        `json:"to"`
		Sent     uint64        `json:"sent"`
		Received uint64        `json:"received"`
		InFlight []jsonMessage `json:"in_flight,omitempty"`
	}
	jsonMessage struct {
		Seq  uint64 `json:"seq"`
		Type string `json:"type"`
		Data []byte `json:"data"`
	}
)

func writeJSON(w io.Writer, g *snapshot.Global) error {
	out := jsonGlobal{ID: uint64(g.ID), Mode: g.Mode.String(), Start: g.Start, End: g.End}
	for _, p := range g.Participants {
		out.Participants = append(out.Participants, jsonParticipant{ID: string(p.ID), Kind: p.Kind, State: p.State, Departed: p.Departed})
	}
	for _, c := range g.Channels {
		jc := jsonChannel{From: string(c.Channel.From), To: string(c.Channel.To), Sent: c.Sent, Received: c.Received}
		for _, m := range c.Messages {
			rm, _ := m.Payload.(persistence.RecordedMessage)
			jc.InFlight = append(jc.InFlight, jsonMessage{Seq: m.Seq, Type: rm.Type, Data: rm.Data})
		}
		out.Channels = append(out.Channels, jc)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeDOT draws actors as nodes and channels as edges labelled with the
// number of messages in flight on them. Waits follow (writeWaitsDOT);
// a snapshot in which nobody waits is drawn with channels alone.
func writeDOT(w io.Writer, g *snapshot.Global) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph snapshot_%d {\n  rankdir=LR;\n  node [shape=box];\n", g.ID)
	for _, p := range g.Participants {
		style := ""
		if p.Departed {
			style = ", style=dashed"
		}
		fmt.Fprintf(&b, "  %q [label=%q%s];\n", p.ID, fmt.Sprintf("%s\n%s, %d B", p.ID, p.Kind, len(p.State)), style)
	}
	for _, c := range g.Channels {
		attrs := fmt.Sprintf("label=%q", fmt.Sprint(len(c.Messages)))
		if len(c.Messages) > 0 {
			attrs += ", penwidth=2"
		}
		fmt.Fprintf(&b, "  %q -> %q [%s];\n", c.Channel.From, c.Channel.To, attrs)
	}
	writeWaitsDOT(&b, g)
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// The colours of waits in the DOT graph.
const (
	dotWait     = "blue"   // a wait-for edge
	dotDeadlock = "red"    // a deadlock's participants and the waits among them
	dotBlocked  = "orange" // a participant blocked on a deadlock
)

// writeWaitsDOT draws the wait-for graph over the graph of channels: a
// dashed edge from each waiter to each participant it waits for, blue,
// labelled with the request's number (or what a declared wait awaits).
// The participants of each deadlock and the waits among them, which form
// its cycles, are red; the participants blocked on one are orange. The
// attributes of a participant's node are added by a second statement for
// it, so that its first is the same whether or not it waits.
func writeWaitsDOT(b *strings.Builder, g *snapshot.Global) {
	type waitKey struct {
		from, to snapshot.ProcessID
		request  uint64
		typ      string
		since    int64
	}
	key := func(from snapshot.ProcessID, w snapshot.Wait) waitKey {
		return waitKey{from, w.To, w.Request, w.Type, w.Since.UnixNano()}
	}
	inDeadlock := make(map[waitKey]bool)
	for _, d := range snapshot.Deadlocks(g) {
		for _, id := range d.Participants {
			fmt.Fprintf(b, "  %q [color=%s, fontcolor=%s, penwidth=2];\n", id, dotDeadlock, dotDeadlock)
		}
		for _, id := range d.Blocked {
			fmt.Fprintf(b, "  %q [color=%s, fontcolor=%s];\n", id, dotBlocked, dotBlocked)
		}
		for _, e := range d.Edges {
			inDeadlock[key(e.From, e.Wait)] = true
		}
	}
	for _, p := range g.Participants {
		if p.Waits == nil {
			continue
		}
		for _, w := range p.Waits.Edges {
			label := w.Type
			if w.Request != 0 {
				label = fmt.Sprintf("request %d", w.Request)
			}
			colour, width := dotWait, ""
			if inDeadlock[key(p.ID, w)] {
				colour, width = dotDeadlock, ", penwidth=2"
			}
			fmt.Fprintf(b, "  %q -> %q [label=%q, style=dashed, color=%s, fontcolor=%s%s];\n", p.ID, w.To, label, colour, colour, width)
		}
	}
}
