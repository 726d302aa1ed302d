package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/cluster"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/engine/metrics"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/internal/crashpoint"
	"github.com/cairnflow/cairn/internal/tracing/otlpenv"
)

// Server is one `cairn server` (or `cairn dev`) process: its store, its
// engine, the API and UI listeners and the group of actors that run until
// the context ends. serve builds it step by step; each step undoes what it
// opened when a later one fails (close).
type Server struct {
	g     *globals
	f     serverFlags
	hooks serveHooks
	log   zerolog.Logger
	token string

	store   *badgerstore.Store // the embedded store, nil on Postgres
	pg      *pgstore.Store     // the Postgres store, nil on Badger
	node    *cluster.Node      // this server's membership, with pg
	svc     api.Service        // what the API and the UI serve: eng, or the cluster's router
	eng     *engine.Engine
	ln      net.Listener // the API
	uiLn    net.Listener // the web UI, nil when off
	uiURL   string
	handler *httpapi.Handler
	group   run.Group
}

// serve runs a server until ctx ends or one of its actors fails.
func serve(ctx context.Context, g *globals, f serverFlags, hooks serveHooks) error {
	s := &Server{g: g, f: f, hooks: hooks}
	defer s.close()
	// Traces, when the OTEL_* environment asks for them (the demo's
	// worker and client of cairn dev trace with the global provider).
	shutdown, err := otlpenv.Setup(ctx, "cairn-server")
	if err != nil {
		return usageError{err}
	}
	defer flushTraces(shutdown)
	for _, step := range []func() error{s.configure, s.openStore, s.openEngine, s.listen, s.joinCluster, s.serveAPI, s.serveUI, s.addActors} {
		if err := step(); err != nil {
			return err
		}
	}
	s.announce()
	s.group.Add(func() error {
		<-ctx.Done()
		s.log.Info().Msg("shutting down")
		return nil
	}, func(error) {})
	return s.group.Run()
}

// flushTraces sends the spans still queued, waiting at most 5 seconds.
func flushTraces(shutdown func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = shutdown(ctx) // an unreachable collector must not hold the exit
}

// configure checks the flags that need no resource: the log level, the
// crash point of a fault test, the token and TLS.
func (s *Server) configure() error {
	f := s.f
	lvl, err := zerolog.ParseLevel(f.logLevel)
	if err != nil {
		return usagef("--log-level %q: %v", f.logLevel, err)
	}
	s.log = zerolog.New(s.g.stderr).Level(lvl).With().Timestamp().Logger()
	if point, err := crashpoint.FromEnv(); err != nil {
		return usageError{err}
	} else if point != "" {
		s.log.Warn().Str("point", point).Msg("fault test: this server kills itself (SIGKILL) at crash point " + point + " (" + crashpoint.EnvVar + ")")
	}
	if s.token, err = serverToken(f, s.g); err != nil {
		return err
	}
	if err := s.checkExposure(); err != nil {
		return err
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if f.driftMargin < 0 {
		return usagef("--lease-drift-margin must not be negative")
	}
	if f.retention < 0 || f.sweepEvery < 0 {
		return usagef("--retention and --retention-sweep-interval must not be negative")
	}
	return nil
}

// checkExposure refuses to listen beyond loopback without a token.
func (s *Server) checkExposure() error {
	for _, l := range []struct{ flag, addr string }{{"--listen", s.f.listen}, {"--ui-listen", s.f.uiListen}} {
		if l.addr == "" || l.addr == "off" && l.flag == "--ui-listen" {
			continue
		}
		loopback, err := isLoopback(l.flag, l.addr)
		if err != nil {
			return err
		}
		if !loopback && s.token == "" {
			return fmt.Errorf("%w: refusing to listen on %s without a token: set --token-file or CAIRN_TOKEN (or listen on 127.0.0.1)", api.ErrInvalidArgument, l.addr)
		}
	}
	return nil
}

// openStore opens the data directory, refusing one that is damaged, or
// the Postgres store.
func (s *Server) openStore() error {
	if s.postgresURL() != "" {
		return s.openPostgresStore()
	}
	if spec := s.f.spec(); spec != "" {
		s.f.data = spec // --store DIR is --data DIR
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: s.f.data, Logger: &s.log, AcceptDataLoss: s.f.acceptDataLoss})
	if errors.Is(err, history.ErrCorrupt) {
		return s.refuse(err)
	}
	if err != nil {
		return err
	}
	s.store = st
	return nil
}

// openEngine starts the engine over the store, with the price table. An
// engine that finds a data directory's records damaged at open refuses to
// serve as the store does.
func (s *Server) openEngine() error {
	pricing, err := readPricing(s.f.pricing)
	if err != nil {
		return err
	}
	if pricing == nil {
		pricing = s.hooks.pricing
	}
	opts := engine.Options{Store: s.store, Logger: &s.log, Pricing: pricing, LeaseDriftMargin: s.f.driftMargin,
		Retention: s.f.retention, RetentionSweepInterval: s.f.sweepEvery}
	if s.pg != nil {
		if s.node, err = s.newNode(); err != nil {
			return err
		}
		opts.Store, opts.Shards = s.pg, s.node
	}
	s.eng, err = engine.Open(opts)
	s.svc = s.eng
	if s.store != nil && (errors.Is(err, history.ErrCorrupt) || errors.Is(err, api.ErrDataCorrupt)) {
		return s.refuse(err)
	}
	return err
}

// refuse logs the refusal of a damaged data directory and returns it as
// the command's error (exit code 3): what is damaged, where, and what to
// do, on one line.
func (s *Server) refuse(err error) error {
	d := &damagedDirError{dir: s.f.data, err: err}
	s.log.Error().Str("data", s.f.data).Msg("refusing to serve: " + d.Error())
	return corruptError{d}
}

// damagedDirError is a server's refusal of a damaged data directory.
type damagedDirError struct {
	dir string
	err error // wraps history.ErrCorrupt or api.ErrDataCorrupt
}

// Error reads "the data directory D is damaged: <file>: <what>; <what to do>".
func (d *damagedDirError) Error() string {
	return "the data directory " + d.dir + " is damaged: " + damageDetail(d.err) + "; " + d.advice()
}

func (d *damagedDirError) Unwrap() error { return d.err }

// advice says the ways out: a backup always; --accept-data-loss only
// where the store can go on without the lost data.
func (d *damagedDirError) advice() string {
	const restore = "restore a backup (cairn restore --from BACKUP --data NEW_DIR, then serve NEW_DIR)"
	var de *badgerstore.DamagedError
	switch {
	case !errors.As(d.err, &de):
		// Records the engine found damaged: the store opened.
		return restore + "; cairn check --data " + d.dir + " lists every damaged record"
	case de.Acceptable:
		return restore + ", or start with --accept-data-loss to serve what is intact without the lost data (the loss is recorded)"
	}
	return restore + "; --accept-data-loss cannot go past this damage"
}

// damageDetail is what is damaged and where, without the directory.
func damageDetail(err error) string {
	var de *badgerstore.DamagedError
	if errors.As(err, &de) {
		return de.Detail()
	}
	var ce *history.CorruptError
	if errors.As(err, &ce) && ce.File == "" {
		return strings.TrimPrefix(ce.Error(), "history: corrupt record: ")
	}
	return err.Error()
}

// listen opens the API listener and, unless it is off, the UI's.
func (s *Server) listen() error {
	var err error
	if s.ln, err = listenOn("--listen", s.f.listen); err != nil {
		return err
	}
	if s.f.uiListen == "" || s.f.uiListen == "off" {
		return nil
	}
	if s.uiLn, err = listenOn("--ui-listen", s.f.uiListen); err != nil {
		return err
	}
	scheme := "http://"
	if s.f.tlsCert != "" {
		scheme = "https://"
	}
	s.uiURL = scheme + s.uiLn.Addr().String() + "/"
	return nil
}

// serveAPI adds the API server to the group. Stopping it closes the engine
// first, so long polls return at once, then lets the requests in flight
// (and their commits) finish.
func (s *Server) serveAPI() error {
	opts := httpapi.Options{Token: s.token, Logger: &s.log, MaxSessions: s.f.maxSessions, UIURL: s.uiURL,
		MaxPayloadBytes: s.eng.MaxPayloadBytes(), // the cluster's router does not say it
		Collectors:      []prometheus.Collector{metrics.NewCollector(s.eng, metrics.Options{Queues: s.eng.TaskQueues})}}
	if s.store != nil {
		opts.Backup = s.backup // a Postgres store is backed up with the database's own tools
	}
	if s.node != nil {
		opts.RequestContext = cluster.RequestContext
		opts.Collectors = append(opts.Collectors, newClusterCollector(s.node, s.pg))
	}
	s.handler = httpapi.NewHandler(s.svc, opts)
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      90 * time.Second, // long polls answer within a minute
		IdleTimeout:       2 * time.Minute,
	}
	s.group.Add(s.serveOn(srv, s.ln), func(error) {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if s.node != nil {
			_ = s.node.Close() // the others take its shards over at once
		}
		_ = s.eng.Close()
		_ = srv.Shutdown(sctx)
		_ = s.handler.Shutdown(sctx) // sessions: answer the calls in flight, then close
	})
	return nil
}

// apiAddress is the address clients give to reach the API (an https://
// URL with TLS).
func (s *Server) apiAddress() string {
	if s.f.tlsCert != "" {
		return "https://" + s.ln.Addr().String()
	}
	return s.ln.Addr().String()
}

// serveUI adds the web UI's server to the group, when it listens.
func (s *Server) serveUI() error {
	if s.uiLn == nil {
		return nil
	}
	uiSrv := &http.Server{
		Handler:           ui.New(s.svc, ui.Options{Token: s.token, Secure: s.f.tlsCert != "", Logger: &s.log, APIAddress: s.apiAddress()}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       2 * time.Minute, // no WriteTimeout: a run page streams while it is open
	}
	s.group.Add(s.serveOn(uiSrv, s.uiLn), func(error) {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = uiSrv.Shutdown(sctx)
		_ = uiSrv.Close() // streams do not end by themselves
	})
	return nil
}

// addActors adds what the hooks run beside the server (cairn dev's demo
// worker).
func (s *Server) addActors() error {
	if s.hooks.actors == nil {
		return nil
	}
	actors, err := s.hooks.actors(s.eng, s.ln.Addr().String())
	if err != nil {
		return err
	}
	for _, a := range actors {
		s.group.Add(a.run, a.interrupt)
	}
	return nil
}

// announce logs the ready line (tests and scripts wait for it) and tells
// the hooks where the server listens.
func (s *Server) announce() {
	ev := s.log.Info().Str("listen", s.ln.Addr().String()).Bool("auth", s.token != "").Bool("tls", s.f.tlsCert != "")
	if s.node != nil {
		ev = ev.Str("store", "postgres").Str("server", s.node.ID()).Int("shards", len(s.node.Held()))
	} else {
		ev = ev.Str("data", s.f.data)
	}
	if s.uiURL != "" {
		ev = ev.Str("ui", s.uiURL)
	}
	ev.Msg("cairn server ready")
	if s.hooks.ready != nil {
		s.hooks.ready(s.ln.Addr().String(), s.uiURL)
	}
}

// serveOn returns an actor serving srv on ln (with TLS when configured).
func (s *Server) serveOn(srv *http.Server, ln net.Listener) func() error {
	return func() error {
		var err error
		if s.f.tlsCert != "" {
			err = srv.ServeTLS(ln, s.f.tlsCert, s.f.tlsKey)
		} else {
			err = srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// backup streams a backup of the store (GET /api/v1/backup).
func (s *Server) backup(ctx context.Context, w io.Writer) error {
	info, err := s.store.Backup(ctx, w)
	if err == nil {
		s.log.Info().Int64("bytes", info.Bytes).Int64("keys", info.Keys).Uint64("seq", info.Seq).Msg("backup served")
	}
	return err
}

// close releases what the steps opened, in reverse order. Listeners the
// group served are closed already; closing them again is harmless.
func (s *Server) close() {
	if s.uiLn != nil {
		_ = s.uiLn.Close()
	}
	if s.ln != nil {
		_ = s.ln.Close()
	}
	if s.node != nil {
		_ = s.node.Close()
	}
	if s.eng != nil {
		_ = s.eng.Close()
	}
	if s.store != nil {
		_ = s.store.Close()
	}
	if s.pg != nil {
		_ = s.pg.Close()
	}
}
