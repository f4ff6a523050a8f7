package snapshot

import "fmt"

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
