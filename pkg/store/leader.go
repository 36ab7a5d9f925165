package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Leader elects one process of many with a Postgres advisory lock held on a
// dedicated connection, and runs Lead while it holds the lock. Unlike
// Listener it does not LISTEN, so the leader's connection is not sent every
// notification.
//
// Leadership lives and dies with the database session: if the leader's
// process, host or connection dies, or an operator ends its session (see
// LockHolderTerminate), Postgres releases the lock and a standby whose lock
// request was blocked gets it at once. The deposed leader notices the lost
// session (the server closes it, or the connection's dead-peer detection
// ends it) and its Lead context is cancelled. If the leader's host dies or
// is cut off, both ends of the connection give up on the silent peer within
// seconds (see lockConnConfig): the server ends the session, releasing the
// lock, about when the deposed leader steps down.
type Leader struct {
	// URL is the database to connect to, directly: a campaign through a
	// connection pooler fails with ErrSessionPooled.
	URL string
	// LockKey is the advisory lock that elects the leader.
	LockKey int64
	// Role, if set, opens a term of role (LeadersElect) on the session once
	// the lock is granted; Lead is given it for its fenced writes (Fenced).
	Role string
	// Lead runs while the lock is held, with the term (0 without Role). Its
	// context ends when the session is lost or Run's context ends; Lead
	// must then return promptly. When Lead returns, the lock is released
	// (the connection closed) and, unless Run's context ended, the
	// campaign starts again after Retry.
	Lead func(ctx context.Context, term int64) error
	// OnError receives non-fatal errors (connect failed, session lost, Lead
	// failed).
	OnError func(err error)
	// Retry is the wait before campaigning again (default 200 ms).
	Retry time.Duration
}

// Run campaigns, leads while elected, and campaigns again, until ctx ends.
// It returns ctx's error.
func (l *Leader) Run(ctx context.Context) error {
	return retryLoop(ctx, l.Retry, l.OnError, l.term)
}

// term is one campaign: connect, wait for the lock, lead until the session
// or Lead ends.
func (l *Leader) term(ctx context.Context) error {
	conn, err := lockedConn(ctx, l.URL, l.LockKey, "leader")
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var term int64
	if l.Role != "" {
		if term, err = LeadersElect(ctx, conn, l.Role); err != nil {
			return fmt.Errorf("leader: %w", err)
		}
	}
	leadCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The connection is idle while we lead; reading from it is how a lost
	// session shows (the server's FATAL message, a closed socket, a
	// dead-peer timeout).
	watchCtx, stopWatch := context.WithCancel(leadCtx)
	watched := make(chan error, 1)
	go func() {
		for {
			_, err := conn.WaitForNotification(watchCtx)
			if err == nil {
				continue // nothing LISTENs, but a notification is harmless
			}
			if watchCtx.Err() == nil {
				err = fmt.Errorf("leader: session lost: %w", err)
				cancel(err)
			} else {
				err = nil
			}
			watched <- err
			return
		}
	}()
	leadErr := errors.New("leader: no Lead function")
	if l.Lead != nil {
		leadErr = l.Lead(leadCtx, term)
		if leadErr != nil {
			leadErr = fmt.Errorf("leader: lead: %w", leadErr)
		}
	}
	stopWatch()
	lost := <-watched
	if lost != nil {
		return lost
	}
	if ctx.Err() != nil {
		return nil
	}
	return leadErr
}

// LeadersElect opens the next term of role and returns it: the first
// statement of a leader, on the session that holds its lock (see Leader).
// It waits for the fenced writes of the previous term still in flight
// (they hold the row FOR SHARE), so none of them commits after it.
func LeadersElect(ctx context.Context, db DBTX, role string) (int64, error) {
	var term int64
	err := db.QueryRow(ctx, `
INSERT INTO kagzi.leaders (role, term) VALUES (@role, 1)
ON CONFLICT (role) DO UPDATE SET term = kagzi.leaders.term + 1, elected_at = now()
RETURNING term`, pgx.NamedArgs{"role": role}).Scan(&term)
	return term, mapErr("elect "+role, err)
}

// Fenced runs fn in a transaction in which term is role's current term,
// and fails with ErrLeaseLost, writing nothing, if it is not: the writes
// of a leader that was replaced while it stalled do not happen. The term
// row stays locked FOR SHARE until the transaction ends, so a new
// election waits for fn's writes instead of overtaking them.
func (s *Store) Fenced(ctx context.Context, role string, term int64, fn func(tx *Store) error) error {
	return s.InTx(ctx, func(tx *Store) error {
		// Waits for an election in progress, then reads the term it set.
		var current int64
		err := tx.db.QueryRow(ctx, `SELECT term FROM kagzi.leaders WHERE role = @role FOR SHARE`,
			pgx.NamedArgs{"role": role}).Scan(&current)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return mapErr("fence "+role, err)
		}
		if current != term {
			return fmt.Errorf("%s term %d is over: %w", role, term, ErrLeaseLost)
		}
		return fn(tx)
	})
}
