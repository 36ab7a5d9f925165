package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/tests/modeltest"
)

// ScenarioVerdict is how one operator scenario (modeltest.Scenario)
// compares with the model.
type ScenarioVerdict struct {
	Scenario modeltest.Scenario
	// Acts counts the acts played, Batches the batches created.
	Acts, Batches int
	// Diffs are where the engine differs from the model, each naming
	// the act.
	Diffs []string
}

// scenarioTimeout bounds the wait for a run the model says an act ends,
// and for a batch to complete.
const scenarioTimeout = 30 * time.Second

// Scenarios plays the operator scenarios 0 to n-1 of seed, one after
// the other, and compares every act's answer and every run's end with
// the model's. An error is the harness's (a run that could not be
// started); what the engine does differently is in the verdicts.
func (d *Driver) Scenarios(ctx context.Context, seed uint64, n int) ([]ScenarioVerdict, error) {
	if n <= 0 {
		return nil, nil
	}
	if err := d.declareAttributes(ctx); err != nil {
		return nil, err
	}
	var out []ScenarioVerdict
	for i := 0; i < n; i++ {
		v, err := d.scenario(ctx, modeltest.GenerateScenario(seed, i))
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

type scenarioRun struct {
	d   *Driver
	s   modeltest.Scenario
	m   *modeltest.ScenarioModel
	ids []uuid.UUID
	idx map[uuid.UUID]int
	v   *ScenarioVerdict
	act string
}

func (x *scenarioRun) diff(format string, args ...any) {
	x.v.Diffs = append(x.v.Diffs, x.act+": "+fmt.Sprintf(format, args...))
}

func (d *Driver) scenario(ctx context.Context, s modeltest.Scenario) (ScenarioVerdict, error) {
	v := ScenarioVerdict{Scenario: s}
	x := &scenarioRun{d: d, s: s, m: modeltest.NewScenarioModel(s), idx: map[uuid.UUID]int{}, v: &v, act: "start"}
	reqs := make([]client.StartRequest, len(s.Runs))
	for i, r := range s.Runs {
		reqs[i] = d.StartRequest(r.Program)
		reqs[i].Options.ConcurrencyKey = ""
		reqs[i].Options.Attributes = s.Attributes(i)
	}
	hs, err := d.Client.StartMany(ctx, reqs)
	if err != nil {
		return v, fmt.Errorf("scenario %s: start: %w", s.Name, err)
	}
	for i, h := range hs {
		x.ids = append(x.ids, h.RunID)
		x.idx[h.RunID] = i
	}
	// Every run waits for its event before the first act.
	wctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	for i, id := range x.ids {
		if !d.waitPendingCtx(wctx, id, "event:"+modeltest.OperatorEvent) {
			x.diff("run %d (%s) does not wait for its event", i, id)
		}
	}
	cancel()
	if len(v.Diffs) > 0 {
		return v, nil
	}
	for n, a := range s.Acts {
		x.act = fmt.Sprintf("act %d (%s)", n+1, a)
		want := x.m.Apply(a)
		v.Acts++
		if !x.play(ctx, a, want) {
			break
		}
		x.settle(ctx, a, want)
		if len(v.Diffs) > 0 {
			break
		}
	}
	if len(v.Diffs) == 0 {
		x.act = "end"
		x.ends(ctx)
	}
	return v, nil
}

// play does a and compares its answer with want; false if the scenario
// cannot go on (the engine's state is no longer the model's).
func (x *scenarioRun) play(ctx context.Context, a modeltest.Act, want modeltest.ActResult) bool {
	d := x.d
	conflict := func(err error) bool {
		switch {
		case want.Conflict && !errors.Is(err, client.ErrConflict):
			x.diff("got %v, model: ErrConflict", err)
			return false
		case !want.Conflict && err != nil:
			x.diff("got %v, model: no error", err)
			return false
		}
		return true
	}
	switch a.Kind {
	case modeltest.ActPause:
		p, err := d.Client.PauseRun(ctx, x.ids[a.Run], client.PauseOptions{Reason: "model " + x.act})
		if !conflict(err) {
			return false
		}
		if err == nil && p.AlreadyPaused != want.AlreadyPaused {
			x.diff("AlreadyPaused %v, model %v", p.AlreadyPaused, want.AlreadyPaused)
		}
	case modeltest.ActResume:
		r, err := d.Client.ResumeRun(ctx, x.ids[a.Run])
		if !conflict(err) {
			return false
		}
		if r.WasPaused != want.WasPaused {
			x.diff("WasPaused %v, model %v", r.WasPaused, want.WasPaused)
		}
	case modeltest.ActSend:
		_, err := d.Client.SendEvent(ctx, x.ids[a.Run], modeltest.OperatorEvent, a.Payload)
		return conflict(err)
	case modeltest.ActCancel:
		return conflict(d.Client.Cancel(ctx, x.ids[a.Run]))
	case modeltest.ActList:
		runs, next, err := d.Client.List(ctx, client.ListOptions{Query: a.Query(x.s.Name), Limit: 1000})
		if err != nil || next != "" {
			x.diff("list %q: %v (next %q)", a.Query(x.s.Name), err, next)
			return false
		}
		got := []int{}
		for _, r := range runs {
			i, ok := x.idx[r.ID]
			if !ok {
				x.diff("list %q found run %s, not of the scenario", a.Query(x.s.Name), r.ID)
				continue
			}
			got = append(got, i)
		}
		sort.Ints(got)
		if fmt.Sprint(got) != fmt.Sprint(want.Matches) {
			x.diff("list %q found runs %v, model %v", a.Query(x.s.Name), got, want.Matches)
		}
	case modeltest.ActCount:
		res, err := d.Client.Count(ctx, client.CountOptions{Query: a.Query(x.s.Name), GroupBy: "status"})
		if err != nil {
			x.diff("count %q: %v", a.Query(x.s.Name), err)
			return false
		}
		got := map[string]int{}
		for _, g := range res.Groups {
			st := "<none>"
			if g.Value != nil {
				st = *g.Value
			}
			switch st {
			case "PENDING", "RUNNING", "SLEEPING":
				st = modeltest.LiveStatus
			}
			got[st] += int(g.Count)
		}
		total := 0
		for _, n := range want.Counts {
			total += n
		}
		if fmt.Sprint(got) != fmt.Sprint(want.Counts) || res.Total != int64(total) {
			x.diff("count %q by status: %v (total %d), model %v", a.Query(x.s.Name), got, res.Total, want.Counts)
		}
	case modeltest.ActBatch:
		return x.batch(ctx, a, want)
	}
	return true
}

// batch starts a's batch, waits for it to complete and compares its set
// and its runs' outcomes with the model's.
func (x *scenarioRun) batch(ctx context.Context, a modeltest.Act, want modeltest.ActResult) bool {
	d := x.d
	o := client.BatchOptions{Action: client.BatchAction(a.Action), By: "model", Reason: modeltest.BatchReason, Rate: client.MaxBatchRate}
	if a.IDs != nil {
		for _, i := range a.IDs {
			o.RunIDs = append(o.RunIDs, x.ids[i])
		}
	} else {
		o.Query = a.Query(x.s.Name)
	}
	if a.Action == modeltest.BatchSignal {
		o.EventName, o.Payload = modeltest.OperatorEvent, a.Payload
	}
	before, err := d.Client.ListBatches(ctx, 1000)
	if err != nil {
		x.diff("list batches: %v", err)
		return false
	}
	b, err := d.Client.StartBatch(ctx, o)
	switch {
	case want.Conflict || want.NotFound:
		wantErr, name := client.ErrConflict, "ErrConflict"
		if want.NotFound {
			wantErr, name = client.ErrNotFound, "ErrNotFound"
		}
		if !errors.Is(err, wantErr) {
			x.diff("batch started (%v), model: refused with %s", err, name)
			return false
		}
		after, err := d.Client.ListBatches(ctx, 1000)
		if err != nil {
			x.diff("list batches: %v", err)
			return false
		}
		if len(after) != len(before) {
			x.diff("a refused batch created one: %d batches, %d before", len(after), len(before))
			return false
		}
		return true
	case err != nil:
		x.diff("batch refused: %v; model: %d runs", err, len(want.Outcomes))
		return false
	}
	x.v.Batches++
	if b, err = d.batchDone(ctx, b.ID); err != nil {
		x.diff("%v", err)
		return false
	}
	wantN := map[string]int{}
	for _, oc := range want.Outcomes {
		wantN[oc]++
	}
	if b.Total != len(want.Outcomes) || b.Done != wantN["done"] || b.Skipped != wantN["skipped"] || b.Failed != 0 {
		x.diff("batch total %d done %d skipped %d failed %d, model total %d done %d skipped %d failed 0",
			b.Total, b.Done, b.Skipped, b.Failed, len(want.Outcomes), wantN["done"], wantN["skipped"])
	}
	runs, err := d.Client.BatchRuns(ctx, b.ID, "", uuid.Nil, 1000)
	if err != nil {
		x.diff("batch runs: %v", err)
		return false
	}
	seen := map[int]bool{}
	for _, r := range runs {
		i, ok := x.idx[r.RunID]
		if !ok {
			x.diff("batch acted on run %s, not of the scenario", r.RunID)
			continue
		}
		seen[i] = true
		if wo, in := want.Outcomes[i]; !in {
			x.diff("batch took run %d (%s: %s), model: not in its set", i, r.Outcome, r.Error)
		} else if r.Outcome != wo {
			x.diff("run %d: outcome %s (%s), model %s", i, r.Outcome, r.Error, wo)
		} else if why := skipReason(a.Action); wo == "skipped" && r.Error != why {
			x.diff("run %d: skipped for %q, model: %q", i, r.Error, why)
		}
	}
	for i := range want.Outcomes {
		if !seen[i] {
			x.diff("batch left out run %d, model: %s", i, want.Outcomes[i])
		}
	}
	return len(x.v.Diffs) == 0
}

// settle waits for the runs the act ends and checks their ends, then
// checks that every run the model says is live is, paused as it says.
// A paused run sent its event is given a moment first: were the pause not
// kept, it would end meanwhile.
func (x *scenarioRun) settle(ctx context.Context, a modeltest.Act, want modeltest.ActResult) {
	for _, i := range want.Ends {
		x.checkEnd(ctx, i)
	}
	if a.Kind == modeltest.ActSend || (a.Kind == modeltest.ActBatch && a.Action == modeltest.BatchSignal) {
		if _, paused := x.m.Live(a.Run); paused || a.Kind == modeltest.ActBatch {
			_ = sleepCtx(ctx, 300*time.Millisecond)
		}
	}
	for i, id := range x.ids {
		live, paused := x.m.Live(i)
		if !live {
			continue
		}
		r, err := x.d.Client.Get(ctx, id)
		if err != nil {
			x.diff("get run %d: %v", i, err)
			return
		}
		if r.Status.Terminal() {
			x.diff("run %d ended %s %q, model: live (paused %v)", i, r.Status, r.Error, paused)
			continue
		}
		if (r.Paused != nil) != paused {
			x.diff("run %d paused %v, model %v", i, r.Paused != nil, paused)
		}
	}
}

// checkEnd waits for run i to end and compares its end with the model's.
func (x *scenarioRun) checkEnd(ctx context.Context, i int) {
	want, _ := x.m.End(i)
	wctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	r, err := x.d.Client.Wait(wctx, x.ids[i])
	if err != nil {
		x.diff("run %d did not end (%v), model: %s %q %q", i, err, want.Status, want.Error, want.Payload)
		return
	}
	if string(r.Status) != want.Status {
		x.diff("run %d ended %s %q, model %s %q %q", i, r.Status, r.Error, want.Status, want.Error, want.Payload)
		return
	}
	switch want.Status {
	case modeltest.StatusCompleted:
		wantOut, _ := json.Marshal(x.s.Output(i, want.Payload))
		if !modeltest.JSONEqual(r.Output, wantOut) {
			x.diff("run %d output %s, model %s", i, r.Output, wantOut)
		}
	default:
		if r.Error != want.Error {
			x.diff("run %d error %q, model %q", i, r.Error, want.Error)
		}
	}
	if r.Paused != nil {
		x.diff("run %d ended paused (%+v)", i, *r.Paused)
	}
	// A pause consumes no attempt: every run has one.
	if r.Attempts != 1 {
		x.diff("run %d ended after %d attempts, model 1 (a pause counts none)", i, r.Attempts)
	}
}

// ends checks, once every act was played, that every run ended as the
// model says.
func (x *scenarioRun) ends(ctx context.Context) {
	for i := range x.ids {
		if live, _ := x.m.Live(i); live {
			x.diff("run %d: the model leaves it live", i)
		}
	}
}

// waitPendingCtx is waitPending under ctx.
func (d *Driver) waitPendingCtx(ctx context.Context, id uuid.UUID, stepID string) bool {
	b := backoff{}
	for {
		pending, over, err := d.pendingCtx(ctx, id, stepID)
		if err == nil && (pending || over) {
			return pending
		}
		if !b.sleep(ctx) {
			return false
		}
	}
}

// skipReason is why a batch of action skips a live run: the pause of a
// paused run, the resume of one that is not paused.
func skipReason(action string) string {
	switch action {
	case modeltest.BatchPause:
		return "paused already"
	case modeltest.BatchResume:
		return "not paused"
	}
	return ""
}

// declareAttributes declares the search attributes of the runs of
// operator scenarios and of those paused by batches (declaring them
// again changes nothing).
func (d *Driver) declareAttributes(ctx context.Context) error {
	for _, a := range []struct {
		name string
		kind client.AttributeKind
	}{{modeltest.AttrScenario, client.AttributeKeyword}, {modeltest.AttrGroup, client.AttributeKeyword}, {modeltest.AttrIndex, client.AttributeInt}} {
		if err := d.Client.DeclareAttribute(ctx, a.name, a.kind); err != nil {
			return fmt.Errorf("declare %s: %w", a.name, err)
		}
	}
	return nil
}
