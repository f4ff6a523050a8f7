package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// The environment variables that give the keys, unless --key-file does.
const (
	envKeyFile = "ACTORSNAP_KEY_FILE" // the path of a key file
	envKey     = "ACTORSNAP_KEY"      // the keys themselves
)

// storeFlags are the flags every command takes to name a store and the
// keys that authenticate its snapshots.
func storeFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.String("store", "./actorsnap-data", "snapshot store: a directory, file://DIR or postgres://... (keep a password out of it: PGPASSWORD or ~/.pgpass)")
	f.String("namespace", "", "a namespace of the store: a store of its own for another system, beside the store's")
	f.String("key-file", "", "a file of keys (ID:BASE64 each, the first signs) that sign the snapshots saved and check those loaded; default $"+envKeyFile+", or the keys themselves in $"+envKey)
	f.Bool("require-signed", false, "refuse snapshots without a MAC (needs keys)")
}

// keyring returns the keys of --key-file, or else of $ACTORSNAP_KEY_FILE
// or $ACTORSNAP_KEY (one of the two), or nil if none is given; with
// --require-signed, keys that refuse unsigned snapshots.
func keyring(cmd *cobra.Command) (*persistence.Keyring, error) {
	file, _ := cmd.Flags().GetString("key-file")
	if file == "" {
		file = os.Getenv(envKeyFile)
	}
	text := os.Getenv(envKey)
	require, _ := cmd.Flags().GetBool("require-signed")
	var (
		k   *persistence.Keyring
		err error
	)
	switch {
	case file != "" && text != "":
		return nil, fmt.Errorf("keys are given both in a key file (%s) and in $%s: give them in one", file, envKey)
	case file != "":
		k, err = persistence.ReadKeyringFile(file)
	case text != "":
		if k, err = persistence.ParseKeyring(text); err != nil {
			err = fmt.Errorf("$%s: %w", envKey, err)
		}
	case require:
		return nil, errors.New("--require-signed needs keys: --key-file, $" + envKeyFile + " or $" + envKey)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if require {
		k = k.RequireSigned()
	}
	return k, nil
}

// keyArgs returns the flags that give a member process the keys this one
// was given by flag; keys from the environment reach it by inheritance.
func keyArgs(cmd *cobra.Command) []string {
	var args []string
	if file, _ := cmd.Flags().GetString("key-file"); file != "" {
		args = append(args, "--key-file", file)
	}
	if require, _ := cmd.Flags().GetBool("require-signed"); require {
		args = append(args, "--require-signed")
	}
	return args
}

// openStore opens the store of --store and --namespace, with the keys of
// keyring. An inspection command (mustExist) changes nothing and finds no
// store where there is none; run and restore create the store if it is
// missing. Errors name the store with its password redacted.
func openStore(cmd *cobra.Command, mustExist bool) (persistence.Store, error) {
	url, _ := cmd.Flags().GetString("store")
	ns, _ := cmd.Flags().GetString("namespace")
	keys, err := keyring(cmd)
	if err != nil {
		return nil, err
	}
	opts := []persistence.OpenOption{persistence.Authenticate(keys)}
	if ns != "" {
		opts = append(opts, persistence.InNamespace(ns))
	}
	if mustExist {
		opts = append(opts, persistence.MustExist())
	}
	s, err := persistence.OpenURL(cmd.Context(), url, opts...)
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", persistence.Redact(url), err)
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
