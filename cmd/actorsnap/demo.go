package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
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
		cmd.Flags().String("mode", "epoch", "snapshot algorithm: epoch, unaligned or aligned (a restore takes the snapshot's)")
	}
	cmd.Flags().String("counting", "", "how the epoch mode counts messages: sums (the default in one process) or per-channel (the default across members, and the only counting there); a restore counts as its snapshot did")
	cmd.Flags().Duration("interval", 200*time.Millisecond, "time between snapshots")
	cmd.Flags().Duration("duration", 10*time.Second, "how long to run")
	cmd.Flags().Int("retain", 10, "snapshots to keep in the store (0: all)")
	cmd.Flags().Duration("timeout", 10*time.Second, "a snapshot not complete by then is aborted")
	cmd.Flags().Int("max-failures", bankdemo.DefaultMaxFailures, "stop with an error after this many snapshots in a row fail")
}

// memberFlags are the flags of run bank and restore that spread the bank
// over member processes.
func memberFlags(cmd *cobra.Command) {
	cmd.Flags().Int("members", 1, "member processes to run the bank on, on this machine (1: the bank runs in this process)")
	cmd.Flags().Bool("restart", true, "when a member dies, restore the bank from its latest snapshot onto the members left and a new one in its place (--members above 1)")
	cmd.Flags().String("logs", "", "a directory for the members' logs, member-N.log (--members above 1)")
}

// onMembers runs the bank on members member processes: a new one, or, if
// restore names a snapshot (an id or "latest"), the one it holds.
func onMembers(cmd *cobra.Command, store persistence.Store, cfg bankdemo.RunConfig, members int, restore string) error {
	f := cmd.Flags()
	if counting, _ := f.GetString("counting"); counting == actors.InSums.String() {
		return fmt.Errorf("--counting sums runs in one process; across members the epoch mode counts per channel")
	}
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	c, err := newClusterRun(out, cmd.ErrOrStderr(), store)
	if err != nil {
		return err
	}
	url, _ := f.GetString("store")
	ns, _ := f.GetString("namespace")
	timeout, _ := f.GetDuration("timeout")
	retain, _ := f.GetInt("retain")
	c.members, c.duration, c.maxFailed = members, cfg.Duration, cfg.MaxFailures
	c.restart, _ = f.GetBool("restart")
	c.args = append([]string{"--store", url, "--interval", cfg.Interval.String(), "--timeout", timeout.String(), "--retain", strconv.Itoa(retain)}, keyArgs(cmd)...)
	c.storeArgs = " --store " + persistence.Redact(url)
	if ns != "" {
		c.args = append(c.args, "--namespace", ns)
		c.storeArgs += " --namespace " + ns
	}
	if c.logs, _ = f.GetString("logs"); c.logs != "" {
		if err := os.MkdirAll(c.logs, 0o755); err != nil {
			return err
		}
	}
	o, err := store.Ownership(ctx)
	if err != nil {
		return fmt.Errorf("the store's owner: %w", err)
	}
	if restore != "" {
		system := o.Owner.System
		if system == "" {
			system = actors.DefaultSystemName
		}
		if err := persistence.DecideClaim(url, persistence.ClaimRestore, system, o); err != nil {
			return err
		}
		g, err := load(ctx, store, restore)
		if err != nil {
			return err
		}
		// The members restore in the snapshot's mode.
		c.args = append(c.args, "--system", system)
		return c.run(ctx, g.ID, nil)
	}
	system, _ := f.GetString("system")
	if f.Changed("mode") {
		mode, _ := f.GetString("mode")
		c.args = append(c.args, "--mode", mode)
	}
	if err := persistence.DecideClaim(url, persistence.ClaimNew, system, o); err != nil {
		if errors.Is(err, persistence.ErrOwned) {
			return fmt.Errorf("%w (actorsnap restore latest --members %d; or --namespace NAME)", err, members)
		}
		return err
	}
	c.args = append(c.args, "--system", system, "--actors", strconv.Itoa(cfg.Accounts))
	c.total, c.actors = cfg.Total(), cfg.Accounts
	return c.run(ctx, 0, func() {
		fmt.Fprintf(out, "%d accounts, $%d in all, %d transfers in flight, on %d member processes; a snapshot every %v for %v\n",
			cfg.Accounts, cfg.Total(), cfg.Accounts*cfg.InFlight, members, cfg.Interval, cfg.Duration)
	})
}

// membersFlag returns --members, checked.
func membersFlag(cmd *cobra.Command) (int, error) {
	n, _ := cmd.Flags().GetInt("members")
	if n < 1 {
		return 0, fmt.Errorf("--members must be at least 1")
	}
	return n, nil
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
	if f.Lookup("mode") != nil && (f.Changed("mode") || !f.Changed("restore")) {
		// A restore takes the snapshot's mode unless told otherwise.
		name, _ := f.GetString("mode")
		mode, err := snapshot.ParseMode(name)
		if err != nil {
			return cfg, fmt.Errorf("--mode: %w", err)
		}
		cfg.Options = append(cfg.Options, actors.WithMode(mode))
	}
	if name, _ := f.GetString("counting"); name != "" {
		counting, err := actors.ParseCounting(name)
		if err != nil {
			return cfg, fmt.Errorf("--counting: %w", err)
		}
		cfg.Options = append(cfg.Options, actors.WithCounting(counting))
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
		Long: `Run the bank demo: account actors pay each other at random, so money keeps
moving while the total stays the same. Every --interval a snapshot is taken,
saved to --store and checked: its balances plus the money in the transfers
it recorded in flight must make the total.

With --members N (above 1) the bank runs on N member processes on this
machine, which this command starts and stops. They find each other through
Proto.Actor's automanaged provider (no server to run) and share the store;
the accounts are placed over them, and each snapshot line is one consistent
snapshot across all of them. The members' pids and addresses are listed at
the start: kill one (kill -9 PID) and the run shows the snapshot its death
aborted and restores the bank from its latest complete snapshot, as Flink
restarts a job from its last checkpoint: the members left restore in their
own processes, and a new member takes the dead one's place. With --restart=false it stops instead, with an error that says
how to restore.`,
		Example: `  actorsnap run bank --store ./snaps --duration 10s
  actorsnap run bank --members 3 --store ./snaps --duration 1m
  actorsnap run bank --members 3 --restart=false --logs ./logs --store ./snaps`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := demoConfig(cmd)
			if err != nil {
				return err
			}
			members, err := membersFlag(cmd)
			if err != nil {
				return err
			}
			store, err := openStore(cmd, false)
			if err != nil {
				return err
			}
			defer closeStore(store)
			if members > 1 {
				return onMembers(cmd, store, cfg, members, "")
			}
			cfg.Options = append(cfg.Options, actors.WithStore(store))
			err = bankdemo.Run(cmd.Context(), cmd.OutOrStdout(), cfg)
			if errors.Is(err, persistence.ErrOwned) {
				return fmt.Errorf("%w (actorsnap restore latest; or --namespace NAME)", err)
			}
			return err
		},
	}
	demoFlags(bank, true)
	memberFlags(bank)
	run.AddCommand(bank)
	return run
}

func restoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore ID|latest",
		Short: "Resume the bank demo from a stored snapshot",
		Long: `Resume the bank demo from a stored snapshot: every account with its
balance, and every transfer the snapshot recorded in flight, then run as
run bank does. A snapshot taken on any number of members restores onto any
other: in this process, or with --members N on N member processes, as
run bank --members starts them.`,
		Example: `  actorsnap restore latest --store ./snaps
  actorsnap restore 42 --members 2 --store ./snaps`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			cfg, err := demoConfig(cmd)
			if err != nil {
				return err
			}
			members, err := membersFlag(cmd)
			if err != nil {
				return err
			}
			store, err := openStore(cmd, true)
			if err != nil {
				return err
			}
			defer closeStore(store)
			if members > 1 {
				return onMembers(cmd, store, cfg, members, args[0])
			}
			p := newProgress(cmd.ErrOrStderr())
			p.step(fmt.Sprintf("restoring snapshot %s", args[0]))
			defer p.end()
			cfg.Options = append(cfg.Options, actors.WithStore(store))
			return bankdemo.Resume(cmd.Context(), p.after(cmd.OutOrStdout()), store, id, cfg)
		},
	}
	demoFlags(cmd, false)
	memberFlags(cmd)
	return cmd
}
