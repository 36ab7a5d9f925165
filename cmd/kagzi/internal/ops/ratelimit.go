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

func NewRateLimitCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "rate-limit",
		Aliases: []string{"rate-limits"},
		Short:   "Cap how many runs with a rate limit key start per period",
		Example: `  kagzi rate-limit set crm-api 10 --per 1s
  kagzi rate-limit list
  kagzi rate-limit remove crm-api`,
	})
	c.AddCommand(newRateLimitSetCmd(a), newRateLimitListCmd(a), newRateLimitRemoveCmd(a))
	return c
}

// RateLimitJSON is a rate limit as the rate-limit commands print it.
type RateLimitJSON struct {
	Key         string    `json:"key"`
	Limit       int       `json:"limit"`
	Period      string    `json:"period"`
	PeriodMS    int64     `json:"period_ms"`
	Claims      int       `json:"claims"`
	WindowStart time.Time `json:"window_start"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Released is, from set, how many runs the previous limit held in
	// later windows that are due again.
	Released int `json:"released,omitempty"`
}

func toRateLimitJSON(r store.RateLimit) RateLimitJSON {
	return RateLimitJSON{Key: r.Key, Limit: r.Limit, Period: cliutil.FmtDur(r.Period), PeriodMS: r.Period.Milliseconds(), Claims: r.Claims,
		WindowStart: r.WindowStart.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Released: r.Released}
}

func newRateLimitSetCmd(a *cliutil.App) *cobra.Command {
	var per time.Duration
	c := &cobra.Command{
		Use:   "set KEY N --per PERIOD",
		Short: "Allow at most N claims of runs with rate limit key KEY per period",
		Long: `Allow at most N claims (starts of execution, resumptions included) of runs
started with rate limit key KEY (kagzi run start --rate-limit-key,
client.StartOptions.RateLimitKey) per PERIOD, across every dispatcher and
queue of the namespace. Windows are fixed and aligned to the Unix epoch: no
window holds more than N claims (any interval of one period at most 2N).
Runs the limit holds back wait for the window that has room, without
polling. Setting a limit again replaces it.`,
		Example: `  kagzi rate-limit set crm-api 10 --per 1s
  kagzi rate-limit set mailer 1000 --per 1h`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				return cliutil.Usagef("limit %q must be a whole number, 1 or more", args[1])
			}
			if per < time.Millisecond {
				return cliutil.Usagef("--per %s must be at least 1ms, e.g. --per 1s", cliutil.FmtDur(per))
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			r, err := st.RateLimitsSet(cmd.Context(), a.Namespace, args[0], n, per)
			if err != nil {
				return err
			}
			return a.Print(cmd, toRateLimitJSON(r), func(w io.Writer) {
				fmt.Fprintf(w, "At most %d claim(s) of runs with rate limit key %s per %s\n", r.Limit, r.Key, cliutil.FmtDur(r.Period))
				if r.Released > 0 {
					fmt.Fprintf(w, "%d run(s) the previous limit held in later windows are due again, to be spread by this one\n", r.Released)
				}
			})
		},
	}
	cliutil.DurationVar(c.Flags(), &per, "per", time.Second, store.MaxRatePeriod, "the period, e.g. 1s, 1m")
	return c
}

func newRateLimitListCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the namespace's rate limits and their use in the current window",
		Example: `  kagzi rate-limit list --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			rs, err := st.RateLimitsList(cmd.Context(), a.Namespace)
			if err != nil {
				return err
			}
			out := make([]RateLimitJSON, len(rs))
			for i, r := range rs {
				out[i] = toRateLimitJSON(r)
			}
			return a.Print(cmd, out, func(w io.Writer) {
				if len(rs) == 0 {
					fmt.Fprintln(w, "No rate limits.")
					return
				}
				fmt.Fprintln(w, "KEY\tLIMIT\tPER\tCLAIMS NOW\tUPDATED")
				for _, r := range rs {
					fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\n", r.Key, r.Limit, cliutil.FmtDur(r.Period), r.Claims, cliutil.FmtTime(r.UpdatedAt))
				}
			})
		},
	}
}

func newRateLimitRemoveCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:     "remove KEY",
		Aliases: []string{"rm"},
		Short:   "Lift the rate limit of a key",
		Example: `  kagzi rate-limit remove crm-api`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			released, err := st.RateLimitsDelete(cmd.Context(), a.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.Print(cmd, map[string]any{"key": args[0], "removed": true, "released": released}, func(w io.Writer) {
				fmt.Fprintf(w, "Removed the rate limit of %s\n", args[0])
				if released > 0 {
					fmt.Fprintf(w, "%d run(s) it held in later windows are due again\n", released)
				}
			})
		},
	}
}
