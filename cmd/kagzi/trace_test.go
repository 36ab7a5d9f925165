package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	workersvc "github.com/kagzi/kagzi/services/worker"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/telemetry"
	"github.com/kagzi/kagzi/internal/telemetry/otlptest"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// traceWorkflows are the workflows of the trace test: one that sleeps
// (two executions, one retry epoch), one whose first execution fails and
// is retried by its policy (two executions, two epochs), one with a child.
func traceWorkflows(failed *sync.Map) func(*worker.Worker) error {
	return func(w *worker.Worker) error {
		step := func(ctx workflow.Context, id string) error {
			_, err := workflow.Step(ctx, id, func(context.Context) (int, error) { return 1, nil })
			return err
		}
		return errors.Join(
			worker.Register(w, "TraceSleep", func(ctx workflow.Context, _ string) (int, error) {
				if err := step(ctx, "before"); err != nil {
					return 0, err
				}
				if err := workflow.Sleep(ctx, "nap", 200*time.Millisecond); err != nil {
					return 0, err
				}
				return 1, step(ctx, "after")
			}),
			worker.Register(w, "TraceRetry", func(ctx workflow.Context, key string) (int, error) {
				if err := step(ctx, "once"); err != nil {
					return 0, err
				}
				if _, again := failed.LoadOrStore(key, true); !again {
					return 0, errors.New("first execution fails")
				}
				return 2, nil
			}),
			worker.Register(w, "TraceParent", func(ctx workflow.Context, _ string) (int, error) {
				f := workflow.StartChild[int](ctx, "kid", "TraceChild", 3)
				return f.Get(ctx)
			}),
			worker.Register(w, "TraceChild", func(ctx workflow.Context, n int) (int, error) {
				return n, step(ctx, "square")
			}),
			worker.Register(w, "TraceLoop", func(ctx workflow.Context, n int) (int, error) {
				if err := step(ctx, "turn"); err != nil || n > 0 {
					return n, err
				}
				return 0, workflow.ContinueAsNew(ctx, n+1)
			}),
		)
	}
}

// Every documented way of starting a run gives it one connected trace:
// pkg/client in an application that set up no OpenTelemetry at all, the
// CLI, a schedule firing and a trigger. The services run with the setup
// every binary uses (telemetry.Setup, OTEL_* variables) and export by OTLP
// to an in-process receiver.
func TestOneConnectedTracePerRunOnEveryPath(t *testing.T) {
	recv := otlptest.Start(t)
	recv.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testdb.New(t)
	ns := testnats.Start(t)

	prov, err := telemetry.Setup(ctx, telemetry.Options{Service: "kagzi-dev"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
	})
	var failed sync.Map
	wcfg, err := config.Defaults[workersvc.Config](ctx)
	if err != nil {
		t.Fatal(err)
	}
	wcfg.MaxConcurrency, wcfg.HeartbeatInterval = 8, time.Second
	srv, err := devserver.Start(ctx, devserver.Options{DatabaseURL: url, NATSURL: ns.URL(), Workers: 1,
		Worker: wcfg, Register: traceWorkflows(&failed)})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			srv.Stop()
			sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
			defer c()
			if err := prov.Shutdown(sctx); err != nil {
				t.Errorf("flush: %v", err)
			}
		}
	}
	defer stop()

	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	// Every report message, to check which carry a traceparent header.
	var hmu sync.Mutex
	var reportHeaders []string
	onReport := func(m *nats.Msg) {
		hmu.Lock()
		defer hmu.Unlock()
		reportHeaders = append(reportHeaders, m.Header.Get("traceparent"))
	}
	// Workers address reports to a dispatcher they hear (protocol.SubjectDirect).
	for _, subj := range []string{protocol.SubjectReport("default"), protocol.SubjectDirectAny(protocol.SubjectReport("default"))} {
		sub, err := nc.Subscribe(subj, onReport)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// An application that set up no OpenTelemetry: its client traces
	// nothing, so the store gives each run its trace.
	app, err := client.NewFromStore(srv.Store, nc, client.Options{Namespace: "default", TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	fast := &retry.Policy{MaxAttempts: 3, InitialInterval: 50 * time.Millisecond, Jitter: -1}
	start := func(typ string, in any, o client.StartOptions) uuid.UUID {
		h, err := app.Start(ctx, typ, in, o)
		if err != nil {
			t.Fatal(err)
		}
		return h.RunID
	}
	sleepRun := start("TraceSleep", "", client.StartOptions{})
	retryRun := start("TraceRetry", "k1", client.StartOptions{RetryPolicy: fast})
	parentRun := start("TraceParent", "", client.StartOptions{})
	loop, err := app.Start(ctx, "TraceLoop", 0, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	loopRun := loop.RunID

	// A dead letter: fails for good, then is retried from the CLI.
	deadRun := start("TraceRetry", "dead", client.StartOptions{RetryPolicy: &retry.Policy{MaxAttempts: 1}})
	if r, err := app.Wait(ctx, deadRun); err != nil || r.Status != client.StatusFailed {
		t.Fatalf("dead letter: %+v %v", r, err)
	}

	// The CLI, configured by OTEL_* like every binary.
	cliArgs := []string{"--database-url", url, "--nats-url", ns.URL(), "--json"}
	var out, errb strings.Builder
	if code := execute(ctx, append(cliArgs, "run", "retry", deadRun.String()), strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("kagzi run retry: %d %s", code, errb.String())
	}
	out.Reset()
	if code := execute(ctx, append(cliArgs, "run", "start", "TraceSleep", "--input", `"x"`), strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("kagzi run start: %d %s", code, errb.String())
	}
	var started startJSON
	if err := json.Unmarshal([]byte(out.String()), &started); err != nil {
		t.Fatalf("run start output %q: %v", out.String(), err)
	}
	cliRun := uuid.MustParse(started.RunID)

	// A schedule firing every second, and a trigger of it from the CLI.
	sc, err := app.CreateSchedule(ctx, "TraceChild", 1, client.ScheduleOptions{Cron: "* * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := execute(ctx, append(cliArgs, "schedule", "trigger", sc.ID.String()), strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("kagzi schedule trigger: %d %s", code, errb.String())
	}
	var triggered struct {
		ID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(out.String()), &triggered); err != nil || triggered.ID == "" {
		t.Fatalf("schedule trigger output %q: %v", out.String(), err)
	}
	triggerRun := uuid.MustParse(triggered.ID)
	otel.SetTracerProvider(prov.Tracer) // the CLI's own providers are shut down

	var firedRun uuid.UUID
	for firedRun == uuid.Nil {
		hist, err := srv.Store.SchedulesHistory(ctx, "default", sc.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range hist {
			if r.ID != triggerRun {
				firedRun = r.ID
			}
		}
		if firedRun == uuid.Nil {
			if _, err := app.Wait(ctx, triggerRun); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
				t.Fatal("the schedule never fired")
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if _, err := app.PauseSchedule(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{sleepRun, retryRun, parentRun, cliRun, triggerRun, firedRun, deadRun} {
		r, err := app.Wait(ctx, id)
		if err != nil || r.Status != client.StatusCompleted {
			t.Fatalf("run %s: %+v %v", id, r, err)
		}
	}
	checkMetrics(t, prov, []uuid.UUID{sleepRun, retryRun, parentRun, cliRun, triggerRun, firedRun, deadRun})
	var turns int
	if err := loop.Result(ctx, &turns); err != nil || turns != 1 {
		t.Fatalf("continued run: %d %v", turns, err)
	}
	stop()

	pool, err := store.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool, store.Options{})
	traces := map[string]uuid.UUID{}
	check := func(what string, id uuid.UUID) []otlptest.Span {
		t.Helper()
		run, err := st.RunsGet(context.Background(), "default", id)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(run.TraceContext, "-")
		if len(parts) != 4 {
			t.Fatalf("%s: run %s has trace context %q", what, id, run.TraceContext)
		}
		traceID, root := parts[1], parts[2]
		if other, ok := traces[traceID]; ok {
			t.Fatalf("%s: run %s shares its trace with run %s", what, id, other)
		}
		traces[traceID] = id
		// Every span naming the run is in its trace: no process started a
		// root of its own.
		for _, s := range recv.Spans() {
			if s.Attrs["kagzi.run_id"] == id.String() && s.TraceID != traceID {
				t.Fatalf("%s: span %s of run %s is in trace %s, not %s", what, s.Name, id, s.TraceID, traceID)
			}
		}
		spans := recv.Trace(traceID)
		ids := map[string]bool{root: true}
		for _, s := range spans {
			ids[s.SpanID] = true
		}
		rooted := false
		for _, s := range spans {
			rooted = rooted || (s.SpanID == root && s.ParentID == "")
			if s.ParentID == "" && s.SpanID != root {
				t.Fatalf("%s: span %s is a second root of the trace", what, s.Name)
			}
			if s.ParentID != "" && !ids[s.ParentID] {
				t.Fatalf("%s: span %s hangs from a span that is not in the trace", what, s.Name)
			}
		}
		if !rooted {
			t.Fatalf("%s: the trace's root span %s was not reported", what, root)
		}
		return spans
	}
	byName := func(spans []otlptest.Span, prefix string, run uuid.UUID) []otlptest.Span {
		var out []otlptest.Span
		for _, s := range spans {
			if strings.HasPrefix(s.Name, prefix) && s.Attrs["kagzi.run_id"] == run.String() {
				out = append(out, s)
			}
		}
		return out
	}
	// executions returns the (execution, retry epoch) of each attempt span,
	// checking that each attempt hangs from a dispatch span.
	executions := func(what string, spans []otlptest.Span, run uuid.UUID) []string {
		t.Helper()
		dispatch := map[string]bool{}
		for _, s := range byName(spans, "kagzi.dispatch", run) {
			dispatch[s.SpanID] = true
		}
		if len(byName(spans, "kagzi.claim", run)) == 0 {
			t.Fatalf("%s: no claim span", what)
		}
		var got []string
		for _, s := range byName(spans, "kagzi.attempt", run) {
			if !dispatch[s.ParentID] {
				t.Fatalf("%s: attempt span %v is not a child of a dispatch span", what, s.Attrs)
			}
			got = append(got, s.Attrs["kagzi.execution"]+"/"+s.Attrs["kagzi.retry_epoch"])
		}
		sort.Slice(got, func(i, j int) bool {
			var a, b int
			fmt.Sscan(strings.SplitN(got[i], "/", 2)[0], &a)
			fmt.Sscan(strings.SplitN(got[j], "/", 2)[0], &b)
			return a < b
		})
		return got
	}
	// wantExecutions checks one attempt span per execution with the given
	// retry epochs, and execution numbers that only go up: a delivery the
	// dispatcher released unexecuted (a loaded worker had no room) takes a
	// number too, so numbers may skip but never repeat.
	wantExecutions := func(what string, got []string, epochs ...int) {
		t.Helper()
		ok := len(got) == len(epochs)
		last := 0
		for i := 0; ok && i < len(got); i++ {
			var exec, epoch int
			if _, err := fmt.Sscanf(got[i], "%d/%d", &exec, &epoch); err != nil || exec <= last || epoch != epochs[i] {
				ok = false
			}
			last = exec
		}
		if !ok {
			t.Fatalf("%s: executions/epochs %v, want rising executions with epochs %v", what, got, epochs)
		}
	}

	spans := check("client, sleeping", sleepRun)
	// Nothing traced the start: the dispatcher reported the root the store
	// named, from the run's creation to its first claim.
	if s := byName(spans, "kagzi.run", sleepRun); len(s) != 1 || s[0].ParentID != "" || s[0].Service != "kagzi-dev" {
		t.Fatalf("untraced start: root spans %+v, want one kagzi.run from the dispatcher", s)
	}
	wantExecutions("sleeping run", executions("client, sleeping", spans, sleepRun), 1, 1)
	if n := len(byName(spans, "kagzi.step", sleepRun)); n < 2 {
		t.Fatalf("sleeping run: %d step spans", n)
	}
	// The sleeping run's reports each concern that run alone: they carry
	// its attempt span as the W3C traceparent header.
	attempts := map[string]bool{}
	for _, s := range byName(spans, "kagzi.attempt", sleepRun) {
		attempts["00-"+s.TraceID+"-"+s.SpanID+"-01"] = true
	}
	hmu.Lock()
	headed := 0
	for _, h := range reportHeaders {
		if attempts[h] {
			headed++
		}
	}
	hmu.Unlock()
	if headed == 0 {
		t.Fatalf("no report of the sleeping run carried its attempt's traceparent (%d reports seen)", len(reportHeaders))
	}
	spans = check("client, retried", retryRun)
	wantExecutions("retried run", executions("client, retried", spans, retryRun), 1, 2)
	// The retried dead letter continued its trace: its second execution,
	// and the CLI's kagzi.retry, are in it.
	spans = check("retried dead letter", deadRun)
	wantExecutions("retried dead letter", executions("retried dead letter", spans, deadRun), 1, 1)
	if s := byName(spans, "kagzi.retry", deadRun); len(s) != 1 || s[0].Service != "kagzi-cli" {
		t.Fatalf("retried dead letter: retry spans %+v, want one from the CLI", s)
	}
	// A run that continued as new: the chain is one trace with one root.
	spans = check("continued as new", loopRun)
	chain, roots := map[string]bool{}, 0
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "kagzi.attempt TraceLoop") {
			chain[s.Attrs["kagzi.run_id"]] = true
		}
		if strings.HasPrefix(s.Name, "kagzi.run ") {
			roots++
		}
	}
	if len(chain) != 2 || roots != 1 {
		t.Fatalf("continued as new: attempts of %d runs and %d kagzi.run roots in the trace, want 2 and 1", len(chain), roots)
	}
	spans = check("client, parent", parentRun)
	kids := map[uuid.UUID]bool{}
	for _, s := range spans {
		if s.Name == "kagzi.attempt TraceChild" {
			kids[uuid.MustParse(s.Attrs["kagzi.run_id"])] = true
		}
	}
	if len(kids) != 1 {
		t.Fatalf("parent's trace holds the attempts of %d children, want 1", len(kids))
	}
	spans = check("CLI", cliRun)
	if s := byName(spans, "kagzi.start", cliRun); len(s) != 1 || s[0].ParentID != "" || s[0].Service != "kagzi-cli" {
		t.Fatalf("CLI run: start spans %+v, want the trace's root from kagzi-cli", s)
	}
	wantExecutions("CLI run", executions("CLI", spans, cliRun), 1, 1)
	spans = check("trigger", triggerRun)
	found := false
	for _, s := range spans {
		found = found || (s.Name == "kagzi.trigger" && s.ParentID == "" && s.Service == "kagzi-cli")
	}
	if !found {
		t.Fatal("trigger run: no kagzi.trigger root span from the CLI")
	}
	executions("trigger", spans, triggerRun)
	spans = check("schedule", firedRun)
	if s := byName(spans, "kagzi.schedule.fire", firedRun); len(s) != 1 || s[0].Attrs["kagzi.schedule_id"] != sc.ID.String() {
		t.Fatalf("scheduled run: fire spans %+v", s)
	}
	executions("schedule", spans, firedRun)
}

// checkMetrics scrapes the process's /metrics as Prometheus would and
// checks that the metrics an operator alerts on are there, with their
// labels, and that no label carries a run id.
func checkMetrics(t *testing.T, prov *telemetry.Providers, runs []uuid.UUID) {
	t.Helper()
	rec := httptest.NewRecorder()
	prov.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, id := range runs {
		if strings.Contains(body, id.String()) {
			t.Fatalf("/metrics names run %s", id)
		}
	}
	for _, want := range []string{
		`kagzi_queue_depth{namespace="default",otel_scope_name="github.com/kagzi/kagzi/dispatcher"`,
		`kagzi_queue_oldest_due_age_seconds{namespace="default",`,
		`kagzi_queue_unserved{namespace="default",`,
		`kagzi_runs_started_total{namespace="default",`,
		`kagzi_runs_completed_total{namespace="default",`,
		`kagzi_executions_total{namespace="default",`,
		`outcome="suspended"`,
		`kagzi_step_duration_milliseconds_bucket{`,
		`kagzi_claim_latency_milliseconds_bucket{namespace="default",`,
		`kagzi_report_latency_milliseconds_bucket{namespace="default",`,
		`kagzi_dispatch_latency_milliseconds_bucket{namespace="default",`,
		`kagzi_runs_recovered_total{`,
		`kagzi_leases_expired_total{`,
		`kagzi_workers_online{`,
		`kagzi_relay_leader{`,
		`kagzi_reaper_leader{`,
		`kagzi_notifications_relayed_total{`,
		`kagzi_schedule_fires_total{namespace="default",`,
		`kagzi_schedule_lateness_milliseconds_bucket{namespace="default",`,
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	// Runs completed and failed are counted per workflow type too.
	for _, re := range []string{`(?m)^kagzi_runs_completed_total\{[^}]*workflow_type="[A-Za-z]+"[^}]*\} [1-9]`,
		`(?m)^kagzi_runs_failed_total\{[^}]*workflow_type="[A-Za-z]+"[^}]*\} [1-9]`} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics has no line matching %s", re)
		}
	}
	if t.Failed() {
		var names []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "kagzi_") {
				names = append(names, l)
			}
		}
		t.Fatalf("kagzi metrics:\n%s", strings.Join(names, "\n"))
	}
	listed := regexp.MustCompile(`^(` + strings.Join(telemetry.MetricNames, "|") + `)(_bucket|_sum|_count)?\{`)
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "kagzi_") {
			continue
		}
		if strings.Contains(l, "run_id") || strings.Contains(l, "worker_id") {
			t.Fatalf("a metric carries an id label: %s", l)
		}
		if !listed.MatchString(l) {
			t.Errorf("metric not in telemetry.MetricNames (which the dashboard and alerts are checked against): %s", l)
		}
	}
	// Depth and age are there at 0 too: nothing is due any more.
	if !regexp.MustCompile(`(?m)^kagzi_queue_depth\{namespace="default",[^}]*queue="default"[^}]*\} 0$`).MatchString(body) {
		t.Errorf("no kagzi_queue_depth 0 for the idle queue")
	}
}
