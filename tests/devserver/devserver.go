// Package devserver assembles every Kagzi service in one process on a
// NATS server it is given: the dispatcher with its relay, the scheduler,
// the reaper, and workers. `kagzi dev` runs it for newcomers (on the
// embedded NATS server of the CLI's module when none is given); end-to-end
// tests run it against their own database and NATS server. It embeds no
// NATS server itself, so the module of the public packages does not
// depend on nats-server.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/kagzi/kagzi/internal/lifecycle/process"
	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/store/pgsession"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/services/scheduler"
	workersvc "github.com/kagzi/kagzi/services/worker"
)

// Options configure a dev server. Zero fields take the defaults; a
// service's configuration is either zero (its defaults, config.Defaults)
// or whole (config.Load's or config.Defaults', changed), and Start
// validates it as config.Load does.
type Options struct {
	// DatabaseURL of a migrated database (required): Postgres, or a
	// connection pooler in transaction mode in front of it.
	DatabaseURL string
	// SessionURL reaches the same database directly, for the relay's and
	// the reaper's sessions (default DatabaseURL).
	SessionURL string
	// NATSURL of the NATS server to use (required).
	NATSURL string
	// Dispatchers is the number of dispatcher replicas (default 1).
	Dispatchers int
	// Schedulers is the number of scheduler replicas (default 1, negative
	// for none).
	Schedulers int
	// Scheduler configures each scheduler: as config.Defaults returns it
	// when zero. Its database fields are set to DatabaseURL and SessionURL.
	Scheduler scheduler.Config
	// Workers is the number of workers (default 1, negative for none);
	// each gets its own NATS connection, as separate processes would.
	Workers int
	// Worker configures each worker (as config.Defaults returns it when
	// zero); Register adds its workflows.
	Worker   workersvc.Config
	Register func(*worker.Worker) error
	// Dispatcher configures each dispatcher: as config.Defaults returns it
	// when zero. Its database fields are set to DatabaseURL and SessionURL,
	// and Relay to true.
	Dispatcher dispatcher.Config
	// Reapers is the number of reaper replicas (default 1, negative for
	// none); they compete for leadership as in production.
	Reapers int
	// Reaper configures each reaper: as config.Defaults returns it when
	// zero. Its database fields are set to DatabaseURL and SessionURL.
	Reaper reaper.Config
	Log    *slog.Logger
	// NATSOptions, if set, gives the extra options (credentials, TLS) of
	// a connection of role (protocol.RoleDispatcher, ..., RoleWorker for
	// workers, RoleClient for Connect).
	NATSOptions func(role string) []nats.Option
	// Statements, if set, counts every statement of the services' pool.
	Statements *stmtcount.Counter
}

// Server is a running dev assembly.
type Server struct {
	// NATSURL is where the services' NATS is.
	NATSURL string
	// Pool is the services' database pool (closed by Stop).
	Pool *pgxpool.Pool
	// Store is a store over the dev database.
	Store *store.Store
	// Workers are the running workers.
	Workers []*worker.Worker
	// Dispatchers and Relays are the running dispatcher replicas.
	Dispatchers []*dispatcher.Dispatcher
	Relays      []*dispatcher.Relay
	// Reapers are the running reaper replicas.
	Reapers []*reaper.Reaper
	// Schedulers are the running scheduler replicas.
	Schedulers []*scheduler.Scheduler

	log   *slog.Logger
	opts  func(role string) []nats.Option
	comps []lifecycle.Component
	conns []*nats.Conn
	close []func()
}

// Start starts everything; Stop stops it.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Dispatchers <= 0 {
		o.Dispatchers = 1
	}
	if o.Schedulers < 0 {
		o.Schedulers = 0
	} else if o.Schedulers == 0 {
		o.Schedulers = 1
	}
	if o.Workers < 0 {
		o.Workers = 0
	} else if o.Workers == 0 {
		o.Workers = 1
	}
	if o.Reapers < 0 {
		o.Reapers = 0
	} else if o.Reapers == 0 {
		o.Reapers = 1
	}
	if o.DatabaseURL == "" {
		return nil, errors.New("devserver: a database url is required")
	}
	if o.NATSURL == "" {
		return nil, errors.New("devserver: a nats url is required")
	}
	if o.SessionURL == "" {
		o.SessionURL = o.DatabaseURL
	}
	// As the services do: a session URL that reaches a pooler fails now
	// rather than campaigning for ever.
	if err := pgsession.Check(ctx, o.SessionURL); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	s := &Server{log: o.Log, NATSURL: o.NATSURL, opts: o.NATSOptions}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	connect := store.Connect
	if o.Statements != nil {
		connect = func(ctx context.Context, url string) (*pgxpool.Pool, error) {
			return store.ConnectTraced(ctx, url, o.Statements)
		}
	}
	pool, err := connect(ctx, o.DatabaseURL)
	if err != nil {
		return nil, err
	}
	s.close = append(s.close, pool.Close)
	s.Pool = pool
	s.Store = store.New(pool, store.Options{OnLargePayload: process.LogLargePayload(o.Log)})

	dcfg, err := configure(ctx, o.Dispatcher, func(c *dispatcher.Config) {
		c.DatabaseURL, c.DatabaseSessionURL = o.DatabaseURL, o.SessionURL
		// Every replica competes for the relay lock, as in production.
		c.Relay = true
	})
	if err != nil {
		return nil, err
	}
	for i := 0; i < o.Dispatchers; i++ {
		nc, err := s.connect(fmt.Sprintf("dispatcher-%d", i), protocol.RoleDispatcher, nats.CustomInboxPrefix(protocol.ServiceInbox(protocol.RoleDispatcher)))
		if err != nil {
			return nil, err
		}
		comps := dispatcher.Assemble(dcfg, s.Store, nc, o.Log.With("dispatcher", i)).Components
		for _, c := range comps {
			switch c := c.(type) {
			case *dispatcher.Dispatcher:
				s.Dispatchers = append(s.Dispatchers, c)
			case *dispatcher.Relay:
				s.Relays = append(s.Relays, c)
			}
		}
		if err := s.start(ctx, comps...); err != nil {
			return nil, err
		}
	}
	scfg, err := configure(ctx, o.Scheduler, func(c *scheduler.Config) {
		c.DatabaseURL, c.DatabaseSessionURL = o.DatabaseURL, o.SessionURL
	})
	if err != nil {
		return nil, err
	}
	for i := 0; i < o.Schedulers; i++ {
		nc, err := s.connect(fmt.Sprintf("scheduler-%d", i), protocol.RoleScheduler, nats.CustomInboxPrefix(protocol.ServiceInbox(protocol.RoleScheduler)))
		if err != nil {
			return nil, err
		}
		sc := scheduler.Assemble(scfg, s.Store, nc, o.Log.With("scheduler", i)).Components[0]
		if err := s.start(ctx, sc); err != nil {
			return nil, err
		}
		s.Schedulers = append(s.Schedulers, sc.(*scheduler.Scheduler))
	}
	rcfg, err := configure(ctx, o.Reaper, func(c *reaper.Config) {
		c.DatabaseURL, c.DatabaseSessionURL = o.DatabaseURL, o.SessionURL
	})
	if err != nil {
		return nil, err
	}
	wcfg, err := configure(ctx, o.Worker, nil)
	if err != nil {
		return nil, err
	}
	for i := 0; i < o.Reapers; i++ {
		nc, err := s.connect(fmt.Sprintf("reaper-%d", i), protocol.RoleReaper, nats.CustomInboxPrefix(protocol.ServiceInbox(protocol.RoleReaper)))
		if err != nil {
			return nil, err
		}
		r := reaper.Assemble(rcfg, s.Store, nc, o.Log.With("reaper", i)).Components[0]
		if err := s.start(ctx, r); err != nil {
			return nil, err
		}
		s.Reapers = append(s.Reapers, r.(*reaper.Reaper))
	}
	for i := 0; i < o.Workers; i++ {
		nc, err := s.connect(fmt.Sprintf("worker-%d", i), protocol.RoleWorker, worker.Inbox(wcfg.Namespace, wcfg.Identity))
		if err != nil {
			return nil, err
		}
		w, err := workersvc.New(wcfg, nc, o.Log.With("worker", i), o.Register)
		if err != nil {
			return nil, err
		}
		if err := s.start(ctx, w); err != nil {
			return nil, err
		}
		s.Workers = append(s.Workers, w)
	}
	ok = true
	return s, nil
}

// configure returns cfg, or the defaults if it is zero, with what set
// changes, validated as config.Load validates.
func configure[C any, P interface {
	*C
	Validate() error
}](ctx context.Context, cfg C, set func(P)) (C, error) {
	if reflect.ValueOf(&cfg).Elem().IsZero() {
		var err error
		if cfg, err = config.Defaults[C](ctx); err != nil {
			return cfg, fmt.Errorf("devserver: %w", err)
		}
	}
	if set != nil {
		set(P(&cfg))
	}
	if err := P(&cfg).Validate(); err != nil {
		return cfg, fmt.Errorf("devserver: %w: %v", config.ErrInvalid, err)
	}
	return cfg, nil
}

func (s *Server) connect(name, role string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name("kagzi-dev-" + name), nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				s.log.Warn("nats error", "connection", name, "subject", sub.Subject, "err", err)
				return
			}
			s.log.Warn("nats error", "connection", name, "err", err)
		})}, extra...)
	if s.opts != nil {
		opts = append(opts, s.opts(role)...)
	}
	nc, err := nats.Connect(s.NATSURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("devserver: connect nats: %w", err)
	}
	s.conns = append(s.conns, nc)
	return nc, nil
}

func (s *Server) start(ctx context.Context, comps ...lifecycle.Component) error {
	for _, c := range comps {
		if err := c.Start(ctx); err != nil {
			return err
		}
		s.comps = append(s.comps, c)
	}
	return nil
}

// Connect opens another NATS connection to the server (for clients).
// It connects as a client of the default namespace.
func (s *Server) Connect() (*nats.Conn, error) {
	return s.connect("client", protocol.RoleClient, nats.CustomInboxPrefix(protocol.ClientInbox(worker.DefaultNamespace)))
}

// Stop stops the components in reverse order, then the connections.
func (s *Server) Stop() {
	for i := len(s.comps) - 1; i >= 0; i-- {
		s.comps[i].Stop()
	}
	s.comps = nil
	for _, nc := range s.conns {
		nc.Close()
	}
	s.conns = nil
	for _, f := range s.close {
		f()
	}
	s.close = nil
}
