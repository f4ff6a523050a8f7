package actors

import "fmt"

// checkBudget keeps this participant's part of the messages held for the
// snapshots in progress up to date in the system-wide count, and fails
// its snapshots if its part grew while the count is above WithMaxRecorded
// (docs/design.md, decision 8).
func (p *participant) checkBudget() {
	if total, over := p.grewOverBudget(); over {
		p.overBudget(total)
	}
}

// grewOverBudget recounts this participant's part and reports whether it
// grew while the system-wide count is over WithMaxRecorded.
func (p *participant) grewOverBudget() (total int64, over bool) {
	grew, total := p.recount()
	return total, grew && p.sys.pastBudget(total)
}

// recount brings the system-wide count (System.recorded) up to date with
// the messages this participant holds for snapshots in progress: recorded
// as channel state, and held for senders paused behind aligned barriers.
// It reports whether its part grew, and the count after. A participant
// whose part did not change touches nothing shared.
func (p *participant) recount() (grew bool, total int64) {
	n := p.proc.Recorded() + p.nReports
	if p.aligned {
		n += p.mb.Held() + len(p.held)
	}
	if n == p.counted || p.stopped.Load() {
		// Unchanged; or stopped: depart took its part out, once, and what
		// its mailbox still sorts is held for no one.
		return false, 0
	}
	grew = n > p.counted
	total = p.sys.recorded.Add(int64(n - p.counted))
	p.counted = n
	return grew, total
}

// overHeld runs in the mailbox, between two messages, when messages are
// held for paused senders: it counts them at once, so that a flood from a
// paused sender alone is caught, and, over the budget, the participant
// fails its snapshots at its next message, which it posts itself in case
// the paused senders' are the only ones coming.
func (p *participant) overHeld(int) {
	if _, over := p.grewOverBudget(); over && !p.budget {
		p.budget = true
		p.mb.PostFrom(controlKey, &budgetMsg{})
	}
}

// overBudget fails every snapshot this participant records channels for or
// aligns, holding n messages, and lets go of those messages at once: it
// discards its recordings, and forgets the aligned snapshot it has not
// recorded, which resumes the senders it held paused. It does not forget
// the snapshots it recorded: until the guardian has aborted them, this
// participant's first messages must still say it recorded them.
func (p *participant) overBudget(total int64) {
	err := fmt.Errorf("%w: %s holds %d messages in flight, %d system-wide, above %d (WithMaxRecorded)",
		ErrOverBudget, p.id, p.counted, total, p.sys.cfg.maxRecorded)
	for _, id := range p.proc.Active() {
		p.fail(id, err)
		p.proc.Discard(id)
		p.dropReports(id)
	}
	if id, _ := p.proc.Awaiting(); id != 0 {
		p.fail(id, err)
		p.forget = append(p.forget, id)
	}
}

// pastBudget reports whether total, the messages held for snapshots in
// progress system-wide (System.recorded), is above WithMaxRecorded.
func (s *System) pastBudget(total int64) bool { return total > int64(s.cfg.maxRecorded) }
