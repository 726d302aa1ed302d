package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/gctune"
)

type serverFlags struct {
	storeFlags
	clusterFlags

	data, listen, uiListen, tokenFile, tlsCert, tlsKey, logLevel, pricing string
	acceptDataLoss                                                        bool
	maxSessions                                                           int
	driftMargin                                                           time.Duration
	retention, sweepEvery                                                 time.Duration
}

// DefaultRetention is `cairn server --retention`'s default: a closed run is
// kept 30 days (Temporal's namespaces ask for one too; Temporal Cloud's
// default is 30 days).
const DefaultRetention = 30 * 24 * time.Hour

// DefaultUIListen is where the web UI listens unless told otherwise.
const DefaultUIListen = "127.0.0.1:8233"

func serverCommand(g *globals) *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the engine over HTTP to workers and the CLI",
		Long: `Serve the engine over HTTP. Badger allows one process per data directory, so
workers in other processes (and on other machines) talk to this server.

With --store postgres://… (or CAIRN_STORE) the runs live in PostgreSQL
instead, and several servers may share the database: each serves a share of
the runs' shards under fenced leases, takes over those of a server that
dies, and forwards a call about a run to the server that serves it, so
workers and clients may use any of them (docs/scale-out.md).

The web UI is served on a listener of its own (--ui-listen, default
127.0.0.1:8233; "off" turns it off), with the same token: people sign in
with it once.

A bearer token (--token-file or CAIRN_TOKEN) is required whenever --listen or
--ui-listen is not a loopback address: the server refuses to start open to
the network.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.ForServer()
			return serve(cmd.Context(), g, f, serveHooks{})
		},
	}
	cmd.Flags().StringVar(&f.data, "data", "./cairn-data", "data directory (the embedded Badger store)")
	f.storeFlags.add(cmd)
	f.clusterFlags.add(cmd)
	cmd.Flags().StringVar(&f.listen, "listen", DefaultAddress, "listen address of the API (workers and the CLI)")
	cmd.Flags().StringVar(&f.uiListen, "ui-listen", DefaultUIListen, `listen address of the web UI ("off": none)`)
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token (default: CAIRN_TOKEN)")
	cmd.Flags().StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (with --tls-key)")
	cmd.Flags().StringVar(&f.tlsKey, "tls-key", "", "TLS key file (with --tls-cert)")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "log level (debug, info, warn, error)")
	cmd.Flags().StringVar(&f.pricing, "pricing", "", `JSON price table for token costs: {"model": {"input": USD/Mtok, "cached_input": …, "output": …}}`)
	cmd.Flags().BoolVar(&f.acceptDataLoss, "accept-data-loss", false,
		"open a data directory whose acknowledged data was lost or damaged, recording durably what was lost (instead: restore a backup)")
	cmd.Flags().IntVar(&f.maxSessions, "max-sessions", 1024, "most client sessions (upgraded connections) open at once")
	cmd.Flags().DurationVar(&f.driftMargin, "lease-drift-margin", engine.DefaultLeaseDriftMargin,
		"how long after a lost attempt's lease a Reconcile lookup or the next attempt waits (clock drift, requests still in flight; docs/effects.md)")
	cmd.Flags().DurationVar(&f.retention, "retention", DefaultRetention,
		"how long a closed run is kept when its start did not say, then deleted with its history (not its effects ledger); 0: kept until `cairn workflow delete`")
	cmd.Flags().DurationVar(&f.sweepEvery, "retention-sweep-interval", engine.DefaultRetentionSweepInterval,
		"how often the retention sweep deletes the closed runs whose retention passed")
	return cmd
}

// serverToken returns the bearer token from --token-file or CAIRN_TOKEN.
func serverToken(f serverFlags, g *globals) (string, error) {
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("--token-file %s is empty", f.tokenFile)
		}
		return t, nil
	}
	return os.Getenv("CAIRN_TOKEN"), nil
}

// isLoopback reports whether a listen address only accepts local
// connections.
func isLoopback(flag, listen string) (bool, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, usagef("%s %q: %v", flag, listen, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// serveHooks are what `cairn dev` adds to a server: it learns the
// addresses once listening, and runs actors (its demo worker) beside it.
type serveHooks struct {
	ready  func(apiAddr, uiAddr string)
	actors func(eng *engine.Engine, apiAddr string) ([]actor, error)
	// pricing is the price table when --pricing gives none.
	pricing engine.Pricing
}

// actor is one member of the server's run group.
type actor struct {
	run       func() error
	interrupt func(error)
}

// listenOn listens on addr, given by flag. An address already in use says
// which flag chooses another: the usual cause is another cairn server or
// cairn dev on this machine's default ports.
func listenOn(flag, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%w: %s is already in use (another cairn server or cairn dev?): choose another address with %s, "+
			"for example %s 127.0.0.1:0 for any free port", api.ErrUnavailable, addr, flag, flag)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	return ln, nil
}
