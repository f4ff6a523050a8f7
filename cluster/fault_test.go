package cluster_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var faultTrials = flag.Int("fault-trials", 10, "seeded trials of a member killed mid-snapshot")

// A member killed with SIGKILL while snapshots run: the snapshot in
// progress aborts, naming it, within its timeout; the bank then restores
// from its latest complete snapshot onto two members, with every account
// and every transfer in flight, and its snapshots balance and hold the
// bank's money.
func TestMemberKilledMidSnapshotThenRestore(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	for trial := range *faultTrials {
		seed := base + uint64(trial)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			kids, specs := startCluster(t, 3, 60, 50*time.Millisecond, nil)
			coord := coordinator(kids)
			deadline := time.Now().Add(60 * time.Second)
			waitComplete(t, coord, 2+rng.IntN(3), deadline)
			// A member other than the coordinator, at a seeded moment
			// between two completions: a snapshot is in progress.
			var victim *child
			for victim == nil || victim == coord {
				victim = kids[rng.IntN(len(kids))]
			}
			time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond) // the seeded moment, not a wait for an outcome
			_ = victim.cmd.Process.Kill()
			for {
				l := coord.expect(t, deadline, "aborted")
				if strings.Contains(l, victim.self) {
					t.Logf("%s", l)
					break
				}
			}
			// Every member goes: the bank restarts from its last
			// checkpoint, as Flink restarts a job.
			for _, k := range kids {
				_ = k.cmd.Process.Kill()
				<-k.done
			}
			restoreOnto(t, specs[0], 2)
		})
	}
}

// restoreOnto restores the bank of spec's store onto n new members and
// checks that its snapshots then balance and hold all its money.
func restoreOnto(t *testing.T, spec childSpec, n int) {
	t.Helper()
	kids, _ := startMembers(t, n, spec, true)
	deadline := time.Now().Add(60 * time.Second)
	for _, k := range kids {
		k.self = strings.Fields(k.expect(t, deadline, "member "))[1]
		k.expect(t, deadline, "restored")
	}
	waitComplete(t, coordinator(kids), 3, deadline)
	for _, k := range kids {
		_ = k.cmd.Process.Kill()
	}
}
