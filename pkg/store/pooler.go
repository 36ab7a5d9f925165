package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Kagzi talks to Postgres in two ways, and a connection pooler in
// transaction mode (PgBouncer's pool_mode = transaction), which gives each
// transaction whichever server session is free, carries only one of them:
//
//   - Pooled work: every statement of the services, the client and the CLI
//     on a pool (Connect) is a transaction or a statement that needs
//     nothing of its session beyond it. Through a pooler, Connect notices
//     the pooler and keeps nothing on the server across transactions: no
//     prepared statements (pgx describes a statement once and sends it
//     unnamed: QueryExecModeCacheDescribe), and no session settings as
//     startup parameters (the idle-in-transaction bound is set per
//     transaction instead: see beginBounded).
//   - Sessions: the relay's LISTEN, the leaders' advisory locks with the
//     dead-peer settings of their sessions (pgsession), and the
//     migrator's lock live as long as a session, on a connection of their
//     own straight to Postgres (the session URL). Through a pooler LISTEN
//     hears nothing (the pooler hands its server session to others), a
//     lock is held by whichever server session ran the statement, outlives
//     its client, and nobody can release it; so these refuse a pooler
//     (ErrSessionPooled) instead.
//
// A pooler is recognised by what it cannot hide: the id of the server
// process a connection talks to (pg_backend_pid) is the one the server
// announced when the connection was made (BackendKeyData) only when the
// connection is a session of its own. PgBouncer announces ids of its own,
// whatever its pool mode; and it refuses every startup parameter it does
// not know (08P01 "unsupported startup parameter") unless told to ignore
// it.

// ErrSessionPooled is wrapped by the error of a connection meant to hold a
// session (LISTEN, a leader lock, migrating) that reached a connection
// pooler rather than Postgres itself.
var ErrSessionPooled = errors.New("a session needs a direct connection to Postgres, and this one reaches a connection pooler")

// idleParam is the session setting that bounds a transaction left idle
// (IdleInTransactionTimeout).
const idleParam = "idle_in_transaction_session_timeout"

// beginBounded begins a transaction that the server ends if it sits idle
// for IdleInTransactionTimeout: the bound Connect's pools set for the
// whole session where they can (directly), set per transaction where the
// session is not theirs (through a pooler). One message, one round trip,
// as a plain BEGIN.
// Its timeout is IdleInTransactionTimeout in milliseconds
// (TestBeginBoundedTimeout).
var beginBounded = stmt("StoreBeginBounded").SQL()

// sqlStateProtocolViolation is what PgBouncer answers a connection it
// refuses with (and a missing database, which Postgres calls 3D000).
const sqlStateProtocolViolation = "08P01"

// unsupportedStartupParameter reports whether err is a pooler's refusal of
// a startup parameter (Postgres itself accepts every setting a client may
// set at startup).
func unsupportedStartupParameter(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == sqlStateProtocolViolation && strings.HasPrefix(pe.Message, "unsupported startup parameter")
}

// IsDatabaseMissing reports whether err says the database a connection
// named does not exist: Postgres's 3D000, or PgBouncer's 08P01 for a
// database it has no entry for ("no such database") or whose server
// refused it ("database ... does not exist").
func IsDatabaseMissing(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "3D000":
		return true
	case sqlStateProtocolViolation:
		return strings.HasPrefix(pe.Message, "no such database") ||
			(strings.HasPrefix(pe.Message, "database ") && strings.HasSuffix(pe.Message, " does not exist"))
	}
	return false
}

// poolerEvidence returns why conn is not a session of its own on a
// Postgres server ("" when it is): the server process answering its
// statements is not the one announced when it connected. The statement
// goes by the simple protocol, so nothing is prepared on a server session
// that a pooler may hand to someone else.
func poolerEvidence(ctx context.Context, conn *pgconn.PgConn) (string, error) {
	res, err := conn.Exec(ctx, sessionPIDSQL.SQL()).ReadAll()
	if err != nil {
		return "", fmt.Errorf("read server process id: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return "", errors.New("read server process id: no answer")
	}
	pid, err := strconv.ParseUint(string(res[0].Rows[0][0]), 10, 32)
	if err != nil {
		return "", fmt.Errorf("read server process id: %w", err)
	}
	if uint32(pid) == conn.PID() {
		return "", nil
	}
	return fmt.Sprintf("the server process answering (pg_backend_pid %d) is not the one announced when it connected (%d)", pid, conn.PID()), nil
}

// SessionDirect checks that conn, opened to hold a session for what
// (e.g. "relay"), talks to Postgres directly; a pooler is ErrSessionPooled.
func SessionDirect(ctx context.Context, conn *pgx.Conn, what string) error {
	why, err := poolerEvidence(ctx, conn.PgConn())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if why != "" {
		return fmt.Errorf("%s: %w (%s)", what, ErrSessionPooled, why)
	}
	return nil
}

// SessionConnectError is the error of a failed connect for what: a
// pooler's refusal of the session settings of a dedicated connection is
// ErrSessionPooled, with the refusal.
func SessionConnectError(what string, err error) error {
	if unsupportedStartupParameter(err) {
		return fmt.Errorf("%s: %w (it refused a session setting: %v)", what, ErrSessionPooled, err)
	}
	return fmt.Errorf("%s: connect: %w", what, err)
}

// connectSession opens a plain connection to url for what (migrating,
// setting up roles) that holds session state, and refuses a pooler.
func connectSession(ctx context.Context, url, what string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("%s: connect to %s: %w", what, redact(url), err)
	}
	if err := SessionDirect(ctx, conn, what); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// poolerProbe opens one connection with cfg and reports whether it
// reaches Postgres through a pooler. When ours is set, cfg carries the
// idle-in-transaction bound as a startup parameter of Connect's choosing,
// and a pooler's refusal of it is the answer rather than an error.
func poolerProbe(ctx context.Context, cfg *pgx.ConnConfig, ours bool) (bool, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		if !ours || !unsupportedStartupParameter(err) {
			return false, err
		}
		// Only a pooler refuses it; check it lets us in without.
		c := cfg.Copy()
		delete(c.RuntimeParams, idleParam)
		conn, err = pgx.ConnectConfig(ctx, c)
		if err != nil {
			return false, err
		}
		_ = conn.Close(context.WithoutCancel(ctx))
		return true, nil
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	why, err := poolerEvidence(ctx, conn.PgConn())
	return why != "", err
}
