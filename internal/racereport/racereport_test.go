package racereport

import (
	"fmt"
	"strings"
	"testing"
)

const report = `==================
WARNING: DATA RACE
Write at 0x00c000123 by goroutine 7:
  github.com/asynkron/protoactor-go/remote.(*BlockList).Block()
      /x/blocklist.go:40 +0x44

Previous read at 0x00c000123 by goroutine 9:
  %s
      /x/y.go:10 +0x10
==================
`

func TestSplitTellsOursFromTheirs(t *testing.T) {
	theirsOnly := "github.com/asynkron/protoactor-go/remote.(*BlockList).IsBlocked()"
	ours := Module + "actors.(*System).deliver()"
	stderr := "noise\n" + fmt.Sprintf(report, theirsOnly) + fmt.Sprintf(report, ours) + fmt.Sprintf(report, theirsOnly)
	o, th := Split(stderr)
	if len(o) != 1 {
		t.Fatalf("ours: %d reports, want 1", len(o))
	}
	if len(th) != 1 {
		t.Fatalf("theirs: %v, want one distinct pair", th)
	}
}

func TestRaceReportsAreTold(t *testing.T) {
	theirs := `
Write at 0x00c0000ddbc1 by main goroutine:
  github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd.(*Provider).Shutdown()
      /x/etcd_provider.go:117 +0x44
  github.com/actorsnap/actorsnap/cluster/membership.(*lateEtcd).Shutdown()
      /x/membership.go:336 +0x64

Previous read at 0x00c0000ddbc1 by goroutine 41:
  github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd.(*Provider).keepAliveForever()
      /x/etcd_provider.go:168 +0x74f

Goroutine 41 (running) created at:
  github.com/actorsnap/actorsnap/cluster/membership.Join()
      /x/membership.go:204 +0x9d2
`
	if InOurCode(theirs) {
		t.Error("a race between two Proto.Actor functions was taken for ours")
	}
	ours := strings.Replace(theirs, "  github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd.(*Provider).keepAliveForever()",
		"  github.com/actorsnap/actorsnap/cluster/membership.(*Membership).update()", 1)
	if !InOurCode(ours) {
		t.Error("a race in Membership.update was not taken for ours")
	}
}
