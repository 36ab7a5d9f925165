package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/pkg/store"
)

func init() { register(newLimitCmd) }

func newLimitCmd(a *app) *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:     "limit",
		Aliases: []string{"limits"},
		Short:   "Cap how many runs of a workflow type run at once",
		Example: `  kagzi limit set ProcessOrder 10 --queue orders
  kagzi limit list
  kagzi limit remove ProcessOrder --queue orders`,
	})
	c.AddCommand(newLimitSetCmd(a), newLimitListCmd(a), newLimitRemoveCmd(a))
	return c
}

// limitJSON is a concurrency limit as the limit commands print it.
type limitJSON struct {
	Queue      string    `json:"queue"`
	Type       string    `json:"type"`
	MaxRunning int       `json:"max_running"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func toLimitJSON(l store.ConcurrencyLimit) limitJSON {
	return limitJSON{Queue: l.Queue, Type: l.Type, MaxRunning: l.MaxRunning, UpdatedAt: l.UpdatedAt.UTC()}
}

func newLimitSetCmd(a *app) *cobra.Command {
	var queue string
	c := &cobra.Command{
		Use:   "set TYPE N",
		Short: "Allow at most N runs of TYPE to run at once in a queue",
		Long: `Allow at most N runs of workflow type TYPE to be RUNNING at once in a task
queue, across every worker (each worker's own max concurrency still applies).
The dispatchers' claims enforce it: runs beyond the limit wait, in priority
order, until running ones finish or suspend. N 0 pauses the type. Setting a
limit again replaces it.`,
		Example: `  kagzi limit set ProcessOrder 10 --queue orders
  kagzi limit set Report 0`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return usagef("limit %q must be a whole number, 0 or more", args[1])
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			l, err := st.LimitsSet(cmd.Context(), a.Namespace, queue, args[0], n)
			if err != nil {
				return err
			}
			return a.print(cmd, toLimitJSON(l), func(w io.Writer) {
				fmt.Fprintf(w, "At most %d run(s) of %s at once in queue %s\n", l.MaxRunning, l.Type, l.Queue)
			})
		},
	}
	c.Flags().StringVar(&queue, "queue", "default", "task queue")
	return c
}

func newLimitListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the namespace's concurrency limits",
		Example: `  kagzi limit list --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			ls, err := st.LimitsList(cmd.Context(), a.Namespace)
			if err != nil {
				return err
			}
			out := make([]limitJSON, len(ls))
			for i, l := range ls {
				out[i] = toLimitJSON(l)
			}
			return a.print(cmd, out, func(w io.Writer) {
				if len(ls) == 0 {
					fmt.Fprintln(w, "No concurrency limits: every type runs as many as the workers take.")
					return
				}
				fmt.Fprintln(w, "QUEUE\tTYPE\tMAX RUNNING\tUPDATED")
				for _, l := range ls {
					fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", l.Queue, l.Type, l.MaxRunning, fmtTime(l.UpdatedAt))
				}
			})
		},
	}
}

func newLimitRemoveCmd(a *app) *cobra.Command {
	var queue string
	c := &cobra.Command{
		Use:     "remove TYPE",
		Aliases: []string{"rm"},
		Short:   "Lift the concurrency limit of a workflow type",
		Example: `  kagzi limit remove ProcessOrder --queue orders`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			if err := st.LimitsDelete(cmd.Context(), a.Namespace, queue, args[0]); err != nil {
				return err
			}
			return a.print(cmd, map[string]any{"queue": queue, "type": args[0], "removed": true}, func(w io.Writer) {
				fmt.Fprintf(w, "Removed the limit of %s in queue %s\n", args[0], queue)
			})
		},
	}
	c.Flags().StringVar(&queue, "queue", "default", "task queue")
	return c
}
