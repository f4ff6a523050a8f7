package bankdemo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/persistence"
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
