package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testflows"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// world builds synthetic runs, step rows and worker log records.
type world struct {
	in Input
}

// exec logs an execution of run in pid beginning at ms (X), and returns
// its id.
func (w *world) exec(run uuid.UUID, id string, pid, ms int) string {
	w.rec(testflows.ChaosExecBegin, run, id, pid, "", 1, ms)
	return id
}

func (w *world) rec(kind byte, run uuid.UUID, exec string, pid int, step string, attempt, ms int) {
	line := testflows.FormatChaosRecord(kind, at(ms), run.String(), exec, pid, step, attempt)
	r, err := ParseRecord(line)
	if err != nil {
		panic(err)
	}
	w.in.Records = append(w.in.Records, r)
}

// step logs step k (attempt) run by exec in pid from ms to ms+5 and, if
// recordMS >= 0, records its result at recordMS.
func (w *world) step(rd *RunData, exec string, pid, k, attempt, ms, recordMS int) {
	id := testflows.ChaosStepID(k)
	w.rec(testflows.ChaosStepBegin, rd.ID, exec, pid, id, attempt, ms)
	w.rec(testflows.ChaosStepEnd, rd.ID, exec, pid, id, attempt, ms+5)
	if recordMS >= 0 {
		rd.Steps = append(rd.Steps, fnStep(rd.ID, id, attempt, exec, pid, recordMS))
	}
}

func fnStep(run uuid.UUID, id string, attempt int, exec string, pid, ms int) store.Step {
	out, _ := json.Marshal(testflows.ChaosStep{Exec: exec, PID: pid, Attempt: attempt})
	return store.Step{RunID: run, StepID: id, Attempt: attempt, Kind: store.StepFunction, Status: store.StepCompleted,
		IsLatest: true, Output: out, CreatedAt: at(ms)}
}

// cleanRun is a completed run of 5 steps executed by one execution in pid
// from ms on, 10 ms a step.
func (w *world) cleanRun(n, pid, ms int) *RunData {
	rd := &RunData{ID: uuid.New(), ExternalID: externalID(n), Status: store.StatusCompleted, Input: testflows.ChaosInput{N: n, Steps: 5}}
	e := w.exec(rd.ID, fmt.Sprintf("e%d", n), pid, ms)
	var seen []string
	for k := 1; k <= 5; k++ {
		w.step(rd, e, pid, k, 1, ms+10*k, ms+10*k+6)
		seen = append(seen, e)
	}
	w.rec(testflows.ChaosExecEnd, rd.ID, e, pid, "", 0, ms+60)
	fin := at(ms + 61)
	rd.FinishedAt = &fin
	rd.Output, _ = json.Marshal(testflows.ChaosOutput{Exec: e, Seen: seen})
	w.in.ExternalIDs = append(w.in.ExternalIDs, rd.ExternalID)
	return rd
}

func (w *world) add(rds ...*RunData) {
	for _, rd := range rds {
		w.in.Runs = append(w.in.Runs, *rd)
	}
}

func kinds(r *Report) map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Kind]++
	}
	return m
}

func TestRecordRoundTrip(t *testing.T) {
	run := uuid.New()
	for _, line := range []string{
		testflows.FormatChaosRecord(testflows.ChaosExecBegin, at(1), run.String(), "abc", 42, "", 3),
		testflows.FormatChaosRecord(testflows.ChaosStepEnd, at(2), run.String(), "abc", 42, "s4", 2),
	} {
		r, err := ParseRecord(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.Run != run || r.Exec != "abc" || r.PID != 42 {
			t.Fatalf("parsed %+v from %q", r, line)
		}
	}
	recs, torn, err := ReadRecords(strings.NewReader(testflows.FormatChaosRecord('B', at(3), run.String(), "x", 1, "s1", 1) + "B 12 torn"))
	if err != nil || len(recs) != 1 || torn != 1 {
		t.Fatalf("ReadRecords: %d records, %d torn, %v", len(recs), torn, err)
	}
}

func TestCheckClean(t *testing.T) {
	w := &world{}
	w.add(w.cleanRun(1, 100, 0), w.cleanRun(2, 100, 5))

	// A run recovered after its worker (pid 200) was killed at 1030 ms,
	// in the middle of step 3: the next execution (pid 300) replays steps
	// 1 and 2 and runs step 3 again, as attempt 1 since none was recorded.
	rd := &RunData{ID: uuid.New(), ExternalID: externalID(3), Status: store.StatusCompleted, Input: testflows.ChaosInput{N: 3, Steps: 5}}
	e1 := w.exec(rd.ID, "k1", 200, 1000)
	w.step(rd, e1, 200, 1, 1, 1005, 1011)
	w.step(rd, e1, 200, 2, 1, 1015, 1021)
	w.rec(testflows.ChaosStepBegin, rd.ID, e1, 200, "s3", 1, 1025)
	w.in.Kills = append(w.in.Kills, Kill{PID: 200, At: at(1030)})
	e2 := w.exec(rd.ID, "k2", 300, 3500)
	for k := 3; k <= 5; k++ {
		w.step(rd, e2, 300, k, 1, 3500+10*k, 3500+10*k+6)
	}
	w.rec(testflows.ChaosExecEnd, rd.ID, e2, 300, "", 0, 3560)
	fin := at(3561)
	rd.FinishedAt = &fin
	rd.Output, _ = json.Marshal(testflows.ChaosOutput{Exec: e2, Seen: []string{e1, e1, e2, e2, e2}})
	w.in.ExternalIDs = append(w.in.ExternalIDs, rd.ExternalID)
	w.add(rd)

	sid := uuid.New()
	w.in.Schedule = &ScheduleData{ID: sid, From: at(0), To: at(3000), Fires: []store.ScheduleFire{
		{ScheduleID: sid, RunID: uuid.New(), FireAt: t0.Add(time.Second)},
		{ScheduleID: sid, RunID: uuid.New(), FireAt: t0.Add(3 * time.Second)},
	}}
	// 2 s was in the Postgres outage.
	w.in.Outages = []Window{{From: at(1900), To: at(2100)}}

	rep := Check(w.in)
	if rep.Failed() {
		var b bytes.Buffer
		_ = rep.Write(&b)
		t.Fatalf("violations in a clean history:\n%s", b.String())
	}
	if rep.Runs != 3 || rep.Completed != 3 || rep.Lost != 0 || rep.DuplicateResults != 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.MaxRecovery != 2470*time.Millisecond || len(rep.Recoveries) != 1 {
		t.Fatalf("recovery %v (%d), want 2470ms (1)", rep.MaxRecovery, len(rep.Recoveries))
	}
	if rep.ScheduleTimes != 3 || rep.ScheduleFired != 2 || rep.ScheduleExcused != 1 {
		t.Fatalf("schedule times %d fired %d excused %d", rep.ScheduleTimes, rep.ScheduleFired, rep.ScheduleExcused)
	}
	want := "chaos: 3 runs, 3 completed, 0 lost, 0 duplicate results, max recovery 2470 ms\n"
	var b bytes.Buffer
	if err := rep.Write(&b); err != nil || b.String() != want {
		t.Fatalf("Write = %q, %v; want %q", b.String(), err, want)
	}

	// The same history with recovery bounded below what it took.
	w.in.MaxRecovery = 2 * time.Second
	if got := kinds(Check(w.in)); got[VSlowRecovery] != 1 || len(got) != 1 {
		t.Fatalf("with --max-recovery 2s: violations %v, want one slow-recovery", got)
	}
}

func TestCheckViolations(t *testing.T) {
	w := &world{}

	// Lost: run 1 failed, run 2 was never created.
	failed := w.cleanRun(1, 100, 0)
	failed.Status, failed.Error = store.StatusFailed, "boom"
	w.add(failed)
	w.in.ExternalIDs = append(w.in.ExternalIDs, externalID(2))

	// Duplicate: step s2 of run 3 has two completed attempts.
	dup := w.cleanRun(3, 100, 100)
	second := fnStep(dup.ID, "s2", 2, "e3", 100, 150)
	dup.Steps[1].IsLatest = false
	dup.Steps = append(dup.Steps, second)
	w.rec(testflows.ChaosStepBegin, dup.ID, "e3", 100, "s2", 2, 140)
	w.rec(testflows.ChaosStepEnd, dup.ID, "e3", 100, "s2", 2, 145)
	w.add(dup)

	// Unlogged: s4 of run 4 names an execution no worker logged.
	unl := w.cleanRun(4, 100, 200)
	unl.Steps[3] = fnStep(unl.ID, "s4", 1, "ghost", 999, 246)
	w.add(unl)

	// Stale lease: execution a (pid 1) of run 5 wrote s1; execution b
	// (pid 2) started at 320 and wrote s2..s5; a's write of s1 is recorded
	// at 330, after b started.
	st := &RunData{ID: uuid.New(), ExternalID: externalID(5), Status: store.StatusCompleted, Input: testflows.ChaosInput{N: 5, Steps: 5}}
	a := w.exec(st.ID, "a5", 1, 300)
	b := w.exec(st.ID, "b5", 2, 320)
	w.step(st, a, 1, 1, 1, 305, 330)
	w.rec(testflows.ChaosStepBegin, st.ID, b, 2, "s1", 1, 321) // b replays nothing: s1 was not recorded when it was delivered
	for k := 2; k <= 5; k++ {
		w.step(st, b, 2, k, 1, 320+10*k, 320+10*k+6)
	}
	fin := at(400)
	st.FinishedAt = &fin
	st.Output, _ = json.Marshal(testflows.ChaosOutput{Exec: b, Seen: []string{b, b, b, b, b}})
	w.in.ExternalIDs = append(w.in.ExternalIDs, st.ExternalID)
	w.add(st)

	// After finish: a step of run 6 began after the run finished.
	late := w.cleanRun(6, 100, 500)
	w.rec(testflows.ChaosStepBegin, late.ID, "zombie", 7, "s3", 2, 900)
	// Not one: a body begun before the finish (by a worker then frozen)
	// and ended after it.
	w.rec(testflows.ChaosStepBegin, late.ID, "frozen", 9, "s2", 2, 450)
	w.rec(testflows.ChaosStepEnd, late.ID, "frozen", 9, "s2", 2, 950)
	w.add(late)

	// Acked but not recorded: execution c of run 7 finished s1 and went on
	// to s2, but the database holds execution d's s1.
	ack := w.cleanRun(7, 100, 600)
	w.exec(ack.ID, "c7", 8, 590)
	w.rec(testflows.ChaosStepBegin, ack.ID, "c7", 8, "s1", 1, 591)
	w.rec(testflows.ChaosStepEnd, ack.ID, "c7", 8, "s1", 1, 592)
	w.rec(testflows.ChaosStepBegin, ack.ID, "c7", 8, "s2", 1, 593)
	w.add(ack)

	// Missing result: a completed run without s5.
	miss := w.cleanRun(8, 100, 700)
	miss.Steps = miss.Steps[:4]
	w.add(miss)

	// Not redelivered: pid 50 held run 9 when it was killed.
	nr := &RunData{ID: uuid.New(), ExternalID: externalID(9), Status: store.StatusRunning, Input: testflows.ChaosInput{N: 9, Steps: 5}}
	w.exec(nr.ID, "n9", 50, 800)
	w.in.Kills = append(w.in.Kills, Kill{PID: 50, At: at(810)})
	w.in.ExternalIDs = append(w.in.ExternalIDs, nr.ExternalID)
	w.add(nr)

	// Schedule: 1 s fired twice, 2 s not at all (no outage).
	sid := uuid.New()
	w.in.Schedule = &ScheduleData{ID: sid, From: at(0), To: at(2000), Fires: []store.ScheduleFire{
		{ScheduleID: sid, RunID: uuid.New(), FireAt: t0.Add(time.Second)},
		{ScheduleID: sid, RunID: uuid.New(), FireAt: t0.Add(time.Second)},
	}}
	w.in.Harness = []string{"dispatcher-0 exited on its own"}

	rep := Check(w.in)
	if testing.Verbose() {
		_ = rep.Write(os.Stdout)
	}
	got := kinds(rep)
	for k, n := range map[string]int{VLost: 3, VDuplicate: 1, VUnlogged: 1, VStaleLease: 1, VAfterFinish: 1,
		VAckedNotApplied: 1, VMissingResult: 1, VNotRedelivered: 1, VScheduleDup: 1, VScheduleMissed: 1, VHarness: 1} {
		if got[k] < n {
			var buf bytes.Buffer
			_ = rep.Write(&buf)
			t.Errorf("%s: %d violations, want at least %d; report:\n%s", k, got[k], n, buf.String())
		}
	}
	for _, v := range rep.Violations {
		if v.Kind == VAfterFinish && !strings.Contains(v.Msg, "1 step records are later, the first B s3") {
			t.Errorf("the end of a body begun before the finish counted as a step after it: %s", v.Msg)
		}
	}
	if rep.Runs != 9 || rep.Lost != 3 || rep.DuplicateResults != 1 {
		t.Errorf("runs %d lost %d duplicates %d; want 9, 3, 1", rep.Runs, rep.Lost, rep.DuplicateResults)
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if lines[0] != "chaos: 9 runs, 6 completed, 3 lost, 1 duplicate results, max recovery 0 ms" {
		t.Errorf("summary %q", lines[0])
	}
	if len(lines) != len(rep.Violations)+1 || !strings.HasPrefix(lines[1], "violation lost: ") {
		t.Errorf("want one line per violation after the summary, lost first:\n%s", buf.String())
	}
}

func TestCheckReplayAndWake(t *testing.T) {
	w := &world{}
	// The completing execution saw s2 from another execution than the
	// database holds.
	rd := w.cleanRun(1, 100, 0)
	rd.Output, _ = json.Marshal(testflows.ChaosOutput{Exec: "e1", Seen: []string{"e1", "other", "e1", "e1", "e1"}})
	w.add(rd)

	// A run whose step 3 began before its nap's wake time.
	sl := w.cleanRun(2, 100, 100)
	sl.Input.SleepMS = 100
	wake, _ := json.Marshal(at(200))
	sl.Steps = append(sl.Steps, store.Step{RunID: sl.ID, StepID: "nap", Attempt: 1, Kind: store.StepSleep,
		Status: store.StepCompleted, IsLatest: true, Output: wake, CreatedAt: at(121)})
	w.add(sl)

	got := kinds(Check(w.in))
	if got[VReplay] != 1 || got[VWokeEarly] != 1 || len(got) != 2 {
		t.Fatalf("violations %v; want one replay-divergence and one woke-early", got)
	}
}
