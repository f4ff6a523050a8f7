package snapshot

import (
	"fmt"
	"slices"
	"strings"
)

// CheckLogged reports whether p's count of logged messages, which
// Recorded returns without a pass over the channels, matches the logs.
func CheckLogged(p *Process) error {
	n := 0
	for _, c := range p.ins {
		n += len(c.log)
	}
	if n != p.logged {
		return fmt.Errorf("%s: %d messages logged, counted %d", p.id, n, p.logged)
	}
	return nil
}

// BackEdgesIn returns the senders whose channels are back edges at p.
func BackEdgesIn(p *Process) []ProcessID { return p.backEdgesIn() }

// AwaitAll makes p's aligned snapshots wait for every known incoming
// channel that is not a back edge again.
func AwaitAll(p *Process) { p.awaitAll() }

// NumberingLayers returns how many entries n's base and extra tables
// hold.
func NumberingLayers(n *Numbering) (base, extra int) { return n.base.len(), n.extra.len() }

// ScanChannels returns the channels a complete Assembler's Global is to
// list, found as build found them before it kept the channels with a
// recording: every channel of every process, sender by sender in name
// order, then by receiver.
func ScanChannels(a *Assembler) []Channel {
	order := make([]int32, len(a.procs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return strings.Compare(string(a.procs[x].id), string(a.procs[y].id)) })
	rank := make([]int32, len(a.procs))
	for r, p := range order {
		rank[p] = int32(r)
	}
	var chans []int32
	for _, p := range order {
		first := len(chans)
		for _, ci := range a.procs[p].chans {
			if c := &a.chans[ci]; c.from == p && c.seen && !a.procs[c.to].departed && ((a.ledger == nil && !a.cfg.Sums) || (c.record != nil && len(c.record.Messages) > 0 && a.procs[c.from].record != nil && a.procs[c.to].record != nil)) {
				chans = append(chans, ci)
			}
		}
		slices.SortFunc(chans[first:], func(x, y int32) int { return int(rank[a.chans[x].to] - rank[a.chans[y].to]) })
	}
	out := make([]Channel, len(chans))
	for i, ci := range chans {
		out[i] = a.name(&a.chans[ci])
	}
	return out
}
