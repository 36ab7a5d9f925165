package measure

import (
	"context"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What Postgres's backends are doing: which application runs which
// statement, sampled from pg_stat_activity.

// ObservedStatement is a statement seen while sampling pg_stat_activity.
type ObservedStatement struct {
	Service   string `json:"service"`
	Statement string `json:"statement"`
	Count     int    `json:"count"`
}

// WithApp returns the database URL u with application_name set to app, so
// pg_stat_activity tells the services' connections apart.
func WithApp(u, app string) string {
	if strings.Contains(u, "://") {
		if p, err := url.Parse(u); err == nil {
			q := p.Query()
			q.Set("application_name", app)
			p.RawQuery = q.Encode()
			return p.String()
		}
		return u
	}
	return u + " application_name=" + app
}

// ActivitySampler watches pg_stat_activity of one database from another
// one and counts each statement it sees start (a backend's query_start
// moved), by application name and statement text.
type ActivitySampler struct {
	// pool is on another database than db, so sampling is not counted
	// in db's statistics.
	pool *pgxpool.Pool
	db   string
	// ignore is the application_name of connections left out (the
	// sampler's own).
	ignore string
	last   map[int]time.Time
	counts map[[2]string]int
	mu     sync.Mutex
}

// NewActivitySampler samples database db over pool, leaving out the
// connections of application ignore.
func NewActivitySampler(pool *pgxpool.Pool, db, ignore string) *ActivitySampler {
	return &ActivitySampler{pool: pool, db: db, ignore: ignore, last: map[int]time.Time{}, counts: map[[2]string]int{}}
}

// Run samples every interval until ctx is done.
func (a *ActivitySampler) Run(ctx context.Context, every time.Duration) {
	first := true
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		bs, err := Activity(ctx, a.pool, a.db)
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
func (a *ActivitySampler) add(bs []Backend, baseline bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range bs {
		if b.QueryStart == nil || b.ApplicationName == a.ignore {
			continue
		}
		prev, seen := a.last[b.PID]
		a.last[b.PID] = *b.QueryStart
		if baseline || (seen && !b.QueryStart.After(prev)) {
			continue
		}
		a.counts[[2]string{b.ApplicationName, StatementName(b.Query)}]++
	}
}

// Observed are the statements seen so far, the most frequent first.
func (a *ActivitySampler) Observed() []ObservedStatement {
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

// StatementName names a statement for the reports: Kagzi's by what they
// do, others by their first words.
func StatementName(sql string) string {
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
