package ops

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

func NewLimitCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "limit",
		Aliases: []string{"limits"},
		Short:   "Cap how many runs of a workflow type run at once",
		Example: `  kagzi limit set ProcessOrder 10 --queue orders
  kagzi limit set SyncCustomer 50 --per-key 2
  kagzi limit list
  kagzi limit remove ProcessOrder --queue orders`,
	})
	c.AddCommand(newLimitSetCmd(a), newLimitListCmd(a), newLimitRemoveCmd(a))
	return c
}

// LimitJSON is a concurrency limit as the limit commands print it.
type LimitJSON struct {
	Queue      string    `json:"queue"`
	Type       string    `json:"type"`
	MaxRunning int       `json:"max_running"` // -1: none (per-key limit only)
	MaxPerKey  int       `json:"max_per_key,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func toLimitJSON(l store.ConcurrencyLimit) LimitJSON {
	return LimitJSON{Queue: l.Queue, Type: l.Type, MaxRunning: l.MaxRunning, MaxPerKey: l.MaxPerKey, UpdatedAt: l.UpdatedAt.UTC()}
}

// fmtLimit renders a limit for the tables: "-" for none (store.NoLimit,
// or 0 per key).
func fmtLimit(n int) string {
	if n == store.NoLimit || n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func newLimitSetCmd(a *cliutil.App) *cobra.Command {
	var queue string
	var perKey int
	c := &cobra.Command{
		Use:   "set TYPE [N] [--per-key M]",
		Short: "Allow at most N runs of TYPE to run at once in a queue",
		Long: `Allow at most N runs of workflow type TYPE to be RUNNING at once in a task
queue, across every worker (each worker's own max concurrency still applies).
The dispatchers' claims enforce it: runs beyond the limit wait, in priority
order, until running ones finish or suspend. N 0 pauses the type. Setting a
limit again replaces it.

With --per-key M, at most M runs of TYPE with the same concurrency key
(kagzi run start --concurrency-key, client.StartOptions.ConcurrencyKey) run
at once, and claims take the keys in turns, so a key with few runs queued
is not starved by one with many. N may then be left out (no total cap);
--per-key 0 removes the per-key limit.`,
		Example: `  kagzi limit set ProcessOrder 10 --queue orders
  kagzi limit set Report 0`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			hasPerKey := cmd.Flags().Changed("per-key")
			if len(args) == 1 && !hasPerKey {
				return cliutil.Usagef("give the limit N, --per-key M, or both")
			}
			if hasPerKey && perKey < 0 {
				return cliutil.Usagef("--per-key %d must be 0 or more", perKey)
			}
			n := 0
			if len(args) == 2 {
				var err error
				if n, err = strconv.Atoi(args[1]); err != nil || n < 0 {
					return cliutil.Usagef("limit %q must be a whole number, 0 or more", args[1])
				}
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			var l store.ConcurrencyLimit
			if len(args) == 2 {
				if l, err = st.LimitsSet(cmd.Context(), a.Namespace, queue, args[0], n); err != nil {
					return err
				}
			}
			if hasPerKey {
				if l, err = st.LimitsSetPerKey(cmd.Context(), a.Namespace, queue, args[0], perKey); err != nil {
					return err
				}
			}
			return a.Print(cmd, toLimitJSON(l), func(w io.Writer) {
				if l.MaxRunning != store.NoLimit {
					fmt.Fprintf(w, "At most %d run(s) of %s at once in queue %s\n", l.MaxRunning, l.Type, l.Queue)
				}
				if l.MaxPerKey > 0 {
					fmt.Fprintf(w, "At most %d run(s) of %s at once per concurrency key in queue %s\n", l.MaxPerKey, l.Type, l.Queue)
				}
			})
		},
	}
	c.Flags().StringVar(&queue, "queue", "default", "task queue")
	c.Flags().IntVar(&perKey, "per-key", 0, "at most this many running per concurrency key (0 removes the per-key limit)")
	return c
}

func newLimitListCmd(a *cliutil.App) *cobra.Command {
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
			out := make([]LimitJSON, len(ls))
			for i, l := range ls {
				out[i] = toLimitJSON(l)
			}
			return a.Print(cmd, out, func(w io.Writer) {
				if len(ls) == 0 {
					fmt.Fprintln(w, "No concurrency limits: every type runs as many as the workers take.")
					return
				}
				fmt.Fprintln(w, "QUEUE\tTYPE\tMAX RUNNING\tPER KEY\tUPDATED")
				for _, l := range ls {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", l.Queue, l.Type, fmtLimit(l.MaxRunning), fmtLimit(l.MaxPerKey), cliutil.FmtTime(l.UpdatedAt))
				}
			})
		},
	}
}

func newLimitRemoveCmd(a *cliutil.App) *cobra.Command {
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
			return a.Print(cmd, map[string]any{"queue": queue, "type": args[0], "removed": true}, func(w io.Writer) {
				fmt.Fprintf(w, "Removed the limit of %s in queue %s\n", args[0], queue)
			})
		},
	}
	c.Flags().StringVar(&queue, "queue", "default", "task queue")
	return c
}
