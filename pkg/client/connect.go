package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Connect opens a database pool for databaseURL (a PostgreSQL URL or DSN
// that pgx accepts), checks it answers, and returns a client over it and
// nc. Close closes the pool. databaseURL may reach Postgres directly or
// through a connection pooler in transaction mode (PgBouncer), which the
// pool notices (see store.Connect); a pool given to NewFromPool through
// such a pooler must not prepare statements by name: put
// default_query_exec_mode=cache_describe in its URL.
func Connect(ctx context.Context, databaseURL string, nc *nats.Conn, opts Options) (*Client, error) {
	pool, err := store.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c, err := NewFromPool(pool, nc, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	c.pool = pool
	return c, nil
}

// NewFromPool returns a client over the application's own pool (which it
// keeps owning: Close does not close it) and nc. Use StartTx to start runs
// inside the application's transactions on that pool.
func NewFromPool(pool *pgxpool.Pool, nc *nats.Conn, opts Options) (*Client, error) {
	if pool == nil {
		return nil, fmt.Errorf("client: %w: nil pool", ErrInvalidArgument)
	}
	return NewFromStore(store.New(pool, store.Options{}), nc, opts)
}

// DrainWorker asks worker id of the client's namespace to drain: it is
// marked DRAINING at once (so it is no longer counted as serving new runs
// by RequireWorker), and told over NATS to stop taking runs, finish (or,
// after its drain timeout, release) those it holds and deregister, as its
// own Stop does. Draining a DRAINING worker is a no-op (it is told again);
// an OFFLINE one is ErrConflict; an unknown one ErrNotFound.
func (c *Client) DrainWorker(ctx context.Context, id uuid.UUID) (*Worker, error) {
	if c.nc == nil {
		return nil, errors.New("drain worker: client has no NATS connection")
	}
	w, err := c.st.WorkersDrain(ctx, c.ns, id)
	if err != nil {
		return nil, err
	}
	data, err := protocol.Encode(&protocol.Cancel{Namespace: c.ns, WorkerID: id, Drain: true})
	if err != nil {
		return nil, fmt.Errorf("drain worker %s: %w", id, err)
	}
	if err := c.nc.Publish(protocol.SubjectCancel(c.ns, id), data); err != nil {
		return nil, fmt.Errorf("drain worker %s: tell it: %w", id, err)
	}
	// Flushed, so a caller that returns (a CLI) has sent it.
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.nc.FlushWithContext(fctx); err != nil {
		return nil, fmt.Errorf("drain worker %s: tell it: %w", id, err)
	}
	out := workerFrom(w)
	return &out, nil
}

// Workers lists the namespace's workers (live and recently gone).
func (c *Client) Workers(ctx context.Context) ([]Worker, error) {
	ws, err := c.st.WorkersList(ctx, store.WorkersListParams{Namespace: c.ns})
	if err != nil {
		return nil, err
	}
	out := make([]Worker, len(ws))
	for i, w := range ws {
		out[i] = workerFrom(w)
	}
	return out, nil
}

// DefaultVersion is the version runs of a workflow type get when started
// without one.
type DefaultVersion struct {
	Type    string
	Version string
}

// SetDefaultVersion makes version the default version of workflow type
// typ in the client's namespace: runs started from now on without a
// version (by Start, a schedule, or a parent's StartChild, or a
// continue-as-new) are pinned to it, and delivered only to workers that
// registered typ at that version. Runs already started keep theirs. It is
// the operator's choice, not the first worker's.
func (c *Client) SetDefaultVersion(ctx context.Context, typ, version string) error {
	_, err := c.st.DefaultsSet(ctx, c.ns, typ, version)
	return err
}

// RemoveDefaultVersion removes typ's default version (ErrNotFound if it
// has none): runs started without a version are again pinned by the first
// worker that claims them.
func (c *Client) RemoveDefaultVersion(ctx context.Context, typ string) error {
	return c.st.DefaultsDelete(ctx, c.ns, typ)
}

// DefaultVersions lists the namespace's default versions by type.
func (c *Client) DefaultVersions(ctx context.Context) ([]DefaultVersion, error) {
	ds, err := c.st.DefaultsList(ctx, c.ns)
	if err != nil {
		return nil, err
	}
	out := make([]DefaultVersion, len(ds))
	for i, d := range ds {
		out[i] = DefaultVersion{Type: d.Type, Version: d.Version}
	}
	return out, nil
}
