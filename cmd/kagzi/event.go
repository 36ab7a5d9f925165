package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
	"github.com/kagzi/kagzi/pkg/store"
)

func init() { register(newEventCmd) }

func newEventCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "event",
		Aliases: []string{"events"},
		Short:   "Send events to runs waiting for them, or publish events to triggers",
		Example: `  kagzi event send order-42 payment-received --payload '{"amount": 1999}'`,
	})
	c.AddCommand(newEventSendCmd(a), newEventSendWithStartCmd(a), ops.NewEventPublishCmd(a))
	return c
}

// eventJSON is what `event send` prints with --json.
type eventJSON struct {
	EventID   uuid.UUID       `json:"event_id"`
	RunID     uuid.UUID       `json:"run_id"`
	Name      string          `json:"name"`
	CreatedAt time.Time       `json:"created_at"`
	RunStatus store.RunStatus `json:"run_status"`
	Woken     bool            `json:"woken"`
	Data      json.RawMessage `json:"data,omitempty"`
}

func newEventSendCmd(a *cliutil.App) *cobra.Command {
	var (
		data       string
		byExternal bool
	)
	c := &cobra.Command{
		Use:   "send RUN_ID_OR_EXTERNAL_ID NAME",
		Short: "Send an event to a run",
		Long: `Send event NAME with JSON data to a run, named by its run id or by its
external id (the live run holding it). A run waiting for an event of that name
wakes at once; any other live run gets it when it next waits for it. Sending
to a finished run fails (exit 1).

An argument that parses as a UUID is taken as a run id; add --external-id to
take it as an external id anyway. --payload takes inline JSON, @FILE to read a
file, or - for stdin (--data, its former name, still works and is deprecated).`,
		Example: `  kagzi event send 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e approved
  kagzi event send order-42 payment-received --payload '{"amount": 1999}'
  kagzi event send --external-id 3f0e2c1a-0000-4000-8000-000000000000 done --payload @result.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := cliutil.ReadJSON(cmd, cliutil.UsedName(cmd, "payload", "data"), data)
			if err != nil {
				return err
			}
			if body == nil {
				body = []byte("null")
			}
			if args[0] == "" {
				return cliutil.Usagef("name the run by its run id or external id")
			}
			if args[1] == "" {
				return cliutil.Usagef("the event name must not be empty")
			}
			p := store.EventsSendParams{Namespace: a.Namespace, Name: args[1], Payload: body}
			if id, err := cliutil.ParseUUID(args[0]); err == nil && !byExternal {
				p.RunID = id
			} else {
				p.ExternalID = args[0]
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			ev, err := st.EventsSend(cmd.Context(), p)
			if err != nil {
				return err
			}
			v := eventJSON{EventID: ev.ID, RunID: ev.RunID, Name: ev.Name, CreatedAt: ev.CreatedAt.UTC(),
				RunStatus: ev.RunStatus, Woken: ev.Woken, Data: cliutil.Payload(ev.Payload)}
			return a.Print(cmd, v, func(w io.Writer) {
				if ev.Woken {
					fmt.Fprintf(w, "Sent event %q to run %s, which was waiting for it and is now due\n", ev.Name, ev.RunID)
				} else {
					fmt.Fprintf(w, "Sent event %q to run %s (%s); it gets the event when it waits for it\n",
						ev.Name, ev.RunID, ev.RunStatus)
				}
			})
		},
	}
	c.Flags().StringVar(&data, "payload", "", "the event's payload: JSON, @FILE, or - for stdin (default null)")
	cliutil.DeprecatedAlias(c.Flags(), &data, "data", "payload")
	c.Flags().BoolVar(&byExternal, "external-id", false, "take the first argument as an external id even if it looks like a UUID")
	return c
}
