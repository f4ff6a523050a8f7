package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/snapshot"
)

// demoFlags are the flags of run bank and restore.
func demoFlags(cmd *cobra.Command, withSize bool) {
	if withSize {
		cmd.Flags().String("system", "bank", "the system's name, recorded as the store's owner")
		cmd.Flags().Int("actors", 1000, "number of account actors")
		cmd.Flags().String("mode", "unaligned", "snapshot algorithm: unaligned or aligned (a restore takes the snapshot's)")
	}
	cmd.Flags().Duration("interval", 200*time.Millisecond, "time between snapshots")
	cmd.Flags().Duration("duration", 10*time.Second, "how long to run")
	cmd.Flags().Int("retain", 10, "snapshots to keep in the store (0: all)")
	cmd.Flags().Duration("timeout", 10*time.Second, "a snapshot not complete by then is aborted")
	cmd.Flags().Int("max-failures", bankdemo.DefaultMaxFailures, "stop with an error after this many snapshots in a row fail")
}

func demoConfig(cmd *cobra.Command) (bankdemo.RunConfig, error) {
	var cfg bankdemo.RunConfig
	f := cmd.Flags()
	cfg.Config = bankdemo.Config{Initial: 1000, Chords: 2, InFlight: 2, Seed: 1}
	if f.Lookup("actors") != nil {
		cfg.Accounts, _ = f.GetInt("actors")
	}
	cfg.Interval, _ = f.GetDuration("interval")
	cfg.Duration, _ = f.GetDuration("duration")
	retain, _ := f.GetInt("retain")
	cfg.MaxFailures, _ = f.GetInt("max-failures")
	cfg.Errors = cmd.ErrOrStderr()
	if cfg.MaxFailures < 1 {
		return cfg, fmt.Errorf("--max-failures must be at least 1")
	}
	timeout, _ := f.GetDuration("timeout")
	if cfg.Interval <= 0 || cfg.Duration <= 0 {
		return cfg, fmt.Errorf("--interval and --duration must be positive")
	}
	cfg.Options = []actors.Option{actors.WithRetain(retain), actors.WithTimeout(timeout)}
	if f.Lookup("system") != nil {
		// A restore keeps the name the store records.
		name, _ := f.GetString("system")
		cfg.Options = append(cfg.Options, actors.WithSystemName(name))
	}
	if f.Lookup("mode") != nil {
		name, _ := f.GetString("mode")
		mode, err := snapshot.ParseMode(name)
		if err != nil {
			return cfg, fmt.Errorf("--mode: %w", err)
		}
		cfg.Options = append(cfg.Options, actors.WithMode(mode))
	}
	return cfg, nil
}

func runCmd() *cobra.Command {
	run := &cobra.Command{
		Use:   "run DEMO",
		Short: "Run a demo (bank)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("run: name a demo: actorsnap run bank")
		},
	}
	bank := &cobra.Command{
		Use:   "bank",
		Short: "Run the bank demo, saving a checked snapshot every --interval",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := demoConfig(cmd)
			if err != nil {
				return err
			}
			store, err := openStore(cmd, false)
			if err != nil {
				return err
			}
			defer closeStore(store)
			cfg.Options = append(cfg.Options, actors.WithStore(store))
			err = bankdemo.Run(cmd.Context(), cmd.OutOrStdout(), cfg)
			if errors.Is(err, persistence.ErrOwned) {
				return fmt.Errorf("%w (actorsnap restore latest; or --namespace NAME)", err)
			}
			return err
		},
	}
	demoFlags(bank, true)
	run.AddCommand(bank)
	return run
}

func restoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore ID|latest",
		Short: "Resume the bank demo from a stored snapshot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			cfg, err := demoConfig(cmd)
			if err != nil {
				return err
			}
			store, err := openStore(cmd, true)
			if err != nil {
				return err
			}
			defer closeStore(store)
			p := newProgress(cmd.ErrOrStderr())
			p.step(fmt.Sprintf("restoring snapshot %s", args[0]))
			defer p.end()
			cfg.Options = append(cfg.Options, actors.WithStore(store))
			return bankdemo.Resume(cmd.Context(), p.after(cmd.OutOrStdout()), store, id, cfg)
		},
	}
	demoFlags(cmd, false)
	return cmd
}
