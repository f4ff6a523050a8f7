// Command actorsnap runs the demos and inspects stored snapshots.
//
//	actorsnap run bank --store ./snaps --actors 1000 --interval 200ms --duration 10s
//	actorsnap run bank --members 3 --store ./snaps --duration 1m
//	actorsnap ls --store ./snaps
//	actorsnap show 12 --store ./snaps
//	actorsnap show latest --where 'Balance > 900' --store ./snaps
//	actorsnap verify 12 --store ./snaps
//	actorsnap analyze 12 --store ./snaps
//	actorsnap analyze latest --fail-on-deadlock --format json --store ./snaps
//	actorsnap fsck --set-aside --store ./snaps
//	actorsnap diff 11 12 --store ./snaps
//	actorsnap export 12 --format dot --store ./snaps | dot -Tsvg > snap.svg
//	actorsnap serve --store ./snaps --addr 127.0.0.1:8080
//	actorsnap restore latest --store ./snaps --duration 10s
//	actorsnap restore latest --members 2 --store ./snaps
//
// Every command takes --store: a directory, a file://DIR URL, or a
// postgres:// URL; and --namespace, for a store of its own beside the
// store's. A postgres:// URL is best given without its password, which
// then comes from PGPASSWORD or ~/.pgpass; output shows a store's URL with
// any password masked. A directory store is created private (0700, files
// 0600), and one that others may write to is refused.
//
// Keys make the store sign the snapshots saved, and refuse those whose MAC
// fails (verify, show, restore and the rest): --key-file FILE, or
// $ACTORSNAP_KEY_FILE, names a file of keys, ID:BASE64-SECRET each
// (separated by white space or commas; '#' starts a comment), the first of
// which signs while the others still check what they signed; the file
// must be private (chmod 600). $ACTORSNAP_KEY holds the keys themselves,
// in the same form, instead. --require-signed also refuses snapshots
// without a MAC. Member processes get the same keys. For example:
//
//	(umask 077; printf 'k1:%s\n' "$(head -c 32 /dev/urandom | base64)" > keys)
//	actorsnap run bank --store ./snaps --key-file keys --duration 10s
//	actorsnap verify latest --store ./snaps --key-file keys --require-signed
//
// Errors are one line on stderr and a non-zero exit. analyze
// reports a snapshot's wait-for graph, deadlocks, quiescence and broken
// invariants; it exits 1 on a deadlock only with --fail-on-deadlock.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/cobra"

	_ "github.com/actorsnap/actorsnap/persistence/postgres" // postgres:// stores
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := newRoot(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "actorsnap:", err)
		os.Exit(1)
	}
}

// newRoot builds the command tree writing to out and err.
func newRoot(out, errw io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "actorsnap",
		Short:         "Consistent global snapshots of Proto.Actor systems",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errw)
	storeFlags(root)
	root.AddCommand(runCmd(), restoreCmd(), lsCmd(), showCmd(), verifyCmd(), analyzeCmd(), fsckCmd(), diffCmd(), exportCmd(), memberCmd(), serveCmd())
	return root
}
