package cluster_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cluster starts n members of a bank of accounts accounts, on the
// automanaged provider (or etcd when given), sharing a file store.
func startCluster(t *testing.T, n, accounts int, interval time.Duration, etcd []string) ([]*child, []childSpec) {
	t.Helper()
	ports := freePorts(t, 2*n)
	name := fmt.Sprintf("bank-%d", time.Now().UnixNano())
	var seeds []string
	for i := range n {
		seeds = append(seeds, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[n+i])))
	}
	store := t.TempDir()
	var kids []*child
	var specs []childSpec
	for i := range n {
		spec := childSpec{Cluster: name, Port: ports[i], AutoPort: ports[n+i], Seeds: seeds, Etcd: etcd, Store: store,
			Accounts: accounts, InFlight: 2, Members: n, Interval: interval, Timeout: 5 * time.Second}
		specs = append(specs, spec)
		kids = append(kids, startChild(t, fmt.Sprintf("m%d", i), spec))
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, k := range kids {
		k.expect(t, deadline, "ready")
	}
	return kids, specs
}

// Every snapshot of a bank spread over three member processes balances:
// its counters on every channel, those between members included, and its
// money.
func TestBankAcrossThreeMembers(t *testing.T) {
	kids, _ := startCluster(t, 3, 60, 100*time.Millisecond, nil)
	deadline := time.Now().Add(60 * time.Second)
	complete := 0
	for complete < 10 && time.Now().Before(deadline.Add(-50*time.Second)) {
		var l string
		select {
		case l = <-kids[0].lines:
		case l = <-kids[1].lines:
		case l = <-kids[2].lines:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%d snapshots complete in time, want 10", complete)
		}
		switch {
		case strings.HasPrefix(l, "complete"):
			if !strings.HasSuffix(l, " ok") {
				t.Fatalf("inconsistent snapshot: %s", l)
			}
			complete++
			t.Log(l)
		case strings.HasPrefix(l, "error"):
			t.Fatal(l)
		case strings.HasPrefix(l, "aborted"):
			t.Logf("%s", l)
		}
	}
	for _, k := range kids {
		k.stop(t, time.Now().Add(30*time.Second))
	}
}
