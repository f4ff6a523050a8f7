package snapshottest_test

import (
	"fmt"

	"github.com/actorsnap/actorsnap/snapshot/snapshottest"
)

// A bank of eight processes on two joined rings, three concurrent
// snapshots under random traffic, every invariant checked on each.
func ExampleBankRun() {
	res, err := snapshottest.BankRun{
		Config:    snapshottest.Config{Seed: 7, Graph: snapshottest.TwoRings(4), MaxDelay: 3},
		Initial:   100,
		Rate:      2,
		Ticks:     50,
		Snapshots: 3,
		Broadcast: 0.5,
	}.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("snapshots:", len(res.Network.Completed()), "total:", res.Total)
	// Output:
	// snapshots: 3 total: 800
}
