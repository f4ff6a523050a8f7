package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/cluster/placement"
	"github.com/actorsnap/actorsnap/persistence"
)

// trafficRun is one member's System.Traffic as it left, and the state
// bytes of its participants in the stored snapshots.
type trafficRun struct {
	sends, frames, bytes, markers, state uint64
	stored                               uint64 // over every stored snapshot
	participants                         int    // in one
}

// What a snapshot sends across members, counted by the members as they
// leave (System.Traffic) against the stored snapshots: each participant's
// state crosses the network exactly once a snapshot, from its member to
// the coordinator, and none of the coordinator's own does. The
// coordinator sends a start and an end to each other member; the other
// members' reports, one a participant, go in batches, far fewer sends
// than participants. Both the unaligned and the epoch mode, at 60 and
// 600 accounts.
func TestSnapshotTrafficAcrossMembers(t *testing.T) {
	const snapshots = 8
	for _, mode := range []struct {
		name string
		spec childSpec
	}{{"unaligned", childSpec{}}, {"epoch", childSpec{Epochs: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			perSnapshot := map[int]float64{} // accounts -> a non-coordinator's sends a snapshot, the most of them
			for _, accounts := range []int{60, 600} {
				spec := mode.spec
				spec.Store, spec.Accounts, spec.InFlight, spec.Timeout, spec.Snapshots = t.TempDir(), accounts, 2, 10*time.Second, snapshots
				kids, _ := startMembers(t, 3, spec, false)
				deadline := awaitReady(t, kids)
				// Every member counts from a line it is sent once all are
				// ready, the coordinator last: it begins the snapshots
				// as it reads it.
				coord := coordinator(kids)
				for _, k := range append(slices.DeleteFunc(slices.Clone(kids), func(k *child) bool { return k == coord }), coord) {
					if _, err := fmt.Fprintln(k.stdin, "begin"); err != nil {
						t.Fatal(err)
					}
					k.expect(t, deadline, "counting")
				}
				coord.expect(t, deadline, "taken")
				runs := map[string]*trafficRun{}
				var members []string
				for _, k := range kids {
					k.leaving.Store(true)
					_ = k.stdin.Close()
					var r trafficRun
					l := k.expect(t, deadline, "traffic")
					if _, err := fmt.Sscanf(l, "traffic %d %d %d %d %d", &r.sends, &r.frames, &r.bytes, &r.markers, &r.state); err != nil {
						t.Fatalf("member %s: %q: %v", k.name, l, err)
					}
					k.expect(t, deadline, "bye")
					runs[k.self] = &r
					members = append(members, k.self)
				}
				slices.Sort(members)
				store, err := persistence.OpenURL(context.Background(), spec.Store)
				if err != nil {
					t.Fatal(err)
				}
				ids, err := store.List(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(ids) != snapshots {
					t.Fatalf("%d snapshots stored, want %d", len(ids), snapshots)
				}
				for _, id := range ids {
					g, err := store.Load(context.Background(), id)
					if err != nil {
						t.Fatal(err)
					}
					if err := g.Verify(); err != nil {
						t.Fatalf("snapshot %d: %v", id, err)
					}
					for _, p := range g.Participants {
						r := runs[placement.Owner(string(p.ID), members)]
						r.stored += uint64(len(p.State))
						if id == ids[0] {
							r.participants++
						}
					}
				}
				var most float64
				others := uint64(len(kids) - 1)
				for _, k := range kids {
					r := runs[k.self]
					want := r.stored
					if k == coord {
						want = 0 // its participants report on its own guardian
					}
					t.Logf("%d accounts, member %s%s: %.1f sends, %.1f frames, %.0f bytes, %.1f markers a snapshot; state sent %d bytes, its participants' stored %d",
						accounts, k.name, map[bool]string{true: " (coordinator)"}[k == coord],
						float64(r.sends)/snapshots, float64(r.frames)/snapshots, float64(r.bytes)/snapshots, float64(r.markers)/snapshots, r.state, r.stored)
					if r.state != want {
						t.Errorf("member %s sent %d bytes of state for %d snapshots, want %d: each participant's state once a snapshot", k.name, r.state, snapshots, want)
					}
					sends := float64(r.sends) / snapshots
					switch {
					case k == coord:
						// A start and an end to each other member, and
						// nothing else: no member stops or joins, no
						// coordinator takes over, and no record is
						// refused (a resync would abort a snapshot).
						if r.sends != 2*others*snapshots {
							t.Errorf("the coordinator sent %d times for %d snapshots to %d members, want %d: a start and an end to each", r.sends, snapshots, others, 2*others*snapshots)
						}
					case accounts >= 600 && sends > float64(r.participants)/10:
						t.Errorf("member %s sent %.1f times a snapshot for its %d participants: its reports go about one a send, not in batches", k.name, sends, r.participants)
					default:
						most = max(most, sends)
					}
				}
				perSnapshot[accounts] = most
			}
			t.Logf("a member's guardian sends %.1f times a snapshot at 60 accounts, %.1f at 600", perSnapshot[60], perSnapshot[600])
		})
	}
}
