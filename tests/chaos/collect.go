package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kagzi/kagzi/pkg/store"
)

// collect reads what the checker needs: every run of the namespace with
// its input, output and every step attempt, the schedule's fired runs, and
// the workers' logs.
func (h *harness) collect(ctx context.Context) (Input, error) {
	in := Input{MaxRecovery: h.o.MaxRecovery}
	for i := 1; i <= h.o.Runs; i++ {
		in.ExternalIDs = append(in.ExternalIDs, externalID(i))
	}
	var runs []store.Run
	p := store.RunsListParams{Namespace: Namespace, Limit: 1000}
	for {
		page, next, err := h.st.RunsList(ctx, p)
		if err != nil {
			return in, err
		}
		runs = append(runs, page...)
		if next == nil {
			break
		}
		p.After = next
	}
	in.Runs = make([]RunData, len(runs))
	var g errgroup.Group
	g.SetLimit(8)
	for i := range runs {
		g.Go(func() (err error) {
			in.Runs[i], err = h.runData(ctx, runs[i])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return in, err
	}
	if h.sched != nil {
		fires, err := h.st.SchedulesFires(ctx, Namespace, h.sched.From.Add(-time.Hour), time.Now().Add(time.Hour))
		if err != nil {
			return in, err
		}
		h.sched.Fires = fires
		in.Schedule = h.sched
	}
	recs, torn, err := ReadDir(h.dir)
	if err != nil {
		return in, err
	}
	in.Records = recs
	h.mu.Lock()
	in.Kills = append(in.Kills, h.kills...)
	in.Outages = append(in.Outages, h.outages...)
	in.Harness = append(in.Harness, h.problems...)
	h.mu.Unlock()
	if torn > 0 {
		in.Harness = append(in.Harness, fmt.Sprintf("%d unreadable lines in the workers' chaos logs", torn))
	}
	h.logf("collected %d runs, %d log records, %d worker kills", len(in.Runs), len(recs), len(in.Kills))
	return in, nil
}

func (h *harness) runData(ctx context.Context, r store.Run) (RunData, error) {
	full, err := h.st.RunsGet(ctx, Namespace, r.ID)
	if err != nil {
		return RunData{}, fmt.Errorf("run %s: %w", r.ID, err)
	}
	steps, err := h.st.StepsList(ctx, Namespace, r.ID)
	if err != nil {
		return RunData{}, fmt.Errorf("steps of run %s: %w", r.ID, err)
	}
	rd := RunData{ID: full.ID, ExternalID: full.ExternalID, Status: full.Status, Error: full.Error, FinishedAt: full.FinishedAt,
		ScheduleID: full.ScheduleID, ScheduleFireAt: full.ScheduleFireAt, Output: full.Output, Steps: steps}
	if len(full.Input) > 0 {
		if err := json.Unmarshal(full.Input, &rd.Input); err != nil {
			return RunData{}, fmt.Errorf("run %s: input: %w", r.ID, err)
		}
	}
	return rd, nil
}
