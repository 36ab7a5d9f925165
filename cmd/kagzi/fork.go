package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/store"
)

// forkJSON is what `run fork` prints with --json.
type forkJSON struct {
	RunID      uuid.UUID       `json:"run_id"`
	ForkedFrom uuid.UUID       `json:"forked_from"`
	Step       string          `json:"step"`
	Created    bool            `json:"created"`
	Run        cliutil.RunJSON `json:"run"`
}

// forkManyJSON is what `run fork-many` prints with --json.
type forkManyJSON struct {
	Matched       int            `json:"matched"`
	Forked        int            `json:"forked"`
	AlreadyForked int            `json:"already_forked"`
	Skipped       int            `json:"skipped"`
	Forks         []forkedRunRow `json:"forks"`
}

type forkedRunRow struct {
	ForkedFrom uuid.UUID `json:"forked_from"`
	Step       string    `json:"step"`
	RunID      uuid.UUID `json:"run_id"`
	Created    bool      `json:"created"`
}

// forkLinksJSON are a run's fork links in `run show --json`.
type forkLinksJSON struct {
	ForkedFrom *uuid.UUID `json:"forked_from,omitempty"`
	// ForkedAtStep is set with ForkedFrom ("" for a fork from the start).
	ForkedAtStep *string      `json:"forked_at_step,omitempty"`
	Forks        []forkRefRow `json:"forks,omitempty"`
}

type forkRefRow struct {
	RunID     uuid.UUID       `json:"run_id"`
	Step      string          `json:"step"`
	Status    store.RunStatus `json:"status"`
	CreatedAt time.Time       `json:"created_at"`
}

// forkLinks reads a run's fork links for `run show`.
func forkLinks(ctx context.Context, st *store.Store, namespace string, id uuid.UUID) (store.ForkLinks, forkLinksJSON, error) {
	l, err := st.RunsForkLinks(ctx, namespace, id)
	if err != nil {
		return store.ForkLinks{}, forkLinksJSON{}, err
	}
	v := forkLinksJSON{ForkedFrom: l.ForkedFrom}
	if l.ForkedFrom != nil {
		v.ForkedAtStep = &l.ForkedAtStep
	}
	for _, f := range l.Forks {
		v.Forks = append(v.Forks, forkRefRow{RunID: f.RunID, Step: f.Step, Status: f.Status, CreatedAt: f.CreatedAt.UTC()})
	}
	return l, v, nil
}

// atStep names where a fork executes from.
func atStep(step string) string {
	if step == "" {
		return "the start"
	}
	return "step " + step
}

// forkFields prints a run's fork links as rows of `run show`.
func forkFields(w io.Writer, l store.ForkLinks) {
	if l.ForkedFrom != nil {
		fmt.Fprintf(w, "Forked from:\t%s at %s\n", l.ForkedFrom, atStep(l.ForkedAtStep))
	}
	for i, f := range l.Forks {
		k := ""
		if i == 0 {
			k = "Forks:"
		}
		fmt.Fprintf(w, "%s\t%s at %s (%s)\n", k, f.RunID, atStep(f.Step), f.Status)
	}
}

// forkSpan records a fork made as the first span of its trace.
func forkSpan(ctx context.Context, f store.Fork) {
	_, span := otel.Tracer("github.com/kagzi/kagzi/cmd/kagzi").Start(
		tracectx.WithTraceParent(ctx, f.Run.TraceContext), "kagzi.fork "+f.Run.Type,
		trace.WithAttributes(attribute.String("kagzi.run_id", f.Run.ID.String()), attribute.String("kagzi.workflow_type", f.Run.Type),
			attribute.String("kagzi.forked_from", f.From.String()), attribute.String("kagzi.forked_at_step", f.Step)))
	span.End()
}

func newRunForkCmd(a *cliutil.App) *cobra.Command {
	var step, version string
	c := &cobra.Command{
		Use:   "fork RUN_ID",
		Short: "Rerun a run from a step, as a new run",
		Long: `Start a new run that reruns RUN_ID from a step, typically after a fix for a
failed run is deployed. The new run has the same type, queue, input, retry
policy, priority and version; the steps RUN_ID completed before --step (in the
order of its history: recorded before the step first was) are copied into its
history and replay from their recorded results, so only --step and what follows
it execute. Without --step it reruns from the start, reusing nothing.

The new run is PENDING and claimed at once; RUN_ID is not changed. The two are
linked: kagzi run show prints "Forked from" on the new run and "Forks" on the
old one. A fork is made once per run and step: asking again prints the
existing fork. --version pins the fork to another version of the workflow
(default: the run's).`,
		Example: `  kagzi run fork 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --step charge
  kagzi run fork 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e
  kagzi --json run fork 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --step charge --version v2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("run id", args[0])
			if err != nil {
				return err
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			f, err := st.RunsFork(cmd.Context(), store.RunsForkParams{Namespace: a.Namespace, RunID: id, Step: step, Version: version})
			if err != nil {
				return err
			}
			if f.Created {
				forkSpan(cmd.Context(), f)
			}
			v := forkJSON{RunID: f.Run.ID, ForkedFrom: f.From, Step: f.Step, Created: f.Created, Run: cliutil.ToRunJSON(f.Run)}
			return a.Print(cmd, v, func(w io.Writer) {
				if f.Created {
					fmt.Fprintf(w, "Forked run %s from %s at %s: it is PENDING and executes %s and what follows\n",
						f.Run.ID, f.From, atStep(f.Step), atStep(f.Step))
				} else {
					fmt.Fprintf(w, "Run %s was already forked from %s at %s (%s); not forked again\n",
						f.Run.ID, f.From, atStep(f.Step), f.Run.Status)
				}
			})
		},
	}
	c.Flags().StringVar(&step, "step", "", "the step to execute again, with everything after it (default: from the start)")
	c.Flags().StringVar(&version, "version", "", "pin the fork to this version (default: the run's)")
	return c
}

func newRunForkManyCmd(a *cliutil.App) *cobra.Command {
	var (
		typ, status, group, errType, since, until, step, version string
		fromFailed                                               bool
		limit                                                    int
	)
	c := &cobra.Command{
		Use:   "fork-many",
		Short: "Rerun every matching run from a step (bulk fork of dead letters)",
		Long: `Fork every run that matches the filter, each as kagzi run fork would: by
default the FAILED runs of the namespace, narrowed by workflow type, error
group (the fingerprint the console's dead-letter view groups by), error type
(of the step whose failure ended the run) and finish time.

Each run is forked from --step (runs that did not record it are skipped and
counted), from its failed step with --from-failed-step (the step whose failure
ended it; a run without one is forked from the start), or from the start.
At most --limit runs are taken, those that finished last first, in one
transaction. Runs forked from the same step before are not forked again: they
are counted as already forked, so running the command twice forks each once.
--since and --until take a time (RFC 3339) or an age (6d, 36h).`,
		Example: `  kagzi run fork-many --type ProcessOrder --from-failed-step
  kagzi run fork-many --type ProcessOrder --error-type CardDeclined --since 2h --step charge
  kagzi --json run fork-many --status FAILED --until 2025-01-01T00:00:00Z --limit 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fromFailed && step != "" {
				return cliutil.Usagef("--step and --from-failed-step exclude each other; give one")
			}
			if limit < 1 || limit > store.MaxForkMany {
				return cliutil.Usagef("--limit %d: use 1 to %d", limit, store.MaxForkMany)
			}
			p := store.RunsForkManyParams{Namespace: a.Namespace, Type: typ, Status: store.RunStatus(status), ErrorGroup: group,
				ErrorType: errType, Step: step, FromFailedStep: fromFailed, Version: version, Limit: limit}
			if status != "" {
				sts, err := cliutil.ParseStatuses([]string{status})
				if err != nil {
					return err
				}
				p.Status = sts[0]
			}
			now := time.Now()
			for _, b := range []struct {
				flag, v string
				to      **time.Time
			}{{"since", since, &p.FinishedAfter}, {"until", until, &p.FinishedBefore}} {
				if b.v == "" {
					continue
				}
				t, err := cliutil.ParseWhen(b.flag, b.v, now)
				if err != nil {
					return err
				}
				*b.to = &t
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			// One transaction: the count is known at its end, the line
			// shows the time meanwhile.
			prog, err := a.Progress(cmd, "forking runs", 0)
			if err != nil {
				return err
			}
			prog.Start()
			res, err := st.RunsForkMany(cmd.Context(), p)
			prog.Done(int64(res.Forked))
			if err != nil {
				return err
			}
			v := forkManyJSON{Matched: res.Matched, Forked: res.Forked, AlreadyForked: res.AlreadyForked, Skipped: res.Skipped,
				Forks: []forkedRunRow{}}
			for _, f := range res.Forks {
				if f.Created {
					forkSpan(cmd.Context(), f)
				}
				v.Forks = append(v.Forks, forkedRunRow{ForkedFrom: f.From, Step: f.Step, RunID: f.Run.ID, Created: f.Created})
			}
			return a.Print(cmd, v, func(w io.Writer) {
				fmt.Fprintf(w, "Matched %d runs: forked %d, already forked %d, skipped %d (no step %q)\n",
					res.Matched, res.Forked, res.AlreadyForked, res.Skipped, step)
				if len(res.Forks) == 0 {
					return
				}
				fmt.Fprintln(w)
				fmt.Fprintln(w, "FORKED FROM\tAT\tFORK\tNEW")
				for _, f := range res.Forks {
					fmt.Fprintf(w, "%s\t%s\t%s\t%t\n", f.From, atStep(f.Step), f.Run.ID, f.Created)
				}
			})
		},
	}
	f := c.Flags()
	f.StringVar(&typ, "type", "", "only runs of this workflow type")
	f.StringVar(&status, "status", "FAILED", "only runs in this status")
	f.StringVar(&group, "error-group", "", "only runs whose error has this fingerprint (the console's dead-letter group)")
	f.StringVar(&errType, "error-type", "", "only runs whose failed step failed with this error type")
	f.StringVar(&since, "since", "", "only runs that finished at or after this time (RFC 3339) or age (e.g. 2h)")
	f.StringVar(&until, "until", "", "only runs that finished before this time (RFC 3339) or age (e.g. 1h)")
	f.StringVar(&step, "step", "", "fork every run from this step (runs without it are skipped)")
	f.BoolVar(&fromFailed, "from-failed-step", false, "fork each run from the step whose failure ended it")
	f.StringVar(&version, "version", "", "pin the forks to this version (default: each run's)")
	f.IntVar(&limit, "limit", store.DefaultForkMany, fmt.Sprintf("fork at most this many runs, 1 to %d", store.MaxForkMany))
	return c
}
