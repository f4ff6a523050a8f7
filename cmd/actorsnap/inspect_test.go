package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// inspectCLI runs the command line in this process, as main does, and
// returns what it wrote to stdout.
func inspectCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	root := newRoot(&out, &errw)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// mustInspect is inspectCLI for a command that must succeed.
func mustInspect(t *testing.T, args ...string) string {
	t.Helper()
	out, err := inspectCLI(t, args...)
	require.NoError(t, err, "%v", args)
	return out
}

// account is a bank account's state, decoded with msgpack as a restore
// decodes it, to check what the command line decodes without the type.
type account struct {
	Balance int64
	Peers   []string
}

// bankSnapshot runs the bank demo into a new store and returns the store
// and its latest snapshot, with each account decoded.
func bankSnapshot(t *testing.T) (string, *snapshot.Global, map[snapshot.ProcessID]account) {
	t.Helper()
	store := filepath.Join(t.TempDir(), "snaps")
	runSmallBank(t, store)
	s, err := persistence.Open(context.Background(), store)
	require.NoError(t, err)
	g, err := s.Latest(context.Background())
	require.NoError(t, err)
	return store, g, accounts(t, g)
}

func accounts(t *testing.T, g *snapshot.Global) map[snapshot.ProcessID]account {
	t.Helper()
	out := make(map[snapshot.ProcessID]account)
	for _, p := range g.Participants {
		var a account
		require.NoError(t, msgpack.Unmarshal(p.State, &a), p.ID)
		out[p.ID] = a
	}
	return out
}

// amount decodes a bank transfer in flight as a restore decodes it.
func amount(t *testing.T, m snapshot.Message) int64 {
	t.Helper()
	v, err := actors.DecodeMessage(m.Payload.(persistence.RecordedMessage), bankdemo.Messages)
	require.NoError(t, err)
	return v.(*bankdemo.Transfer).Amount
}

// stateText is an account as show writes it.
func stateText(a account) string {
	peers := make([]string, len(a.Peers))
	for i, p := range a.Peers {
		peers[i] = fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("{Balance: %d, Peers: [%s]}", a.Balance, strings.Join(peers, ", "))
}

// rows returns the first column of the rows of the table of show's
// output whose header's first columns are header.
func rows(out string, header ...string) []string {
	var ids []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= len(header) && slices.Equal(f[:len(header)], header):
			in = true
		case l == "":
			in = false
		case in && !strings.HasPrefix(l, "…"):
			ids = append(ids, strings.Fields(l)[0])
		}
	}
	return ids
}

// show, export --format json and DOT decode the bank's states and
// messages to the values a restore decodes.
func TestInspectDecodesBank(t *testing.T) {
	store, g, accts := bankSnapshot(t)
	require.NotZero(t, g.TotalInFlight(), "the bank has transfers in flight")

	out := mustInspect(t, "show", "latest", "--store", store)
	for _, p := range g.Participants {
		assert.Regexp(t, fmt.Sprintf(`(?m)^%s +account +%d +%s$`, p.ID, len(p.State), regexp.QuoteMeta(stateText(accts[p.ID]))), out)
	}
	for _, c := range g.Channels {
		if len(c.Messages) > 0 {
			assert.Regexp(t, fmt.Sprintf(`(?m)^%s +%d +%d +%d +bank\.transfer×%d$`, regexp.QuoteMeta(c.Channel.String()), c.Sent, c.Received, len(c.Messages), len(c.Messages)), out)
		}
		for _, m := range c.Messages {
			assert.Regexp(t, fmt.Sprintf(`(?m)^%s +%d +bank\.transfer +\{Amount: %d\}$`, regexp.QuoteMeta(c.Channel.String()), m.Seq, amount(t, m)), out)
		}
	}
	fitsLines(t, out)

	var doc struct {
		ID           uint64 `json:"id"`
		Participants []struct {
			ID         string `json:"id"`
			Kind       string `json:"kind"`
			State      account
			StateBytes []byte `json:"state_bytes"`
		} `json:"participants"`
		Channels []struct {
			From, To string
			Sent     uint64
			InFlight []struct {
				Seq   uint64
				Type  string
				Value struct{ Amount int64 }
				Data  []byte
			} `json:"in_flight"`
		} `json:"channels"`
	}
	for _, raw := range []bool{false, true} {
		args := []string{"export", "latest", "--store", store}
		if raw {
			args = append(args, "--raw")
		}
		require.NoError(t, json.Unmarshal([]byte(mustInspect(t, args...)), &doc))
		assert.Equal(t, uint64(g.ID), doc.ID)
		require.Len(t, doc.Participants, len(g.Participants))
		for i, p := range g.Participants {
			jp := doc.Participants[i]
			assert.Equal(t, string(p.ID), jp.ID)
			assert.Equal(t, "account", jp.Kind)
			assert.Equal(t, accts[p.ID], jp.State, "%s: the Balance export writes is the account's", p.ID)
			if raw {
				assert.Equal(t, p.State, jp.StateBytes, "--raw: the bytes as stored")
			} else {
				assert.Nil(t, jp.StateBytes)
			}
		}
		require.Len(t, doc.Channels, len(g.Channels))
		for i, c := range g.Channels {
			jc := doc.Channels[i]
			assert.Equal(t, c.Channel, snapshot.Channel{From: snapshot.ProcessID(jc.From), To: snapshot.ProcessID(jc.To)})
			assert.Equal(t, c.Sent, jc.Sent)
			require.Len(t, jc.InFlight, len(c.Messages))
			for j, m := range c.Messages {
				jm := jc.InFlight[j]
				assert.Equal(t, m.Seq, jm.Seq)
				assert.Equal(t, "bank.transfer", jm.Type)
				assert.Equal(t, amount(t, m), jm.Value.Amount)
				if raw {
					assert.Equal(t, m.Payload.(persistence.RecordedMessage).Data, jm.Data)
				} else {
					assert.Nil(t, jm.Data)
				}
			}
		}
	}

	out = mustInspect(t, "export", "latest", "--format", "dot", "--store", store)
	dg, err := parseDOT(out)
	require.NoError(t, err, out)
	p := g.Participants[0]
	label := fmt.Sprintf("%s\naccount, %d B\n%s", p.ID, len(p.State), stateText(accts[p.ID]))
	assert.Equal(t, dotName(t, snapshot.ProcessID(label[:strings.LastIndex(label, "\n")+1+dotStateWidth-1]+"…")), dg.nodes[string(p.ID)]["label"],
		"the label ends in the first %d runes of the state", dotStateWidth)
	graphvizReads(t, "bank", out)
	_, err = inspectCLI(t, "export", "latest", "--format", "dot", "--raw", "--store", store)
	assert.ErrorContains(t, err, "--raw is for --format json")
}

// The queries of show select what they say, checked against the
// accounts decoded with their Go type.
func TestShowQueriesBank(t *testing.T) {
	store, g, accts := bankSnapshot(t)
	ids := func(pick func(account) bool) []string {
		var out []string
		for _, p := range g.Participants {
			if pick(accts[p.ID]) {
				out = append(out, string(p.ID))
			}
		}
		return out
	}
	var bal []int64
	for _, a := range accts {
		bal = append(bal, a.Balance)
	}
	slices.Sort(bal)
	median, low := bal[len(bal)/2], bal[len(bal)/4]

	t.Run("where", func(t *testing.T) {
		for _, tc := range []struct {
			where []string
			pick  func(account) bool
		}{
			{[]string{fmt.Sprintf("Balance > %d", median)}, func(a account) bool { return a.Balance > median }},
			{[]string{fmt.Sprintf("Balance <= %d", median)}, func(a account) bool { return a.Balance <= median }},
			{[]string{fmt.Sprintf("Balance >= %d", low), fmt.Sprintf("Balance < %d", median)}, func(a account) bool { return a.Balance >= low && a.Balance < median }},
			{[]string{"Balance < 0"}, func(a account) bool { return a.Balance < 0 }},
			{[]string{`Peers[0] == "acct-00001"`}, func(a account) bool { return a.Peers[0] == "acct-00001" }},
			{[]string{`Owner == "ann"`}, func(account) bool { return false }},
		} {
			args := []string{"show", "latest", "--store", store}
			for _, w := range tc.where {
				args = append(args, "--where", w)
			}
			out := mustInspect(t, args...)
			want := ids(tc.pick)
			assert.Equal(t, want, rows(out, "PARTICIPANT"), "%v", tc.where)
			assert.Contains(t, out, fmt.Sprintf("%d of %d participants match %s\n", len(want), len(g.Participants), strings.Join(tc.where, " and ")))
			assert.NotContains(t, out, "CHANNEL", "a query of states lists participants only")
		}
	})

	t.Run("kind", func(t *testing.T) {
		out := mustInspect(t, "show", "latest", "--kind", "account", "--where", fmt.Sprintf("Balance > %d", median), "--store", store)
		assert.Equal(t, ids(func(a account) bool { return a.Balance > median }), rows(out, "PARTICIPANT"))
		out = mustInspect(t, "show", "latest", "--kind", "router", "--store", store)
		assert.Contains(t, out, fmt.Sprintf("0 of %d participants match kind router\n", len(g.Participants)))
		assert.Empty(t, rows(out, "PARTICIPANT"))
	})

	t.Run("channel", func(t *testing.T) {
		busiest := g.Channels[0]
		for _, c := range g.Channels {
			if len(c.Messages) > len(busiest.Messages) {
				busiest = c
			}
		}
		// The bank runs in the default, epoch, mode: its snapshots list
		// only the channels with something in flight.
		require.Equal(t, snapshot.Epochs, g.Mode)
		for _, c := range g.Channels {
			assert.NotEmpty(t, c.Messages, "%s is listed with nothing in flight", c.Channel)
		}
		out := mustInspect(t, "show", "latest", "--channel", busiest.Channel.String(), "--store", store)
		assert.NotContains(t, out, "PARTICIPANT")
		assert.Equal(t, []string{busiest.Channel.String()}, rows(out, "CHANNEL", "SENT"))
		var msgs []string
		for _, m := range busiest.Messages {
			msgs = append(msgs, busiest.Channel.String())
			assert.Regexp(t, fmt.Sprintf(`(?m)^%s +%d +bank\.transfer +\{Amount: %d\}$`, regexp.QuoteMeta(busiest.Channel.String()), m.Seq, amount(t, m)), out)
		}
		assert.Equal(t, msgs, rows(out, "CHANNEL", "SEQ"), "the channel's messages only")
	})

	t.Run("participant", func(t *testing.T) {
		// One with a channel listed: with something in flight.
		require.NotEmpty(t, g.Channels)
		p, ok := g.Participant(g.Channels[len(g.Channels)/2].Channel.From)
		require.True(t, ok)
		out := mustInspect(t, "show", "latest", "--participant", string(p.ID), "--store", store)
		assert.Equal(t, []string{string(p.ID)}, rows(out, "PARTICIPANT"))
		assert.Regexp(t, fmt.Sprintf(`(?m)^%s +account +%d +%s$`, p.ID, len(p.State), regexp.QuoteMeta(stateText(accts[p.ID]))), out)
		var want []string
		for _, c := range g.Channels {
			if c.Channel.From == p.ID || c.Channel.To == p.ID {
				want = append(want, c.Channel.String())
			}
		}
		require.NotEmpty(t, want)
		assert.Equal(t, want, rows(out, "CHANNEL", "SENT"), "every channel into and out of it")
	})

	t.Run("errors", func(t *testing.T) {
		var stranger snapshot.Channel
		for _, p := range g.Participants[1:] {
			c := snapshot.Channel{From: g.Participants[0].ID, To: p.ID}
			if _, ok := g.Channel(c); !ok {
				stranger = c
				break
			}
		}
		require.NotEmpty(t, stranger.To)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--where", "Balance <"}, `--where "Balance <": `},
			{[]string{"--where", "Balance ~ 3"}, `--where "Balance ~ 3": `},
			{[]string{"--channel", "acct-00001-acct-00002"}, "want SENDER->RECEIVER"},
			{[]string{"--channel", "acct-00001->nobody"}, `snapshot ` + fmt.Sprint(g.ID) + ` has no participant "nobody"`},
			{[]string{"--channel", stranger.String()}, "has no such channel"},
			{[]string{"--participant", "nobody"}, `has no participant "nobody"`},
			{[]string{"--limit", "-1"}, "--limit -1"},
		} {
			_, err := inspectCLI(t, append([]string{"show", "latest", "--store", store}, tc.args...)...)
			assert.ErrorContains(t, err, tc.want, "%v", tc.args)
		}
		// A query that cannot parse is refused before the store is opened.
		_, err := inspectCLI(t, "show", "latest", "--where", "Balance <", "--store", filepath.Join(t.TempDir(), "none"))
		assert.ErrorContains(t, err, "--where")
	})
}

// diff of two of the bank's snapshots names each account whose Balance
// changed, with its two values, and no other.
func TestDiffBank(t *testing.T) {
	store := filepath.Join(t.TempDir(), "snaps")
	runSmallBank(t, store)
	ids := storedIDs(t, store)
	s, err := persistence.Open(context.Background(), store)
	require.NoError(t, err)
	a, err := s.Load(context.Background(), snapshot.SnapshotID(ids[0]))
	require.NoError(t, err)
	b, err := s.Load(context.Background(), snapshot.SnapshotID(ids[len(ids)-1]))
	require.NoError(t, err)
	before, after := accounts(t, a), accounts(t, b)

	out := mustInspect(t, "diff", fmt.Sprint(ids[0]), fmt.Sprint(ids[len(ids)-1]), "--store", store)
	changed := 0
	for id, x := range before {
		line := fmt.Sprintf("~ %s: Balance %d -> %d\n", id, x.Balance, after[id].Balance)
		if x.Balance == after[id].Balance {
			assert.NotContains(t, out, fmt.Sprintf("~ %s:", id))
			continue
		}
		changed++
		assert.Contains(t, out, line)
	}
	assert.Contains(t, out, fmt.Sprintf("\n%d actors changed, 0 added, 0 removed; ", changed))
	assert.Regexp(t, `(?m)^~ channel acct-\d+->acct-\d+: [-+] #\d+ bank\.transfer \{Amount: \d+\}$`, out)
}

// fitsLines checks that the lines of show's tables fit lineWidth (the
// header's line names the snapshot, and may be longer).
func fitsLines(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n")[1:] {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), lineWidth, "fits a line: %q", l)
	}
}

// handMade returns msgpack data of v.
func handMade(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	require.NoError(t, err)
	return b
}

// ordered is a msgpack map in the order of its keys, as a struct's
// fields are encoded.
type ordered struct {
	Balance int64
	Owner   string
	Items   []int
}

// notMsgpack is 58 bytes that are not msgpack (0xc1 is never used).
var notMsgpack = append([]byte{0xc1}, bytes.Repeat([]byte{7}, 57)...)

// saveHandMade saves gs into a new file store and returns it.
func saveHandMade(t *testing.T, gs ...*snapshot.Global) string {
	t.Helper()
	store := filepath.Join(t.TempDir(), "snaps")
	s, err := persistence.Open(context.Background(), store)
	require.NoError(t, err)
	for _, g := range gs {
		require.NoError(t, s.Save(context.Background(), g))
	}
	return store
}

// transfer is a bank transfer recorded as actors records one.
func transfer(t *testing.T, seq uint64, amount int64) snapshot.Message {
	return snapshot.Message{Seq: seq, Payload: persistence.RecordedMessage{Type: "bank.transfer", Data: handMade(t, map[string]int64{"Amount": amount})}}
}

// A snapshot made by hand: a state too long for a line is cut, whole with
// --full; a state that is not msgpack and a message that is not are
// labelled with their size; a request shows its sender; --limit cuts the
// tables.
func TestShowHandMade(t *testing.T) {
	items := make([]int, 200)
	for i := range items {
		items[i] = i
	}
	long := ordered{Balance: 762, Owner: "ann", Items: items}
	request := struct {
		Sender *actor.PID         `msgpack:"s"`
		Data   msgpack.RawMessage `msgpack:"d"`
	}{&actor.PID{Address: "node-1", Id: "$7"}, handMade(t, map[string]string{"Key": "k1"})}
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	g := &snapshot.Global{ID: 1, Start: end.Add(-time.Millisecond), End: end,
		Participants: []snapshot.Participant{
			{ID: "a-long", Kind: "account", State: handMade(t, long)},
			{ID: "b-raw", Kind: "blob", State: notMsgpack},
			{ID: "c-gone", Departed: true},
			{ID: "d-poor", Kind: "account", State: handMade(t, ordered{Balance: -5, Owner: "bob"})},
		},
		Channels: []snapshot.ChannelState{{
			Channel: snapshot.Channel{From: "a-long", To: "b-raw"}, Sent: 3,
			Messages: []snapshot.Message{
				transfer(t, 1, 5),
				{Seq: 2, Payload: persistence.RecordedMessage{Type: "kv.get", Data: []byte{0xc1, 1, 2}}},
				{Seq: 3, Payload: persistence.RecordedMessage{Type: "@kv.get", Data: handMade(t, request)}},
			},
		}},
	}
	store := saveHandMade(t, g)

	out := mustInspect(t, "show", "1", "--store", store)
	fitsLines(t, out)
	assert.Regexp(t, `(?m)^a-long +account +\d+ +\{Balance: 762, Owner: "ann", Items: \[0, 1, 2, [0-9, ]+…$`, out)
	assert.Regexp(t, `(?m)^b-raw +blob +58 +<58 bytes, not msgpack>$`, out)
	assert.Regexp(t, `(?m)^c-gone +\(stopped\) +0 *$`, out)
	assert.Regexp(t, `(?m)^d-poor +account +\d+ +\{Balance: -5, Owner: "bob", Items: null\}$`, out)
	assert.Regexp(t, `(?m)^CHANNEL +SEQ +TYPE +SENDER +MESSAGE$`, out)
	assert.Regexp(t, `(?m)^a-long->b-raw +1 +bank\.transfer +\{Amount: 5\}$`, out)
	assert.Regexp(t, `(?m)^a-long->b-raw +2 +kv\.get +<3 bytes, not msgpack>$`, out)
	assert.Regexp(t, `(?m)^a-long->b-raw +3 +kv\.get +node-1/\$7 +\{Key: "k1"\}$`, out)

	full := mustInspect(t, "show", "1", "--full", "--store", store)
	whole := fmt.Sprint(items)
	whole = strings.ReplaceAll(whole[1:len(whole)-1], " ", ", ")
	assert.Contains(t, full, `{Balance: 762, Owner: "ann", Items: [`+whole+`]}`)
	assert.Equal(t, full, mustInspect(t, "show", "1", "--participant", "a-long", "--participant", "b-raw", "--participant", "c-gone", "--participant", "d-poor", "--store", store),
		"naming every participant shows all, whole")

	out = mustInspect(t, "show", "1", "--where", "Balance < 0", "--store", store)
	assert.Equal(t, []string{"d-poor"}, rows(out, "PARTICIPANT"), "a state that is not msgpack matches nothing")
	out = mustInspect(t, "show", "1", "--where", `Owner >= "ann"`, "--where", "Items[199] == 199", "--store", store)
	assert.Equal(t, []string{"a-long"}, rows(out, "PARTICIPANT"))

	out = mustInspect(t, "show", "1", "--limit", "2", "--store", store)
	assert.Equal(t, []string{"a-long", "b-raw"}, rows(out, "PARTICIPANT"))
	assert.Contains(t, out, "\n… 2 more participants (--limit 0 shows all)\n")
	assert.Contains(t, out, "\n… 1 more messages (--limit 0 shows all)\n")

	var doc struct {
		Participants []struct {
			State      map[string]any `json:"state"`
			StateBytes []byte         `json:"state_bytes"`
		} `json:"participants"`
		Channels []struct {
			InFlight []map[string]any `json:"in_flight"`
		} `json:"channels"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustInspect(t, "export", "1", "--store", store)), &doc))
	raw := doc.Participants[1]
	assert.Equal(t, float64(58), raw.State["size"])
	assert.Contains(t, raw.State["$undecoded"], "not msgpack")
	assert.NotContains(t, raw.State, "bytes")
	assert.Nil(t, doc.Participants[2].State, "a stopped participant has no state")
	msgs := doc.Channels[0].InFlight
	assert.Equal(t, "kv.get", msgs[2]["type"])
	assert.Equal(t, "node-1/$7", msgs[2]["sender"])
	assert.Equal(t, map[string]any{"Key": "k1"}, msgs[2]["value"])

	require.NoError(t, json.Unmarshal([]byte(mustInspect(t, "export", "1", "--raw", "--store", store)), &doc))
	assert.Equal(t, notMsgpack, doc.Participants[1].StateBytes)
	assert.NotEmpty(t, doc.Participants[1].State["bytes"], "--raw keeps the bytes that do not decode")
	assert.Equal(t, "@kv.get", doc.Channels[0].InFlight[2]["recorded_type"], "--raw: the type as recorded, with its envelope")
}

// diff names the fields that changed, the participants that came and
// left, and the messages gone from and new on each channel, a few per
// channel unless --full.
func TestDiffHandMade(t *testing.T) {
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	many := func(from uint64, n int) []snapshot.Message {
		var ms []snapshot.Message
		for i := range n {
			ms = append(ms, transfer(t, from+uint64(i), int64(i)))
		}
		return ms
	}
	a := &snapshot.Global{ID: 1, Start: end.Add(-time.Second), End: end.Add(-time.Second + time.Millisecond),
		Participants: []snapshot.Participant{
			{ID: "acct-1", Kind: "account", State: handMade(t, ordered{Balance: 762, Owner: "ann", Items: []int{1, 2}})},
			{ID: "acct-2", Kind: "account", State: handMade(t, ordered{Balance: 5})},
			{ID: "gone", Kind: "account", State: handMade(t, ordered{})},
			{ID: "raw", Kind: "blob", State: notMsgpack[:10]},
		},
		Channels: []snapshot.ChannelState{
			{Channel: snapshot.Channel{From: "acct-1", To: "acct-2"}, Sent: 2, Messages: []snapshot.Message{transfer(t, 1, 5), transfer(t, 2, 6)}},
			{Channel: snapshot.Channel{From: "acct-2", To: "acct-1"}, Sent: 3, Received: 3},
		},
	}
	b := &snapshot.Global{ID: 2, Start: end.Add(-time.Millisecond), End: end,
		Participants: []snapshot.Participant{
			{ID: "acct-1", Kind: "account", State: handMade(t, ordered{Balance: 801, Owner: "ann", Items: []int{1, 2, 3}})},
			{ID: "acct-2", Kind: "account", State: handMade(t, ordered{Balance: 5})},
			{ID: "new", Kind: "account", State: handMade(t, ordered{})},
			{ID: "raw", Kind: "blob", State: notMsgpack[:12]},
		},
		Channels: []snapshot.ChannelState{
			{Channel: snapshot.Channel{From: "acct-1", To: "acct-2"}, Sent: 3, Received: 1, Messages: []snapshot.Message{transfer(t, 2, 6), transfer(t, 3, 7)}},
			{Channel: snapshot.Channel{From: "acct-2", To: "acct-1"}, Sent: 18, Received: 3, Messages: many(4, 15)},
		},
	}
	store := saveHandMade(t, a, b)
	out := mustInspect(t, "diff", "1", "2", "--store", store)
	assert.Equal(t, `snapshot 1 -> 2
~ acct-1: Balance 762 -> 801, + Items[2] 3
+ new (account)
~ raw: state <10 bytes, not msgpack> -> <12 bytes, not msgpack>
- gone (account)
~ channel acct-1->acct-2: 2 -> 2 in flight
~ channel acct-1->acct-2: - #1 bank.transfer {Amount: 5}
~ channel acct-1->acct-2: + #3 bank.transfer {Amount: 7}
~ channel acct-2->acct-1: 0 -> 15 in flight
~ channel acct-2->acct-1: + #4 bank.transfer {Amount: 0}
~ channel acct-2->acct-1: + #5 bank.transfer {Amount: 1}
~ channel acct-2->acct-1: + #6 bank.transfer {Amount: 2}
~ channel acct-2->acct-1: + #7 bank.transfer {Amount: 3}
~ channel acct-2->acct-1: + #8 bank.transfer {Amount: 4}
~ channel acct-2->acct-1: + #9 bank.transfer {Amount: 5}
~ channel acct-2->acct-1: + #10 bank.transfer {Amount: 6}
~ channel acct-2->acct-1: + #11 bank.transfer {Amount: 7}
~ channel acct-2->acct-1: + #12 bank.transfer {Amount: 8}
~ channel acct-2->acct-1: + #13 bank.transfer {Amount: 9}
~ channel acct-2->acct-1: … 5 more
2 actors changed, 1 added, 1 removed; 2 channels differ
`, out)

	full := mustInspect(t, "diff", "1", "2", "--full", "--store", store)
	assert.Contains(t, full, "~ channel acct-2->acct-1: + #18 bank.transfer {Amount: 14}\n")
	assert.NotContains(t, full, "more")

	// Many changes of one participant are cut, values too.
	changed := func(owner string, items []int) string {
		x := make([]int, len(items))
		var c strings.Builder
		diff(&c, &snapshot.Global{Participants: []snapshot.Participant{{ID: "p", State: handMade(t, ordered{Owner: strings.Repeat("a", 100), Items: x})}}},
			&snapshot.Global{Participants: []snapshot.Participant{{ID: "p", State: handMade(t, ordered{Owner: owner, Items: items})}}}, false)
		return c.String()
	}
	lots := make([]int, 20)
	for i := range lots {
		lots[i] = i + 1000
	}
	assert.Equal(t, `snapshot 0 -> 0
~ p: Items[0] 0 -> 1000, Items[1] 0 -> 1001, Items[2] 0 -> 1002, Items[3] 0 -> 1003, Items[4] 0 -> 1004, Items[5] 0 -> 1005, … 15 more
1 actors changed, 0 added, 0 removed; 0 channels differ
`, changed("b", lots))
	assert.Equal(t, `snapshot 0 -> 0
~ p: Items[0] 0 -> 1000, Owner "`+strings.Repeat("a", diffValueWidth-2)+`… -> "b"
1 actors changed, 0 added, 0 removed; 0 channels differ
`, changed("b", lots[:1]))
}
