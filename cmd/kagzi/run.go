package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

func init() { register(newRunCmd) }

func newRunCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:   "run",
		Short: "Start, list, show, cancel, retry, fork and export workflow runs",
		Example: `  kagzi run start ProcessOrder --input '{"order_id": 42}'
  kagzi run list --status FAILED
  kagzi run show 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e
  kagzi run retry 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e
  kagzi run fork 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --step charge
  kagzi run export --finished-before 6d --output archive.jsonl`,
	})
	c.AddCommand(newRunStartCmd(a), newRunListCmd(a), newRunShowCmd(a), newRunCancelCmd(a), newRunTerminateCmd(a), newRunRetryCmd(a),
		newRunExportCmd(a), newRunCountCmd(a), newRunForkCmd(a), newRunForkManyCmd(a), newRunStateCmd(a), newRunStreamCmd(a),
		newRunUpdateCmd(a), newRunPauseCmd(a), newRunResumeCmd(a), newRunRetryStepCmd(a))
	return c
}

// startJSON is what `run start` prints with --json.
type startJSON struct {
	RunID   string `json:"run_id"`
	Created bool   `json:"created"`
	// Warnings are the start's (client.Handle.Warnings), also printed on
	// standard error.
	Warnings []string `json:"warnings,omitempty"`
	// Run is the finished run, with --wait.
	Run *cliutil.RunJSON `json:"run,omitempty"`
}

func newRunStartCmd(a *cliutil.App) *cobra.Command {
	var (
		input, queue, externalID, version string
		concurrencyKey, rateKey           string
		priority                          int
		deadline, timeout                 time.Duration
		wait, requireWorker               bool
		progressEvery                     time.Duration
		flow                              flowFlags
		attrs                             []string
	)
	c := &cobra.Command{
		Use:   "start TYPE",
		Short: "Start a run of a workflow type",
		Long: `Start a run of workflow type TYPE with a JSON input.

With --id the start is idempotent: while a run with that external id is live,
starting again returns it instead of starting another.

With --wait the command waits (by push over NATS, so NATS must be reachable)
until the run ends, prints its output, and exits 1 if it failed or was
cancelled. --input takes inline JSON, @FILE to read a file, or - for stdin.

A run of a type no live worker serves is accepted and waits, PENDING, until
one registers (kagzi run show says so); with --require-worker the start is
refused instead, and nothing is started.

With --debounce-key K --debounce D, starts of TYPE with key K merge into one
run that executes once no start came for D (--debounce-max-wait caps the
delay after the first start; --debounce-keep first keeps the first input).

With --id, --id-reuse says whether the id may name a new run after a run with
it ended: allow (default), failed-only (not after a COMPLETED one), reject
(not after any, within --id-reuse-window if given), or terminate (a live run
with the id is terminated and the new one started). A refused start exits 1.`,
		Example: `  kagzi run start ProcessOrder --input '{"order_id": 42}'
  kagzi run start ProcessOrder --id order-42 --queue orders --priority 10
  kagzi run start Report --input @report.json --deadline 1h --wait --timeout 5m
  kagzi run start SyncCustomer --concurrency-key customer-7 --rate-limit-key crm-api
  kagzi run start Reindex --debounce-key catalog --debounce 5s --debounce-max-wait 1m
  kagzi run start Import --id import-7 --id-reuse failed-only
  kagzi run start ProcessOrder --attr customer=42 --attr tags=rush --attr tags=gift`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			in, err := cliutil.ReadJSON(cmd, "input", input)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("timeout") && !wait {
				return cliutil.Usagef("--timeout bounds --wait; add --wait or drop --timeout")
			}
			if timeout < 0 {
				return cliutil.Usagef("--timeout %s must not be negative", cliutil.FmtDur(timeout))
			}
			opts := client.StartOptions{Queue: queue, Version: version, ExternalID: externalID, Priority: priority,
				RequireWorker: requireWorker, ConcurrencyKey: concurrencyKey, RateLimitKey: rateKey}
			if err := flow.apply(cmd.Flags(), &opts); err != nil {
				return err
			}
			if cmd.Flags().Changed("deadline") {
				if deadline <= 0 {
					return cliutil.Usagef("--deadline %s must be positive, e.g. --deadline 30m", cliutil.FmtDur(deadline))
				}
				opts.Deadline = time.Now().Add(deadline)
			}
			if len(attrs) > 0 {
				st, err := a.Store(ctx)
				if err != nil {
					return err
				}
				declared, err := st.AttributesList(ctx, a.Namespace)
				if err != nil {
					return err
				}
				if opts.Attributes, err = cliutil.ParseAttrFlags(a.Namespace, declared, attrs); err != nil {
					return err
				}
			}
			cl, err := a.Client(ctx, wait)
			if err != nil {
				return err
			}
			var inputArg any
			if in != nil {
				inputArg = json.RawMessage(in)
			}
			h, err := cl.Start(ctx, args[0], inputArg, opts)
			if err != nil {
				return err
			}
			res := startJSON{RunID: h.RunID.String(), Created: h.Created, Warnings: h.Warnings}
			for _, w := range h.Warnings {
				cliutil.Warn(cmd, "%s", w)
			}
			out := cmd.OutOrStdout()
			if !a.JSON {
				switch {
				case h.Created:
					fmt.Fprintf(out, "Started run %s (%s)\n", h.RunID, args[0])
				case opts.Debounce != nil:
					fmt.Fprintf(out, "Merged into debounced run %s (key %q); not started again\n", h.RunID, opts.Debounce.Key)
				default:
					fmt.Fprintf(out, "Run %s already exists with external id %q; not started again\n", h.RunID, externalID)
				}
			}
			if !wait {
				if a.JSON {
					return a.Print(cmd, res, nil)
				}
				return nil
			}
			wctx := ctx
			if timeout > 0 {
				var cancel context.CancelFunc
				wctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			run, err := waitSaying(wctx, cmd, a, cl, h.RunID, progressEvery)
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					return fmt.Errorf("timed out after %s waiting for run %s, which goes on; follow it with `kagzi run show %s`",
						cliutil.FmtDur(timeout), h.RunID, h.RunID)
				}
				return fmt.Errorf("waiting for run %s: %w", h.RunID, err)
			}
			rj := cliutil.ClientRunJSON(*run)
			res.Run = &rj
			if a.JSON {
				if err := a.Print(cmd, res, nil); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "Run %s %s after %d attempt(s)\n", run.ID, run.Status, run.Attempts)
				if run.Status == client.StatusCompleted {
					fmt.Fprintf(out, "Output: %s\n", cliutil.FmtPayload(run.Output))
				}
			}
			if run.Status != client.StatusCompleted {
				return &client.RunError{RunID: run.ID, Status: run.Status, Message: run.Error}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&input, "input", "", "input as JSON, @FILE, or - for stdin (default null)")
	f.StringVar(&queue, "queue", "", `task queue (default "default")`)
	f.StringVar(&externalID, "id", "", "external id: makes the start idempotent while the run is live")
	f.StringVar(&version, "version", "", "workflow version to pin (default: the version of the first worker that claims it)")
	f.IntVar(&priority, "priority", 0, "priority; higher is claimed first")
	cliutil.DurationVar(f, &deadline, "deadline", 0, 0, "fail the run if it has not finished within this duration, e.g. 1h")
	f.BoolVar(&wait, "wait", false, "wait for the run to end and print its result (needs NATS); says on stderr every 10s what it waits for")
	cliutil.DurationVar(f, &timeout, "timeout", 0, 0, "with --wait, give up waiting after this duration (the run goes on)")
	f.DurationVar(&progressEvery, "wait-progress", 10*time.Second, "how often --wait says what it waits for")
	_ = f.MarkHidden("wait-progress")
	f.BoolVar(&requireWorker, "require-worker", false, "refuse the start if no live worker serves the type (and version) on the queue")
	flow.register(f)
	f.StringVar(&concurrencyKey, "concurrency-key", "", "key the type's per-key limit counts the run under (kagzi limit set --per-key)")
	f.StringVar(&rateKey, "rate-limit-key", "", "key whose rate limit counts each claim of the run (kagzi rate-limit set)")
	f.StringArrayVar(&attrs, "attr", nil, "search attribute name=value, parsed by its declared kind; repeat a keyword for a list (kagzi attribute declare)")
	return c
}

// runsPage is what `run list` prints with --json.
type runsPage struct {
	Runs       []cliutil.RunJSON `json:"runs"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

func newRunListCmd(a *cliutil.App) *cobra.Command {
	var (
		statuses           []string
		typ, queue, cursor string
		query              string
		limit              int
		paused             bool
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Long: `List the namespace's runs, newest first, a page at a time. When there are
more, the command prints the cursor of the next page (on stderr for tables,
as next_cursor with --json).

--query filters in Kagzi's query language, ANDed with the other flags:
predicates over the built-in fields (type, queue, status, version,
external_id, concurrency_key, rate_key, debounce_key, error_type, error, priority,
attempts, created_at, started_at, finished_at, deadline_at, paused,
paused_at, paused_by) and the namespace's search attributes, with =, !=, <, <=, >, >=, IN (...),
STARTS_WITH, IS [NOT] NULL, AND, OR, NOT and parentheses. Strings are
quoted ('it''s' or "x"), times are RFC 3339 strings. attr != v matches runs
that hold the attribute with another value; NOT attr = v and attr IS NULL
also match runs without it. --paused lists the paused runs (the query
paused = true: see kagzi run pause).`,
		Example: `  kagzi run list
  kagzi run list --status RUNNING,SLEEPING --type ProcessOrder --limit 20
  kagzi run list --paused
  kagzi run list --query 'customer = "42" AND status = "FAILED" AND finished_at > "2025-06-01T00:00:00Z"'

  kagzi run list --cursor MTcxOTg...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sts, err := cliutil.ParseStatuses(statuses)
			if err != nil {
				return err
			}
			if limit < 1 || limit > store.MaxPageSize {
				return cliutil.Usagef("--limit %d: use 1 to %d", limit, store.MaxPageSize)
			}
			if paused {
				if query == "" {
					query = "paused = true"
				} else {
					query = "(" + query + ") AND paused = true"
				}
			}
			p := store.RunsListParams{Namespace: a.Namespace, Statuses: sts, Type: typ, Queue: queue, Query: query, Limit: limit}
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
			runs, next, err := st.RunsList(cmd.Context(), p)
			if err != nil {
				return err
			}
			page := runsPage{Runs: cliutil.ToRunsJSON(runs)}
			if next != nil {
				page.NextCursor = next.String()
			}
			err = a.Print(cmd, page, func(w io.Writer) { cliutil.RunsTable(w, runs, false) })
			if err == nil && !a.JSON && page.NextCursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "More runs: kagzi run list --cursor %s\n", page.NextCursor)
			}
			return err
		},
	}
	f := c.Flags()
	f.StringSliceVar(&statuses, "status", nil, "only these statuses, comma-separated (e.g. RUNNING,FAILED)")
	f.StringVar(&typ, "type", "", "only this workflow type")
	f.StringVar(&queue, "queue", "", "only this task queue")
	f.StringVar(&query, "query", "", `only runs matching this query, e.g. 'customer = "42" AND status = "FAILED"'`)
	f.BoolVar(&paused, "paused", false, "only paused runs (kagzi run pause)")
	f.IntVar(&limit, "limit", 50, fmt.Sprintf("page size, 1 to %d", store.MaxPageSize))
	f.StringVar(&cursor, "cursor", "", "continue from the cursor a previous page printed")
	return c
}

// runShowJSON is what `run show` prints with --json.
type runShowJSON struct {
	cliutil.RunJSON
	forkLinksJSON
	// WorkersServing counts the live workers that serve a PENDING or
	// SLEEPING run's type@version on its queue (absent for other runs).
	WorkersServing *int `json:"workers_serving,omitempty"`
	// Waiting says why a PENDING or SLEEPING run waits (store.RunsWaiting).
	Waiting *waitingJSON       `json:"waiting,omitempty"`
	Steps   []cliutil.StepJSON `json:"steps"`
	// Events are the events sent to the run, oldest first; Unreceived
	// counts those the run ended without receiving.
	Events     []cliutil.RunEventJSON `json:"events"`
	Unreceived int                    `json:"unreceived_events"`
	// Attributes are the run's search attributes by name.
	Attributes map[string]any `json:"attributes"`
}

func newRunShowCmd(a *cliutil.App) *cobra.Command {
	var byExternal bool
	c := &cobra.Command{
		Use:   "show RUN_ID|EXTERNAL_ID",
		Short: "Show a run, the timeline of its steps and its events",
		Long: `Show a run's fields, input and output, then every attempt of every step in
the order they were recorded: step id, kind, attempt, status, start,
duration and error; then the events sent to it, oldest first, each
RECEIVED (with the wait or drain step that took it), PENDING (the run may
still receive it) or UNRECEIVED (the run ended without receiving it: its
workflow never waited for or drained it after it came). For a run waiting
to be claimed (PENDING or SLEEPING), it says how many live workers serve
its type@version on its queue, and warns when none does: the run waits
until one registers.

The run is named by its run id or, as with kagzi event send, by an external
id: the live run holding it, else the newest. An argument that parses as a
UUID is taken as a run id; add --external-id to take it as an external id
anyway.`,
		Example: `  kagzi run show 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e
  kagzi run show order-42
  kagzi --json run show 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e | jq .steps`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return cliutil.Usagef("name the run by its run id or external id")
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			id, err := cliutil.ParseUUID(args[0])
			if err != nil || byExternal {
				r, err := st.RunsGetByExternalID(cmd.Context(), a.Namespace, args[0])
				if err != nil {
					return err
				}
				id = r.ID
			}
			run, err := st.RunsGet(cmd.Context(), a.Namespace, id)
			if err != nil {
				return err
			}
			steps, err := st.StepsList(cmd.Context(), a.Namespace, id)
			if err != nil {
				return err
			}
			events, err := st.EventsList(cmd.Context(), a.Namespace, id)
			if err != nil {
				return err
			}
			links, linksJSON, err := forkLinks(cmd.Context(), st, a.Namespace, id)
			if err != nil {
				return err
			}
			attrs, err := st.RunAttributes(cmd.Context(), a.Namespace, id)
			if err != nil {
				return err
			}
			v := runShowJSON{RunJSON: cliutil.ToRunJSON(run), forkLinksJSON: linksJSON, Steps: make([]cliutil.StepJSON, len(steps)),
				Events: make([]cliutil.RunEventJSON, len(events)), Attributes: attrs}
			for i, s := range steps {
				v.Steps[i] = cliutil.ToStepJSON(s)
			}
			for i, e := range events {
				v.Events[i] = cliutil.ToRunEventJSON(e)
				if e.Unreceived {
					v.Unreceived++
				}
			}
			if run.Status == store.StatusPending || run.Status == store.StatusSleeping {
				n, err := st.WorkersServing(cmd.Context(), run.Namespace, run.Queue, run.Type, run.Version)
				if err != nil {
					return err
				}
				v.WorkersServing = &n
				wt, ok, err := st.RunsWaiting(cmd.Context(), run.Namespace, run.ID)
				if err != nil {
					return err
				}
				if ok {
					v.Waiting = &waitingJSON{Reason: string(wt.Reason), Until: cliutil.UTC(wt.Until), Detail: wt.Detail}
				}
			}
			return a.Print(cmd, v, func(w io.Writer) {
				runFields(w, run)
				forkFields(w, links)
				names := make([]string, 0, len(attrs))
				for n := range attrs {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					fmt.Fprintf(w, "Attribute %s:\t%s\n", n, fmtAttr(attrs[n]))
				}
				if v.Waiting != nil {
					line := v.Waiting.Detail
					if v.Waiting.Until != nil {
						line += ", until " + cliutil.FmtTimeP(v.Waiting.Until)
					}
					fmt.Fprintf(w, "Waiting:\t%s\n", line)
				}
				if v.WorkersServing != nil {
					fmt.Fprintf(w, "Workers:\t%s\n", servingLine(*v.WorkersServing, run))
				}
				if v.Unreceived > 0 {
					fmt.Fprintf(w, "Events:\t%d of %d UNRECEIVED: the run ended without receiving them\n", v.Unreceived, len(events))
				}
				fmt.Fprintln(w)
				if len(steps) == 0 {
					fmt.Fprintln(w, "No steps recorded.")
				} else {
					fmt.Fprintln(w, "STEP\tKIND\tATTEMPT\tSTATUS\tSTARTED\tDURATION\tERROR")
				}
				for _, s := range steps {
					dur := "-"
					if began, ended := s.Span(); ended != nil {
						dur = cliutil.FmtDuration(ended.Sub(began))
					}
					errMsg := cliutil.OneLine(s.Error, 80)
					if errMsg == "" && s.ChildRunID != nil {
						errMsg = "child run " + s.ChildRunID.String()
					}
					fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s.StepID, s.Kind, s.Attempt, s.Status,
						cliutil.FmtTimeMS(s.StartedAt), dur, cliutil.OrDash(errMsg))
				}
				if len(events) == 0 {
					return
				}
				fmt.Fprintln(w)
				fmt.Fprintln(w, "EVENT\tNAME\tSENT\tSTATE\tRECEIVED BY\tPAYLOAD")
				for _, e := range events {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Name, cliutil.FmtTimeMS(&e.CreatedAt), cliutil.EventState(e),
						cliutil.OrDash(e.ConsumedBy), cliutil.OneLine(cliutil.FmtPayload(e.Payload), 60))
				}
			})
		},
	}
	c.Flags().BoolVar(&byExternal, "external-id", false, "take the argument as an external id even if it looks like a UUID")
	return c
}

// runFields prints a run's fields as a two-column list.
func runFields(w io.Writer, r store.Run) {
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	opt := func(k, v string) {
		if v != "" && v != "-" {
			row(k, v)
		}
	}
	row("Run ID", r.ID.String())
	row("Type", r.Type)
	opt("Version", r.Version)
	row("Namespace", r.Namespace)
	row("Queue", r.Queue)
	row("Status", string(r.Status))
	if p := r.Paused; p != nil {
		line := "since " + cliutil.FmtTimeP(&p.At) + " by " + cliutil.OrDash(p.By)
		if p.Reason != "" {
			line += ": " + p.Reason
		}
		if r.Status == store.StatusRunning {
			line += " (stops when the step it is in is recorded)"
		}
		row("Paused", line)
	}
	if maxAttempts := r.Policy().MaxAttempts; maxAttempts > 0 {
		row("Attempts", fmt.Sprintf("%d of %d", r.Attempts, maxAttempts))
	} else {
		row("Attempts", fmt.Sprintf("%d (no limit)", r.Attempts))
	}
	row("Priority", fmt.Sprint(r.Priority))
	opt("External ID", r.ExternalID)
	if r.DebounceKey != "" {
		row("Debounce key", fmt.Sprintf("%s (%d %s)", r.DebounceKey, r.DebounceStarts, plural(r.DebounceStarts, "start", "starts merged")))
	}
	opt("Concurrency key", r.ConcurrencyKey)
	opt("Rate limit key", r.RateLimitKey)
	row("Created", cliutil.FmtTime(r.CreatedAt))
	opt("Started", cliutil.FmtTimeP(r.StartedAt))
	opt("Finished", cliutil.FmtTimeP(r.FinishedAt))
	if r.StartedAt != nil && r.FinishedAt != nil {
		row("Duration", cliutil.FmtDuration(r.FinishedAt.Sub(*r.StartedAt)))
	}
	opt("Due", cliutil.FmtTimeP(r.AvailableAt))
	opt("Deadline", cliutil.FmtTimeP(r.DeadlineAt))
	if r.LockedBy != nil && !r.Status.Terminal() {
		row("Worker", r.LockedBy.String())
		opt("Lease expires", cliutil.FmtTimeP(r.LeaseExpiresAt))
	}
	if r.ParentRunID != nil {
		row("Parent run", fmt.Sprintf("%s (step %s)", r.ParentRunID, r.ParentStepID))
	}
	if r.ScheduleID != nil {
		row("Schedule", fmt.Sprintf("%s (fired for %s)", r.ScheduleID, cliutil.FmtTimeP(r.ScheduleFireAt)))
	}
	if r.ContinuedAs != nil {
		row("Continued as", r.ContinuedAs.String())
	}
	opt("Trace ID", cliutil.TraceID(r.TraceContext))
	opt("Error", cliutil.OneLine(r.Error, 500))
	row("Input", cliutil.FmtPayload(r.Input))
	opt("Output", cliutil.FmtPayload(r.Output))
}

func newRunCancelCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Ask a live run to cancel (it may clean up first)",
		Long: `Ask a pending, running or sleeping run to cancel, and with it the children it
started (except those started with the ABANDON parent-close policy). A
running run's worker is told by push and its workflow context is cancelled;
a sleeping or waiting run is delivered at once with its context cancelled.
The workflow may run cleanup steps, then ends CANCELLED (or COMPLETED if it
returns a result). A run that never started is cancelled at once. Use
kagzi run terminate to end a run without cleanup. Cancelling a finished run
fails (exit 1).`,
		Example: `  kagzi run cancel 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := onRun(a, cmd, args[0], func(st *store.Store, id uuid.UUID) (store.Run, error) {
				return st.RunsCancel(cmd.Context(), a.Namespace, id)
			})
			if err != nil {
				return err
			}
			return a.Print(cmd, cliutil.ToRunJSON(run), func(w io.Writer) {
				if run.Status == store.StatusCancelled {
					fmt.Fprintf(w, "Cancelled run %s (%s)\n", run.ID, run.Type)
					return
				}
				fmt.Fprintf(w, "Asked run %s (%s) to cancel: it is %s and ends when its workflow has handled the request\n",
					run.ID, run.Type, run.Status)
			})
		},
	}
}

func newRunTerminateCmd(a *cliutil.App) *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "terminate RUN_ID",
		Short: "End a live run at once, without cleanup",
		Long: `Terminate a pending, running or sleeping run: it ends CANCELLED at once with
the error "terminated" (and the reason). No workflow code runs after it; a
running run's worker abandons it. Its children get their parent-close
policy (by default they are terminated too). Terminating a finished run
fails (exit 1).`,
		Example: `  kagzi run terminate 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --reason "stuck on a bad input"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := onRun(a, cmd, args[0], func(st *store.Store, id uuid.UUID) (store.Run, error) {
				return st.RunsTerminate(cmd.Context(), a.Namespace, id, reason)
			})
			if err != nil {
				return err
			}
			return a.Print(cmd, cliutil.ToRunJSON(run), func(w io.Writer) {
				fmt.Fprintf(w, "Terminated run %s (%s)\n", run.ID, run.Type)
			})
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why, recorded in the run's error")
	return c
}

func newRunRetryCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "retry RUN_ID",
		Short: "Retry a failed run from its last completed step",
		Long: `Give a FAILED run (a dead letter: list them with
kagzi run list --status FAILED) a fresh start. The run becomes PENDING and is
claimed again at once; its completed steps stay memoized, so it resumes after
the last one. Its attempts start over (a full budget under its retry policy),
and so do the attempts of its failed steps. A deadline that already passed is
dropped. Retrying a run that is not FAILED fails (exit 1).`,
		Example: `  kagzi run retry 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e
  kagzi --json run retry 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			run, err := onRun(a, cmd, args[0], func(st *store.Store, id uuid.UUID) (store.Run, error) {
				return st.RunsRetry(cmd.Context(), a.Namespace, id)
			})
			if err != nil {
				return err
			}
			// The retry continues the run's trace: it is a span in it.
			_, span := otel.Tracer("github.com/kagzi/kagzi/cmd/kagzi").Start(
				tracectx.WithTraceParent(cmd.Context(), run.TraceContext), "kagzi.retry "+run.Type, trace.WithTimestamp(start),
				trace.WithAttributes(attribute.String("kagzi.run_id", run.ID.String()), attribute.String("kagzi.workflow_type", run.Type)))
			span.End()
			return a.Print(cmd, cliutil.ToRunJSON(run), func(w io.Writer) {
				fmt.Fprintf(w, "Retrying run %s (%s): it is PENDING again and resumes after its last completed step\n", run.ID, run.Type)
			})
		},
	}
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// waitingJSON is why a run waits: store.Waiting.
type waitingJSON struct {
	// Reason is one of store's WaitReason values, e.g. rate_limited.
	Reason string     `json:"reason"`
	Until  *time.Time `json:"until,omitempty"`
	Detail string     `json:"detail"`
}

// servingLine says who serves a waiting run.
func servingLine(n int, r store.Run) string {
	tv := r.Type
	if r.Version != "" {
		tv += "@" + r.Version
	}
	if n == 0 {
		return fmt.Sprintf("none: no live worker serves %s on queue %s; the run waits until one registers", tv, r.Queue)
	}
	if n == 1 {
		return fmt.Sprintf("1 live worker serves %s on queue %s", tv, r.Queue)
	}
	return fmt.Sprintf("%d live workers serve %s on queue %s", n, tv, r.Queue)
}

// onRun parses a run id argument and applies change to that run.
func onRun(a *cliutil.App, cmd *cobra.Command, arg string, change func(*store.Store, uuid.UUID) (store.Run, error)) (store.Run, error) {
	id, err := cliutil.ParseID("run id", arg)
	if err != nil {
		return store.Run{}, err
	}
	st, err := a.Store(cmd.Context())
	if err != nil {
		return store.Run{}, err
	}
	return change(st, id)
}
