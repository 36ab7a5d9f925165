package store_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/store"
)

var traceParentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)

// Every create path gives a run started outside any trace a trace context
// of its own, and each run a different trace; one given is kept.
func TestRunsTraceContextFromBirth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	traces := map[string]uuid.UUID{}
	check := func(what string, r store.Run) {
		t.Helper()
		if !traceParentRE.MatchString(r.TraceContext) {
			t.Fatalf("%s: trace context %q is not a fresh traceparent", what, r.TraceContext)
		}
		if _, _, born := tracectx.BirthRoot(r.TraceContext); !born {
			t.Fatalf("%s: trace context %q is not marked as the store's", what, r.TraceContext)
		}
		tid := r.TraceContext[3:35]
		if other, ok := traces[tid]; ok {
			t.Fatalf("%s: run %s shares trace %s with run %s", what, r.ID, tid, other)
		}
		traces[tid] = r.ID
	}
	check("create", e.create(store.RunsCreateParams{}))
	given := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if r := e.create(store.RunsCreateParams{TraceContext: given}); r.TraceContext != given {
		t.Fatalf("create with a context: %q, want %q", r.TraceContext, given)
	}
	if _, _, born := tracectx.BirthRoot(given); born {
		t.Fatalf("a caller's trace context %q passes as the store's", given)
	}
	many, err := e.s.RunsCreateMany(e.ctx, []store.RunsCreateParams{
		{Namespace: "ns", Queue: "q", Type: "T"}, {Namespace: "ns", Queue: "q", Type: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range many {
		check("create many", e.get("ns", m.RunID))
	}
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	inTx, _, err := e.s.WithTx(tx).RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	check("create in a transaction", e.get("ns", inTx.ID))

	// A schedule catching up fires several instances at once: one trace each.
	sc := createSchedule(t, e.s, store.SchedulesCreateParams{Cron: "* * * * *", MaxCatchup: 3})
	res, err := e.s.SchedulesFireDueMany(e.ctx, []store.Schedule{sc}, sc.NextFireAt.Add(150*time.Second), time.Hour, "")
	if err != nil || res[0].Err != nil || len(res[0].Runs) < 2 {
		t.Fatalf("fire due: %+v %v", res, err)
	}
	for _, r := range res[0].Runs {
		check("schedule fire", r)
	}
	trig, err := e.s.SchedulesTrigger(e.ctx, "ns", sc.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	check("trigger", trig)

	// A retried dead letter continues its trace; one from before trace
	// contexts gets one.
	old := e.create(store.RunsCreateParams{})
	e.exec(`UPDATE kagzi.workflow_runs SET status = 'FAILED', trace_context = NULL, finished_at = now() WHERE run_id = $1`, old.ID)
	retried, err := e.s.RunsRetry(e.ctx, "ns", old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !traceParentRE.MatchString(retried.TraceContext) {
		t.Fatalf("retried run without a context: %q", retried.TraceContext)
	}
	kept := e.create(store.RunsCreateParams{})
	e.exec(`UPDATE kagzi.workflow_runs SET status = 'FAILED', finished_at = now() WHERE run_id = $1`, kept.ID)
	again, err := e.s.RunsRetry(e.ctx, "ns", kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.TraceContext != kept.TraceContext {
		t.Fatalf("retry changed the trace: %q, was %q", again.TraceContext, kept.TraceContext)
	}
}
