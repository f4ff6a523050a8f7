package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// openStore opens the store of --store. For inspection commands the store
// must exist: a missing directory is an error, not a new empty store.
func openStore(cmd *cobra.Command, mustExist bool) (persistence.Store, error) {
	url, _ := cmd.Flags().GetString("store")
	if mustExist && (!strings.Contains(url, "://") || strings.HasPrefix(url, "file://")) {
		dir := strings.TrimPrefix(url, "file://")
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no store at %s", dir)
		}
	}
	s, err := persistence.OpenURL(cmd.Context(), url)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", url, err)
	}
	return s, nil
}

// parseID reads a snapshot id; "latest" (or 0) means the newest.
func parseID(arg string) (snapshot.SnapshotID, error) {
	if arg == "latest" {
		return 0, nil
	}
	n, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad snapshot id %q: want a number or \"latest\"", arg)
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
	if id == 0 {
		g, err = s.Latest(ctx)
	} else {
		g, err = s.Load(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", arg, err)
	}
	return g, nil
}

// closeStore closes a store that holds resources.
func closeStore(s persistence.Store) {
	if c, ok := s.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}
