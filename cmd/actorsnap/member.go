package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/actors"
	"github.com/actorsnap/actorsnap/cluster"
	"github.com/actorsnap/actorsnap/cluster/membership"
	"github.com/actorsnap/actorsnap/internal/bankdemo"
	"github.com/actorsnap/actorsnap/snapshot"
)

// memberEvent is a line a member process writes on its standard output,
// as JSON, for the process that started it (clusterRun).
type memberEvent struct {
	// Event is one of: ready (the member's part of a new bank runs),
	// restored (its part of a restored bank runs), coordinator (another
	// member coordinates now), complete, aborted, warning (a line on
	// standard input it did not take), error (the member fails and
	// exits) and bye (it left the cluster and exits).
	Event string `json:"event"`
	// Addr is the member's address (ready, restored), the coordinator's
	// (coordinator), or that of the member whose departure aborted the
	// snapshot (aborted).
	Addr        string `json:"addr,omitempty"`
	Coordinator string `json:"coordinator,omitempty"`
	// Actors is the number of participants on the member (ready,
	// restored) or in the snapshot (complete).
	Actors   int           `json:"actors,omitempty"`
	ID       uint64        `json:"id,omitempty"`
	Members  int           `json:"members,omitempty"`
	InFlight int           `json:"in_flight,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	// Check is why a complete snapshot is inconsistent; empty if it is
	// consistent.
	Check string `json:"check,omitempty"`
	// Departed is the number of accounts that had stopped before the
	// snapshot (complete): their member was shutting down. Such a
	// snapshot is checked for consistency, not for the bank's money.
	Departed int    `json:"departed,omitempty"`
	Error    string `json:"error,omitempty"`
}

// eventWriter writes memberEvents, a line each, from any goroutine.
type eventWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *eventWriter) emit(e memberEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(e)
}

// memberCmd is the hidden command of one member process of the bank, as
// run bank --members and restore --members start it. It runs until its
// standard input closes: the supervisor closes it to stop the member,
// and so does the supervisor's death. A line "restore ID N NAME" on it
// makes the member leave its cluster and restore snapshot ID onto N
// members of a cluster named NAME in the same process, as the survivors
// of a member's death do (restoreLine).
func memberCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "member",
		Short:  "Run one member of the bank demo on a cluster (run bank --members starts them)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A Ctrl-C at the terminal reaches the whole process group:
			// the supervisor decides when its members stop.
			signal.Ignore(os.Interrupt)
			out := &eventWriter{enc: json.NewEncoder(cmd.OutOrStdout())}
			err := runMember(cmd, out)
			if err != nil {
				out.emit(memberEvent{Event: "error", Error: err.Error()})
			}
			return err
		},
	}
	demoFlags(cmd, true)
	f := cmd.Flags()
	f.String("cluster", "", "the cluster's name")
	f.Int("port", 0, "this member's remote port (0: a free one)")
	f.Int("automanaged-port", 0, "this member's automanaged port, one of --seeds")
	f.StringSlice("seeds", nil, "every member's automanaged host:port")
	f.Int("members", 1, "members to wait for before the bank starts, or to restore onto")
	f.String("restore", "", "the snapshot to restore (empty: start a new bank)")
	f.Int64("total", 0, "the bank's money, which every snapshot must hold")
	f.String("log-level", "warn", "level of the log on standard error: debug, info, warn or error")
	f.String("tls-ca", "", "PEM certificate of the cluster's authority: with --tls-cert and --tls-key, members talk mutual TLS and admit only certificates of it")
	f.String("tls-cert", "", "PEM certificate of this member, signed by --tls-ca, for 127.0.0.1")
	f.String("tls-key", "", "PEM key of --tls-cert")
	return cmd
}

// memberTLS returns the member's TLS configuration from --tls-ca,
// --tls-cert and --tls-key: all three, or nil for none.
func memberTLS(cmd *cobra.Command) (*tls.Config, error) {
	f := cmd.Flags()
	ca, _ := f.GetString("tls-ca")
	cert, _ := f.GetString("tls-cert")
	key, _ := f.GetString("tls-key")
	switch {
	case ca == "" && cert == "" && key == "":
		return nil, nil
	case ca == "" || cert == "" || key == "":
		return nil, errors.New("--tls-ca, --tls-cert and --tls-key go together")
	}
	return membership.LoadTLS(ca, cert, key)
}

func runMember(cmd *cobra.Command, out *eventWriter) error {
	f := cmd.Flags()
	name, _ := f.GetString("cluster")
	port, _ := f.GetInt("port")
	autoPort, _ := f.GetInt("automanaged-port")
	seeds, _ := f.GetStringSlice("seeds")
	members, _ := f.GetInt("members")
	restore, _ := f.GetString("restore")
	total, _ := f.GetInt64("total")
	var level slog.Level
	lv, _ := f.GetString("log-level")
	if err := level.UnmarshalText([]byte(lv)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	cfg, err := demoConfig(cmd)
	if err != nil {
		return err
	}
	tlsCfg, err := memberTLS(cmd)
	if err != nil {
		return err
	}

	// Stopped when the supervisor closes standard input; its lines are
	// restores in place.
	ctx, stop := context.WithCancel(cmd.Context())
	defer stop()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(cmd.InOrStdin())
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		stop()
	}()

	store, err := openStore(cmd, false)
	if err != nil {
		return err
	}
	defer closeStore(store)
	opts := append([]actors.Option{bankdemo.Messages, actors.WithStore(store),
		actors.WithLogger(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})))}, cfg.Options...)
	mcfg := membership.Config{ClusterName: name, Host: "127.0.0.1", Port: port, Provider: membership.Automanaged,
		Seeds: seeds, AutomanagedPort: autoPort, TTL: time.Second, TLS: tlsCfg}

	// restored restores snapshot id onto n members of the cluster named
	// clusterName, this one among them.
	restored := func(id snapshot.SnapshotID, n int, clusterName string) (*cluster.Member, memberEvent, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		rcfg := mcfg
		rcfg.ClusterName = clusterName
		m, err := cluster.Restore(rctx, cluster.Config{Membership: rcfg, JoinTimeout: time.Minute}, store, id, n, append(opts, bankdemo.Kind(0))...)
		if err != nil {
			return nil, memberEvent{}, err
		}
		return m, memberEvent{Event: "restored", Actors: len(m.System().Participants())}, nil
	}
	var m *cluster.Member
	var ready memberEvent
	if restore != "" {
		id, err := parseID(restore)
		if err != nil {
			return err
		}
		if m, ready, err = restored(id, members, name); err != nil {
			return err
		}
	} else {
		m, err = cluster.Start(cluster.Config{Membership: mcfg, Members: members, JoinTimeout: time.Minute}, append(opts, bankdemo.Kind(cfg.Initial))...)
		if err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		bank, err := bankdemo.StartMember(sctx, m, cfg.Config)
		cancel()
		if err != nil {
			shutdownMember(m)
			return err
		}
		ready = memberEvent{Event: "ready", Actors: len(bank.PIDs)}
	}
	// running reports on m's snapshots and starts them; it says ready.
	running := func(ready memberEvent) error {
		subscribe(m, out, total)
		if err := m.System().SnapshotEvery(cfg.Interval); err != nil {
			shutdownMember(m)
			return err
		}
		ready.Addr, ready.Coordinator, ready.Members = m.Self(), m.Coordinator(), len(m.Members())
		out.emit(ready)
		return nil
	}
	if err := running(ready); err != nil {
		return err
	}

	// The coordinator changes when the one before leaves.
	coordinator := m.Coordinator()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case l := <-lines:
			id, n, renamed, err := restoreLine(l)
			if err != nil {
				out.emit(memberEvent{Event: "warning", Error: err.Error()})
				continue
			}
			// The cluster this member was in lost a member: it leaves,
			// and restores with the others onto a cluster of n under a
			// new name, which no member of the old one can join (another
			// survivor still leaving it would otherwise count as one of
			// the n).
			shutdownMember(m)
			if m, ready, err = restored(id, n, renamed); err != nil {
				return fmt.Errorf("restoring snapshot %d in place: %w", id, err)
			}
			if err := running(ready); err != nil {
				return err
			}
			coordinator = m.Coordinator()
		case <-tick.C:
			if c := m.Coordinator(); c != coordinator {
				coordinator = c
				out.emit(memberEvent{Event: "coordinator", Addr: c})
			}
		}
	}
	shutdownMember(m)
	out.emit(memberEvent{Event: "bye"})
	return nil
}

// restoreLine reads the supervisor's "restore ID N NAME".
func restoreLine(l string) (snapshot.SnapshotID, int, string, error) {
	var id uint64
	var n int
	var name string
	if _, err := fmt.Sscanf(l, "restore %d %d %s", &id, &n, &name); err != nil || id == 0 || n < 1 {
		return 0, 0, "", fmt.Errorf("a line the member does not know: %q (want \"restore ID N NAME\")", l)
	}
	return snapshot.SnapshotID(id), n, name, nil
}

// shutdownMember leaves the cluster, waiting at most 20 s for the
// participants to stop.
func shutdownMember(m *cluster.Member) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = m.Shutdown(ctx)
}

// subscribe reports every snapshot that completes or aborts: only the
// coordinator's member hears of them.
func subscribe(m *cluster.Member, out *eventWriter, total int64) {
	m.System().ActorSystem().EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *actors.SnapshotCompleted:
			g := e.Global
			ev := memberEvent{Event: "complete", ID: uint64(g.ID), Members: len(m.Members()), Actors: len(g.Participants),
				InFlight: g.TotalInFlight(), Duration: g.End.Sub(g.Start)}
			departed, err := bankdemo.Verdict(g, total)
			if err != nil {
				ev.Check = err.Error()
			}
			ev.Departed = departed
			out.emit(ev)
		case *actors.SnapshotAborted:
			// The reason, without the "snapshot ID aborted" around it.
			reason := strings.TrimPrefix(e.Err.Error(), fmt.Sprintf("snapshot %d aborted: ", e.ID))
			ev := memberEvent{Event: "aborted", ID: uint64(e.ID), Error: reason}
			var left *actors.MemberLeftError
			if errors.As(e.Err, &left) {
				ev.Error = fmt.Sprintf("cluster member left: %s, with %d participants", left.Member, len(left.Participants))
				ev.Addr = left.Member
			}
			out.emit(ev)
		}
	})
}
