package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/decoded"
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
	cmd := &cobra.Command{
		Use:   "show ID|latest",
		Short: "Show a snapshot's participants with their state decoded, and the messages in flight per channel",
		Long: `show lists a snapshot's participants, each with its state decoded from
msgpack (a state that is not msgpack shows as its size), then its channels
with messages in flight and those messages decoded. Values are cut to fit
a line; --full writes them whole.

Queries narrow what is shown:
  --participant NAME  that participant's whole state, and every channel into
                      and out of it with its messages (repeatable)
  --channel A->B      that channel's counters and its messages, whole (repeatable)
  --where 'Balance < 0'
                      only the participants whose state matches: PATH OP VALUE,
                      OP one of == != < <= > >=; repeatable, all must match
  --kind KIND         only the participants of that kind (repeatable)`,
		Example: `  actorsnap show latest --store ./snaps
  actorsnap show 12 --participant acct-00003 --store ./snaps
  actorsnap show 12 --channel 'acct-00003->acct-00004' --store ./snaps
  actorsnap show 12 --where 'Balance > 1500' --kind account --store ./snaps`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := readShowQuery(cmd) // before the store: a usage error needs none
			if err != nil {
				return err
			}
			g, err := loadArg(cmd, args[0])
			if err != nil {
				return err
			}
			v, err := q.view(g)
			if err != nil {
				return err
			}
			return v.write(cmd.OutOrStdout(), g)
		},
	}
	f := cmd.Flags()
	f.Bool("full", false, "write states and messages whole instead of cut to fit a line")
	f.Int("limit", 0, "at most N rows in each table, then a line saying how many more (0: all)")
	f.StringArray("participant", nil, "show this participant whole, with the channels into and out of it (repeatable)")
	f.StringArray("channel", nil, "show this channel, SENDER->RECEIVER, with its messages whole (repeatable)")
	f.StringArray("where", nil, "only participants whose state matches PATH OP VALUE, e.g. 'Balance < 0' (repeatable: all must match)")
	f.StringArray("kind", nil, "only participants of this kind (repeatable)")
	return cmd
}

// lineWidth is the width, in runes, that show fits its lines to unless
// told to write values whole.
const lineWidth = 100

// minValueWidth is the least room a decoded value gets in a line, however
// wide the columns before it.
const minValueWidth = 30

// showQuery is what show's flags ask for.
type showQuery struct {
	names    []snapshot.ProcessID // --participant
	channels []string             // --channel, as given: resolved against the snapshot
	where    []*decoded.Query     // --where
	kinds    []string             // --kind
	full     bool                 // --full
	limit    int                  // --limit
}

// readShowQuery reads show's flags, and refuses those that cannot be
// right whatever the snapshot.
func readShowQuery(cmd *cobra.Command) (*showQuery, error) {
	f := cmd.Flags()
	q := &showQuery{}
	q.full, _ = f.GetBool("full")
	q.limit, _ = f.GetInt("limit")
	if q.limit < 0 {
		return nil, fmt.Errorf("--limit %d: want 0 (all) or more", q.limit)
	}
	names, _ := f.GetStringArray("participant")
	for _, n := range names {
		q.names = append(q.names, snapshot.ProcessID(n))
	}
	q.channels, _ = f.GetStringArray("channel")
	for _, c := range q.channels {
		if !strings.Contains(c, "->") {
			return nil, fmt.Errorf("--channel %q: want SENDER->RECEIVER, e.g. acct-00001->acct-00002", c)
		}
	}
	where, _ := f.GetStringArray("where")
	for _, w := range where {
		dq, err := decoded.ParseQuery(w)
		if err != nil {
			return nil, fmt.Errorf("--where %q: %w", w, err)
		}
		q.where = append(q.where, dq)
	}
	q.kinds, _ = f.GetStringArray("kind")
	return q, nil
}

// showView is what show writes of one snapshot.
type showView struct {
	// participants are listed when listParticipants; of total, those the
	// query selected.
	participants     []snapshot.Participant
	listParticipants bool
	total            int
	filtered         string // the filters, when some narrowed the list
	// channels are listed when listChannels, with their messages.
	channels     []snapshot.ChannelState
	listChannels bool
	named        bool // channels were asked for by name: list them even when empty
	full         bool
	limit        int
}

// view selects what q asks for of g. A named participant or channel that
// g does not have is an error.
func (q *showQuery) view(g *snapshot.Global) (*showView, error) {
	v := &showView{total: len(g.Participants), full: q.full, limit: q.limit}
	byName := len(q.names) > 0 || len(q.channels) > 0
	v.listParticipants = len(q.channels) == 0 || len(q.names) > 0 || len(q.kinds) > 0 || len(q.where) > 0
	v.listChannels = byName || len(q.kinds) == 0 && len(q.where) == 0
	v.named = byName
	v.full = q.full || byName

	named := make(map[snapshot.ProcessID]bool, len(q.names))
	for _, n := range q.names {
		if _, ok := g.Participant(n); !ok {
			return nil, fmt.Errorf("snapshot %d has no participant %q", g.ID, n)
		}
		named[n] = true
	}
	var filters []string
	if len(q.kinds) > 0 {
		filters = append(filters, "kind "+strings.Join(q.kinds, " or "))
	}
	for _, w := range q.where {
		filters = append(filters, w.String())
	}
	v.filtered = strings.Join(filters, " and ")
	if v.listParticipants {
		for _, p := range g.Participants {
			if len(named) > 0 && !named[p.ID] || len(q.kinds) > 0 && !slices.Contains(q.kinds, p.Kind) {
				continue
			}
			if len(q.where) > 0 && !matchesAll(q.where, decoded.State(p)) {
				continue
			}
			v.participants = append(v.participants, p)
		}
	}

	if !byName {
		for _, c := range g.Channels {
			if len(c.Messages) > 0 {
				v.channels = append(v.channels, c)
			}
		}
		return v, nil
	}
	chosen := make(map[snapshot.Channel]bool)
	for _, arg := range q.channels {
		c, err := findChannel(g, arg)
		if err != nil {
			return nil, err
		}
		chosen[c] = true
	}
	for _, c := range g.Channels {
		if chosen[c.Channel] || named[c.Channel.From] || named[c.Channel.To] {
			v.channels = append(v.channels, c)
		}
	}
	return v, nil
}

// matchesAll reports whether state matches every query.
func matchesAll(qs []*decoded.Query, state any) bool {
	for _, q := range qs {
		if !q.Match(state) {
			return false
		}
	}
	return true
}

// findChannel finds the channel arg names, SENDER->RECEIVER. A name may
// hold "->" itself, so each place it occurs is tried as the split.
func findChannel(g *snapshot.Global, arg string) (snapshot.Channel, error) {
	var first snapshot.Channel
	for i := 0; ; {
		j := strings.Index(arg[i:], "->")
		if j < 0 {
			break
		}
		c := snapshot.Channel{From: snapshot.ProcessID(arg[:i+j]), To: snapshot.ProcessID(arg[i+j+2:])}
		if _, ok := g.Channel(c); ok {
			return c, nil
		}
		if i == 0 {
			first = c
		}
		i += j + 2
	}
	for _, id := range []snapshot.ProcessID{first.From, first.To} {
		if _, ok := g.Participant(id); !ok {
			return snapshot.Channel{}, fmt.Errorf("--channel %q: snapshot %d has no participant %q", arg, g.ID, id)
		}
	}
	if g.Mode == snapshot.Epochs {
		return snapshot.Channel{}, fmt.Errorf("--channel %q: snapshot %d has no such channel with messages in flight (an epoch-mode snapshot lists only those)", arg, g.ID)
	}
	return snapshot.Channel{}, fmt.Errorf("--channel %q: snapshot %d has no such channel (nothing was sent on it)", arg, g.ID)
}

// write writes v: the header, the participants, the channels and their
// messages in flight, each table cut at v.limit rows.
func (v *showView) write(w io.Writer, g *snapshot.Global) error {
	fmt.Fprintf(w, "snapshot %d (%s): %d participants, %d messages in flight, taken %s in %v\n",
		g.ID, g.Mode, len(g.Participants), g.TotalInFlight(), g.End.Local().Format(time.DateTime), g.End.Sub(g.Start).Round(time.Microsecond))
	if a := analyze(g); a.waiting > 0 || len(a.deadlocks) > 0 || len(g.Violations) > 0 {
		fmt.Fprintf(w, "%s %s, %s, %s violated: see actorsnap analyze %d\n", count(a.waiting, "participant"), verb(a.waiting, "waits", "wait"),
			count(len(a.deadlocks), "deadlock"), count(len(g.Violations), "invariant"), g.ID)
	}
	if v.listParticipants {
		fmt.Fprintln(w)
		if v.filtered != "" {
			fmt.Fprintf(w, "%d of %d participants match %s\n", len(v.participants), v.total, v.filtered)
		}
		if len(v.participants) > 0 {
			t := &table{header: []string{"PARTICIPANT", "KIND", "BYTES", "STATE"}, what: "participants"}
			for _, p := range v.participants {
				if p.Departed {
					t.addBlank(string(p.ID), "(stopped)", "0")
					continue
				}
				t.add(decoded.State(p), string(p.ID), p.Kind, fmt.Sprint(len(p.State)))
			}
			if err := t.write(w, v.full, v.limit); err != nil {
				return err
			}
		}
	}
	if !v.listChannels {
		return nil
	}
	fmt.Fprintln(w)
	if len(v.channels) == 0 {
		fmt.Fprintln(w, "no messages in flight")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tSENT\tRECEIVED\tIN FLIGHT\tTYPES")
	msgs := &table{header: []string{"CHANNEL", "SEQ", "TYPE", "MESSAGE"}, what: "messages"}
	withSender := false
	for i, c := range v.channels {
		ms := decoded.Messages(c.Messages)
		if v.limit == 0 || i < v.limit {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", c.Channel, c.Sent, c.Received, len(c.Messages), types(ms))
		}
		for _, m := range ms {
			msgs.add(m.Value, c.Channel.String(), fmt.Sprint(m.Seq), m.Type, m.Sender)
			withSender = withSender || m.Sender != ""
		}
	}
	if n := len(v.channels) - v.limit; v.limit > 0 && n > 0 {
		fmt.Fprintf(tw, "… %d more channels (--limit 0 shows all)\n", n)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(msgs.rows) == 0 {
		return nil
	}
	if withSender {
		msgs.header = []string{"CHANNEL", "SEQ", "TYPE", "SENDER", "MESSAGE"}
	} else {
		for i := range msgs.rows {
			msgs.rows[i].cells = msgs.rows[i].cells[:3]
		}
	}
	fmt.Fprintln(w)
	return msgs.write(w, v.full, v.limit)
}

// table is a table whose last column is a decoded value, cut so that a
// row fits lineWidth unless written whole.
type table struct {
	header []string
	rows   []tableRow
	what   string // what the rows are, for the line that says how many more
}

type tableRow struct {
	cells []string // the columns before the value
	value any
	blank bool // no value: a stopped participant has no state
}

// add adds a row of cells and a value.
func (t *table) add(value any, cells ...string) {
	t.rows = append(t.rows, tableRow{cells: cells, value: value})
}

// addBlank adds a row of cells with an empty last column.
func (t *table) addBlank(cells ...string) {
	t.rows = append(t.rows, tableRow{cells: cells, blank: true})
}

// write writes the first limit rows (all with limit 0), then a line
// saying how many more there are.
func (t *table) write(w io.Writer, full bool, limit int) error {
	rows := t.rows
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	// The room the value has is what the columns before it, as tabwriter
	// pads them, leave of the line.
	widths := make([]int, len(t.header)-1)
	for i := range widths {
		widths[i] = utf8.RuneCountInString(t.header[i])
	}
	for _, r := range rows {
		for i, c := range r.cells {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	room := lineWidth
	for _, wd := range widths {
		room -= wd + 2
	}
	room = max(room, minValueWidth)
	if full {
		room = 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range rows {
		value := ""
		if !r.blank {
			value = decoded.Format(r.value, room)
		}
		fmt.Fprintf(tw, "%s\t%s\n", strings.Join(r.cells, "\t"), value)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := len(t.rows) - len(rows); n > 0 {
		fmt.Fprintf(w, "… %d more %s (--limit 0 shows all)\n", n, t.what)
	}
	return nil
}

// types summarises the types of a channel's messages in flight.
func types(ms []decoded.Message) string {
	count := map[string]int{}
	for _, m := range ms {
		count[m.Type]++
	}
	if len(count) == 0 {
		return "-"
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
			// An epoch snapshot lists only the channels in flight; its
			// receivers' counts prove that none is missing.
			receivers := ""
			if g.ReceiverCounts {
				n := 0
				for _, p := range g.Participants {
					if !p.Departed {
						n++
					}
				}
				receivers = fmt.Sprintf(", %d receivers balance (sent to it = received + in flight)", n)
			}
			// One counted in sums proves the same with two totals.
			if s := g.Sums; s != nil {
				receivers += fmt.Sprintf(", the sums balance (%d sent before the records = %d received + %d in flight)", s.Sent, s.Received, g.TotalInFlight())
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "snapshot %d: ok: checksums match, %d channels balance (sent before = received before + in flight)%s, %s%s\n",
				g.ID, len(g.Channels), receivers, decoded, violated)
			for _, v := range g.Violations {
				fmt.Fprintf(w, "  invariant %s violated: %s\n", v.Invariant, v.Err)
			}
			return nil
		},
	}
}

func diffCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "List the fields of states that changed, the participants that came and left, and the messages in flight that changed on each channel",
		Long: `diff compares snapshot A with snapshot B, decoding states and messages:

  ~ acct-00000: Balance 762 -> 801        fields that changed (+ added, - removed)
  + acct-00100 (account)                  a participant that B has and A not
  - acct-00007 (account)                  one that A has and B not
  ~ channel a->b: 2 -> 1 in flight        a channel whose messages in flight changed,
  ~ channel a->b: - #12 bank.transfer {Amount: 5}    then each message gone
  ~ channel a->b: + #14 bank.transfer {Amount: 7}    and each new one

A few changes per participant and messages per channel are listed, values
cut short, and a line says how many more; --full lists them all, whole.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			full, _ := cmd.Flags().GetBool("full")
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
			diff(cmd.OutOrStdout(), a, b, full)
			return nil
		},
	}
	cmd.Flags().Bool("full", false, "list every change and message, whole")
	return cmd
}

// What diff lists unless told to list all: the changes of one
// participant, the messages gone and new of one channel, and the runes
// of a value in a change.
const (
	diffChanges    = 6
	diffMessages   = 10
	diffValueWidth = 30
)

// diff writes what changed from a to b; full lists every change, whole.
func diff(w io.Writer, a, b *snapshot.Global, full bool) {
	fmt.Fprintf(w, "snapshot %d -> %d\n", a.ID, b.ID)
	changed, added, removed := 0, 0, 0
	for _, p := range b.Participants {
		q, ok := a.Participant(p.ID)
		switch {
		case !ok:
			fmt.Fprintf(w, "+ %s (%s)\n", p.ID, p.Kind)
			added++
		case p.Departed != q.Departed:
			what := "stopped"
			if !p.Departed {
				what = "running again: " + decoded.Format(decoded.State(p), lineWidth)
			}
			fmt.Fprintf(w, "~ %s: %s\n", p.ID, what)
			changed++
		case p.Kind != q.Kind || !bytes.Equal(p.State, q.State):
			fmt.Fprintf(w, "~ %s: %s\n", p.ID, stateChanges(q, p, full))
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
		if messageChanges(w, c.Channel, d.Messages, c.Messages, full) {
			chans++
		}
	}
	for _, c := range a.Channels {
		if _, ok := b.Channel(c.Channel); !ok && messageChanges(w, c.Channel, c.Messages, nil, full) {
			chans++
		}
	}
	fmt.Fprintf(w, "%d actors changed, %d added, %d removed; %d channels differ\n", changed, added, removed, chans)
}

// stateChanges says what changed from participant p's state to q's: the
// changes of its fields, separated by ", ".
func stateChanges(p, q snapshot.Participant, full bool) string {
	var parts []string
	if p.Kind != q.Kind {
		parts = append(parts, fmt.Sprintf("kind %s -> %s", p.Kind, q.Kind))
	}
	cs := decoded.Diff(decoded.State(p), decoded.State(q), 0)
	shown, width := cs, 0
	if !full {
		shown, width = cs[:min(len(cs), diffChanges)], diffValueWidth
	}
	for _, c := range shown {
		parts = append(parts, formatChange(c, width))
	}
	if n := len(cs) - len(shown); n > 0 {
		parts = append(parts, fmt.Sprintf("… %d more", n))
	}
	if len(cs) == 0 && !bytes.Equal(p.State, q.State) {
		parts = append(parts, fmt.Sprintf("same values, encoded differently (%d -> %d bytes)", len(p.State), len(q.State)))
	}
	return strings.Join(parts, ", ")
}

// formatChange writes c as Change.String does, its values cut to width
// runes (0: whole). The change of a whole state (path "") is named
// "state".
func formatChange(c decoded.Change, width int) string {
	path := c.Path
	if path == "" {
		path = "state"
	}
	switch {
	case c.Added:
		return "+ " + path + " " + decoded.Format(c.To, width)
	case c.Removed:
		return "- " + path + " " + decoded.Format(c.From, width)
	}
	return path + " " + decoded.Format(c.From, width) + " -> " + decoded.Format(c.To, width)
}

// messageChanges writes the messages in flight on ch that were in from
// and are not in to, and those in to that were not in from, and reports
// whether there were any. A message is the same in both when its number,
// type and encoding are.
func messageChanges(w io.Writer, ch snapshot.Channel, from, to []snapshot.Message, full bool) bool {
	in := func(ms []snapshot.Message) map[string]int {
		n := make(map[string]int, len(ms))
		for _, m := range ms {
			n[messageKey(m)]++
		}
		return n
	}
	// not returns the messages of ms beyond those counted in other.
	not := func(ms []snapshot.Message, other map[string]int) []snapshot.Message {
		var out []snapshot.Message
		for _, m := range ms {
			k := messageKey(m)
			if other[k] > 0 {
				other[k]--
				continue
			}
			out = append(out, m)
		}
		return out
	}
	gone, added := not(from, in(to)), not(to, in(from))
	if len(gone) == 0 && len(added) == 0 {
		return false
	}
	fmt.Fprintf(w, "~ channel %s: %d -> %d in flight\n", ch, len(from), len(to))
	lines := 0
	for _, part := range []struct {
		sign string
		ms   []snapshot.Message
	}{{"-", gone}, {"+", added}} {
		for _, m := range decoded.Messages(part.ms) {
			if !full && lines == diffMessages {
				fmt.Fprintf(w, "~ channel %s: … %d more\n", ch, len(gone)+len(added)-lines)
				return true
			}
			prefix := fmt.Sprintf("~ channel %s: %s #%d %s ", ch, part.sign, m.Seq, m.Type)
			width := 0
			if !full {
				width = max(lineWidth-utf8.RuneCountInString(prefix), minValueWidth)
			}
			fmt.Fprintf(w, "%s%s\n", prefix, decoded.Format(m.Value, width))
			lines++
		}
	}
	return true
}

// messageKey identifies a message in flight on a channel: its number,
// type and encoding.
func messageKey(m snapshot.Message) string {
	if rm, ok := m.Payload.(persistence.RecordedMessage); ok {
		return fmt.Sprintf("%d\x00%s\x00%s", m.Seq, rm.Type, rm.Data)
	}
	return fmt.Sprintf("%d\x00%T\x00%v", m.Seq, m.Payload, m.Payload)
}

func exportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export ID|latest",
		Short: "Write a snapshot as JSON, states and messages decoded, or as a Graphviz DOT graph of actors and channels",
		Long: `export writes a snapshot as JSON (--format json): each participant's
"state" and each message's "value" decoded from msgpack (a state that is
not msgpack as {"$undecoded": reason, "size": n}); --raw adds the bytes as
stored, base64, as "state_bytes" and "data". Or as a Graphviz DOT graph
(--format dot): participants as nodes labelled with their kind and a
summary of their state, channels as edges labelled with the number of
messages in flight on them, waits dashed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, _ := cmd.Flags().GetString("format")
			raw, _ := cmd.Flags().GetBool("raw")
			if format != "json" && format != "dot" {
				return fmt.Errorf("unknown --format %q: want json or dot", format)
			}
			if raw && format != "json" {
				return errors.New("--raw is for --format json")
			}
			g, err := loadArg(cmd, args[0])
			if err != nil {
				return err
			}
			if format == "dot" {
				return writeDOT(cmd.OutOrStdout(), g)
			}
			return writeJSON(cmd.OutOrStdout(), g, raw)
		},
	}
	cmd.Flags().String("format", "json", "json or dot")
	cmd.Flags().Bool("raw", false, "with json: add the bytes as stored, base64 (state_bytes, data)")
	return cmd
}

// The JSON form of a snapshot. States and messages are decoded
// (decoded.JSON); the bytes as stored are base64, as encoding/json writes
// them, when asked for.
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
		ID         string `json:"id"`
		Kind       string `json:"kind,omitempty"`
		State      any    `json:"state"`
		StateBytes []byte `json:"state_bytes,omitempty"`
		Departed   bool   `json:"departed,omitempty"`
	}
	jsonChannel struct {
		From     string        `json:"from"`
		To       string        `json:"to"`
		Sent     uint64        `json:"sent"`
		Received uint64        `json:"received"`
		InFlight []jsonMessage `json:"in_flight,omitempty"`
	}
	jsonMessage struct {
		Seq    uint64 `json:"seq"`
		Type   string `json:"type"`
		Sender string `json:"sender,omitempty"`
		Value  any    `json:"value"`
		// With --raw: the recorded message as stored, its type name
		// when it differs from Type (a message recorded with its
		// envelope) and its bytes.
		RecordedType string `json:"recorded_type,omitempty"`
		Data         []byte `json:"data,omitempty"`
	}
)

// writeJSON writes g as JSON, decoded; raw adds the bytes as stored.
func writeJSON(w io.Writer, g *snapshot.Global, raw bool) error {
	out := jsonGlobal{ID: uint64(g.ID), Mode: g.Mode.String(), Start: g.Start, End: g.End}
	for _, p := range g.Participants {
		jp := jsonParticipant{ID: string(p.ID), Kind: p.Kind, State: decoded.JSON(decoded.State(p), raw), Departed: p.Departed}
		if raw {
			jp.StateBytes = p.State
		}
		out.Participants = append(out.Participants, jp)
	}
	for _, c := range g.Channels {
		jc := jsonChannel{From: string(c.Channel.From), To: string(c.Channel.To), Sent: c.Sent, Received: c.Received}
		for i, m := range decoded.Messages(c.Messages) {
			jm := jsonMessage{Seq: m.Seq, Type: m.Type, Sender: m.Sender, Value: decoded.JSON(m.Value, raw)}
			if rm, ok := c.Messages[i].Payload.(persistence.RecordedMessage); ok && raw {
				jm.Data = rm.Data
				if rm.Type != m.Type {
					jm.RecordedType = rm.Type
				}
			}
			jc.InFlight = append(jc.InFlight, jm)
		}
		out.Channels = append(out.Channels, jc)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// dotStateWidth is the runes of a state's summary in a DOT node's label.
const dotStateWidth = 40

// writeDOT draws actors as nodes, labelled with their kind, the size of
// their state and its first runes decoded, and channels as edges
// labelled with the number of messages in flight on them. Waits follow
// (writeWaitsDOT); a snapshot in which nobody waits is drawn with
// channels alone.
func writeDOT(w io.Writer, g *snapshot.Global) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph snapshot_%d {\n  rankdir=LR;\n  node [shape=box];\n", g.ID)
	for _, p := range g.Participants {
		style := ""
		label := fmt.Sprintf("%s\n%s, %d B", p.ID, p.Kind, len(p.State))
		if p.Departed {
			style = ", style=dashed"
		} else {
			label += "\n" + decoded.Format(decoded.State(p), dotStateWidth)
		}
		fmt.Fprintf(&b, "  %q [label=%q%s];\n", p.ID, label, style)
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
