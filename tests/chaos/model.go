package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/tests/modeltest"
	"github.com/kagzi/kagzi/tests/modeltest/driver"
)

// VModel is a program whose engine outcome differs from the model's.
const VModel = "model-divergence"

// ModelReport is the outcome of a model run (Options.Model).
type ModelReport struct {
	Seed uint64
	// Programs were run (Regressions of them regression cases); Completed,
	// Failed and Cancelled say how they ended.
	Programs, Regressions, Completed, Failed, Cancelled int
	// ChildRuns and Invocations count what the programs made.
	ChildRuns, Invocations int
	// Ops counts the programs' ops by kind (children's programs included),
	// Policies the detached children by parent-close policy.
	Ops, Policies map[string]int
	// Divergences are every program that differs from the model (each
	// one a violation).
	Divergences []modeltest.Divergence
	// LostRuns counts the runs failed by a crash once their attempts were
	// spent, CappedRuns those failed by their workflow's error once their
	// attempts were spent with recoveries among them, PastDeadline the
	// programs that faults delayed past their deadline: the ends the model
	// took from the database.
	LostRuns, CappedRuns, PastDeadline int
	// ShrinkRuns counts the engine runs spent shrinking.
	ShrinkRuns int
	// Kills counts worker SIGKILLs.
	Kills int
	// RunPhase is the time from the first start to the last run's end.
	RunPhase time.Duration
	// Forks counts the runs forked once they ended (fault-free runs only:
	// driver.Forks), ForkDivergences the forks whose end differs from the
	// model's (each one a violation).
	Forks, ForkDivergences int
	// Reuses counts the second starts under an id reuse policy
	// (fault-free runs only: driver.Reuses), ReuseStarted those that
	// started a run, ReuseDivergences those that differ from the model.
	Reuses, ReuseStarted, ReuseDivergences int
	// KeyPeaks is the most executions of one concurrency key at once, by
	// key (Options.Keys).
	KeyPeaks map[string]int
	// Scenarios counts the operator scenarios played (fault-free runs
	// only: driver.Scenarios), ScenarioActs their acts, Batches the
	// batches they created, ScenarioDivergences the scenarios where the
	// engine differs from the model (each one a violation).
	Scenarios, ScenarioActs, Batches, ScenarioDivergences int
	// Pauses counts the programs started again and paused (fault-free
	// runs only: driver.Pauses), PausedLive those whose pause came before
	// their run ended, PauseDivergences those that differ from the model.
	Pauses, PausedLive, PauseDivergences int
}

// inlineRetry is the KAGZI_MAX_INLINE_RETRY of a worker slot in a model
// run: one in three workers waits for step retry backoffs in place (the
// default), one only for the shortest, one never, so a program's retries
// suspend its run or not depending on where it runs.
func inlineRetry(slot string) string {
	n, _ := strconv.Atoi(slot[strings.LastIndexByte(slot, '-')+1:])
	switch n % 3 {
	case 1:
		return "10ms"
	case 2:
		return "-1ms"
	}
	return "2s"
}

// modelScenario runs the model's programs (and the faults, unless
// NoFaults), checks each against the model and shrinks divergences.
func (h *harness) modelScenario(ctx, cleanup context.Context) *Report {
	o := h.o
	mr := &ModelReport{Seed: o.Seed}
	rep := &Report{Model: mr}
	d := &driver.Driver{Client: h.cl, Store: h.st, NC: h.nc, Namespace: Namespace, NATSURL: h.natsURL,
		Invocations: func() ([]modeltest.Invocation, error) { return modeltest.ReadLogs(h.dir) },
		Logf:        h.logf, Keys: o.Keys}
	if o.Keys > 0 {
		if _, err := h.cl.SetKeyConcurrencyLimit(ctx, "", modeltest.WorkflowType, o.PerKey); err != nil {
			rep.add(VHarness, "model: per-key limit: %v", err)
			return rep
		}
	}
	if err := d.Start(ctx); err != nil {
		rep.add(VHarness, "model driver: %v", err)
		return rep
	}
	defer d.Stop()

	ps := make([]modeltest.Program, 0, o.Runs+len(o.Regressions))
	for i := 0; i < o.Runs; i++ {
		ps = append(ps, modeltest.Generate(o.Seed, i))
	}
	for i, p := range o.Regressions {
		ps = append(ps, p.WithKey("reg-"+strconv.Itoa(i)))
	}
	mr.Programs, mr.Regressions = len(ps), len(o.Regressions)
	mr.Ops, mr.Policies = map[string]int{}, map[string]int{}
	for _, p := range ps {
		// A chain's continuations count as "continue", their ops with the rest.
		for i, q := range p.Chain() {
			if i > 0 {
				mr.Ops["continue"]++
			}
			countOpKinds(q.Ops, mr.Ops, mr.Policies)
		}
	}

	h.t0ns.Store(time.Now().UnixNano())
	began := time.Now()
	var ids []uuid.UUID
	var err error
	if o.NoFaults {
		h.logf("model: %d programs (seed %d), no faults", len(ps), o.Seed)
		ids, err = d.Launch(ctx, ps)
	} else {
		h.logf("model: %d programs (seed %d) over %v, worker SIGKILL every %v", len(ps), o.Seed, o.Duration, o.KillEvery)
		ids, err = h.launchWithFaults(ctx, d, ps)
	}
	if err == nil {
		err = d.WaitAll(ctx, ids)
	}
	mr.RunPhase = time.Since(began)
	if err != nil {
		rep.add(VHarness, "model: runs did not end: %v", err)
		return rep
	}
	h.mu.Lock()
	mr.Kills = len(h.kills)
	h.mu.Unlock()
	h.logf("model: every run ended after %.1f s; checking", mr.RunPhase.Seconds())
	if o.Keys > 0 {
		execs, err := modeltest.ReadExecutions(h.dir)
		if err != nil {
			rep.add(VHarness, "model: executions: %v", err)
			return rep
		}
		mr.KeyPeaks = modeltest.KeyPeaks(execs, ps, o.Keys)
		for k, n := range mr.KeyPeaks {
			if n > o.PerKey {
				rep.add(VModel, "concurrency key %s: %d runs executing at once, limit %d", k, n, o.PerKey)
			}
		}
	}

	obs, err := d.Observe(ctx, ps, ids)
	if err != nil {
		rep.add(VHarness, "model: observe: %v", err)
		return rep
	}
	crashes := !o.NoFaults
	verdicts := modeltest.Judge(ps, obs, crashes)
	var divs []modeltest.Divergence
	for i, p := range ps {
		switch obs[i].Status {
		case modeltest.StatusCompleted:
			mr.Completed++
		case modeltest.StatusCancelled:
			mr.Cancelled++
		default:
			mr.Failed++
		}
		for _, n := range obs[i].ChildRuns {
			mr.ChildRuns += n
		}
		mr.LostRuns += verdicts[i].Lost
		mr.CappedRuns += verdicts[i].Capped
		if verdicts[i].PastDeadline {
			mr.PastDeadline++
		}
		for _, n := range obs[i].Invocations {
			mr.Invocations += n
		}
		if v := verdicts[i]; v.Diverges() {
			idx := i
			if i >= o.Runs {
				idx = -1
			}
			divs = append(divs, modeltest.Divergence{Seed: o.Seed, Index: idx, Program: p, Minimal: p, Diffs: v.Diffs,
				Model: v.Model, Engine: v.Engine})
		}
	}
	if o.NoFaults {
		h.forks(ctx, d, ps, ids, mr, rep)
		h.reuses(ctx, d, ps, ids, mr, rep)
		h.pauses(ctx, d, ps, mr, rep)
		h.scenarios(ctx, d, mr, rep)
	}
	for i := range divs {
		if i < o.ShrinkMax {
			mr.ShrinkRuns += h.shrink(ctx, d, &divs[i])
		}
		rep.add(VModel, "%s", strings.TrimRight(divs[i].Describe(), "\n"))
	}
	mr.Divergences = divs
	if len(divs) > 0 && (!o.NoFaults || rep.Failed()) {
		// Every divergence in full (the report prints a few of each kind).
		var b strings.Builder
		for _, dv := range divs {
			b.WriteString(dv.Describe())
		}
		path := filepath.Join(h.dir, "divergences.txt")
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err == nil {
			h.logf("model: every divergence is in %s", path)
			h.keep.Store(true)
		}
	}
	for _, p := range d.Problems() {
		rep.add(VHarness, "%s", p)
	}
	h.mu.Lock()
	for _, p := range h.problems {
		rep.add(VHarness, "%s", p)
	}
	h.mu.Unlock()
	return rep
}

// shrink reduces a divergence to a minimal program, running candidates
// through the engine (faults are over by now). It returns the runs spent.
func (h *harness) shrink(ctx context.Context, d *driver.Driver, dv *modeltest.Divergence) int {
	same := func(v modeltest.Verdict) bool { return v.Diverges() }
	test := func(ps []modeltest.Program) []bool {
		vs, err := d.Try(ctx, ps, false)
		out := make([]bool, len(ps))
		if err != nil {
			return out
		}
		for i, v := range vs {
			out[i] = same(v)
		}
		return out
	}
	again := dv.Program.WithKey(dv.Program.Key + "~0")
	if !test([]modeltest.Program{again})[0] {
		dv.Diffs = append(dv.Diffs, modeltest.Diff{Msg: "(did not diverge the same way when run again without faults: not shrunk)"})
		return 1
	}
	minimal, n := modeltest.Shrink(again, h.o.ShrinkTries, 8, test)
	if vs, err := d.Try(ctx, []modeltest.Program{minimal.WithKey(minimal.Key + "m")}, false); err == nil && same(vs[0]) {
		dv.Minimal, dv.Diffs, dv.Engine, dv.Model = minimal, vs[0].Diffs, vs[0].Engine, vs[0].Model
	}
	h.logf("model: shrank %s to %d ops in %d runs", dv.Program.Key, countOps(dv.Minimal.Ops), n)
	return n + 2
}

// forks forks the ended runs of the forkable programs and checks each
// fork against the model (driver.Forks).
func (h *harness) forks(ctx context.Context, d *driver.Driver, ps []modeltest.Program, ids []uuid.UUID, mr *ModelReport, rep *Report) {
	began := time.Now()
	fvs, err := d.Forks(ctx, ps, ids, h.o.Seed)
	if err != nil {
		rep.add(VHarness, "model: forks: %v", err)
		return
	}
	mr.Forks = len(fvs)
	for _, fv := range fvs {
		if !fv.Verdict.Diverges() {
			continue
		}
		mr.ForkDivergences++
		rep.add(VModel, "%s", describeAfter(fmt.Sprintf("fork of %s from %q", ps[fv.Index].Key, fv.Step), ps[fv.Index], fv.Verdict))
	}
	h.logf("model: %d forks checked in %.1f s, %d diverge", len(fvs), time.Since(began).Seconds(), mr.ForkDivergences)
}

// describeAfter describes a divergence of what the harness did with a
// program's run once it ended (what), as a violation's message.
func describeAfter(what string, p modeltest.Program, v modeltest.Verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: model %s; engine %s", what, v.Model, v.Engine)
	for _, x := range v.Diffs {
		fmt.Fprintf(&b, "\n  - %s", x)
	}
	fmt.Fprintf(&b, "\n  program: %s", p)
	return b.String()
}

// reuses starts programs again under id reuse policies and checks each
// outcome against the model (driver.Reuses).
func (h *harness) reuses(ctx context.Context, d *driver.Driver, ps []modeltest.Program, ids []uuid.UUID, mr *ModelReport, rep *Report) {
	began := time.Now()
	rvs, err := d.Reuses(ctx, ps, ids, h.o.Seed)
	if err != nil {
		rep.add(VHarness, "model: id reuse: %v", err)
		return
	}
	mr.Reuses = len(rvs)
	for _, rv := range rvs {
		if rv.Started {
			mr.ReuseStarted++
		}
		if !rv.Verdict.Diverges() {
			continue
		}
		mr.ReuseDivergences++
		rep.add(VModel, "%s", describeAfter(fmt.Sprintf("start of %s again under id reuse policy %s", ps[rv.Index].Key, rv.Policy), ps[rv.Index], rv.Verdict))
	}
	h.logf("model: %d starts under id reuse policies checked in %.1f s (%d started a run), %d diverge",
		len(rvs), time.Since(began).Seconds(), mr.ReuseStarted, mr.ReuseDivergences)
}

// pauses starts programs again, pauses and resumes their runs, and checks
// each against the model (driver.Pauses).
func (h *harness) pauses(ctx context.Context, d *driver.Driver, ps []modeltest.Program, mr *ModelReport, rep *Report) {
	began := time.Now()
	pvs, err := d.Pauses(ctx, ps, h.o.Seed)
	if err != nil {
		rep.add(VHarness, "model: pauses: %v", err)
		return
	}
	mr.Pauses = len(pvs)
	for _, pv := range pvs {
		if pv.Paused {
			mr.PausedLive++
		}
		if !pv.Verdict.Diverges() {
			continue
		}
		mr.PauseDivergences++
		rep.add(VModel, "%s", describeAfter(fmt.Sprintf("pause and resume of %s", ps[pv.Index].Key), ps[pv.Index], pv.Verdict))
	}
	h.logf("model: %d runs paused and resumed checked in %.1f s (%d paused live), %d diverge",
		len(pvs), time.Since(began).Seconds(), mr.PausedLive, mr.PauseDivergences)
}

// scenarios plays the operator scenarios (pauses, resumes, queries over
// search attributes, batches) and checks each against the model
// (driver.Scenarios).
func (h *harness) scenarios(ctx context.Context, d *driver.Driver, mr *ModelReport, rep *Report) {
	began := time.Now()
	svs, err := d.Scenarios(ctx, h.o.Seed, h.o.Scenarios)
	if err != nil {
		rep.add(VHarness, "model: operator scenarios: %v", err)
	}
	mr.Scenarios = len(svs)
	for _, sv := range svs {
		mr.ScenarioActs += sv.Acts
		mr.Batches += sv.Batches
		if len(sv.Diffs) == 0 {
			continue
		}
		mr.ScenarioDivergences++
		var acts []string
		for i, a := range sv.Scenario.Acts {
			acts = append(acts, fmt.Sprintf("%d %s", i+1, a))
		}
		var groups []string
		for i, r := range sv.Scenario.Runs {
			groups = append(groups, fmt.Sprintf("r%d:%s", i, strings.Join(r.Groups, ",")))
		}
		rep.add(VModel, "operator scenario %s:\n  - %s\n  runs: %s\n  acts: %s", sv.Scenario.Name, strings.Join(sv.Diffs, "\n  - "),
			strings.Join(groups, " "), strings.Join(acts, "; "))
	}
	h.logf("model: %d operator scenarios (%d acts, %d batches) checked in %.1f s, %d diverge",
		mr.Scenarios, mr.ScenarioActs, mr.Batches, time.Since(began).Seconds(), mr.ScenarioDivergences)
}

// countOpKinds adds the ops of ops (and of their children's programs) to
// kinds, by kind, and the detached children to policies, by policy.
func countOpKinds(ops []modeltest.Op, kinds, policies map[string]int) {
	modeltest.Walk(ops, func(op *modeltest.Op) {
		kinds[op.Kind]++
		for _, c := range op.Children {
			if op.Kind == modeltest.KindDetach {
				policies[c.Policy]++
			}
			countOpKinds(c.Program.Ops, kinds, policies)
		}
	})
}

func countOps(ops []modeltest.Op) int {
	n := 0
	modeltest.Walk(ops, func(op *modeltest.Op) {
		n++
		for _, c := range op.Children {
			n += countOps(c.Program.Ops)
		}
	})
	return n
}

// launchWithFaults starts the programs in batches over the first 80% of
// the chaos phase while workers are killed every KillEvery and the other
// faults happen, and returns when every program was started and the
// faults are over.
func (h *harness) launchWithFaults(ctx context.Context, d *driver.Driver, ps []modeltest.Program) ([]uuid.UUID, error) {
	o := h.o
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	end := h.t0().Add(o.Duration)
	var wg sync.WaitGroup
	wg.Add(2)
	killRng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	go func() { defer wg.Done(); h.killWorkers(ctx, killRng, end) }()
	go func() { defer wg.Done(); h.faults(ctx) }()
	span := o.Duration * 8 / 10
	const batch = 50
	var ids []uuid.UUID
	var err error
	for i := 0; i < len(ps); i += batch {
		n := min(batch, len(ps)-i)
		var got []uuid.UUID
		got, err = d.Launch(ctx, ps[i:i+n])
		ids = append(ids, got...)
		if err != nil {
			break
		}
		next := h.t0().Add(time.Duration(float64(span) * float64(i+n) / float64(len(ps))))
		_ = sleepCtx(ctx, time.Until(next))
	}
	wg.Wait()
	if err != nil {
		return ids, fmt.Errorf("starting programs: %w", err)
	}
	return ids, nil
}
