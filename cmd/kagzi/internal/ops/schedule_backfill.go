package ops

import (
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

const overlapFlagHelp = "while a run of the schedule is live: skip, buffer-one, allow-all, cancel-other or terminate-other"

// parseOverlapFlag reads --overlap; "" is allow-all.
func parseOverlapFlag(s string) (store.OverlapPolicy, error) {
	p, err := store.ParseOverlap(s)
	if err != nil {
		return "", cliutil.Usagef("--overlap %q: use skip, buffer-one, allow-all, cancel-other or terminate-other", s)
	}
	return p, nil
}

// BackfillJSON is what `schedule backfill` prints with --json.
type BackfillJSON struct {
	ScheduleID uuid.UUID         `json:"schedule_id"`
	FireTimes  []time.Time       `json:"fire_times"`
	Runs       []cliutil.RunJSON `json:"runs"`
	Existing   []time.Time       `json:"existing"`
	Dropped    []time.Time       `json:"dropped"`
	Buffered   *time.Time        `json:"buffered,omitempty"`
	Stopped    []uuid.UUID       `json:"stopped"`
}

func utcs(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

func newScheduleBackfillCmd(a *cliutil.App) *cobra.Command {
	var from, to, overlap string
	c := &cobra.Command{
		Use:   "backfill SCHEDULE_ID --from T --to T",
		Short: "Start the runs of a past range of fire times the schedule did not fire",
		Long: `Start a run for each fire time of the schedule in [--from, --to) that has
none, paused or not, as if the fire times came one after the other now under
--overlap (default: the schedule's own policy; allow-all starts them all).
A fire time starts at most once however often it is backfilled, so a
repeated backfill starts nothing new. The schedule's next fire time does not
move. At most ` + fmt.Sprint(store.MaxBackfill) + ` fire times; --to may not be in the future.
--from and --to take an RFC 3339 time or an age before now (90m, 2d).`,
		Example: `  kagzi schedule backfill ` + exampleScheduleID + ` --from 2025-01-01T00:00:00Z --to 2025-01-02T00:00:00Z
  kagzi schedule backfill ` + exampleScheduleID + ` --from 6h --to 0s --overlap allow-all`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("schedule id", args[0])
			if err != nil {
				return err
			}
			now := time.Now()
			f, err := cliutil.ParseWhen("from", from, now)
			if err != nil {
				return err
			}
			t, err := cliutil.ParseWhen("to", to, now)
			if err != nil {
				return err
			}
			var policy store.OverlapPolicy
			if overlap != "" {
				if policy, err = parseOverlapFlag(overlap); err != nil {
					return err
				}
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			// One transaction: the count is known at its end, the line
			// shows the time meanwhile.
			prog, err := a.Progress(cmd, "backfilling runs", 0)
			if err != nil {
				return err
			}
			prog.Start()
			r, err := st.SchedulesBackfill(cmd.Context(), store.SchedulesBackfillParams{Namespace: a.Namespace, ScheduleID: id,
				From: f, To: t, Overlap: policy, Now: now})
			prog.Done(int64(len(r.Runs)))
			if err != nil {
				return err
			}
			out := BackfillJSON{ScheduleID: id, FireTimes: utcs(r.FireTimes), Runs: make([]cliutil.RunJSON, len(r.Runs)),
				Existing: utcs(r.Existing), Dropped: utcs(r.Dropped), Buffered: cliutil.UTC(r.Buffered), Stopped: r.Stopped}
			if out.Stopped == nil {
				out.Stopped = []uuid.UUID{}
			}
			for i, run := range r.Runs {
				out.Runs[i] = cliutil.ToRunJSON(run)
			}
			return a.Print(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "Backfilled schedule %s: %d fire times, %d started, %d had a run, %d dropped by the overlap policy\n",
					id, len(r.FireTimes), len(r.Runs), len(r.Existing), len(r.Dropped))
				for _, run := range r.Runs {
					fmt.Fprintf(w, "  %s\t%s\n", cliutil.FmtTimeP(run.ScheduleFireAt), run.ID)
				}
				if r.Buffered != nil {
					fmt.Fprintf(w, "Buffered: %s\n", cliutil.FmtTimeP(r.Buffered))
				}
				for _, s := range r.Stopped {
					fmt.Fprintf(w, "Stopped: %s\n", s)
				}
			})
		},
	}
	fl := c.Flags()
	fl.StringVar(&from, "from", "", "first time of the range (RFC 3339, or an age such as 6h) (required)")
	fl.StringVar(&to, "to", "", "end of the range, excluded (RFC 3339, or an age such as 1h; 0s is now) (required)")
	fl.StringVar(&overlap, "overlap", "", overlapFlagHelp+" (default: the schedule's)")
	_ = c.MarkFlagRequired("from")
	_ = c.MarkFlagRequired("to")
	return c
}
