package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/store"
)

// exitCode maps an error to the process exit code. This is the only place
// that decides: a *cliutil.UsageError, an invalid argument or payload rejected by
// the store, or an invalid configuration is bad usage (2); anything else
// is a failed operation (1).
func exitCode(err error) int {
	var u *cliutil.UsageError
	switch {
	case err == nil:
		return cliutil.ExitOK
	case errors.As(err, &u),
		errors.Is(err, store.ErrInvalidArgument),
		errors.Is(err, store.ErrPayloadTooLarge),
		errors.Is(err, config.ErrInvalid):
		return cliutil.ExitUsage
	default:
		return cliutil.ExitFailed
	}
}

// hint returns a line telling the user what to do about err, or "".
func hint(cmd *cobra.Command, a *cliutil.App, err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "SQLSTATE 3D000"), store.IsDatabaseMissing(err): // invalid_catalog_name, or a pooler's
		return "Hint: the database does not exist; create and migrate it with `kagzi migrate`."
	case strings.Contains(msg, "SQLSTATE 42P01"), strings.Contains(msg, "SQLSTATE 3F000"): // undefined table, schema
		return "Hint: the database has no Kagzi schema; apply it with `kagzi migrate`."
	case errors.Is(err, store.ErrNotFound):
		h := fmt.Sprintf("Hint: check the id and the namespace (--namespace %q)", a.Namespace)
		if noun := topNoun(cmd); noun == "run" || noun == "schedule" || noun == "worker" {
			h += fmt.Sprintf("; list what exists with `kagzi %s list`", noun)
		}
		return h + "."
	case errors.Is(err, store.ErrConflict) && topNoun(cmd) == "run" && cmd.Name() == "cancel":
		return "Hint: only PENDING, RUNNING or SLEEPING runs can be cancelled."
	case errors.Is(err, store.ErrNoWorker):
		return "Hint: start a worker that registers the type on the queue (`kagzi worker list` shows the live ones), " +
			"or start without --require-worker to let the run wait for one."
	case errors.Is(err, context.Canceled):
		return "Interrupted."
	}
	return ""
}

// topNoun is the name of the top-level command cmd belongs to.
func topNoun(cmd *cobra.Command) string {
	for c := cmd; c != nil && c.HasParent(); c = c.Parent() {
		if !c.Parent().HasParent() {
			return c.Name()
		}
	}
	return ""
}
