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
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/engine/metrics"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/gctune"
)

type serverFlags struct {
	data, listen, tokenFile, tlsCert, tlsKey, logLevel string
	acceptDataLoss                                     bool
	maxSessions                                        int
}

func serverCommand(g *globals) *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the engine over HTTP to workers and the CLI",
		Long: `Serve the engine over HTTP. Badger allows one process per data directory, so
workers in other processes (and on other machines) talk to this server.

A bearer token (--token-file or CAIRN_TOKEN) is required whenever --listen is
not a loopback address: the server refuses to start open to the network.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.ForServer()
			return serve(cmd.Context(), g, f)
		},
	}
	cmd.Flags().StringVar(&f.data, "data", "./cairn-data", "data directory")
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:7233", "listen address")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token (default: CAIRN_TOKEN)")
	cmd.Flags().StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate file (with --tls-key)")
	cmd.Flags().StringVar(&f.tlsKey, "tls-key", "", "TLS key file (with --tls-cert)")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "log level (debug, info, warn, error)")
	cmd.Flags().BoolVar(&f.acceptDataLoss, "accept-data-loss", false,
		"open a data directory whose acknowledged data was lost or damaged, recording durably what was lost (instead: restore a backup)")
	cmd.Flags().IntVar(&f.maxSessions, "max-sessions", 1024, "most client sessions (upgraded connections) open at once")
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
func isLoopback(listen string) (bool, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, usagef("--listen %q: %v", listen, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

func serve(ctx context.Context, g *globals, f serverFlags) error {
	lvl, err := zerolog.ParseLevel(f.logLevel)
	if err != nil {
		return usagef("--log-level %q: %v", f.logLevel, err)
	}
	log := zerolog.New(g.stderr).Level(lvl).With().Timestamp().Logger()
	token, err := serverToken(f, g)
	if err != nil {
		return err
	}
	loopback, err := isLoopback(f.listen)
	if err != nil {
		return err
	}
	if !loopback && token == "" {
		return fmt.Errorf("refusing to listen on %s without a token: set --token-file or CAIRN_TOKEN (or listen on 127.0.0.1)", f.listen)
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
	eng, err := engine.Open(engine.Options{Store: st, Logger: &log})
	if err != nil {
		return err
	}
	defer eng.Close()
	ln, err := net.Listen("tcp", f.listen)
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
	handler := httpapi.NewHandler(eng, httpapi.Options{Token: token, Logger: &log, MaxSessions: f.maxSessions, Backup: backup,
		Collectors: []prometheus.Collector{metrics.NewCollector(eng, metrics.Options{Queues: eng.TaskQueues})}})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      90 * time.Second, // long polls answer within a minute
		IdleTimeout:       2 * time.Minute,
	}
	log.Info().Str("listen", ln.Addr().String()).Str("data", f.data).Bool("auth", token != "").Bool("tls", f.tlsCert != "").Msg("cairn server ready")
	var g2 run.Group
	g2.Add(func() error {
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
	}, func(error) {
		// Stop accepting, let in-flight requests (and their commits) finish.
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = eng.Close() // long polls return at once
		_ = srv.Shutdown(sctx)
		_ = handler.Shutdown(sctx) // sessions: answer the calls in flight, then close
	})
	g2.Add(func() error {
		<-ctx.Done()
		log.Info().Msg("shutting down")
		return nil
	}, func(error) {})
	return g2.Run()
}
