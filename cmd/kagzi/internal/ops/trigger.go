package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// NewTriggerCmd builds `kagzi trigger`: event triggers (docs/triggers.md).
func NewTriggerCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "trigger",
		Aliases: []string{"triggers"},
		Short:   "Manage event triggers: published events that start runs",
		Example: `  kagzi trigger create ship-orders --event 'order.*' --type ShipOrder --input-path order
  kagzi trigger list
  kagzi trigger fired "$EVENT_ID"
  kagzi trigger delete ship-orders`,
	})
	c.AddCommand(newTriggerCreateCmd(a), newTriggerListCmd(a), newTriggerDeleteCmd(a), newTriggerFiredCmd(a))
	return c
}

// TriggerJSON is a trigger as `trigger create` and `trigger list` print it
// with --json.
type TriggerJSON struct {
	ID        uuid.UUID `json:"trigger_id"`
	Name      string    `json:"name"`
	Event     string    `json:"event"`
	Type      string    `json:"type"`
	Queue     string    `json:"queue"`
	InputPath string    `json:"input_path,omitempty"`
	// Batch is the trigger's batch option (docs/batching.md), if any.
	Filter    string            `json:"filter,omitempty"`
	Batch     *TriggerBatchJSON `json:"batch,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

// TriggerBatchJSON is a trigger's batch option.
type TriggerBatchJSON struct {
	Key       string `json:"key"`
	MaxSize   int    `json:"max_size"`
	MaxWaitMS int64  `json:"max_wait_ms"`
}

func toTriggerJSON(t store.Trigger) TriggerJSON {
	j := TriggerJSON{ID: t.ID, Name: t.Name, Event: t.Pattern, Type: t.Type, Queue: t.Queue, InputPath: t.InputPath,
		Filter: t.Filter, CreatedAt: t.CreatedAt.UTC()}
	if b := t.Batch; b != nil {
		j.Batch = &TriggerBatchJSON{Key: b.Key, MaxSize: b.MaxSize, MaxWaitMS: b.MaxWait.Milliseconds()}
	}
	return j
}

func newTriggerCreateCmd(a *cliutil.App) *cobra.Command {
	var (
		t store.Trigger
		b store.StartBatch
	)
	c := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a trigger: events matching a pattern start runs of a type",
		Long: `Create trigger NAME: every event published in the namespace whose name matches
--event starts one run of --type on --queue, exactly once per event, even when
the publisher retries. Names are dot-separated tokens; in a pattern "*"
matches one token and a last ">" one or more ("order.>" matches
"order.created" and "order.created.eu"). The run's input is the event's
payload, or with --input-path the value of that top-level key of it (null
when the payload has none). With --filter, only events whose payload matches
the query start a run (the language of run list --query, over the payload's
keys: amount > 100 AND order.currency = 'usd'; a missing key or a value of
another type matches nothing). The run's external id is
trigger:NAME:EVENT_ID. A namespace holds at most 1000 triggers.

With --batch-max-size each matching event is instead an item of a start
batch (docs/batching.md): one run of --type gets the JSON list of the
items' inputs when --batch-max-size items are collected or --batch-max-wait
after the first, whichever is first; --batch-key names the batch.`,
		Example: `  kagzi trigger create ship-orders --event 'order.*' --type ShipOrder --input-path order
  kagzi trigger create big-orders --event order.created --type Review --filter "order.amount > 100 AND order.currency = 'usd'"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			t.Namespace, t.Name = a.Namespace, args[0]
			if cmd.Flags().Changed("batch-max-size") || cmd.Flags().Changed("batch-max-wait") || cmd.Flags().Changed("batch-key") {
				t.Batch = &b
			}
			if t.Queue == "" {
				t.Queue = "default"
			}
			made, err := st.TriggersCreate(cmd.Context(), t)
			if err != nil {
				return err
			}
			return a.Print(cmd, toTriggerJSON(made), func(w io.Writer) {
				fmt.Fprintf(w, "Created trigger %s: events %s start %s on queue %s.\n", made.Name, made.Pattern, made.Type, made.Queue)
			})
		},
	}
	c.Flags().StringVar(&t.Pattern, "event", "", "the event name pattern (required; * one token, a last > the rest)")
	c.Flags().StringVar(&t.Type, "type", "", "the workflow type of the runs it starts (required)")
	c.Flags().StringVar(&t.Queue, "queue", "default", "the queue of the runs it starts")
	c.Flags().StringVar(&t.InputPath, "input-path", "", "the top-level key of the payload that is the run's input (default: all of it)")
	c.Flags().StringVar(&t.Filter, "filter", "", "a query the payload must match to start a run (the language of run list --query; default: every event)")
	c.Flags().StringVar(&b.Key, "batch-key", "", "batch the events: the key of their batch (with --batch-max-size)")
	c.Flags().IntVar(&b.MaxSize, "batch-max-size", 0, "batch the events: the items of one run (1 to 10000)")
	c.Flags().DurationVar(&b.MaxWait, "batch-max-wait", time.Minute, "batch the events: a run starts at most this long after its first item (at most 24h)")
	_ = c.MarkFlagRequired("event")
	_ = c.MarkFlagRequired("type")
	return c
}

func newTriggerListCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the namespace's triggers",
		Example: `  kagzi trigger list
  kagzi --json trigger list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			ts, err := st.TriggersList(cmd.Context(), a.Namespace)
			if err != nil {
				return err
			}
			v := struct {
				Triggers []TriggerJSON `json:"triggers"`
			}{Triggers: make([]TriggerJSON, len(ts))}
			for i, t := range ts {
				v.Triggers[i] = toTriggerJSON(t)
			}
			return a.Print(cmd, v, func(w io.Writer) {
				if len(ts) == 0 {
					fmt.Fprintf(w, "No triggers in namespace %q.\n", a.Namespace)
					return
				}
				fmt.Fprintln(w, "NAME\tEVENT\tTYPE\tQUEUE\tINPUT PATH\tFILTER")
				for _, t := range ts {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Pattern, t.Type, t.Queue, t.InputPath, t.Filter)
				}
			})
		},
	}
}

func newTriggerDeleteCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a trigger (events not fanned out yet start no run of it)",
		Example: `  kagzi trigger delete ship-orders`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			if err := st.TriggersDelete(cmd.Context(), a.Namespace, args[0]); err != nil {
				return err
			}
			return a.Print(cmd, map[string]string{"deleted": args[0]}, func(w io.Writer) {
				fmt.Fprintf(w, "Deleted trigger %s.\n", args[0])
			})
		},
	}
}

// FiredJSON is what `trigger fired` prints with --json.
type FiredJSON struct {
	EventID     uuid.UUID  `json:"event_id"`
	Name        string     `json:"name"`
	PublishedAt time.Time  `json:"published_at"`
	FannedOutAt *time.Time `json:"fanned_out_at"`
	// FanOutAttempts counts the failed fan-outs and FanOutError is the
	// last one's error; FailedAt is set once the event was given up
	// after store.MaxFanOutAttempts of them (a poison event: no run).
	FanOutAttempts int        `json:"fan_out_attempts"`
	FanOutError    string     `json:"fan_out_error,omitempty"`
	FailedAt       *time.Time `json:"failed_at"`
	Runs           []struct {
		Trigger string    `json:"trigger"`
		RunID   uuid.UUID `json:"run_id"`
	} `json:"runs"`
}

func newTriggerFiredCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "fired EVENT_ID",
		Short: "Show a published event and the runs its triggers started",
		Example: `  kagzi trigger fired 0192f3c4-8d5e-7a01-b2c3-d4e5f6a7b8c9
  kagzi --json trigger fired "$EVENT_ID" | jq -r '.runs[].run_id'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("event id", args[0])
			if err != nil {
				return err
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			e, err := st.PublishedEventsGet(cmd.Context(), a.Namespace, id)
			if err != nil {
				return err
			}
			v := FiredJSON{EventID: e.ID, Name: e.Name, PublishedAt: e.PublishedAt.UTC(), FannedOutAt: cliutil.UTC(e.FannedOutAt),
				FanOutAttempts: e.FanOutAttempts, FanOutError: e.FanOutError, FailedAt: cliutil.UTC(e.FailedAt)}
			for _, f := range e.Firings {
				v.Runs = append(v.Runs, struct {
					Trigger string    `json:"trigger"`
					RunID   uuid.UUID `json:"run_id"`
				}{f.Trigger, f.RunID})
			}
			return a.Print(cmd, v, func(w io.Writer) {
				switch {
				case e.FailedAt != nil:
					fmt.Fprintf(w, "Event %s (%s) failed: its fan-out failed %d times, no run was started. Last error: %s\n",
						e.ID, e.Name, e.FanOutAttempts, e.FanOutError)
					return
				case e.FannedOutAt == nil && e.FanOutAttempts > 0:
					fmt.Fprintf(w, "Event %s (%s) is not fanned out yet: %d failed attempts (at most %d). Last error: %s\n",
						e.ID, e.Name, e.FanOutAttempts, store.MaxFanOutAttempts, e.FanOutError)
					return
				case e.FannedOutAt == nil:
					fmt.Fprintf(w, "Event %s (%s) is not fanned out yet.\n", e.ID, e.Name)
					return
				}
				fmt.Fprintf(w, "Event %s (%s) started %d runs.\n", e.ID, e.Name, len(e.Firings))
				if len(e.Firings) > 0 {
					fmt.Fprintln(w, "TRIGGER\tRUN")
				}
				for _, f := range e.Firings {
					fmt.Fprintf(w, "%s\t%s\n", f.Trigger, f.RunID)
				}
			})
		},
	}
}

// PublishJSON is what `event publish` prints with --json.
type PublishJSON struct {
	EventID uuid.UUID `json:"event_id"`
	Created bool      `json:"created"`
}

// NewEventPublishCmd builds `kagzi event publish`.
func NewEventPublishCmd(a *cliutil.App) *cobra.Command {
	var payload, id string
	c := &cobra.Command{
		Use:   "publish NAME",
		Short: "Publish an event: every matching trigger starts a run",
		Long: `Publish event NAME (dot-separated tokens, e.g. order.created) with a JSON
payload: every trigger of the namespace whose pattern matches NAME starts a
run, exactly once. With --id (a UUID), publishing the same id again adds
nothing and prints the same id: a publisher may retry safely. The event id
is printed; kagzi trigger fired EVENT_ID shows the runs it started.
--payload takes inline JSON, @FILE to read a file, or - for stdin.`,
		Example: `  kagzi event publish order.created --payload '{"order": {"id": 42}}'
  kagzi event publish order.created --id 0192f3c4-8d5e-7a01-b2c3-d4e5f6a7b8c9 --payload @order.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts client.PublishOptions
			if id != "" {
				var err error
				if opts.EventID, err = cliutil.ParseID("event id", id); err != nil {
					return err
				}
			}
			body, err := cliutil.ReadJSON(cmd, "payload", payload)
			if err != nil {
				return err
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			var in any
			if body != nil {
				in = json.RawMessage(body)
			}
			p, err := cl.Publish(cmd.Context(), args[0], in, opts)
			if err != nil {
				return err
			}
			return a.Print(cmd, PublishJSON{EventID: p.EventID, Created: p.Created}, func(w io.Writer) {
				if p.Created {
					fmt.Fprintf(w, "Published event %s\n", p.EventID)
				} else {
					fmt.Fprintf(w, "Event %s was published already: nothing added\n", p.EventID)
				}
			})
		},
	}
	c.Flags().StringVar(&payload, "payload", "", "the payload: JSON, @FILE, or - for stdin (default null)")
	c.Flags().StringVar(&id, "id", "", "the event's id (a UUID): its idempotency key (default: a new UUID v7)")
	return c
}
