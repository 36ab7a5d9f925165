package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/modeltest"
)

// ReuseVerdict is how a second start with the external id of one
// program's ended run, under an id reuse policy, compares with the model.
type ReuseVerdict struct {
	Index   int
	Policy  string
	Started bool
	Verdict modeltest.Verdict
}

// Reuses starts each program ps[i] that modeltest.ReusePolicy picks a
// second time, with the external id of its ended run ids[i] and that
// policy: the start must start a new run or be refused with an
// *client.IDReuseError naming the run, as modeltest.ReuseStarts says from
// the status the model predicts; a new run must then end as the model
// predicts the program ends (its own step invocations counted, and its
// children's).
func (d *Driver) Reuses(ctx context.Context, ps []modeltest.Program, ids []uuid.UUID, seed uint64) ([]ReuseVerdict, error) {
	type reuse struct {
		i      int
		policy string
		id     uuid.UUID
		diffs  []modeltest.Diff
	}
	var rs []reuse
	for i, p := range ps {
		policy, ok := modeltest.ReusePolicy(p, seed, i)
		if !ok {
			continue
		}
		pol, err := client.ParseIDReusePolicy(policy)
		if err != nil {
			return nil, err
		}
		pred := modeltest.Predict(p)
		req := d.StartRequest(p)
		req.Options.IDReusePolicy = pol
		h, err := d.Client.Start(ctx, req.Type, req.Input, req.Options)
		want := modeltest.ReuseStarts(policy, pred.Status)
		r := reuse{i: i, policy: policy}
		var reused *client.IDReuseError
		switch {
		case err == nil && h.RunID == ids[i]:
			r.diffs = append(r.diffs, modeltest.Diff{Msg: fmt.Sprintf("start under %s returned the ended run %s", policy, ids[i])})
		case err == nil && !want:
			r.diffs = append(r.diffs, modeltest.Diff{Msg: fmt.Sprintf("start under %s after a %s run started run %s, model refuses it", policy, pred.Status, h.RunID)})
			r.id = h.RunID
		case err == nil:
			r.id = h.RunID
		case errors.As(err, &reused):
			if want {
				r.diffs = append(r.diffs, modeltest.Diff{Msg: fmt.Sprintf("start under %s after a %s run refused: %v", policy, pred.Status, err)})
			} else if reused.ExistingRunID != ids[i] || string(reused.Status) != pred.Status {
				r.diffs = append(r.diffs, modeltest.Diff{Msg: fmt.Sprintf("start under %s refused naming run %s %s, want %s %s",
					policy, reused.ExistingRunID, reused.Status, ids[i], pred.Status)})
			}
		default:
			return nil, fmt.Errorf("start %s again under %s: %w", p.Key, policy, err)
		}
		rs = append(rs, r)
	}
	var started []uuid.UUID
	for _, r := range rs {
		if r.id != uuid.Nil {
			started = append(started, r.id)
		}
	}
	if err := d.WaitAll(ctx, started); err != nil {
		return nil, err
	}
	byRun, execs, err := d.invocationsByRun()
	if err != nil {
		return nil, err
	}
	out := make([]ReuseVerdict, 0, len(rs))
	for _, r := range rs {
		v := ReuseVerdict{Index: r.i, Policy: r.policy, Started: r.id != uuid.Nil}
		diffs := r.diffs
		if r.id != uuid.Nil && len(diffs) == 0 {
			p := ps[r.i]
			o, err := d.observe(ctx, p, r.id, execs)
			if err != nil {
				return nil, err
			}
			// The new run's invocations and its descendants', none of
			// the first run's (the same program keys).
			o.Invocations = map[string]int{}
			if err := d.walkRuns(ctx, r.id, p.Key, func(run store.Run, _ string, _ []store.Step) {
				for k, n := range byRun[run.ID.String()] {
					o.Invocations[k] += n
				}
			}); err != nil {
				return nil, err
			}
			pred := modeltest.Predict(p)
			diffs = modeltest.Compare(p, pred, o, false)
			v.Verdict.Model, v.Verdict.Engine = modeltest.DescribePrediction(pred), modeltest.DescribeObserved(o)
		}
		v.Verdict.Diffs = diffs
		out = append(out, v)
	}
	return out, nil
}
