package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
)

// sendWithStartJSON is what `event send-with-start` prints with --json.
type sendWithStartJSON struct {
	RunID     uuid.UUID        `json:"run_id"`
	Started   bool             `json:"started"`
	EventID   uuid.UUID        `json:"event_id"`
	Name      string           `json:"name"`
	CreatedAt time.Time        `json:"created_at"`
	RunStatus client.RunStatus `json:"run_status"`
	Woken     bool             `json:"woken"`
	Payload   json.RawMessage  `json:"payload,omitempty"`
}

func newEventSendWithStartCmd(a *cliutil.App) *cobra.Command {
	var (
		typ, externalID, input, event, data, queue, version string
		priority                                            int
		deadline                                            time.Duration
		requireWorker                                       bool
	)
	c := &cobra.Command{
		Use:   "send-with-start",
		Short: "Send an event to the live run with an external id, starting the run if none is live",
		Long: `Send event --event with JSON --payload to the live run holding external id --id,
starting a run of workflow type --type with --input first if no run with that id
is live, in one transaction: the event is never stored on a run that finished
meanwhile, and concurrent callers with the same id end with one run holding all
their events. A finished run with the id does not count: a new run starts.

A live run of another type than --type holding the id is refused (exit 1), and
nothing is stored. --queue, --version, --priority, --deadline and
--require-worker apply only to a run the command starts. --input and --payload
take inline JSON, @FILE to read a file, or - for stdin (one of them at most).`,
		Example: `  kagzi event send-with-start --type Cart --id cart-7 --event add --payload '{"sku": "A1"}'
  kagzi event send-with-start --type Cart --id cart-7 --input '{"user": 5}' --event add --payload @item.json --queue carts`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if input == "-" && data == "-" {
				return cliutil.Usagef("--input and --payload cannot both read standard input")
			}
			in, err := cliutil.ReadJSON(cmd, "input", input)
			if err != nil {
				return err
			}
			body, err := cliutil.ReadJSON(cmd, "payload", data)
			if err != nil {
				return err
			}
			if typ == "" || externalID == "" || event == "" {
				return cliutil.Usagef("--type, --id and --event must not be empty")
			}
			opts := client.StartOptions{Queue: queue, Version: version, Priority: priority, RequireWorker: requireWorker}
			if cmd.Flags().Changed("deadline") {
				if deadline <= 0 {
					return cliutil.Usagef("--deadline %s must be positive, e.g. --deadline 30m", cliutil.FmtDur(deadline))
				}
				opts.Deadline = time.Now().Add(deadline)
			}
			req := client.SignalWithStartRequest{Type: typ, ExternalID: externalID, Event: event, Options: opts}
			if in != nil {
				req.Input = json.RawMessage(in)
			}
			if body != nil {
				req.Payload = json.RawMessage(body)
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			res, err := cl.SignalWithStart(cmd.Context(), req)
			if err != nil {
				return err
			}
			ev := res.Event
			v := sendWithStartJSON{RunID: ev.RunID, Started: res.Started, EventID: ev.ID, Name: ev.Name,
				CreatedAt: ev.CreatedAt.UTC(), RunStatus: ev.RunStatus, Woken: ev.Woken, Payload: cliutil.Payload(ev.Payload)}
			return a.Print(cmd, v, func(w io.Writer) {
				switch {
				case res.Started:
					fmt.Fprintf(w, "Started run %s (%s) with external id %q and sent it event %q\n", ev.RunID, typ, externalID, ev.Name)
				case ev.Woken:
					fmt.Fprintf(w, "Sent event %q to run %s, which was waiting for it and is now due\n", ev.Name, ev.RunID)
				default:
					fmt.Fprintf(w, "Sent event %q to run %s (%s); it gets the event when it waits for it\n", ev.Name, ev.RunID, ev.RunStatus)
				}
			})
		},
	}
	f := c.Flags()
	f.StringVar(&typ, "type", "", "workflow type of the run to start (a live run must be of this type)")
	f.StringVar(&externalID, "id", "", "external id of the run")
	f.StringVar(&input, "input", "", "input of a run to start: JSON, @FILE, or - for stdin (default null)")
	f.StringVar(&event, "event", "", "event name")
	f.StringVar(&data, "payload", "", "event payload: JSON, @FILE, or - for stdin (default null)")
	f.StringVar(&queue, "queue", "", `task queue of a run to start (default "default")`)
	f.StringVar(&version, "version", "", "workflow version to pin on a run to start")
	f.IntVar(&priority, "priority", 0, "priority of a run to start; higher is claimed first")
	cliutil.DurationVar(f, &deadline, "deadline", 0, 0, "fail a run to start if it has not finished within this duration, e.g. 1h")
	f.BoolVar(&requireWorker, "require-worker", false, "refuse to start a run if no live worker serves the type on the queue")
	for _, name := range []string{"type", "id", "event"} {
		_ = c.MarkFlagRequired(name)
	}
	return c
}
