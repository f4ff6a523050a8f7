package persistence_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// Example saves a snapshot of two accounts, with a transfer in flight
// between them, to a file store and loads it back.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "actorsnap-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := persistence.Open(ctx, dir)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	g := &snapshot.Global{
		ID:    1,
		Start: start,
		End:   start.Add(3 * time.Millisecond),
		Participants: []snapshot.Participant{
			{ID: "alice", Kind: "account", State: []byte(`{"balance":70}`)},
			{ID: "bob", Kind: "account", State: []byte(`{"balance":100}`)},
		},
		Channels: []snapshot.ChannelState{{
			Channel:  snapshot.Channel{From: "alice", To: "bob"},
			Sent:     3,
			Received: 2,
			Messages: []snapshot.Message{{Seq: 3, Payload: persistence.RecordedMessage{Type: "bank.Transfer", Data: []byte(`{"amount":30}`)}}},
		}},
	}
	if err := store.Save(ctx, g); err != nil {
		log.Fatal(err)
	}

	latest, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	state, _ := latest.State("alice")
	fmt.Printf("snapshot %d taken in %v\n", latest.ID, latest.End.Sub(latest.Start))
	fmt.Printf("alice: %s\n", state)
	for _, m := range latest.InFlight(snapshot.Channel{From: "alice", To: "bob"}) {
		rm := m.Payload.(persistence.RecordedMessage)
		fmt.Printf("in flight alice->bob #%d: %s %s\n", m.Seq, rm.Type, rm.Data)
	}
	fmt.Println(store.Save(ctx, g))
	// Output:
	// snapshot 1 taken in 3ms
	// alice: {"balance":70}
	// in flight alice->bob #3: bank.Transfer {"amount":30}
	// persistence: snapshot already stored: 1
}

// ExampleOpenURL opens a store by URL, as a command line or a
// configuration file names it.
func ExampleOpenURL() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "actorsnap-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := persistence.OpenURL(ctx, "file://"+dir)
	if err != nil {
		log.Fatal(err)
	}
	_, err = store.Latest(ctx)
	fmt.Println(err)
	_, err = persistence.OpenURL(ctx, "mysql://db/snaps")
	fmt.Println(errors.Is(err, persistence.ErrUnsupportedScheme))
	// Output:
	// persistence: snapshot not found
	// true
}

// ExampleKeyring signs the snapshots a store saves, and shows a store
// with another secret under the same key id refusing them.
func ExampleKeyring() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "actorsnap-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// In production the keys come from a private file (ReadKeyringFile).
	keys, err := persistence.ParseKeyring("k1:" + base64.StdEncoding.EncodeToString([]byte("an example secret, 32 bytes long")))
	if err != nil {
		log.Fatal(err)
	}
	store, err := persistence.OpenURL(ctx, dir, persistence.Authenticate(keys))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Save(ctx, &snapshot.Global{ID: 1}); err != nil {
		log.Fatal(err)
	}
	_, err = store.Load(ctx, 1)
	fmt.Println(err)

	other, err := persistence.NewKeyring(persistence.Key{ID: "k1", Secret: []byte("another secret, also of 32 bytes")})
	if err != nil {
		log.Fatal(err)
	}
	store, err = persistence.OpenURL(ctx, dir, persistence.Authenticate(other))
	if err != nil {
		log.Fatal(err)
	}
	_, err = store.Load(ctx, 1)
	fmt.Println(errors.Is(err, persistence.ErrUnauthentic))
	fmt.Println(err)
	fmt.Println(persistence.Redact("postgres://snaps:s3cret@db.internal/app?sslmode=verify-full"))
	// Output:
	// <nil>
	// true
	// persistence: snapshot 1 is not authentic: its MAC under key "k1" does not match its content: it was changed after it was saved, or saved with another secret under that id
	// postgres://snaps:xxxxx@db.internal/app?sslmode=verify-full
}
