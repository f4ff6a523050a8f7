package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/actorsnap/actorsnap/persistence"
	"github.com/actorsnap/actorsnap/webview"
)

// shutdownGrace is how long serve waits for requests in progress when it
// is stopped.
const shutdownGrace = 5 * time.Second

func serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a read-only web view of the store: snapshots, channel graphs, decoded states and diffs",
		Long: `serve serves a web page that lists the store's snapshots, with charts of
their duration and size, and shows each one's channel graph (deadlock
cycles in red), its participants' decoded states (searchable, and
filtered by a field: Balance < 500), its channels' in-flight messages and
its diff against the snapshot before it. The page follows new snapshots
as they are saved. It only reads the store.

It listens on loopback (127.0.0.1:8080) by default, and answers only to
loopback host names. The page shows everything in the snapshots, so it
refuses an address others can reach unless --public is given.`,
		Example: `  actorsnap serve --store ./snaps
  actorsnap serve --store ./snaps --addr 127.0.0.1:9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, _ := cmd.Flags().GetString("addr")
			public, _ := cmd.Flags().GetBool("public")
			if err := checkServeAddr(addr, public); err != nil {
				return err
			}
			store, err := openStore(cmd, true)
			if err != nil {
				return err
			}
			defer closeStore(store)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			var opts []webview.Option
			if !public {
				opts = append(opts, webview.WithLoopbackHosts())
			}
			srv := &http.Server{Handler: webview.New(store, opts...), ReadHeaderTimeout: 10 * time.Second}
			url, _ := cmd.Flags().GetString("store")
			fmt.Fprintf(cmd.OutOrStdout(), "serving the web view of %s at http://%s/ (read-only; Ctrl-C stops)\n", persistence.Redact(url), ln.Addr())
			return serve(cmd.Context(), srv, ln)
		},
	}
	cmd.Flags().String("addr", "127.0.0.1:8080", "address to listen on, host:port (port 0: any free one)")
	cmd.Flags().Bool("public", false, "allow an address that is not loopback: anyone who reaches it can read every snapshot")
	return cmd
}

// checkServeAddr refuses an address that is not loopback, unless public.
func checkServeAddr(addr string, public bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad --addr %q: want host:port, such as 127.0.0.1:8080", addr)
	}
	if public || webview.LoopbackHost(host) {
		return nil
	}
	what := host
	if host == "" {
		what = "every interface"
	}
	return fmt.Errorf("refusing --addr %s: %s is not loopback, and the web view shows every state and message of the store to whoever reaches it; give --public to serve it there anyway", addr, what)
}

// serve serves srv on ln until ctx is done, then shuts it down, letting
// requests in progress finish for up to shutdownGrace.
func serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("stopping the web view: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
