package actors_test

import (
	"context"
	"fmt"
	"os"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/persistence"
)

// The README's quick start: two accounts, a snapshot stored in a file
// store, and a new system restored from it, as after a crash. The README
// shows the code below this function, word for word.
func Example_quickstart() {
	dir, err := os.MkdirTemp("", "actorsnap-quickstart-")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer os.RemoveAll(dir)
	if err := quickstart(context.Background(), dir); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// snapshot 1: 2 participants, consistent, stored
	// restored from snapshot 1: [alice bob]
}

// Account is an actor; its exported fields are its state in a snapshot.
type Account struct{ Balance int64 }

// Transfer pays Amount to the receiver, or from it to To if set.
type Transfer struct {
	To     *actor.PID
	Amount int64
}

func (a *Account) Receive(ctx actor.Context) {
	if t, ok := ctx.Message().(*Transfer); ok {
		if t.To == nil {
			a.Balance += t.Amount
			return
		}
		a.Balance -= t.Amount
		ctx.Send(t.To, &Transfer{Amount: t.Amount}) // stamped: may be caught in flight
	}
}

func newAccount() actor.Actor { return &Account{Balance: 100} }

func quickstart(ctx context.Context, dir string) error {
	store, err := persistence.Open(ctx, dir) // the file store; keep dir to keep the snapshots
	if err != nil {
		return err
	}
	types := []actors.Option{
		actors.WithMessage[*Transfer]("bank.transfer"), // a type that may be recorded in flight
		actors.WithKind("account", newAccount),         // what a restore rebuilds "account"s from
	}
	sys, err := actors.NewSystem(append(types,
		actors.WithStore(store),       // default: in memory
		actors.WithSystemName("bank"), // the store's owner: another system is refused
	)...)
	if err != nil {
		return err
	}
	// Proto.Actor's own Props and spawn calls; one option makes a participant.
	props := actor.PropsFromProducer(newAccount, sys.Snapshotted("account"))
	alice, err := sys.Root().SpawnNamed(props, "alice")
	if err != nil {
		return err
	}
	bob, err := sys.Root().SpawnNamed(props, "bob")
	if err != nil {
		return err
	}
	sys.Root().Send(alice, &Transfer{To: bob, Amount: 30})

	g, err := sys.Snapshot(ctx) // complete, verified (g.Verify) and stored
	if err != nil {
		return err
	}
	fmt.Printf("snapshot %d: %d participants, consistent, stored\n", g.ID, len(g.Participants))
	if err := sys.Shutdown(ctx); err != nil {
		return err
	}

	// After a crash, in a new process: Restore continues the system from a
	// stored snapshot (0: the latest), with the same types.
	restored, err := actors.Restore(ctx, store, g.ID, types...)
	if err != nil {
		return err
	}
	fmt.Printf("restored from snapshot %d: %v\n", g.ID, restored.Participants())
	return restored.Shutdown(ctx)
}
