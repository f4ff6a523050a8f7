package bankdemo_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

func TestRunPrintsConsistentSnapshots(t *testing.T) {
	var out bytes.Buffer
	err := bankdemo.Run(context.Background(), &out, bankdemo.RunConfig{
		Config:   bankdemo.Config{Accounts: 200, Initial: 100, Chords: 2, InFlight: 2, Seed: 3},
		Interval: 20 * time.Millisecond,
		Duration: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), " yes") || strings.Contains(out.String(), "NO:") {
		t.Fatalf("no consistent snapshot reported:\n%s", out.String())
	}
}

func TestResumeContinuesWithTheSameMoney(t *testing.T) {
	store := persistence.NewMemory()
	cfg := bankdemo.RunConfig{
		Config:   bankdemo.Config{Accounts: 100, Initial: 100, Chords: 2, InFlight: 2, Seed: 5},
		Interval: 20 * time.Millisecond,
		Duration: 300 * time.Millisecond,
		Options:  []actors.Option{actors.WithStore(store)},
	}
	var out bytes.Buffer
	if err := bankdemo.Run(context.Background(), &out, cfg); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	out.Reset()
	if err := bankdemo.Resume(context.Background(), &out, store, 0, cfg); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "restored 100 accounts, $10000") || strings.Contains(out.String(), "NO:") {
		t.Fatalf("resume:\n%s", out.String())
	}
}

func TestKindsDecodeTheBanksSnapshots(t *testing.T) {
	store := persistence.NewMemory()
	var out bytes.Buffer
	err := bankdemo.Run(context.Background(), &out, bankdemo.RunConfig{
		Config:   bankdemo.Config{Accounts: 20, Initial: 100, Chords: 2, InFlight: 2, Seed: 7},
		Interval: 20 * time.Millisecond,
		Duration: 200 * time.Millisecond,
		Options:  []actors.Option{actors.WithStore(store)},
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	g, err := store.Latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g.TotalInFlight() == 0 {
		t.Fatal("no transfer in flight to check")
	}
	if err := actors.CheckDecodes(g, bankdemo.Kinds()...); err != nil {
		t.Fatal(err)
	}

	// An account stored by a build whose Balance was a string.
	g.Participants[3].State, err = msgpack.Marshal(struct{ Balance string }{"100"})
	if err != nil {
		t.Fatal(err)
	}
	err = actors.CheckDecodes(g, bankdemo.Kinds()...)
	want := `participant acct-00003 (kind "account", type *bankdemo.Account): state does not decode: msgpack: invalid code=a3 decoding int64`
	if !errors.Is(err, actors.ErrStateDecode) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want ErrStateDecode and %q", err, want)
	}
}

// Every message and state type of the demo comes back from a snapshot
// whole.
func TestTypesRoundTrip(t *testing.T) {
	for _, v := range []any{
		&bankdemo.Transfer{Amount: 5}, &bankdemo.Peers{Names: []string{"a", "b"}}, &bankdemo.Kick{N: 2},
		&bankdemo.Account{Balance: 7, Peers: []string{"a"}},
	} {
		if err := actors.RoundTrip(v); err != nil {
			t.Fatal(err)
		}
	}
}

// A bank one of whose accounts stopped: a snapshot after holds it as
// departed, without its balance, so Check finds money missing, while
// Verdict counts it and holds the snapshot to consistency.
func TestVerdictHoldsABankWithAStoppedAccountToConsistency(t *testing.T) {
	sys, err := actors.NewSystem(bankdemo.Kind(100), bankdemo.Messages)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sys.Shutdown(context.Background()) }()
	bank, err := bankdemo.Start(sys, bankdemo.Config{Accounts: 10, Initial: 100, Chords: 2, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range bank.PIDs {
		sys.Root().Send(pid, &bankdemo.Kick{N: 2})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := sys.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if departed, err := bankdemo.Verdict(g, 1000); departed != 0 || err != nil {
		t.Fatalf("all accounts running: departed %d, %v", departed, err)
	}
	if err := sys.Root().StopFuture(bank.PIDs[3]).Wait(); err != nil {
		t.Fatal(err)
	}
	// Snapshots until one holds the stopped account: it does while what
	// it sent is still counted on its channels.
	for {
		g, err = sys.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := g.Participant(snapshot.ProcessID(bankdemo.Name(3))); ok && p.Departed {
			break
		}
		if _, ok := g.Participant(snapshot.ProcessID(bankdemo.Name(3))); !ok {
			t.Fatal("the stopped account was dropped before any snapshot held it as departed")
		}
	}
	if err := bankdemo.Check(g, 1000); err == nil {
		t.Fatal("Check found all the money with an account's balance missing")
	}
	departed, err := bankdemo.Verdict(g, 1000)
	if departed != 1 || err != nil {
		t.Fatalf("one account stopped: departed %d, %v", departed, err)
	}
}
