package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testflows"
)

// The invariant checker. It is a pure function of what the database holds
// at the end (runs, every step attempt, the schedule's fired instances),
// what the workers logged outside the database (Record), and what the
// harness did (worker kills, the Postgres outage): Check below.

// RunData is a run as the database holds it at the end, with every
// attempt of every step.
type RunData struct {
	ID             uuid.UUID
	ExternalID     string
	Status         store.RunStatus
	Error          string
	FinishedAt     *time.Time
	ScheduleID     *uuid.UUID
	ScheduleFireAt *time.Time
	Input          testflows.ChaosInput
	Output         []byte
	Steps          []store.Step
}

// Kill is a worker process SIGKILLed at At.
type Kill struct {
	PID int
	At  time.Time
}

// Window is a span of time, ends included.
type Window struct {
	From, To time.Time
}

func (w Window) contains(t time.Time) bool { return !t.Before(w.From) && !t.After(w.To) }

// ScheduleData is the every-second schedule: every whole second in
// (From, To] is a fire time that must fire exactly once, unless Postgres
// was down then.
type ScheduleData struct {
	ID       uuid.UUID
	From, To time.Time
	Fires    []store.ScheduleFire
}

// Input is everything Check looks at.
type Input struct {
	// ExternalIDs are the runs the driver started; each must complete.
	ExternalIDs []string
	// Runs are every run of the namespace (the driver's and the
	// schedule's).
	Runs    []RunData
	Records []Record
	// Kills are the worker SIGKILLs.
	Kills []Kill
	// Outages are when Postgres was down.
	Outages  []Window
	Schedule *ScheduleData
	// MaxRecovery, if positive, bounds the recovery time: a worker kill
	// whose runs took longer to run again is a violation.
	MaxRecovery time.Duration
	// Harness lists problems the harness itself saw (a process that
	// exited on its own, an event that could not be sent…); each is a
	// violation.
	Harness []string
}

// KillStat is what one worker kill held and how long its runs took to
// run again.
type KillStat struct {
	Kill
	Held int
	Max  time.Duration
}

// Violation is one broken invariant.
type Violation struct {
	Kind string
	Msg  string
}

// Violation kinds, in the order the report prints them.
const (
	VLost            = "lost"             // a run did not complete
	VDuplicate       = "duplicate-result" // a step has two completed attempts or two latest rows
	VMissingResult   = "missing-result"   // a completed run's step has no latest completed result
	VUnlogged        = "unlogged-result"  // a recorded step result matches no logged execution
	VStaleLease      = "stale-lease"      // writes of two executions of one run overlap in time
	VAckedNotApplied = "acked-not-recorded"
	VReplay          = "replay-divergence" // the final execution saw other results than the database holds
	VAfterFinish     = "step-after-finish"
	VWokeEarly       = "woke-early"
	VNotRedelivered  = "not-redelivered"
	VSlowRecovery    = "slow-recovery"
	VScheduleDup     = "schedule-duplicate"
	VScheduleMissed  = "schedule-missed"
	VHarness         = "harness"
)

var kindOrder = []string{VModel, VLost, VDuplicate, VMissingResult, VUnlogged, VStaleLease, VAckedNotApplied, VReplay,
	VAfterFinish, VWokeEarly, VNotRedelivered, VSlowRecovery, VScheduleDup, VScheduleMissed, VHarness}

// Report is the outcome of Check.
type Report struct {
	// Runs is the number of runs the driver started; Completed of them
	// completed and Lost did not (or were never created).
	Runs, Completed, Lost int
	// DuplicateResults counts (run, step) pairs with more than one
	// completed attempt or more than one latest attempt.
	DuplicateResults int
	// DuplicateStarts counts extra runs under one external id (a start
	// retried after an ambiguous commit whose run had already finished).
	DuplicateStarts int
	// StepResults is the number of completed step attempts checked.
	StepResults int
	Executions  int
	// Recoveries are, per run held by a killed worker, the time from the
	// kill to the next execution of the run.
	Recoveries  []time.Duration
	MaxRecovery time.Duration
	// KillStats are, per worker kill, the runs it held and their slowest
	// recovery.
	KillStats []KillStat
	// ScheduleTimes were expected, ScheduleFired of them fired,
	// ScheduleExcused were in a Postgres outage and did not fire;
	// ScheduleRuns fired runs, ScheduleCompleted of them completed.
	ScheduleTimes, ScheduleFired, ScheduleExcused, ScheduleRuns, ScheduleCompleted int
	Violations                                                                     []Violation
	// Model is the outcome of a model run (Options.Model); the fields
	// above are then unused.
	Model *ModelReport
}

func (r *Report) add(kind, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Msg: fmt.Sprintf(format, args...)})
}

// Failed reports whether any invariant was violated.
func (r *Report) Failed() bool { return len(r.Violations) > 0 }

// Summary is the report's first line.
func (r *Report) Summary() string {
	if m := r.Model; m != nil {
		return fmt.Sprintf("chaos --model: %d programs (seed %d, %d regression cases), %d completed, %d failed, %d cancelled, %d divergences, %d forks (%d diverge), %d id reuse starts (%d diverge), %d worker kills",
			m.Programs, m.Seed, m.Regressions, m.Completed, m.Failed, m.Cancelled, len(m.Divergences), m.Forks, m.ForkDivergences, m.Reuses, m.ReuseDivergences, m.Kills)
	}
	return fmt.Sprintf("chaos: %d runs, %d completed, %d lost, %d duplicate results, max recovery %d ms",
		r.Runs, r.Completed, r.Lost, r.DuplicateResults, r.MaxRecovery.Milliseconds())
}

// maxPerKind bounds the violations printed per kind.
const maxPerKind = 20

// Write prints the summary line and then every violation (at most
// maxPerKind of each kind, and how many more).
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	b.WriteString(r.Summary())
	b.WriteByte('\n')
	byKind := map[string][]Violation{}
	for _, v := range r.Violations {
		byKind[v.Kind] = append(byKind[v.Kind], v)
	}
	kinds := append([]string(nil), kindOrder...)
	for k := range byKind {
		if !contains(kindOrder, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		vs := byKind[k]
		for i, v := range vs {
			if i == maxPerKind {
				fmt.Fprintf(&b, "violation %s: … and %d more\n", k, len(vs)-maxPerKind)
				break
			}
			fmt.Fprintf(&b, "violation %s: %s\n", k, v.Msg)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Details are informative lines (not part of the summary).
func (r *Report) Details() []string {
	if m := r.Model; m != nil {
		out := []string{fmt.Sprintf("model: %d child runs, %d step invocations; runs took %.1f s; %d runs spent shrinking",
			m.ChildRuns, m.Invocations, m.RunPhase.Seconds(), m.ShrinkRuns)}
		if m.Kills > 0 || m.LostRuns+m.CappedRuns+m.PastDeadline > 0 {
			out = append(out, fmt.Sprintf("model: ends crashes decided: %d runs failed by a crash with their attempts spent, "+
				"%d failed by their workflow with recoveries among their spent attempts, %d programs delayed past their deadline",
				m.LostRuns, m.CappedRuns, m.PastDeadline))
		}
		if len(m.Ops) > 0 {
			out = append(out, "model ops: "+countsString(m.Ops)+"; detached children: "+countsString(m.Policies))
		}
		if m.Pauses > 0 {
			out = append(out, fmt.Sprintf("model: %d runs paused and resumed (%d before they ended), %d diverge", m.Pauses, m.PausedLive, m.PauseDivergences))
		}
		if m.Scenarios > 0 {
			out = append(out, fmt.Sprintf("model: %d operator scenarios, %d acts, %d batches, %d diverge",
				m.Scenarios, m.ScenarioActs, m.Batches, m.ScenarioDivergences))
		}
		if len(m.KeyPeaks) > 0 {
			out = append(out, "model: most executions at once per concurrency key: "+countsString(m.KeyPeaks))
		}
		return out
	}
	out := []string{
		fmt.Sprintf("checked %d step results, %d executions; %d duplicate starts", r.StepResults, r.Executions, r.DuplicateStarts),
		fmt.Sprintf("schedule: %d fire times expected, %d fired, %d skipped in the Postgres outage; %d fired runs, %d completed",
			r.ScheduleTimes, r.ScheduleFired, r.ScheduleExcused, r.ScheduleRuns, r.ScheduleCompleted),
	}
	if n := len(r.Recoveries); n > 0 {
		s := append([]time.Duration(nil), r.Recoveries...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		out = append(out, fmt.Sprintf("recovery (worker kill -> next execution) of %d runs: p50 %d ms, p99 %d ms, max %d ms",
			n, s[n/2].Milliseconds(), s[min(n-1, n*99/100)].Milliseconds(), s[n-1].Milliseconds()))
	}
	if len(r.KillStats) > 0 {
		var ks []string
		for _, k := range r.KillStats {
			ks = append(ks, fmt.Sprintf("%s pid %d: %d runs, max %d ms", k.At.Format("15:04:05.0"), k.PID, k.Held, k.Max.Milliseconds()))
		}
		out = append(out, "worker kills: "+strings.Join(ks, "; "))
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// exec is one execution of a run: a call of the workflow function in one
// process, from its X record to its Y record (if it was not killed).
type execution struct {
	id    string
	run   uuid.UUID
	pid   int
	start time.Time
	end   *time.Time
	// steps: B and E records of the execution, by step id.
	began, ended map[string][]Record
}

type index struct {
	execs map[string]*execution
	// byRun: the run's executions, oldest first.
	byRun map[uuid.UUID][]*execution
	// stepRecs: B and E records by run.
	stepRecs map[uuid.UUID][]Record
}

func buildIndex(recs []Record) *index {
	ix := &index{execs: map[string]*execution{}, byRun: map[uuid.UUID][]*execution{}, stepRecs: map[uuid.UUID][]Record{}}
	get := func(r Record) *execution {
		e := ix.execs[r.Exec]
		if e == nil {
			e = &execution{id: r.Exec, run: r.Run, pid: r.PID, began: map[string][]Record{}, ended: map[string][]Record{}}
			ix.execs[r.Exec] = e
		}
		return e
	}
	for _, r := range recs {
		e := get(r)
		switch r.Kind {
		case testflows.ChaosExecBegin:
			e.start = r.At
			ix.byRun[r.Run] = append(ix.byRun[r.Run], e)
		case testflows.ChaosExecEnd:
			at := r.At
			e.end = &at
		case testflows.ChaosStepBegin:
			e.began[r.Step] = append(e.began[r.Step], r)
			ix.stepRecs[r.Run] = append(ix.stepRecs[r.Run], r)
		case testflows.ChaosStepEnd:
			e.ended[r.Step] = append(e.ended[r.Step], r)
			ix.stepRecs[r.Run] = append(ix.stepRecs[r.Run], r)
		}
	}
	for _, es := range ix.byRun {
		sort.Slice(es, func(i, j int) bool { return es[i].start.Before(es[j].start) })
	}
	return ix
}

func hasRecord(rs []Record, attempt, pid int) bool {
	for _, r := range rs {
		if r.Attempt == attempt && r.PID == pid {
			return true
		}
	}
	return false
}

// Check checks every invariant:
//
//   - every run the driver started, and every run the schedule fired,
//     completed (VLost);
//   - every step of a completed run has exactly one latest attempt, and it
//     is completed; no step has two completed attempts (VDuplicate,
//     VMissingResult);
//   - every recorded FUNCTION step result names (in its output) the
//     execution, process and attempt that produced it, and that execution
//     logged beginning and finishing that attempt of that step
//     (VUnlogged);
//   - no report from a stale lease was applied (VStaleLease). Workers do
//     not see lease tokens, so this is checked through time, on one clock
//     (every process runs on this machine): a step result is written under
//     a FOR SHARE lease check by a transaction that started at the row's
//     created_at, and a re-claim of the run (a new lease) must wait for, or
//     skip, that lock, so it commits after created_at, and the execution
//     it delivers starts (logs X) later still. So if an execution e1 wrote
//     a result at created_at T and another execution e2 of the run that
//     also got a write applied started in between (start(e1) < start(e2) <
//     T), then either e1's write came after e2's newer lease (stale) or,
//     if e2's lease was the older one, every write of e2 came after e1's
//     newer lease (stale). Either way a stale write was applied;
//   - an execution that finished a step and went on to a later step had
//     its result recorded (VAckedNotApplied): a report acknowledged but not
//     applied would let the run go on with a value the database does not
//     hold; and the execution that completed the run saw, for every step,
//     the result the database holds (VReplay);
//   - no step function began or finished after its run finished
//     (VAfterFinish: log time versus the run's finished_at);
//   - a run that slept did not run the step after the sleep before the
//     recorded wake time (VWokeEarly);
//   - every run held by a worker when it was killed ran again
//     (VNotRedelivered); the time from the kill to that next execution is
//     the recovery time, bounded by MaxRecovery if set (VSlowRecovery);
//   - each fire time of the schedule fired at most once (VScheduleDup),
//     and every one outside a Postgres outage fired (VScheduleMissed).
func Check(in Input) *Report {
	rep := &Report{Runs: len(in.ExternalIDs)}
	ix := buildIndex(in.Records)
	rep.Executions = len(ix.execs)
	for _, h := range in.Harness {
		rep.add(VHarness, "%s", h)
	}

	byExt := map[string][]*RunData{}
	runs := map[uuid.UUID]*RunData{}
	for i := range in.Runs {
		r := &in.Runs[i]
		runs[r.ID] = r
		if r.ScheduleID == nil {
			byExt[r.ExternalID] = append(byExt[r.ExternalID], r)
		}
	}
	expected := map[string]bool{}
	for _, ext := range in.ExternalIDs {
		expected[ext] = true
		rs := byExt[ext]
		if len(rs) == 0 {
			rep.Lost++
			rep.add(VLost, "run %s was never created", ext)
			continue
		}
		rep.DuplicateStarts += len(rs) - 1
		ok := true
		for _, r := range rs {
			if r.Status != store.StatusCompleted {
				ok = false
				rep.add(VLost, "run %s (%s) is %s%s", r.ID, ext, r.Status, errSuffix(r.Error))
			}
		}
		if ok {
			rep.Completed++
		} else {
			rep.Lost++
		}
	}
	for i := range in.Runs {
		r := &in.Runs[i]
		if r.ScheduleID != nil {
			rep.ScheduleRuns++
			if r.Status == store.StatusCompleted {
				rep.ScheduleCompleted++
			} else {
				rep.add(VLost, "scheduled run %s (fire time %s) is %s%s", r.ID, fmtTime(r.ScheduleFireAt), r.Status, errSuffix(r.Error))
			}
		} else if !expected[r.ExternalID] {
			// Not started by the driver: it must still complete.
			if r.Status != store.StatusCompleted {
				rep.add(VLost, "run %s (external id %q, not the driver's) is %s%s", r.ID, r.ExternalID, r.Status, errSuffix(r.Error))
			}
		}
		checkRun(rep, ix, r)
	}
	checkRecovery(rep, ix, runs, in.Kills, in.MaxRecovery)
	if in.Schedule != nil {
		checkSchedule(rep, in.Schedule, in.Outages)
	}
	sort.SliceStable(rep.Violations, func(i, j int) bool {
		return kindRank(rep.Violations[i].Kind) < kindRank(rep.Violations[j].Kind)
	})
	return rep
}

func kindRank(k string) int {
	for i, x := range kindOrder {
		if x == k {
			return i
		}
	}
	return len(kindOrder)
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	if len(e) > 200 {
		e = e[:200] + "…"
	}
	return ": " + e
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("15:04:05.000000")
}

// expectedSteps are the step ids a completed run of the input has.
func expectedSteps(in testflows.ChaosInput) []string {
	n := in.Steps
	if n <= 0 {
		n = 5
	}
	var ids []string
	for k := 1; k <= n; k++ {
		ids = append(ids, testflows.ChaosStepID(k))
	}
	if in.SleepMS > 0 && n >= 2 {
		ids = append(ids, "nap")
	}
	if in.Event && n >= 3 {
		ids = append(ids, "event:"+testflows.ChaosEventName)
	}
	return ids
}

// stepIndex is k for step id "s<k>", else 0.
func stepIndex(id string) int {
	if len(id) < 2 || id[0] != 's' {
		return 0
	}
	k := 0
	for _, c := range id[1:] {
		if c < '0' || c > '9' {
			return 0
		}
		k = k*10 + int(c-'0')
	}
	return k
}

// checkRun checks one run's steps against the logs.
func checkRun(rep *Report, ix *index, r *RunData) {
	type agg struct {
		latest, completed []store.Step
	}
	steps := map[string]*agg{}
	for _, s := range r.Steps {
		a := steps[s.StepID]
		if a == nil {
			a = &agg{}
			steps[s.StepID] = a
		}
		if s.IsLatest {
			a.latest = append(a.latest, s)
		}
		if s.Status == store.StepCompleted {
			a.completed = append(a.completed, s)
		}
	}
	for id, a := range steps {
		if len(a.completed) > 1 || len(a.latest) > 1 {
			rep.DuplicateResults++
			var at []string
			for _, s := range a.completed {
				at = append(at, fmt.Sprintf("attempt %d at %s", s.Attempt, fmtTime(&s.CreatedAt)))
			}
			rep.add(VDuplicate, "run %s step %s: %d completed attempts (%s), %d latest", r.ID, id, len(a.completed), strings.Join(at, ", "), len(a.latest))
		}
	}
	if r.Status == store.StatusCompleted {
		for _, id := range expectedSteps(r.Input) {
			a := steps[id]
			switch {
			case a == nil || len(a.latest) == 0:
				rep.add(VMissingResult, "completed run %s has no result for step %s", r.ID, id)
			case a.latest[0].Status != store.StepCompleted:
				rep.add(VMissingResult, "completed run %s: step %s's latest attempt %d is %s", r.ID, id, a.latest[0].Attempt, a.latest[0].Status)
			}
		}
	}

	// The executions whose writes were applied, and what each recorded
	// FUNCTION result says about who produced it.
	type result struct {
		step store.Step
		out  testflows.ChaosStep
	}
	var results []result
	applied := map[string]bool{}
	recorded := map[string]string{} // step id -> exec of its completed result
	for _, s := range r.Steps {
		if s.Kind != store.StepFunction || s.Status != store.StepCompleted {
			continue
		}
		rep.StepResults++
		var out testflows.ChaosStep
		if err := json.Unmarshal(s.Output, &out); err != nil || out.Exec == "" {
			rep.add(VUnlogged, "run %s step %s attempt %d: output %q names no execution", r.ID, s.StepID, s.Attempt, s.Output)
			continue
		}
		results = append(results, result{step: s, out: out})
		applied[out.Exec] = true
		recorded[s.StepID] = out.Exec
		e := ix.execs[out.Exec]
		switch {
		case e == nil || e.run != r.ID:
			rep.add(VUnlogged, "run %s step %s attempt %d: recorded result of execution %s (pid %d) that no worker logged for this run",
				r.ID, s.StepID, s.Attempt, out.Exec, out.PID)
		case out.Attempt != s.Attempt || e.pid != out.PID:
			rep.add(VUnlogged, "run %s step %s: recorded attempt %d holds the result of attempt %d by pid %d (execution %s ran in pid %d)",
				r.ID, s.StepID, s.Attempt, out.Attempt, out.PID, out.Exec, e.pid)
		case !hasRecord(e.began[s.StepID], s.Attempt, out.PID) || !hasRecord(e.ended[s.StepID], s.Attempt, out.PID):
			rep.add(VUnlogged, "run %s step %s attempt %d: execution %s (pid %d) did not log running that attempt", r.ID, s.StepID, s.Attempt, out.Exec, out.PID)
		}
	}
	var final testflows.ChaosOutput
	if r.Status == store.StatusCompleted && len(r.Output) > 0 && json.Unmarshal(r.Output, &final) == nil && final.Exec != "" {
		applied[final.Exec] = true
	}

	// Stale leases: another applied execution started between the writer's
	// start and the write.
	for _, res := range results {
		e1 := ix.execs[res.out.Exec]
		if e1 == nil || e1.start.IsZero() {
			continue
		}
		for _, e2 := range ix.byRun[r.ID] {
			if e2 == e1 || !applied[e2.id] {
				continue
			}
			if e2.start.After(e1.start) && e2.start.Before(res.step.CreatedAt) {
				rep.add(VStaleLease, "run %s step %s attempt %d was written at %s by execution %s (pid %d, started %s), after execution %s (pid %d) of the run started at %s and also got writes applied",
					r.ID, res.step.StepID, res.step.Attempt, fmtTime(&res.step.CreatedAt), e1.id, e1.pid, fmtTime(&e1.start), e2.id, e2.pid, fmtTime(&e2.start))
				break
			}
		}
	}

	// Acknowledged results: an execution that finished step k and began a
	// later step was told k was recorded.
	for _, e := range ix.byRun[r.ID] {
		last := 0
		for id := range e.began {
			last = max(last, stepIndex(id))
		}
		for id := range e.ended {
			k := stepIndex(id)
			if k == 0 || k >= last {
				continue
			}
			if got, ok := recorded[id]; !ok || got != e.id {
				rep.add(VAckedNotApplied, "run %s: execution %s (pid %d) finished step %s and went on to step s%d, but the recorded result is %s",
					r.ID, e.id, e.pid, id, last, orNone(got))
			}
		}
	}
	if final.Exec != "" {
		if e := ix.execs[final.Exec]; e == nil || e.run != r.ID {
			rep.add(VUnlogged, "run %s completed by execution %s that no worker logged for this run", r.ID, final.Exec)
		}
		for k, seen := range final.Seen {
			id := testflows.ChaosStepID(k + 1)
			if got := recorded[id]; got != seen {
				rep.add(VReplay, "run %s: the completing execution %s saw step %s's result from execution %s, the database holds %s",
					r.ID, final.Exec, id, seen, orNone(got))
			}
		}
	}

	// Steps after the run finished. The end of a body begun before is
	// not one: a worker frozen mid-step runs the body on when it resumes
	// (no lease reaches into running code), and its report is refused.
	if r.FinishedAt != nil {
		n := 0
		var first Record
		begunBefore := map[string]bool{}
		for _, rec := range ix.stepRecs[r.ID] {
			if rec.Kind == testflows.ChaosStepBegin && !rec.At.After(*r.FinishedAt) {
				begunBefore[bodyKey(rec)] = true
			}
		}
		for _, rec := range ix.stepRecs[r.ID] {
			if rec.Kind == testflows.ChaosStepEnd && begunBefore[bodyKey(rec)] {
				continue
			}
			if rec.At.After(*r.FinishedAt) {
				if n == 0 || rec.At.Before(first.At) {
					first = rec
				}
				n++
			}
		}
		if n > 0 {
			rep.add(VAfterFinish, "run %s finished at %s; %d step records are later, the first %c %s attempt %d by pid %d at %s (+%d ms)",
				r.ID, fmtTime(r.FinishedAt), n, first.Kind, first.Step, first.Attempt, first.PID, fmtTime(&first.At), first.At.Sub(*r.FinishedAt).Milliseconds())
		}
	}

	// Woke early: step 3 began before the nap's recorded wake time.
	if a := steps["nap"]; a != nil && len(a.completed) > 0 {
		var wake time.Time
		if json.Unmarshal(a.completed[0].Output, &wake) == nil {
			for _, rec := range ix.stepRecs[r.ID] {
				if rec.Kind == testflows.ChaosStepBegin && stepIndex(rec.Step) >= 3 && rec.At.Before(wake) {
					rep.add(VWokeEarly, "run %s: step %s began at %s, %d ms before the nap's wake time %s",
						r.ID, rec.Step, fmtTime(&rec.At), wake.Sub(rec.At).Milliseconds(), fmtTime(&wake))
					break
				}
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// checkRecovery measures, for every run a killed worker held (an execution
// in that process begun before the kill and not ended, and the run's
// latest execution then), the time to the run's next execution.
func checkRecovery(rep *Report, ix *index, runs map[uuid.UUID]*RunData, kills []Kill, bound time.Duration) {
	for _, k := range kills {
		ks := KillStat{Kill: k}
		for _, e := range ix.execs {
			if e.pid != k.PID || e.start.IsZero() || !e.start.Before(k.At) || (e.end != nil && !e.end.After(k.At)) {
				continue
			}
			var next *execution
			latest := true
			for _, o := range ix.byRun[e.run] {
				if o == e {
					continue
				}
				if o.start.After(e.start) && o.start.Before(k.At) {
					latest = false
					break
				}
				if o.start.After(k.At) && o.pid != k.PID && (next == nil || o.start.Before(next.start)) {
					next = o
				}
			}
			if !latest {
				continue
			}
			ks.Held++
			if next != nil {
				d := next.start.Sub(k.At)
				rep.Recoveries = append(rep.Recoveries, d)
				rep.MaxRecovery = max(rep.MaxRecovery, d)
				ks.Max = max(ks.Max, d)
				continue
			}
			if r := runs[e.run]; r != nil && r.FinishedAt != nil && r.FinishedAt.Before(k.At) {
				continue // finished before the kill: the execution had not unwound yet
			}
			rep.add(VNotRedelivered, "run %s was executing in worker pid %d when it was killed at %s and never ran again", e.run, k.PID, fmtTime(&k.At))
		}
		if bound > 0 && ks.Max > bound {
			rep.add(VSlowRecovery, "worker pid %d killed at %s held %d runs; the slowest ran again after %d ms (bound %d ms)",
				k.PID, fmtTime(&k.At), ks.Held, ks.Max.Milliseconds(), bound.Milliseconds())
		}
		rep.KillStats = append(rep.KillStats, ks)
	}
}

// checkSchedule checks the schedule's fire times.
func checkSchedule(rep *Report, sd *ScheduleData, outages []Window) {
	fired := map[int64][]uuid.UUID{}
	for _, f := range sd.Fires {
		if f.ScheduleID != sd.ID {
			continue
		}
		fired[f.FireAt.UnixMicro()] = append(fired[f.FireAt.UnixMicro()], f.RunID)
	}
	for at, ids := range fired {
		if len(ids) > 1 {
			t := time.UnixMicro(at)
			rep.add(VScheduleDup, "fire time %s fired %d runs: %v", fmtTime(&t), len(ids), ids)
		}
	}
	for t := sd.From.Truncate(time.Second).Add(time.Second); !t.After(sd.To); t = t.Add(time.Second) {
		rep.ScheduleTimes++
		if len(fired[t.UnixMicro()]) > 0 {
			rep.ScheduleFired++
			continue
		}
		excused := false
		for _, w := range outages {
			if w.contains(t) {
				excused = true
				break
			}
		}
		if excused {
			rep.ScheduleExcused++
			continue
		}
		rep.add(VScheduleMissed, "fire time %s did not fire (outside the Postgres outage)", fmtTime(&t))
	}
}

// countsString prints counts by name, names sorted.
func countsString(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

// bodyKey names one run of a step body: the execution, process, step and
// attempt its begin and end records share.
func bodyKey(rec Record) string {
	return fmt.Sprintf("%s %d %s %d", rec.Exec, rec.PID, rec.Step, rec.Attempt)
}
