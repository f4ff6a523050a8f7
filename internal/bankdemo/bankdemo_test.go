package bankdemo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/actorsnap/actorsnap/internal/bankdemo"
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
