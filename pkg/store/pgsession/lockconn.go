package pgsession

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/store"
)

// A leader lock (LockedConnect, Leader) lives as long as the Postgres session of
// its dedicated connection, so a leader whose host dies or is cut off from
// the network stays leader until someone notices the dead peer. Nothing
// else notices quickly: the host sends no FIN or RST; the server's
// keepalives default to the kernel's two hours idle; and the relay's
// session is worse, since the notifications Postgres sends to the dead
// client are retransmitted for the kernel's tcp_retries2 (about fifteen
// minutes) during which no keepalive is sent. Meanwhile the standby's
// pg_advisory_lock stays blocked: no wakeups are relayed, nobody reaps.
//
// So both ends of a dedicated connection give up on a silent peer within
// seconds, with the same settings:
//
//   - Keepalive probes once the connection was idle for lockConnIdle, then
//     every lockConnInterval, answered by the peer's kernel (a busy
//     process never misses them); lockConnProbes unanswered ones end the
//     connection where TCP_USER_TIMEOUT does not exist.
//   - TCP_USER_TIMEOUT of lockConnUserTimeout ends it once the peer was
//     silent that long while probed, or data stayed unacknowledged that
//     long: the only bound while data is in flight.
//
// Server side, they are session settings sent at startup (tcp_keepalives_*,
// tcp_user_timeout): Postgres ends the session and releases the lock, and
// the standby's blocked request is granted. Client side, they are socket
// options of the dialer: the deposed leader's read fails and it steps down
// about when its successor takes over. An idle session is probed every
// second, so the peer was last heard at most a second before the cut and
// the session ends 4 to 5 s after it; a session the server notifies (the
// relay's) ends lockConnUserTimeout after the first notification sent after
// the cut, at worst about 10 s after it. tests/e2e's
// TestFailoverNetworkCut measures both against the 15 s the architecture
// promises.
//
// A URL that sets one of the server settings (e.g. ?tcp_user_timeout=10000)
// keeps its own value. Postgres applies them to TCP connections only. The
// server's client_connection_check_interval is left alone: it only serves
// a backend running a query (a standby waiting for the lock, which notices
// its dead client anyway once granted), and a server on a platform without
// it refuses a connection that sets it.
const (
	lockConnIdle        = 2 * time.Second
	lockConnInterval    = time.Second
	lockConnProbes      = 3
	lockConnUserTimeout = 5 * time.Second
	lockConnConnect     = 5 * time.Second
)

// lockConnServerSettings are the session settings that make the server end
// a leader's session once its client is gone.
var lockConnServerSettings = map[string]string{
	"tcp_keepalives_idle":     strconv.Itoa(int(lockConnIdle / time.Second)),
	"tcp_keepalives_interval": strconv.Itoa(int(lockConnInterval / time.Second)),
	"tcp_keepalives_count":    strconv.Itoa(lockConnProbes),
	"tcp_user_timeout":        strconv.Itoa(int(lockConnUserTimeout / time.Millisecond)),
}

// lockConnConfig parses url for a dedicated connection holding a leader
// lock: a bounded connect, and dead-peer detection on both ends.
func lockConnConfig(url string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = lockConnConnect
	}
	for k, v := range lockConnServerSettings {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
	d := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: lockConnIdle, Interval: lockConnInterval, Count: lockConnProbes},
		Control:         setUserTimeout(lockConnUserTimeout),
	}
	cfg.DialFunc = d.DialContext
	return cfg, nil
}

// retryLoop runs session until ctx ends, waiting retry (default 200 ms)
// after each end and passing its errors to onError: a Leader's campaign.
// It returns ctx's error.
func retryLoop(ctx context.Context, retry time.Duration, onError func(error), session func(context.Context) error) error {
	if retry <= 0 {
		retry = 200 * time.Millisecond
	}
	for {
		err := session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry):
		}
	}
}

// lockedConn opens a dedicated connection to url (lockConnConfig), checks
// that it is a session of its own on Postgres (not through a pooler:
// store.ErrSessionPooled) and waits, for as long as ctx allows, until its
// session holds advisory lock key. what names the caller in errors. The
// lock lives as long as the connection.
func lockedConn(ctx context.Context, url string, key int64, what string) (*pgx.Conn, error) {
	cfg, err := lockConnConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%s: parse url: %w", what, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, store.SessionConnectError(what, err)
	}
	// Through a pooler the lock would be held by a server session the
	// pooler hands to others, and never released.
	if err := store.SessionDirect(ctx, conn, what); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	// Blocks while another session holds the lock; ctx's end cancels it.
	if err := store.SessionLock(ctx, conn, key); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%s: lock: %w", what, err)
	}
	return conn, nil
}

// Check connects to url as a leader or the relay does (the same session
// settings) and returns an error wrapping store.ErrSessionPooled if it
// reaches a connection pooler rather than Postgres, or the connection's
// error. Services check their session URL with it when they start, so
// that a URL pointed at the pooler fails at once, with a clear error,
// rather than campaigning for ever.
func Check(ctx context.Context, url string) error {
	cfg, err := lockConnConfig(url)
	if err != nil {
		return fmt.Errorf("session check: parse url: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return store.SessionConnectError("session check", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	return store.SessionDirect(ctx, conn, "session check")
}

// LockedConnect returns a connect function (pgxlisten.Listener's Connect
// hook, for one) that opens a dedicated connection to url with dead-peer
// detection on both ends (lockConnConfig) and returns it once its session
// holds advisory lock key: it blocks while another session holds the
// lock, for as long as ctx allows. The lock lives as long as the session,
// so of many processes listening through it one listens at a time, and a
// standby's blocked request is granted as soon as the holder's session
// ends (it died, was cut off, or was terminated: store.LockHolderTerminate).
// url must reach Postgres directly: through a connection pooler the
// connect fails with store.ErrSessionPooled.
func LockedConnect(url string, key int64) func(ctx context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) { return lockedConn(ctx, url, key, "listener") }
}
