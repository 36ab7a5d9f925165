package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/retry"
)

// runPauseJSON is what `run pause` and `run resume` print with --json.
type runPauseJSON struct {
	RunID  string             `json:"run_id"`
	Status string             `json:"status"`
	Paused *cliutil.PauseJSON `json:"paused,omitempty"`
	// Changed is false when the run was paused already (pause) or was not
	// paused (resume).
	Changed bool       `json:"changed"`
	DueAt   *time.Time `json:"due_at,omitempty"`
}

func newRunPauseCmd(a *cliutil.App) *cobra.Command {
	var pf cliutil.PauseFlags
	c := &cobra.Command{
		Use:   "pause RUN_ID [--reason TEXT] [--by NAME]",
		Short: "Pause a live run: it is not claimed until resumed",
		Long: `Pause a pending, sleeping or running run. A suspended run is not claimed
until kagzi run resume: its wake time, its retry backoff's end or an event
sent to it come due meanwhile and wait (the event is stored as usual). A
running run finishes the step it is in, whose result is recorded, then gives
its lease back and waits. A pause counts no attempt. Who paused it and why
are shown by kagzi run show and the console. Pausing a paused run changes
nothing; pausing a finished run fails (exit 1).`,
		Example: `  kagzi run pause 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --reason "vendor outage"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("run id", args[0])
			if err != nil {
				return err
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			p, err := cl.PauseRun(cmd.Context(), id, client.PauseOptions{Reason: pf.Reason, By: pf.Who()})
			if err != nil {
				return err
			}
			v := runPauseJSON{RunID: id.String(), Status: string(p.Status), Paused: cliutil.ToPauseJSON(&p.Pause), Changed: !p.AlreadyPaused}
			return a.Print(cmd, v, func(w io.Writer) {
				switch {
				case p.AlreadyPaused:
					fmt.Fprintf(w, "Run %s was paused already, since %s by %s\n", id, cliutil.FmtTimeP(&p.Pause.At), p.Pause.By)
				case p.Status == client.StatusRunning:
					fmt.Fprintf(w, "Paused run %s: it stops when the step it is in is recorded\n", id)
				default:
					fmt.Fprintf(w, "Paused run %s (%s)\n", id, p.Status)
				}
			})
		},
	}
	pf.Register(c.Flags())
	return c
}

func newRunResumeCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "resume RUN_ID",
		Short: "Resume a paused run",
		Long: `Resume a paused run: it is claimable again when it would have been without
the pause (at once if that time has passed: a wake time, a retry, an event
that came meanwhile), and the dispatchers of its queue are woken. Resuming a
run that is not paused changes nothing.`,
		Example: `  kagzi run resume 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("run id", args[0])
			if err != nil {
				return err
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			r, err := cl.ResumeRun(cmd.Context(), id)
			if err != nil {
				return err
			}
			v := runPauseJSON{RunID: id.String(), Status: string(r.Status), Changed: r.WasPaused, DueAt: cliutil.UTC(r.DueAt)}
			return a.Print(cmd, v, func(w io.Writer) {
				switch {
				case !r.WasPaused:
					fmt.Fprintf(w, "Run %s is not paused (%s)\n", id, r.Status)
				case r.DueAt != nil:
					fmt.Fprintf(w, "Resumed run %s: due %s\n", id, cliutil.FmtTimeP(r.DueAt))
				default:
					fmt.Fprintf(w, "Resumed run %s (%s)\n", id, r.Status)
				}
			})
		},
	}
}

// runRetryStepJSON is what `run retry-step` prints with --json.
type runRetryStepJSON struct {
	RunID string   `json:"run_id"`
	Steps []string `json:"steps"`
}

func newRunRetryStepCmd(a *cliutil.App) *cobra.Command {
	var o client.RetryStepNowOptions
	cmd := &cobra.Command{
		Use:   "retry-step RUN_ID",
		Short: "Try a failing step's next attempt now, not at the end of its backoff",
		Long: `Make a run that backs off before a failing step's next attempt try it now
(the step's retry time and the run's due time become now), after a fix
went out, say. The attempts made so far stay counted. A paused run's attempt
waits for kagzi run resume. A run that backs off before no step's attempt
(running, sleeping, waiting for an event, finished) fails (exit 1).

The flags give the step new retry options for its next attempts in the
run's current attempt, in place of its code's (workflow.WithRetry): the max
attempts (the attempts made count, so a max at or below them makes the
next failure final), the backoff's base and cap, and the factor of each
next wait: after attempt n the step waits initial-interval × backoff^(n-1),
at most max-interval. A flag not given keeps the code's value, or an
earlier retry-step's. The jitter and the non-retryable error types stay
the code's.`,
		Example: `  kagzi run retry-step 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e
  kagzi run retry-step 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --max-attempts 10 --initial-interval 30s --max-interval 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("run id", args[0])
			if err != nil {
				return err
			}
			// A zero option means "keep the code's": one given as 0 is a
			// mistake, not a request to keep it.
			for _, f := range []string{"max-attempts", "initial-interval", "max-interval", "backoff"} {
				if fl := cmd.Flags().Lookup(f); fl.Changed && (fl.Value.String() == "0" || fl.Value.String() == "0s") {
					return cliutil.Usagef("--%s must not be 0 (leave it out to keep the step's value)", f)
				}
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			steps, err := cl.RetryStepNow(cmd.Context(), id, o)
			if err != nil {
				return err
			}
			return a.Print(cmd, runRetryStepJSON{RunID: id.String(), Steps: steps}, func(w io.Writer) {
				fmt.Fprintf(w, "Run %s retries now: %s\n", id, strings.Join(steps, ", "))
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.MaxAttempts, "max-attempts", 0,
		fmt.Sprintf("the step's max attempts, the attempts made included (1 to %d)", retry.MaxOverrideAttempts))
	f.DurationVar(&o.InitialInterval, "initial-interval", 0,
		fmt.Sprintf("the backoff's base: the wait after attempt n is this × backoff^(n-1) (at most %v)", retry.MaxOverrideInterval))
	f.DurationVar(&o.MaxInterval, "max-interval", 0, fmt.Sprintf("the longest wait between attempts (at most %v)", retry.MaxOverrideInterval))
	f.Float64Var(&o.BackoffCoefficient, "backoff", 0, fmt.Sprintf("the factor of each next wait (1 to %v)", retry.MaxOverrideBackoff))
	return cmd
}
