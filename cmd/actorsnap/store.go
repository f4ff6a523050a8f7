package main

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// storeFlags are the flags every command takes to name a store.
func storeFlags(root *cobra.Command) {
	root.PersistentFlags().String("store", "./actorsnap-data", "snapshot store: a directory, file://DIR or postgres://...")
	root.PersistentFlags().String("namespace", "", "a namespace of the store: a store of its own for another system, beside the store's")
}

// openStore opens the store of --store and --namespace. An inspection
// command (mustExist) changes nothing and finds no store where there is
// none; run and restore create the store if it is missing.
func openStore(cmd *cobra.Command, mustExist bool) (persistence.Store, error) {
	url, _ := cmd.Flags().GetString("store")
	ns, _ := cmd.Flags().GetString("namespace")
	var opts []persistence.OpenOption
	if ns != "" {
		opts = append(opts, persistence.InNamespace(ns))
	}
	if mustExist {
		opts = append(opts, persistence.MustExist())
	}
	s, err := persistence.OpenURL(cmd.Context(), url, opts...)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", url, err)
	}
	return s, nil
}

// latest is the id parseID returns for "latest".
const latest snapshot.SnapshotID = 0

// parseID reads a snapshot id, a number from 1 to 2^63-1, or "latest".
func parseID(arg string) (snapshot.SnapshotID, error) {
	if arg == "latest" {
		return latest, nil
	}
	n, err := strconv.ParseUint(arg, 10, 64)
	if err != nil || n == 0 || n > math.MaxInt64 {
		return 0, fmt.Errorf("bad snapshot id %q: want a number from 1 to %d, or \"latest\"", arg, uint64(math.MaxInt64))
	}
	return snapshot.SnapshotID(n), nil
}

// load loads snapshot arg from s.
func load(ctx context.Context, s persistence.Store, arg string) (*snapshot.Global, error) {
	id, err := parseID(arg)
	if err != nil {
		return nil, err
	}
	var g *snapshot.Global
	if id == latest {
		if g, err = s.Latest(ctx); err != nil {
			return nil, fmt.Errorf("the latest snapshot: %w", err)
		}
		return g, nil
	}
	if g, err = s.Load(ctx, id); err != nil {
		return nil, fmt.Errorf("snapshot %d: %w", id, err)
	}
	return g, nil
}

// closeStore closes a store that holds resources.
func closeStore(s persistence.Store) {
	if c, ok := s.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}
