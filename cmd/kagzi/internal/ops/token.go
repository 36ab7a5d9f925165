package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
)

// NewTokenCmd builds `kagzi token`: wait tokens minted by workflows
// (workflow.NewWaitToken).
func NewTokenCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "token",
		Aliases: []string{"tokens"},
		Short:   "Complete wait tokens that workflows minted",
		Example: `  kagzi token complete "$TOKEN" --payload '{"approved": true}'`,
	})
	c.AddCommand(newTokenCompleteCmd(a))
	return c
}

// TokenJSON is what `token complete` prints with --json.
type TokenJSON struct {
	TokenID   uuid.UUID       `json:"token_id"`
	RunID     uuid.UUID       `json:"run_id"`
	EventID   uuid.UUID       `json:"event_id"`
	Event     string          `json:"event"`
	CreatedAt time.Time       `json:"created_at"`
	Woken     bool            `json:"woken"`
	Payload   json.RawMessage `json:"payload,omitempty"`
}

func newTokenCompleteCmd(a *cliutil.App) *cobra.Command {
	var payload string
	c := &cobra.Command{
		Use:   "complete TOKEN",
		Short: "Complete a wait token with a JSON payload",
		Long: `Complete the wait for TOKEN (minted by workflow.NewWaitToken) with a JSON
payload: the run waiting for it in workflow.WaitForToken wakes with the payload.
A token completes once. A forged or damaged token, an expired one and a used
one are refused (exit 1) and nothing is stored. The token names its namespace.
--payload takes inline JSON, @FILE to read a file, or - for stdin.`,
		Example: `  kagzi token complete "$TOKEN" --payload '{"approved": true}'
  kagzi token complete "$TOKEN" --payload @answer.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := cliutil.ReadJSON(cmd, "payload", payload)
			if err != nil {
				return err
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			done, err := st.WaitTokensComplete(cmd.Context(), args[0], body)
			if err != nil {
				return err
			}
			ev := done.Event
			v := TokenJSON{TokenID: done.TokenID, RunID: ev.RunID, EventID: ev.ID, Event: ev.Name,
				CreatedAt: ev.CreatedAt.UTC(), Woken: ev.Woken, Payload: cliutil.Payload(ev.Payload)}
			return a.Print(cmd, v, func(w io.Writer) {
				fmt.Fprintf(w, "Completed wait token %s of run %s", done.TokenID, ev.RunID)
				if ev.Woken {
					fmt.Fprintln(w, ", which was waiting for it and is now due")
				} else {
					fmt.Fprintf(w, " (%s); it gets the payload when it waits for the token\n", ev.RunStatus)
				}
			})
		},
	}
	c.Flags().StringVar(&payload, "payload", "", "the payload: JSON, @FILE, or - for stdin (default null)")
	return c
}
