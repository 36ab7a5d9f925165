package ops

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

const exampleScheduleID = "0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e"

func NewScheduleCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "schedule",
		Aliases: []string{"schedules"},
		Short:   "Create and manage cron schedules",
		Long: `A schedule starts a run of a workflow type at every time of its cron
expression, exactly once per fire time, with bounded catch-up after downtime.
Pause, resume (missed times are skipped), trigger now, backfill a past
range, delete (the runs it fired stay), and list the runs it fired.`,
		Example: `  kagzi schedule create Report --cron '0 9 * * MON-FRI' --tz Europe/Paris
  kagzi schedule list
  kagzi schedule history ` + exampleScheduleID,
	})
	c.AddCommand(newScheduleCreateCmd(a), newScheduleListCmd(a), newScheduleShowCmd(a),
		newScheduleSetCmd(a, "pause"), newScheduleSetCmd(a, "resume"), newScheduleTriggerCmd(a),
		newScheduleDeleteCmd(a), newScheduleHistoryCmd(a), newScheduleBackfillCmd(a))
	return c
}

func newScheduleCreateCmd(a *cliutil.App) *cobra.Command {
	var (
		cron, tz, input, queue, version string
		maxCatchup                      int
		overlap                         string
		jitter                          time.Duration
		concurrencyKey, rateKey         string
	)
	c := &cobra.Command{
		Use:   "create TYPE --cron EXPR",
		Short: "Create a schedule for a workflow type",
		Long: `Create a schedule that starts a run of workflow type TYPE at every time of
the cron expression, read in the time zone --tz. The expression has 5 fields
(minute hour day month weekday), or 6 or 7 with seconds first and/or a year
last; @hourly, @daily and the like work too.

A fire time less than KAGZI_SCHEDULER_CATCHUP_WINDOW (5m) late is not
missed: it fires when the scheduler comes back. --max-catchup bounds how
many older fire times, missed during a longer downtime, are fired then:
the most recent N of them (0 skips them all).

--overlap says what a fire does while a run the schedule started is still
live: allow-all (the default) starts every fire; skip starts nothing;
buffer-one holds one fire and starts it when the run ends, dropping the
fires after it; cancel-other asks the live run to cancel and starts the new
one; terminate-other terminates it and starts the new one. --jitter delays
each fire's run by a delay in [0, D), the same for the same fire time.
--input takes inline JSON, @FILE to read a file, or - for stdin.`,
		Example: `  kagzi schedule create Report --cron '0 9 * * MON-FRI' --tz Europe/Paris
  kagzi schedule create Cleanup --cron '*/15 * * * *' --queue maintenance --input '{"days": 30}'
  kagzi schedule create Billing --cron @daily --max-catchup 3 --version v2
  kagzi schedule create Sync --cron '*/5 * * * *' --overlap buffer-one --jitter 30s
  kagzi schedule create SyncCustomer --cron '@hourly' --concurrency-key customer-7 --rate-limit-key crm-api`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := cliutil.ReadJSON(cmd, "input", input)
			if err != nil {
				return err
			}
			if in == nil {
				in = []byte("null")
			}
			if err := protocol.ValidToken("workflow type", args[0]); err != nil {
				return cliutil.Usagef("%v", err)
			}
			if err := protocol.ValidToken("--queue", queue); err != nil {
				return cliutil.Usagef("%v", err)
			}
			if maxCatchup < 0 || maxCatchup > store.MaxCatchupLimit {
				return cliutil.Usagef("--max-catchup %d: use 0 to %d", maxCatchup, store.MaxCatchupLimit)
			}
			policy, err := parseOverlapFlag(overlap)
			if err != nil {
				return err
			}
			if jitter < 0 || jitter > store.MaxJitter || jitter%time.Millisecond != 0 {
				return cliutil.Usagef("--jitter %s: use whole milliseconds from 0 to %s", cliutil.FmtDur(jitter), cliutil.FmtDur(store.MaxJitter))
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			sc, err := st.SchedulesCreate(cmd.Context(), store.SchedulesCreateParams{
				Namespace: a.Namespace, Queue: queue, Type: args[0], Version: version,
				Cron: cron, Timezone: tz, Input: in, MaxCatchup: maxCatchup, Overlap: policy, Jitter: jitter,
				ConcurrencyKey: concurrencyKey, RateLimitKey: rateKey,
			})
			if err != nil {
				return err
			}
			// Advice, not a check: what cannot be read gives no warning.
			if n, err := st.WorkersServing(cmd.Context(), a.Namespace, sc.Queue, sc.Type, sc.Version); err == nil && n == 0 {
				cliutil.Warn(cmd, "no live worker serves %s on queue %s: its fired runs wait PENDING until one registers",
					cliutil.TypeAt(sc.Type, sc.Version), sc.Queue)
			}
			return a.Print(cmd, toScheduleJSON(sc), func(w io.Writer) {
				fmt.Fprintf(w, "Created schedule %s: %s at %q (%s), next fire %s\n",
					sc.ID, sc.Type, sc.Cron, sc.Timezone, cliutil.FmtTimeP(sc.NextFireAt))
			})
		},
	}
	f := c.Flags()
	f.StringVar(&cron, "cron", "", "cron expression, e.g. '0 9 * * MON-FRI' (required)")
	f.StringVar(&tz, "tz", "UTC", "IANA time zone the expression is read in, e.g. America/New_York")
	f.StringVar(&input, "input", "", "input of every fired run: JSON, @FILE, or - for stdin (default null)")
	f.StringVar(&queue, "queue", "default", "task queue of the fired runs")
	f.IntVar(&maxCatchup, "max-catchup", 0, fmt.Sprintf("missed fire times to fire after downtime, 0 to %d", store.MaxCatchupLimit))
	f.StringVar(&version, "version", "", "workflow version of the fired runs")
	f.StringVar(&overlap, "overlap", "allow-all", overlapFlagHelp)
	cliutil.DurationVar(f, &jitter, "jitter", 0, store.MaxJitter, "delay each fire's run by up to this, e.g. 30s (0: none)")
	f.StringVar(&concurrencyKey, "concurrency-key", "", "concurrency key of every fired run (kagzi limit set --per-key)")
	f.StringVar(&rateKey, "rate-limit-key", "", "rate limit key of every fired run (kagzi rate-limit set)")
	_ = c.MarkFlagRequired("cron")
	return c
}

// SchedulesPage is what `schedule list` prints with --json.
type SchedulesPage struct {
	Schedules  []ScheduleJSON `json:"schedules"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

func newScheduleListCmd(a *cliutil.App) *cobra.Command {
	var (
		limit  int
		cursor string
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List schedules, newest first",
		Long: `List the namespace's schedules, newest first, a page at a time. When there
are more, the command prints the cursor of the next page (on stderr for
tables, as next_cursor with --json).`,
		Example: `  kagzi schedule list
  kagzi --json schedule list --limit 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > store.MaxPageSize {
				return cliutil.Usagef("--limit %d: use 1 to %d", limit, store.MaxPageSize)
			}
			p := store.SchedulesListParams{Namespace: a.Namespace, Limit: limit}
			if cursor != "" {
				cur, err := store.ParseCursor(cursor)
				if err != nil {
					return cliutil.Usagef("--cursor: %v; pass the cursor a previous page printed", err)
				}
				p.After = &cur
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			scs, next, err := st.SchedulesList(cmd.Context(), p)
			if err != nil {
				return err
			}
			page := SchedulesPage{Schedules: make([]ScheduleJSON, len(scs))}
			for i, sc := range scs {
				page.Schedules[i] = toScheduleJSON(sc)
			}
			if next != nil {
				page.NextCursor = next.String()
			}
			err = a.Print(cmd, page, func(w io.Writer) {
				fmt.Fprintln(w, "SCHEDULE ID\tTYPE\tQUEUE\tCRON\tTZ\tSTATUS\tNEXT FIRE\tLAST FIRED")
				for _, sc := range scs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sc.ID, sc.Type, sc.Queue, sc.Cron, sc.Timezone,
						sc.Status, cliutil.FmtTimeP(sc.NextFireAt), cliutil.FmtTimeP(sc.LastFiredAt))
				}
			})
			if err == nil && !a.JSON && page.NextCursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "More schedules: kagzi schedule list --cursor %s\n", page.NextCursor)
			}
			return err
		},
	}
	c.Flags().IntVar(&limit, "limit", 50, fmt.Sprintf("page size, 1 to %d", store.MaxPageSize))
	c.Flags().StringVar(&cursor, "cursor", "", "continue from the cursor a previous page printed")
	return c
}

func scheduleFields(w io.Writer, sc store.Schedule) {
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	row("Schedule ID", sc.ID.String())
	row("Type", sc.Type)
	if sc.Version != "" {
		row("Version", sc.Version)
	}
	row("Namespace", sc.Namespace)
	row("Queue", sc.Queue)
	row("Cron", sc.Cron)
	row("Time zone", sc.Timezone)
	row("Status", string(sc.Status))
	row("Max catch-up", fmt.Sprint(sc.MaxCatchup))
	row("Overlap", string(sc.Overlap))
	if sc.Jitter > 0 {
		row("Jitter", cliutil.FmtDur(sc.Jitter))
	}
	if sc.BufferedFireAt != nil {
		row("Buffered fire", cliutil.FmtTimeP(sc.BufferedFireAt))
	}
	if sc.ConcurrencyKey != "" {
		row("Concurrency key", sc.ConcurrencyKey)
	}
	if sc.RateLimitKey != "" {
		row("Rate limit key", sc.RateLimitKey)
	}
	row("Next fire", cliutil.FmtTimeP(sc.NextFireAt))
	row("Last fired", cliutil.FmtTimeP(sc.LastFiredAt))
	row("Created", cliutil.FmtTime(sc.CreatedAt))
	if sc.Input != nil {
		row("Input", cliutil.FmtPayload(sc.Input))
	}
}

func newScheduleShowCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:     "show SCHEDULE_ID",
		Short:   "Show a schedule",
		Example: "  kagzi schedule show " + exampleScheduleID,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("schedule id", args[0])
			if err != nil {
				return err
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			sc, err := st.SchedulesGet(cmd.Context(), a.Namespace, id)
			if err != nil {
				return err
			}
			return a.Print(cmd, toScheduleJSON(sc), func(w io.Writer) { scheduleFields(w, sc) })
		},
	}
}

// newScheduleSetCmd builds `schedule pause` and `schedule resume`.
func newScheduleSetCmd(a *cliutil.App, verb string) *cobra.Command {
	short, long := "Pause a schedule: it fires nothing until resumed",
		"Pause a schedule: it fires nothing until resumed. Pausing a paused schedule\ndoes nothing."
	if verb == "resume" {
		short, long = "Resume a paused schedule",
			"Resume a paused schedule at its next fire time from now: the times missed\nwhile paused are skipped. Resuming a running schedule does nothing."
	}
	return &cobra.Command{
		Use:     verb + " SCHEDULE_ID",
		Short:   short,
		Long:    long,
		Example: "  kagzi schedule " + verb + " " + exampleScheduleID,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("schedule id", args[0])
			if err != nil {
				return err
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			var sc store.Schedule
			if verb == "pause" {
				sc, err = st.SchedulesPause(cmd.Context(), a.Namespace, id)
			} else {
				sc, err = st.SchedulesResume(cmd.Context(), a.Namespace, id, time.Now())
			}
			if err != nil {
				return err
			}
			return a.Print(cmd, toScheduleJSON(sc), func(w io.Writer) {
				if verb == "pause" {
					fmt.Fprintf(w, "Paused schedule %s (%s)\n", sc.ID, sc.Type)
				} else {
					fmt.Fprintf(w, "Resumed schedule %s (%s), next fire %s\n", sc.ID, sc.Type, cliutil.FmtTimeP(sc.NextFireAt))
				}
			})
		},
	}
}

func newScheduleTriggerCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "trigger SCHEDULE_ID",
		Short: "Fire a schedule now, outside its cron",
		Long: `Start a run of the schedule now, paused or not. Its next fire time does not
move. Prints the run started.`,
		Example: "  kagzi schedule trigger " + exampleScheduleID,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("schedule id", args[0])
			if err != nil {
				return err
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			// The trigger's span is the root of the run's trace.
			ctx, span := otel.Tracer("github.com/kagzi/kagzi/cmd/kagzi").Start(cmd.Context(), "kagzi.trigger",
				trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(attribute.String("kagzi.schedule_id", id.String()), attribute.String("kagzi.namespace", a.Namespace)))
			defer span.End()
			run, err := st.SchedulesTrigger(store.WithTraceContext(ctx, tracectx.TraceParent(ctx)), a.Namespace, id, time.Now())
			if err != nil {
				span.RecordError(err)
				return err
			}
			span.SetAttributes(attribute.String("kagzi.run_id", run.ID.String()), attribute.String("kagzi.workflow_type", run.Type))
			return a.Print(cmd, cliutil.ToRunJSON(run), func(w io.Writer) {
				fmt.Fprintf(w, "Triggered schedule %s: started run %s (%s)\n", id, run.ID, run.Type)
			})
		},
	}
}

// DeletedJSON is what `schedule delete` prints with --json.
type DeletedJSON struct {
	ScheduleID string `json:"schedule_id"`
	Deleted    bool   `json:"deleted"`
}

func newScheduleDeleteCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:     "delete SCHEDULE_ID",
		Short:   "Delete a schedule (the runs it fired stay)",
		Example: "  kagzi schedule delete " + exampleScheduleID,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("schedule id", args[0])
			if err != nil {
				return err
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			if err := st.SchedulesDelete(cmd.Context(), a.Namespace, id); err != nil {
				return err
			}
			return a.Print(cmd, DeletedJSON{ScheduleID: id.String(), Deleted: true}, func(w io.Writer) {
				fmt.Fprintf(w, "Deleted schedule %s; the runs it fired stay\n", id)
			})
		},
	}
}

// HistoryJSON is what `schedule history` prints with --json.
type HistoryJSON struct {
	Runs []cliutil.RunJSON `json:"runs"`
}

func newScheduleHistoryCmd(a *cliutil.App) *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:     "history SCHEDULE_ID",
		Short:   "List the runs a schedule fired, newest fire time first",
		Example: "  kagzi schedule history " + exampleScheduleID + " --limit 10",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("schedule id", args[0])
			if err != nil {
				return err
			}
			if limit < 1 || limit > store.MaxPageSize {
				return cliutil.Usagef("--limit %d: use 1 to %d", limit, store.MaxPageSize)
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			runs, err := st.SchedulesHistory(cmd.Context(), a.Namespace, id, limit)
			if err != nil {
				return err
			}
			return a.Print(cmd, HistoryJSON{Runs: cliutil.ToRunsJSON(runs)}, func(w io.Writer) {
				if len(runs) == 0 {
					fmt.Fprintln(w, "The schedule has fired no runs yet.")
					return
				}
				cliutil.RunsTable(w, runs, true)
			})
		},
	}
	c.Flags().IntVar(&limit, "limit", 50, fmt.Sprintf("how many runs, 1 to %d", store.MaxPageSize))
	return c
}
