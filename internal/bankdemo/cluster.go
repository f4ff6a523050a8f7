package bankdemo

import (
	"context"
	"fmt"
	"time"

	"github.com/actorsnap/actorsnap/cluster"
)

// StartMember starts member m's part of a new bank: it spawns the
// accounts placed on m, waits until every account of the bank is
// reachable from m, so that every transfer is counted on its channel, and
// only then sets money moving (cfg.InFlight chains from each of m's
// accounts). Every member calls it with the same cfg, once Start has
// returned, which it does once the members the bank is placed over have
// joined (cluster.Config.Members). ctx bounds the wait.
func StartMember(ctx context.Context, m *cluster.Member, cfg Config) (*Bank, error) {
	inFlight := cfg.InFlight
	cfg.InFlight = 0
	b, err := Start(m.System(), cfg, m.Owns)
	if err != nil {
		return nil, err
	}
	sys := m.System()
	missing := 0
	reachable := func() bool {
		missing = 0
		for i := range cfg.Accounts {
			if !sys.Reachable(Name(i)) {
				missing++
			}
		}
		return missing == 0
	}
	if err := until(ctx, reachable); err != nil {
		return nil, fmt.Errorf("bankdemo: %d of %d accounts not reachable from %s: %w", missing, cfg.Accounts, m.Self(), err)
	}
	for _, pid := range b.PIDs {
		sys.Root().Send(pid, &Kick{N: inFlight})
	}
	b.InFlight = inFlight
	return b, nil
}

// until polls cond until it holds or ctx ends: the conditions are other
// processes' doing, with no signal here to wait on.
func until(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
