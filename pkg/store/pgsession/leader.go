package pgsession

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
)

// Leader elects one process of many with a Postgres advisory lock held on a
// dedicated connection, and runs Lead while it holds the lock. Unlike a
// listener's connection (LockedConnect) it does not LISTEN, so it is not
// sent every notification.
//
// Leadership lives and dies with the database session: if the leader's
// process, host or connection dies, or an operator ends its session (see
// store.LockHolderTerminate), Postgres releases the lock and a standby
// whose lock request was blocked gets it at once. The deposed leader notices the lost
// session (the server closes it, or the connection's dead-peer detection
// ends it) and its Lead context is cancelled. If the leader's host dies or
// is cut off, both ends of the connection give up on the silent peer within
// seconds (see lockConnConfig): the server ends the session, releasing the
// lock, about when the deposed leader steps down.
type Leader struct {
	// URL is the database to connect to, directly: a campaign through a
	// connection pooler fails with store.ErrSessionPooled.
	URL string
	// LockKey is the advisory lock that elects the leader.
	LockKey int64
	// Role, if set, opens a term of role (store.LeadersElect) on the session once
	// the lock is granted; Lead is given it for its fenced writes (store.Store.Fenced).
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
		if term, err = store.LeadersElect(ctx, conn, l.Role); err != nil {
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
