package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/internal/stmtcount"
)

// IdleTarget is the most statements per second an idle system may cost.
const IdleTarget = 0.5

// IdleResult is the figures of the idle scenario.
type IdleResult struct {
	Scenario    string  `json:"scenario"`
	Workers     int     `json:"workers"`
	Dispatchers int     `json:"dispatchers"`
	DurationSec float64 `json:"duration_sec"`
	// WindowSec is the time between the two statistics snapshots: the
	// duration plus the wait for lazily flushed counters.
	WindowSec float64 `json:"window_sec"`
	// Statements in the window (the bench's own subtracted) and per second.
	Statements       int64   `json:"statements"`
	StatementsPerSec float64 `json:"statements_per_sec"`
	// Source is where Statements come from: pg_stat_statements, or
	// pg_stat_database (transactions: every autocommit statement is one).
	Source string `json:"source"`
	// PgStatStatements says why pg_stat_statements was not used.
	PgStatStatements string `json:"pg_stat_statements,omitempty"`
	// BenchStatements were the bench's own, subtracted.
	BenchStatements int64   `json:"bench_statements"`
	Target          float64 `json:"target"`
	Met             bool    `json:"met"`
	// Observed are the statements seen in pg_stat_activity (sampled
	// every 10 ms: a backend's back-to-back statements may show as one).
	Observed []ObservedStatement `json:"observed"`
	// WorkerTimeoutMS and HeartbeatIntervalMS configure the processes.
	WorkerTimeoutMS     int64 `json:"worker_timeout_ms"`
	HeartbeatIntervalMS int64 `json:"heartbeat_interval_ms"`
}

// ObservedStatement is a statement seen while sampling pg_stat_activity.
type ObservedStatement struct {
	Service   string `json:"service"`
	Statement string `json:"statement"`
	Count     int    `json:"count"`
}

// Rows implements Detail.
func (r *IdleResult) Rows() [][2]string {
	rows := [][2]string{
		{"scenario", r.Scenario},
		{"processes", fmt.Sprintf("%d dispatcher, 1 scheduler, 1 reaper, %d workers", r.Dispatchers, r.Workers)},
		{"idle for", fmt.Sprintf("%.0f s (window %.1f s with the wait for flushed statistics)", r.DurationSec, r.WindowSec)},
		{"statements", fmt.Sprintf("%d (source %s; %d of the bench's own subtracted)", r.Statements, r.Source, r.BenchStatements)},
		{"statements/s", fmt.Sprintf("%.3f (target <= %.1f: %s)", r.StatementsPerSec, r.Target, verdict(r.Met))},
		{"worker timeout / heartbeat", fmt.Sprintf("%d / %d ms", r.WorkerTimeoutMS, r.HeartbeatIntervalMS)},
	}
	if r.PgStatStatements != "" {
		rows = append(rows, [2]string{"pg_stat_statements", r.PgStatStatements})
	}
	for _, o := range r.Observed {
		rows = append(rows, [2]string{"  seen " + o.Service, fmt.Sprintf("%d× %s", o.Count, o.Statement)})
	}
	return rows
}

func (e *env) idle(ctx context.Context) (Detail, error) {
	o := e.o
	if err := e.openAdmin(ctx); err != nil {
		return nil, err
	}
	r := &IdleResult{Scenario: "idle", Workers: len(e.x.workers), Dispatchers: o.Dispatchers, DurationSec: o.Duration.Seconds(),
		Target: IdleTarget, Source: "pg_stat_database",
		WorkerTimeoutMS: o.workerTimeout().Milliseconds(), HeartbeatIntervalMS: o.heartbeatInterval().Milliseconds()}
	// pg_stat_statements needs shared_preload_libraries; try it.
	_, pssErr := statementCalls(ctx, e.pool)
	if pssErr != nil {
		r.PgStatStatements = "unavailable: " + pssErr.Error()
	}
	// Let the start-up's statements reach pg_stat_database first.
	o.Log.Info("idle: settling", "for", statsFlushWait)
	if err := sleepCtx(ctx, statsFlushWait); err != nil {
		return nil, err
	}
	sampler := newActivitySampler(e.x.admin, e.dbName)
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sampler.run(sctx, 10*time.Millisecond)
	}()
	defer func() {
		stopSampling()
		wg.Wait()
	}()

	var calls0 int64
	if pssErr == nil {
		var err error
		if calls0, err = statementCalls(ctx, e.pool); err != nil {
			return nil, err
		}
	}
	own0 := tallyTotal(e.x.tally)
	s0, err := dbStats(ctx, e.x.admin, e.dbName)
	if err != nil {
		return nil, err
	}
	o.Log.Info("idle: measuring", "for", o.Duration)
	if err := sleepCtx(ctx, o.Duration); err != nil {
		return nil, err
	}
	if pssErr == nil {
		// pg_stat_statements counts at once: no flush wait.
		own := tallyTotal(e.x.tally) - own0
		calls1, err := statementCalls(ctx, e.pool)
		if err != nil {
			return nil, err
		}
		r.Source, r.WindowSec = "pg_stat_statements", o.Duration.Seconds()
		r.BenchStatements = own + 1 // and the CREATE EXTENSION of this read
		r.Statements = calls1 - calls0 - r.BenchStatements
	} else {
		// Backends flush their counters up to 10 s late: wait, still idle,
		// and count the whole window. Both snapshots are taken in the same
		// steady state, so what is pending at either end evens out.
		if err := sleepCtx(ctx, statsFlushWait); err != nil {
			return nil, err
		}
		own := tallyTotal(e.x.tally) - own0
		s1, err := dbStats(ctx, e.x.admin, e.dbName)
		if err != nil {
			return nil, err
		}
		r.WindowSec = s1.At.Sub(s0.At).Seconds()
		r.BenchStatements = own
		r.Statements = s1.Sub(s0).Xacts() - own
	}
	stopSampling()
	wg.Wait()
	r.StatementsPerSec = float64(r.Statements) / r.WindowSec
	r.Met = r.StatementsPerSec <= r.Target
	r.WindowSec = round2(r.WindowSec)
	r.Observed = sampler.observed()
	return r, nil
}

// tallyTotal is the number of statements a tally counted.
func tallyTotal(t *stmtcount.Tally) int64 {
	if t == nil {
		return 0
	}
	var n int64
	for _, c := range t.Snapshot() {
		n += c
	}
	return n
}

// activitySampler watches pg_stat_activity of one database from another
// one and counts each statement it sees start (a backend's query_start
// moved), by application name and statement text.
type activitySampler struct {
	// pool is on another database than db, so sampling is not counted
	// in db's statistics.
	pool   *pgxpool.Pool
	db     string
	last   map[int]time.Time
	counts map[[2]string]int
	mu     sync.Mutex
}

func newActivitySampler(pool *pgxpool.Pool, db string) *activitySampler {
	return &activitySampler{pool: pool, db: db, last: map[int]time.Time{}, counts: map[[2]string]int{}}
}

func (a *activitySampler) run(ctx context.Context, every time.Duration) {
	first := true
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		bs, err := activity(ctx, a.pool, a.db)
		if err == nil {
			a.add(bs, first)
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// add records the backends of one sample; the first sample only sets the
// baseline.
func (a *activitySampler) add(bs []Backend, baseline bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range bs {
		if b.QueryStart == nil || b.ApplicationName == benchApp {
			continue
		}
		prev, seen := a.last[b.PID]
		a.last[b.PID] = *b.QueryStart
		if baseline || (seen && !b.QueryStart.After(prev)) {
			continue
		}
		a.counts[[2]string{b.ApplicationName, statementName(b.Query)}]++
	}
}

func (a *activitySampler) observed() []ObservedStatement {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]ObservedStatement, 0, len(a.counts))
	for k, n := range a.counts {
		out = append(out, ObservedStatement{Service: k[0], Statement: k[1], Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Service+out[i].Statement < out[j].Service+out[j].Statement
	})
	return out
}

// statementNames name Kagzi's statements by a fragment of their text.
var statementNames = []struct{ fragment, name string }{
	{"kagzi.claim_slots", "claim (RunsClaim)"},
	{"SET status = 'COMPLETED', finished_at = now(), lease_expires_at = NULL, error = NULL FROM k", "complete runs and their last steps (RunsCompleteBatch)"},
	{"SET status = 'COMPLETED', finished_at = now(), lease_expires_at = NULL, error = NULL FROM c", "complete runs (RunsCompleteBatch)"},
	{"INSERT INTO kagzi.step_runs AS s", "record step (StepsRecord[Many])"},
	{"INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, external_id", "start runs (RunsCreate[Many])"},
	{"SET lease_expires_at = greatest(r.lease_expires_at, w.until)", "extend leases (RunsExtendLeases)"},
	{"UPDATE kagzi.workers w SET last_heartbeat_at", "persist heartbeats (WorkersHeartbeat)"},
	{"INSERT INTO kagzi.workers", "register worker (WorkersRegister)"},
	{"UPDATE kagzi.workers w SET status = 'OFFLINE'", "mark stale workers offline (WorkersMarkStaleOffline)"},
	{"min(available_at) FROM kagzi.workflow_runs WHERE status IN", "due queues (RunsQueuesDue)"},
	{"SELECT min(available_at) FROM kagzi.workflow_runs WHERE namespace_id", "next due run (RunsNextDue)"},
	{"min(lease_expires_at)", "next lease expiry (RunsNextLeaseExpiry)"},
	{"min(deadline_at)", "next deadline (RunsNextDeadline)"},
	{"min(last_heartbeat_at)", "oldest heartbeat (WorkersOldestHeartbeat)"},
	{"SELECT min(available_at) FROM kagzi.workflow_runs WHERE status = 'SCHEDULED'", "next due schedule (SchedulesNextDue)"},
	{"WHERE r.status = 'SCHEDULED' AND r.available_at <=", "due schedules (SchedulesDue)"},
	{"SET available_at = l.next, last_fired_at", "fire schedules (SchedulesFireDueMany)"},
	{"UPDATE kagzi.workflow_runs r SET status = 'PENDING', available_at = now(), locked_by = NULL", "release runs (RunsReleaseMany)"},
	{"WITH t AS ( SELECT run_id FROM kagzi.workflow_runs WHERE status = 'RUNNING' AND", "recover runs (RunsRecoverWorker/RunsExpireLeases)"},
	{"pg_advisory_lock", "take leader lock"},
	{"LISTEN", "listen"},
	{"-- ping", "pool health ping (pgxpool, after 1 s idle)"},
}

// statementName names a statement for the reports: Kagzi's by what they
// do, others by their first words.
func statementName(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if l := strings.ToLower(s); strings.HasPrefix(l, "begin; set local ") {
		// A transaction through a pooler, which sets its own bounds.
		return "begin"
	}
	switch strings.ToLower(s) {
	case "begin", "begin isolation level read committed":
		return "begin"
	case "commit":
		return "commit"
	case "rollback":
		return "rollback"
	case "":
		return "(empty)"
	}
	for _, n := range statementNames {
		if strings.Contains(s, n.fragment) {
			return n.name
		}
	}
	if len(s) > 70 {
		s = s[:70] + "…"
	}
	return s
}
