package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// updateJSON is what `run update` prints with --json.
type updateJSON struct {
	RunID    uuid.UUID       `json:"run_id"`
	UpdateID uuid.UUID       `json:"update_id"`
	Name     string          `json:"name"`
	Result   json.RawMessage `json:"result"`
}

func newRunUpdateCmd(a *cliutil.App) *cobra.Command {
	var (
		data    string
		timeout time.Duration
	)
	c := &cobra.Command{
		Use:   "update RUN_ID NAME",
		Short: "Send an update to a run and print its answer",
		Long: `Send update NAME with a JSON request to a run and wait (by push over NATS, so
NATS must be reachable) for the workflow's answer, which is printed as JSON.

The workflow answers with the handler it declared for NAME (Update.Handle):
updates of one name are handled one at a time, oldest first. The update's Go
validator does not run here (the CLI has no Go declaration); the workflow
runs it again before its handler, so a request it refuses is answered as
rejected.

Exit 1 if the update was rejected, its handler returned an error, the run is
unknown or finished (refused at once, nothing stored), the run ended without
answering, or --timeout passed (the update stays queued and is answered
later). --payload takes inline JSON, @FILE to read a file, or - for stdin.`,
		Example: `  kagzi run update 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e AddItem --payload '{"sku": "A-1", "price": 10}'
  kagzi run update 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e Approve --timeout 30s`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			runID, err := cliutil.ParseUUID(args[0])
			if err != nil {
				return cliutil.Usagef("%q is not a run id (a UUID): %v", args[0], err)
			}
			body, err := cliutil.ReadJSON(cmd, "payload", data)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return cliutil.Usagef("--timeout %s must not be negative", cliutil.FmtDur(timeout))
			}
			var req any
			if body != nil {
				req = json.RawMessage(body)
			}
			cl, err := a.Client(ctx, true)
			if err != nil {
				return err
			}
			name := args[1]
			id, err := cl.UpdateSend(ctx, runID, name, req)
			if err != nil {
				return explainUpdate(err)
			}
			wctx := ctx
			if timeout > 0 {
				var cancel context.CancelFunc
				wctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			out, err := cl.UpdateResult(wctx, runID, id)
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return fmt.Errorf("timed out after %s waiting for the answer to update %s of run %s; it stays queued and the run answers it when it handles %q",
					cliutil.FmtDur(timeout), id, runID, name)
			}
			if err != nil {
				return explainUpdate(err)
			}
			return a.Print(cmd, updateJSON{RunID: runID, UpdateID: id, Name: name, Result: out}, func(w io.Writer) {
				fmt.Fprintln(w, cliutil.FmtPayload(out))
			})
		},
	}
	c.Flags().StringVar(&data, "payload", "", "the request: JSON, @FILE, or - for stdin (default null)")
	cliutil.DurationVar(c.Flags(), &timeout, "timeout", 0, 0, "give up waiting for the answer after this duration (the update stays queued)")
	return c
}

// plainErrorType is the error type of an error made by errors.New or
// fmt.Errorf: Go's "errorString", which says nothing to the reader.
var plainErrorType = workflow.ErrorType(errors.New(""))

// errTypeNote names a handler's error type, if it has one of its own
// (workflow.TypedError, or an error type of the handler's code).
func errTypeNote(t string) string {
	if t == "" || t == plainErrorType {
		return ""
	}
	return " (error type " + t + ")"
}

// explainUpdate adds to an update's typed failure what it means for the
// caller.
func explainUpdate(err error) error {
	var (
		failed     *client.UpdateFailedError
		rejected   *client.UpdateRejectedError
		unanswered *client.UpdateUnansweredError
	)
	switch {
	case errors.As(err, &failed):
		return fmt.Errorf("%w%s; the run goes on", err, errTypeNote(failed.Type))
	case errors.As(err, &rejected):
		return fmt.Errorf("%w%s; the handler did not run", err, errTypeNote(rejected.Type))
	case errors.As(err, &unanswered):
		return fmt.Errorf("%w; see `kagzi run show %s`", err, unanswered.RunID)
	case errors.Is(err, client.ErrRunFinished):
		return fmt.Errorf("%w; a finished run takes no updates, nothing was sent", err)
	}
	return err
}
