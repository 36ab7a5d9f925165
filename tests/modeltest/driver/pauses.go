package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/modeltest"
)

// PauseVerdict is how a program's run, paused and resumed, compares with
// the model.
type PauseVerdict struct {
	Index int
	// Paused: the pause came before the run ended (else it was refused
	// with ErrConflict, as a finished run's pause is).
	Paused  bool
	Verdict modeltest.Verdict
}

// pauseHold is how long a paused run is watched before its resume: it
// must not go on meanwhile.
const pauseHold = 300 * time.Millisecond

// Pauses starts each program ps[i] that modeltest.PausePoint picks again
// (under a key of its own), pauses its run at the point it says, checks
// that a paused run does not go on (it stays live, paused, and records
// no step but the one it was in), that a second pause changes nothing,
// resumes it (a second resume changing nothing) and checks that it ends
// as the model predicts the program ends: a pause counts no attempt and
// runs no step again. Those modeltest.PauseByBatch picks are started
// together with search attributes, paused by a batch over a query, and
// resumed by another (batchPauseResume).
func (d *Driver) Pauses(ctx context.Context, ps []modeltest.Program, seed uint64) ([]PauseVerdict, error) {
	var out []PauseVerdict
	type started struct {
		i     int
		p     modeltest.Program
		id    uuid.UUID
		diffs []modeltest.Diff
		pause bool
	}
	if err := d.declareAttributes(ctx); err != nil {
		return nil, err
	}
	var runs, batched []*started
	var reqs []client.StartRequest
	var g errgroup.Group
	g.SetLimit(32)
	for i, p := range ps {
		delay, ok := modeltest.PausePoint(p, seed, i)
		if !ok {
			continue
		}
		q := p.WithKey(p.Key + "~p")
		req := d.StartRequest(q)
		req.Options.ConcurrencyKey = ""
		if modeltest.PauseByBatch(seed, i) {
			req.Options.Attributes = map[string]any{modeltest.AttrScenario: modeltest.PausesTag(seed), modeltest.AttrGroup: modeltest.PausedGroup}
			batched = append(batched, &started{i: i, p: q})
			reqs = append(reqs, req)
			continue
		}
		h, err := d.Client.Start(ctx, req.Type, req.Input, req.Options)
		if err != nil {
			_ = g.Wait()
			return nil, fmt.Errorf("start %s: %w", q.Key, err)
		}
		s := &started{i: i, p: q, id: h.RunID}
		runs = append(runs, s)
		g.Go(func() error {
			_ = sleepCtx(ctx, time.Duration(delay)*time.Millisecond)
			s.pause = d.pauseAndResume(ctx, s.id, func(format string, args ...any) {
				s.diffs = append(s.diffs, modeltest.Diff{Msg: fmt.Sprintf(format, args...)})
			})
			return nil
		})
	}
	if len(batched) > 0 {
		// Started together, and the batch at once: it finds most of them
		// live.
		hs, err := d.Client.StartMany(ctx, reqs)
		if err != nil {
			_ = g.Wait()
			return nil, fmt.Errorf("start the runs to pause by batch: %w", err)
		}
		for j, h := range hs {
			batched[j].id = h.RunID
			runs = append(runs, batched[j])
		}
		byID, ids := map[uuid.UUID]*started{}, map[uuid.UUID]bool{}
		for _, s := range batched {
			byID[s.id], ids[s.id] = s, true
		}
		d.batchPauseResume(ctx, modeltest.PausesTag(seed), ids, func(id uuid.UUID, paused bool, format string, args ...any) {
			s := byID[id]
			if s == nil {
				s = batched[0]
			}
			s.pause = s.pause || paused
			if format != "" {
				s.diffs = append(s.diffs, modeltest.Diff{Msg: fmt.Sprintf(format, args...)})
			}
		})
	}
	_ = g.Wait()
	var ids []uuid.UUID
	for _, s := range runs {
		ids = append(ids, s.id)
	}
	if err := d.WaitAll(ctx, ids); err != nil {
		return nil, err
	}
	byRun, execs, err := d.invocationsByRun()
	if err != nil {
		return nil, err
	}
	for _, s := range runs {
		o, err := d.observe(ctx, s.p, s.id, execs)
		if err != nil {
			return nil, err
		}
		o.Invocations = map[string]int{}
		for k, n := range byRun[s.id.String()] {
			o.Invocations[k] += n
		}
		pred := modeltest.Predict(s.p)
		v := PauseVerdict{Index: s.i, Paused: s.pause}
		v.Verdict.Diffs = append(s.diffs, modeltest.Compare(s.p, pred, o, false)...)
		v.Verdict.Model, v.Verdict.Engine = modeltest.DescribePrediction(pred), modeltest.DescribeObserved(o)
		out = append(out, v)
	}
	return out, nil
}

// pauseAndResume pauses the run id, watches it for pauseHold and resumes
// it; diff receives what differs from the contract of a pause. It
// reports whether the pause came before the run ended.
func (d *Driver) pauseAndResume(ctx context.Context, id uuid.UUID, diff func(format string, args ...any)) bool {
	p, err := d.Client.PauseRun(ctx, id, client.PauseOptions{Reason: "model"})
	if errors.Is(err, client.ErrConflict) {
		if r, gerr := d.Client.Get(ctx, id); gerr != nil || !r.Status.Terminal() {
			diff("pause refused (%v) while the run is live", err)
		}
		return false
	}
	if err != nil {
		diff("pause: %v", err)
		return false
	}
	if p.AlreadyPaused {
		diff("first pause: AlreadyPaused")
	}
	p2, err := d.Client.PauseRun(ctx, id, client.PauseOptions{Reason: "again"})
	if errors.Is(err, client.ErrConflict) {
		// A running run ends, paused, in the report of the step it was
		// in: it is then finished, and no longer paused.
		if r, gerr := d.Client.Get(ctx, id); gerr != nil || !r.Status.Terminal() || r.Paused != nil {
			diff("second pause refused (%v) while the run is live or paused", err)
		}
		return true
	}
	if err != nil || !p2.AlreadyPaused || p2.Pause.Reason != "model" {
		diff("second pause: %+v, %v; want AlreadyPaused with the first pause kept", p2, err)
	}
	// The step in flight at the pause may still finish; nothing after it.
	_ = sleepCtx(ctx, pauseHold)
	before, err := d.completedSteps(ctx, id)
	if err != nil {
		diff("steps: %v", err)
	}
	_ = sleepCtx(ctx, pauseHold)
	after, err := d.completedSteps(ctx, id)
	if err != nil {
		diff("steps: %v", err)
	}
	r, err := d.Client.Get(ctx, id)
	switch {
	case err != nil:
		diff("get: %v", err)
	case r.Status.Terminal():
		// A run that was in its last step ends as that step is recorded.
		if r.Paused != nil {
			diff("run ended %s still paused", r.Status)
		}
		if before != after {
			diff("run recorded %d steps while paused, then %d", before, after)
		}
		return true
	case r.Paused == nil:
		diff("run %s not paused after its pause", r.Status)
	case after != before:
		diff("paused run went on: %d steps recorded, %d %v later", before, after, pauseHold)
	}
	res, err := d.Client.ResumeRun(ctx, id)
	if err != nil || !res.WasPaused {
		diff("resume: %+v, %v; want WasPaused", res, err)
	}
	if res, err := d.Client.ResumeRun(ctx, id); err != nil || res.WasPaused {
		diff("second resume: %+v, %v; want not WasPaused", res, err)
	}
	return true
}

// completedSteps counts the steps the run id has recorded completed.
func (d *Driver) completedSteps(ctx context.Context, id uuid.UUID) (int, error) {
	steps, err := d.Store.StepsList(ctx, d.Namespace, id)
	n := 0
	for _, s := range steps {
		if s.Status == store.StepCompleted {
			n++
		}
	}
	return n, err
}

// batchPauseResume pauses the live runs tagged tag (ids) by a batch over
// a query, checks each run's outcome (done: paused, or ended in the
// report of the step it was in; skipped: finished before its turn), that
// the paused runs do not go on, then resumes them by a batch over the
// query of the paused ones, whose set must be those runs exactly. note
// receives, per run, whether the batch paused it and what differs
// (format "": nothing); uuid.Nil names the batch.
func (d *Driver) batchPauseResume(ctx context.Context, tag string, ids map[uuid.UUID]bool, note func(id uuid.UUID, paused bool, format string, args ...any)) {
	query := fmt.Sprintf("%s = '%s' AND %s = '%s'", modeltest.AttrScenario, tag, modeltest.AttrGroup, modeltest.PausedGroup)
	b, err := d.Client.StartBatch(ctx, client.BatchOptions{Action: client.BatchPause, Query: query, Reason: "model", Rate: client.MaxBatchRate})
	if errors.Is(err, client.ErrNotFound) {
		return // every run ended before the batch
	}
	if err != nil {
		note(uuid.Nil, false, "pause batch: %v", err)
		return
	}
	if b, err = d.batchDone(ctx, b.ID); err != nil {
		note(uuid.Nil, false, "pause batch: %v", err)
		return
	}
	brs, err := d.Client.BatchRuns(ctx, b.ID, "", uuid.Nil, 1000)
	if err != nil {
		note(uuid.Nil, false, "pause batch runs: %v", err)
		return
	}
	d.logf("model: pause batch over %d runs: %d done, %d skipped, %d failed", b.Total, b.Done, b.Skipped, b.Failed)
	paused := map[uuid.UUID]bool{}
	for _, br := range brs {
		if !ids[br.RunID] {
			note(uuid.Nil, false, "pause batch over %q took run %s, not one it matches", query, br.RunID)
			continue
		}
		r, err := d.Client.Get(ctx, br.RunID)
		if err != nil {
			note(br.RunID, false, "get: %v", err)
			continue
		}
		switch {
		case br.Outcome == "skipped" && !r.Status.Terminal():
			note(br.RunID, false, "pause batch skipped the live run (%s): %s", r.Status, br.Error)
		case br.Outcome == "skipped":
			note(br.RunID, false, "")
		case br.Outcome != "done":
			note(br.RunID, false, "pause batch: outcome %s (%s)", br.Outcome, br.Error)
		case r.Status.Terminal() && r.Paused != nil:
			note(br.RunID, true, "run ended %s still paused", r.Status)
		case r.Status.Terminal():
			note(br.RunID, true, "")
		case r.Paused == nil:
			note(br.RunID, true, "pause batch done, run %s not paused", r.Status)
		default:
			paused[br.RunID] = true
			note(br.RunID, true, "")
		}
	}
	// The step in flight at the pause may still finish; nothing after it.
	_ = sleepCtx(ctx, pauseHold)
	before := map[uuid.UUID]int{}
	for id := range paused {
		before[id], _ = d.completedSteps(ctx, id)
	}
	_ = sleepCtx(ctx, pauseHold)
	for id := range paused {
		r, err := d.Client.Get(ctx, id)
		n, serr := d.completedSteps(ctx, id)
		switch {
		case err != nil || serr != nil:
			note(id, true, "get: %v %v", err, serr)
		case r.Status.Terminal():
			// It ended in the report of the step it was in.
			delete(paused, id)
			if r.Paused != nil {
				note(id, true, "run ended %s still paused", r.Status)
			}
		case n != before[id]:
			note(id, true, "paused run went on: %d steps recorded, %d %v later", before[id], n, pauseHold)
		}
	}
	if len(paused) == 0 {
		return
	}
	b, err = d.Client.StartBatch(ctx, client.BatchOptions{Action: client.BatchResume, Query: query + " AND paused = true", Rate: client.MaxBatchRate})
	if err != nil {
		note(uuid.Nil, false, "resume batch of %d paused runs: %v", len(paused), err)
		return
	}
	if b, err = d.batchDone(ctx, b.ID); err != nil {
		note(uuid.Nil, false, "resume batch: %v", err)
		return
	}
	if brs, err = d.Client.BatchRuns(ctx, b.ID, "", uuid.Nil, 1000); err != nil {
		note(uuid.Nil, false, "resume batch runs: %v", err)
		return
	}
	for _, br := range brs {
		switch {
		case !paused[br.RunID]:
			note(uuid.Nil, false, "resume batch over the paused runs took run %s, not paused", br.RunID)
		case br.Outcome != "done":
			note(br.RunID, true, "resume batch: outcome %s (%s)", br.Outcome, br.Error)
		}
		delete(paused, br.RunID)
	}
	d.logf("model: resume batch over %d paused runs: %d done, %d skipped, %d failed", b.Total, b.Done, b.Skipped, b.Failed)
	for id := range paused {
		note(id, true, "resume batch over the paused runs left out this paused run")
		_, _ = d.Client.ResumeRun(ctx, id)
	}
}

// batchDone waits until the batch id completed, and returns it.
func (d *Driver) batchDone(ctx context.Context, id uuid.UUID) (client.Batch, error) {
	wctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	b := backoff{}
	for {
		bt, err := d.Client.GetBatch(ctx, id)
		if err != nil {
			return bt, err
		}
		if bt.State == client.BatchCompleted {
			return bt, nil
		}
		if !b.sleep(wctx) {
			return bt, fmt.Errorf("batch %s not completed after %v: %+v", id, scenarioTimeout, bt)
		}
	}
}
