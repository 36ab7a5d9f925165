package core

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Typed errors. Every error the store returns wraps one of these (or a
// database/connection error) with context, so callers test with errors.Is.
var (
	// ErrNotFound: the entity does not exist in the given namespace.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write conflicts with the entity's current state or a
	// uniqueness rule (e.g. cancelling a finished run).
	ErrConflict = errors.New("conflict")
	// ErrInvalidArgument: the input is malformed; the message names the field.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrLeaseLost: the report names a lease that is no longer current; the
	// holder must abandon the run.
	ErrLeaseLost = errors.New("lease lost")
	// ErrPayloadTooLarge: an input, output or event payload exceeds the limit.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrNoWorker: a start that asked for a live worker
	// (RunsCreateParams.RequireWorker) was refused because no live worker
	// serves the run's type@version on its queue; nothing was created.
	ErrNoWorker = errors.New("no live worker serves the run")
	// ErrEventsArrived: a run's end (a completion or a continue-as-new)
	// was refused because events of a name the ending execution waited
	// for or drained arrived after its delivery and are not consumed. The
	// run was made claimable at once, without counting an attempt, to
	// execute again with them; the execution that reported the end must
	// be abandoned (its lease is gone).
	ErrEventsArrived = errors.New("events arrived during the execution")
	// ErrAttribute: a search attribute of a start, a declaration or a query
	// is malformed, undeclared or of the wrong kind; the message names it.
	// It wraps ErrInvalidArgument.
	ErrAttribute = fmt.Errorf("%w: search attribute", ErrInvalidArgument)
	// ErrQueryTimeout: a listing or count by a query ran longer than its
	// statement timeout (QueryTimeout) and was stopped; narrow the query.
	ErrQueryTimeout = errors.New("query timed out")
)

// sqlStateNoWorker is the SQLSTATE kagzi.require_worker raises (migration
// 005_recovery.sql).
const sqlStateNoWorker = "KZ001"

// noWorkerMessage is kagzi.require_worker's message without the "@" it
// prints after a type started without a version ("serves T@ on queue"):
// no type holds an '@' (protocol.ValidToken), so "@ on queue " follows
// only an empty version.
func noWorkerMessage(msg string) string {
	return strings.Replace(msg, "@ on queue ", " on queue ", 1)
}

func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// IsDeadlock reports whether Postgres aborted the statement to break a
// deadlock (the statement may be run again).
func IsDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// IsTransient reports whether err is a clash that the same work may not
// meet again: a deadlock broken by aborting this side (40P01), a
// serialization failure (40001), or a statement refused because an
// earlier one of its transaction was aborted so (25P02).
func IsTransient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40P01", "40001", "25P02":
		return true
	}
	return false
}

// MapErr turns driver errors into the store's typed errors, keeping the
// original for inspection. what names the operation for the message.
func MapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%s: %w: %s", what, ErrConflict, pgErr.ConstraintName)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%s: %w: referenced row missing (%s)", what, ErrNotFound, pgErr.ConstraintName)
		case "23514", "22P02", "22023", "22007", "22008": // check, bad text repr, bad parameter, datetime
			return fmt.Errorf("%s: %w: %s", what, ErrInvalidArgument, pgErr.Message)
		case sqlStateNoWorker:
			return fmt.Errorf("%s: %w: %s", what, ErrNoWorker, noWorkerMessage(pgErr.Message))
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
