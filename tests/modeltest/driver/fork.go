package driver

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/tests/modeltest"
)

// ForkVerdict is how the fork of one program's run compares with the
// model (modeltest.PredictFork).
type ForkVerdict struct {
	// Index is the program's index in the programs forked.
	Index int
	// Step is the step the fork executes from ("" from the start).
	Step    string
	Verdict modeltest.Verdict
}

// Forks forks the ended run ids[i] of every forkable program ps[i] from the
// step modeltest.ForkPoint picks for (seed, i), asks for the same fork a
// second time (it must be the same run: one fork per run and step), waits
// for the forks to end and compares each with the model's prediction:
// status, output or error, the durable state, and which steps were
// invoked again — by the fork's run alone, none of the steps it replays
// from the run's history.
func (d *Driver) Forks(ctx context.Context, ps []modeltest.Program, ids []uuid.UUID, seed uint64) ([]ForkVerdict, error) {
	type fork struct {
		i    int
		step string
		id   uuid.UUID
	}
	var forks []fork
	var problems []string
	for i, p := range ps {
		step, ok := modeltest.ForkPoint(p, seed, i)
		if !ok {
			continue
		}
		h, err := d.Client.Fork(ctx, ids[i], client.ForkOptions{Step: step})
		if err != nil {
			return nil, fmt.Errorf("fork %s (run %s) from %q: %w", p.Key, ids[i], step, err)
		}
		again, err := d.Client.Fork(ctx, ids[i], client.ForkOptions{Step: step})
		switch {
		case err != nil:
			return nil, fmt.Errorf("fork %s (run %s) from %q again: %w", p.Key, ids[i], step, err)
		case again.RunID != h.RunID || again.Created || !h.Created:
			problems = append(problems, fmt.Sprintf("fork of %s from %q twice: runs %s (created %v) and %s (created %v)",
				p.Key, step, h.RunID, h.Created, again.RunID, again.Created))
		}
		forks = append(forks, fork{i: i, step: step, id: h.RunID})
	}
	if len(forks) == 0 {
		return nil, nil
	}
	fids := make([]uuid.UUID, len(forks))
	for k, f := range forks {
		fids[k] = f.id
	}
	if err := d.WaitAll(ctx, fids); err != nil {
		return nil, err
	}
	byRun, execs, err := d.invocationsByRun()
	if err != nil {
		return nil, err
	}
	out := make([]ForkVerdict, 0, len(forks))
	for _, f := range forks {
		p := ps[f.i]
		o, err := d.observe(ctx, p, f.id, execs)
		if err != nil {
			return nil, err
		}
		o.Invocations = byRun[f.id.String()]
		if o.Invocations == nil {
			o.Invocations = map[string]int{}
		}
		pred := modeltest.PredictFork(p, f.step)
		diffs := modeltest.Compare(p, pred, o, false)
		r, err := d.Client.Get(ctx, f.id)
		if err != nil {
			return nil, fmt.Errorf("fork %s: %w", f.id, err)
		}
		if r.ForkedFrom == nil || *r.ForkedFrom != ids[f.i] || r.ForkedAtStep != f.step {
			diffs = append(diffs, modeltest.Diff{Msg: fmt.Sprintf("fork %s links to %v at %q, want %s at %q", f.id, r.ForkedFrom, r.ForkedAtStep, ids[f.i], f.step)})
		}
		out = append(out, ForkVerdict{Index: f.i, Step: f.step, Verdict: modeltest.Verdict{Diffs: diffs,
			Model: modeltest.DescribePrediction(pred), Engine: modeltest.DescribeObserved(o)}})
	}
	for _, pr := range problems {
		d.problem("%s", pr)
	}
	return out, nil
}

// invocationsByRun reads the invocation logs: the step invocations by run
// id and "<program key>/<step id>", and the highest execution attempt of
// each run.
func (d *Driver) invocationsByRun() (byRun map[string]map[string]int, execs map[string]int, err error) {
	invs, err := d.Invocations()
	if err != nil {
		return nil, nil, err
	}
	byRun, execs = map[string]map[string]int{}, map[string]int{}
	for _, in := range invs {
		if in.StepID == modeltest.ExecutionID {
			execs[in.RunID] = max(execs[in.RunID], in.Attempt)
			continue
		}
		m := byRun[in.RunID]
		if m == nil {
			m = map[string]int{}
			byRun[in.RunID] = m
		}
		m[in.Key+"/"+in.StepID]++
	}
	return byRun, execs, nil
}
