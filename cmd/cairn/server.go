package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/engine/metrics"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/crashpoint"
	"github.com/cairnflow/cairn/internal/gctune"
)

type serverFlags struct {
	data, listen, uiListen, tokenFile, tlsCert, tlsKey, logLevel, pricing string
	acceptDataLoss                                                        bool
	maxSessions                                                           int
	driftMargin                                                           time.Duration
}

// DefaultUIListen is where the web UI listens unless told otherwise.
const DefaultUIListen = "127.0.0.1:8233"

func serverCommand(g *globals) *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the engine over HTTP to workers and the CLI",
		Long: `Serve the engine over HTTP. Badger allows one process per data directory, so
workers in other processes (and on other machines) talk to this server.

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
	cmd.Flags().StringVar(&f.data, "data", "./cairn-data", "data directory")
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

func serve(ctx context.Context, g *globals, f serverFlags, hooks serveHooks) error {
	lvl, err := zerolog.ParseLevel(f.logLevel)
	if err != nil {
		return usagef("--log-level %q: %v", f.logLevel, err)
	}
	log := zerolog.New(g.stderr).Level(lvl).With().Timestamp().Logger()
	if point, err := crashpoint.FromEnv(); err != nil {
		return usageError{err}
	} else if point != "" {
		log.Warn().Str("point", point).Msg("fault test: this server kills itself (SIGKILL) at crash point " + point + " (" + crashpoint.EnvVar + ")")
	}
	token, err := serverToken(f, g)
	if err != nil {
		return err
	}
	for _, l := range []struct{ flag, addr string }{{"--listen", f.listen}, {"--ui-listen", f.uiListen}} {
		if l.addr == "" || l.addr == "off" && l.flag == "--ui-listen" {
			continue
		}
		loopback, err := isLoopback(l.flag, l.addr)
		if err != nil {
			return err
		}
		if !loopback && token == "" {
			return fmt.Errorf("%w: refusing to listen on %s without a token: set --token-file or CAIRN_TOKEN (or listen on 127.0.0.1)", api.ErrInvalidArgument, l.addr)
		}
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: f.data, Logger: &log, AcceptDataLoss: f.acceptDataLoss})
	if errors.Is(err, history.ErrCorrupt) {
		log.Error().Err(err).Str("data", f.data).Msg("refusing to serve: the data directory is damaged or lost acknowledged commits; " +
			"restore a backup (cairn restore), or start with --accept-data-loss to go on without the lost data (the loss is recorded)")
		return corruptError{err}
	}
	if err != nil {
		return err
	}
	defer st.Close()
	pricing, err := readPricing(f.pricing)
	if err != nil {
		return err
	}
	if f.driftMargin < 0 {
		return usagef("--lease-drift-margin must not be negative")
	}
	if pricing == nil {
		pricing = hooks.pricing
	}
	eng, err := engine.Open(engine.Options{Store: st, Logger: &log, Pricing: pricing, LeaseDriftMargin: f.driftMargin})
	if err != nil {
		return err
	}
	defer eng.Close()
	ln, err := listenOn("--listen", f.listen)
	if err != nil {
		return err
	}
	backup := func(ctx context.Context, w io.Writer) error {
		info, err := st.Backup(ctx, w)
		if err == nil {
			log.Info().Int64("bytes", info.Bytes).Int64("keys", info.Keys).Uint64("seq", info.Seq).Msg("backup served")
		}
		return err
	}
	var uiLn net.Listener
	if f.uiListen != "" && f.uiListen != "off" {
		if uiLn, err = listenOn("--ui-listen", f.uiListen); err != nil {
			_ = ln.Close()
			return err
		}
	}
	scheme := "http://"
	if f.tlsCert != "" {
		scheme = "https://"
	}
	uiURL := ""
	if uiLn != nil {
		uiURL = scheme + uiLn.Addr().String() + "/"
	}
	handler := httpapi.NewHandler(eng, httpapi.Options{Token: token, Logger: &log, MaxSessions: f.maxSessions, UIURL: uiURL, Backup: backup,
		Collectors: []prometheus.Collector{metrics.NewCollector(eng, metrics.Options{Queues: eng.TaskQueues})}})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      90 * time.Second, // long polls answer within a minute
		IdleTimeout:       2 * time.Minute,
	}
	var g2 run.Group
	serveOn := func(srv *http.Server, ln net.Listener) func() error {
		return func() error {
			var err error
			if f.tlsCert != "" {
				err = srv.ServeTLS(ln, f.tlsCert, f.tlsKey)
			} else {
				err = srv.Serve(ln)
			}
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return err
		}
	}
	g2.Add(serveOn(srv, ln), func(error) {
		// Stop accepting, let in-flight requests (and their commits) finish.
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = eng.Close() // long polls return at once
		_ = srv.Shutdown(sctx)
		_ = handler.Shutdown(sctx) // sessions: answer the calls in flight, then close
	})
	if uiLn != nil {
		uiSrv := &http.Server{
			Handler:           ui.New(eng, ui.Options{Token: token, Secure: f.tlsCert != "", Logger: &log}),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			IdleTimeout:       2 * time.Minute, // no WriteTimeout: a run page streams while it is open
		}
		g2.Add(serveOn(uiSrv, uiLn), func(error) {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = uiSrv.Shutdown(sctx)
			_ = uiSrv.Close() // streams do not end by themselves
		})
	}
	if hooks.actors != nil {
		actors, err := hooks.actors(eng, ln.Addr().String())
		if err != nil {
			_ = ln.Close()
			if uiLn != nil {
				_ = uiLn.Close()
			}
			return err
		}
		for _, a := range actors {
			g2.Add(a.run, a.interrupt)
		}
	}
	ev := log.Info().Str("listen", ln.Addr().String()).Str("data", f.data).Bool("auth", token != "").Bool("tls", f.tlsCert != "")
	if uiURL != "" {
		ev = ev.Str("ui", uiURL)
	}
	ev.Msg("cairn server ready")
	if hooks.ready != nil {
		hooks.ready(ln.Addr().String(), uiURL)
	}
	g2.Add(func() error {
		<-ctx.Done()
		log.Info().Msg("shutting down")
		return nil
	}, func(error) {})
	return g2.Run()
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
