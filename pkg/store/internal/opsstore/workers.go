package opsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// WorkerStatus is the liveness of a worker.
type WorkerStatus string

// Worker statuses. A DRAINING worker finishes what it holds and asks for
// nothing new; an OFFLINE worker must register again to be heard.
const (
	WorkerOnline   WorkerStatus = "ONLINE"
	WorkerDraining WorkerStatus = "DRAINING"
	WorkerOffline  WorkerStatus = "OFFLINE"
)

// Valid reports whether s is a known worker status.
func (s WorkerStatus) Valid() bool {
	return s == WorkerOnline || s == WorkerDraining || s == WorkerOffline
}

// Worker is a registered worker process.
type Worker struct {
	ID              uuid.UUID
	Namespace       string
	Queue           string
	Hostname        string
	PID             int
	Version         string
	Types           []TypeVersion
	MaxConcurrency  int
	Status          WorkerStatus
	RegisteredAt    time.Time
	LastHeartbeatAt time.Time
	// DeregisteredAt is set by a clean deregistration only; a worker marked
	// offline for silence keeps it nil, which tells a crash from a shutdown.
	DeregisteredAt *time.Time
	Labels         map[string]string
}

// Workers' statements, written in sql/workers.sql.
var (
	workersRegisterSQL         = stmt("WorkersRegister")
	workersHeartbeatSQL        = stmt("WorkersHeartbeat")
	workersDrainSQL            = stmt("WorkersDrain")
	workersDeregisterSQL       = stmt("WorkersDeregister")
	workersMarkStaleOfflineSQL = stmt("WorkersMarkStaleOffline")
	workersOldestHeartbeatSQL  = stmt("WorkersOldestHeartbeat")
	workersGetSQL              = stmt("WorkersGet")
	workersListSQL             = stmt("WorkersList")
	workersCountOnlineSQL      = stmt("WorkersCountOnline")
	workersDeleteOfflineSQL    = stmt("WorkersDeleteOffline")
	workersServingSQL          = stmt("WorkersServing")
)

// scanWorker reads a row of a worker's columns (sql/workers.sql).
func scanWorker(row pgx.Row) (Worker, error) {
	var w Worker
	var types, labels []byte
	if err := row.Scan(&w.ID, &w.Namespace, &w.Queue, &w.Hostname, &w.PID, &w.Version, &types, &w.MaxConcurrency,
		&w.Status, &w.RegisteredAt, &w.LastHeartbeatAt, &w.DeregisteredAt, &labels); err != nil {
		return Worker{}, err
	}
	if err := json.Unmarshal(types, &w.Types); err != nil {
		return Worker{}, fmt.Errorf("decode types of worker %s: %w", w.ID, err)
	}
	if err := json.Unmarshal(labels, &w.Labels); err != nil {
		return Worker{}, fmt.Errorf("decode labels of worker %s: %w", w.ID, err)
	}
	return w, nil
}

func collectWorkers(rows pgx.Rows) ([]Worker, error) {
	defer rows.Close()
	out := []Worker{}
	for rows.Next() {
		w, err := scanWorker(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// WorkersRegisterParams describe a worker announcing itself.
type WorkersRegisterParams struct {
	WorkerID       uuid.UUID
	Namespace      string
	Queue          string
	Hostname       string
	PID            int
	Version        string
	Types          []TypeVersion
	MaxConcurrency int
	Labels         map[string]string
}

// Limits on a worker's registration, which is client-supplied.
func validateRegister(p *WorkersRegisterParams) error {
	if p.WorkerID == uuid.Nil {
		return invalidf("worker id is required")
	}
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return err
	}
	if err := checkName("queue", p.Queue, true); err != nil {
		return err
	}
	if err := protocol.ValidWorkerIdentity(p.Hostname, p.Version, p.Labels); err != nil {
		return invalidf("worker %v", err)
	}
	if p.PID < 0 {
		return invalidf("pid %d is negative", p.PID)
	}
	if p.MaxConcurrency <= 0 {
		return invalidf("max concurrency %d must be positive", p.MaxConcurrency)
	}
	if len(p.Types) > protocol.MaxTypes {
		return invalidf("%d workflow types registered, at most %d", len(p.Types), protocol.MaxTypes)
	}
	seen := make(map[string]bool, len(p.Types))
	for _, tv := range p.Types {
		if err := checkName("workflow type", tv.Type, true); err != nil {
			return err
		}
		if err := checkName("version", tv.Version, false); err != nil {
			return err
		}
		// The claim matches one version per type (see RunsClaim).
		if seen[tv.Type+"@"+tv.Version] {
			return invalidf("workflow type %q at version %q registered twice", tv.Type, tv.Version)
		}
		seen[tv.Type+"@"+tv.Version] = true
	}
	return nil
}

// WorkersRegister registers a worker, or registers it again (a restart or a
// reconnect): the registration is replaced, the worker is ONLINE with a
// fresh heartbeat and no deregistration time. RegisteredAt restarts only
// when the worker had gone OFFLINE. A worker id already registered in
// another namespace is ErrConflict: ids are global, and one namespace must
// not take over another's worker.
func (s *Ops) WorkersRegister(ctx context.Context, p WorkersRegisterParams) (Worker, error) {
	if err := validateRegister(&p); err != nil {
		return Worker{}, err
	}
	types := p.Types
	if types == nil {
		types = []TypeVersion{}
	}
	labels := p.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	typesJSON, err := json.Marshal(types)
	if err != nil {
		return Worker{}, fmt.Errorf("encode worker types: %w", err)
	}
	labelsJSON, err := json.Marshal(labels)
	if err != nil {
		return Worker{}, fmt.Errorf("encode worker labels: %w", err)
	}
	row := workersRegisterSQL.QueryRow(ctx, s.h.DB,
		pgx.NamedArgs{"worker_id": p.WorkerID, "namespace": p.Namespace, "queue": p.Queue, "hostname": p.Hostname, "pid": p.PID,
			"version": p.Version, "workflow_types": typesJSON, "max_concurrency": p.MaxConcurrency, "labels": labelsJSON})
	w, err := scanWorker(row)
	if isNoRows(err) {
		return Worker{}, fmt.Errorf("register worker %s: %w: the id is registered in another namespace", p.WorkerID, ErrConflict)
	}
	if err != nil {
		return Worker{}, mapErr(fmt.Sprintf("register worker %s", p.WorkerID), err)
	}
	return w, nil
}

// WorkerBeat is one heartbeat to persist.
type WorkerBeat struct {
	WorkerID uuid.UUID
	// At is when the heartbeat was received; zero means now.
	At time.Time
	// Draining moves an ONLINE worker to DRAINING.
	Draining bool
}

// WorkersHeartbeat persists many heartbeats in one statement and returns how
// many workers it touched. Workers that are OFFLINE (or unknown) are not
// touched: they must register again. A heartbeat never moves
// last_heartbeat_at backwards, and never takes a worker out of DRAINING
// (only a new registration does). Worker ids are global, so beats are not
// namespaced.
func (s *Ops) WorkersHeartbeat(ctx context.Context, beats []WorkerBeat) (int64, error) {
	if len(beats) == 0 {
		return 0, nil
	}
	// One entry per worker: the latest time, draining if any beat said so.
	merged := make(map[uuid.UUID]WorkerBeat, len(beats))
	for _, b := range beats {
		m, ok := merged[b.WorkerID]
		if ok {
			if b.At.After(m.At) {
				m.At = b.At
			}
			m.Draining = m.Draining || b.Draining
			b = m
		}
		merged[b.WorkerID] = b
	}
	ids := make([]uuid.UUID, 0, len(merged))
	for id := range merged {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	ats := make([]*time.Time, len(ids))
	draining := make([]bool, len(ids))
	for i, id := range ids {
		b := merged[id]
		if !b.At.IsZero() {
			at := b.At
			ats[i] = &at
		}
		draining[i] = b.Draining
	}
	// Rows are locked in worker id order first so two concurrent flushes
	// cannot deadlock on each other.
	tag, err := workersHeartbeatSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"worker_ids": ids, "ats": ats, "draining": draining})
	if err != nil {
		return 0, mapErr("worker heartbeats", err)
	}
	return tag.RowsAffected(), nil
}

// workerTransition moves a worker of the namespace that is not OFFLINE;
// an unknown worker is ErrNotFound and an OFFLINE one is returned as is.
// Its statement is q, an update of the worker if it is not OFFLINE.
func (s *Ops) workerTransition(ctx context.Context, what, namespace string, id uuid.UUID, q *namedSQL) (Worker, error) {
	row := q.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "worker_id": id})
	w, err := scanWorker(row)
	if err == nil {
		return w, nil
	}
	if !isNoRows(err) {
		return Worker{}, mapErr(fmt.Sprintf("%s %s", what, id), err)
	}
	w, err = s.WorkersGet(ctx, namespace, id)
	if err != nil {
		return Worker{}, fmt.Errorf("%s: %w", what, err)
	}
	return w, nil
}

// WorkersDrain asks a worker to drain: ONLINE becomes DRAINING. Draining a
// DRAINING worker is a no-op; draining an OFFLINE one is ErrConflict. The
// caller tells the worker (it is not told by the store).
func (s *Ops) WorkersDrain(ctx context.Context, namespace string, id uuid.UUID) (Worker, error) {
	w, err := s.workerTransition(ctx, "drain worker", namespace, id, workersDrainSQL)
	if err != nil {
		return Worker{}, err
	}
	if w.Status == WorkerOffline {
		return Worker{}, fmt.Errorf("drain worker %s: %w: it is OFFLINE", id, ErrConflict)
	}
	return w, nil
}

// WorkersDeregister records a worker's clean shutdown: OFFLINE, with the
// deregistration time. Deregistering an OFFLINE worker is a no-op. Runs
// still locked to the worker are not touched: the caller recovers them with
// RunsRecoverWorker.
func (s *Ops) WorkersDeregister(ctx context.Context, namespace string, id uuid.UUID) (Worker, error) {
	return s.workerTransition(ctx, "deregister worker", namespace, id, workersDeregisterSQL)
}

// WorkersMarkStaleOffline marks OFFLINE every live worker whose last
// heartbeat is before before, and returns their ids; the caller then
// recovers their runs with RunsRecoverWorker. Workers whose rows are busy
// (a heartbeat being written) are skipped: they are alive.
func (s *Ops) WorkersMarkStaleOffline(ctx context.Context, before time.Time) ([]uuid.UUID, error) {
	rows, err := workersMarkStaleOfflineSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"before": before})
	if err != nil {
		return nil, mapErr("mark stale workers offline", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	return ids, mapErr("mark stale workers offline", err)
}

// WorkersOldestHeartbeat returns the oldest last heartbeat among workers
// that are not OFFLINE, or nil when there is none: the reaper arms its
// staleness timer with it instead of scanning.
func (s *Ops) WorkersOldestHeartbeat(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := workersOldestHeartbeatSQL.QueryRowPos(ctx, s.h.DB).Scan(&t)
	return t, mapErr("oldest worker heartbeat", err)
}

// WorkersGet returns a worker of the namespace.
func (s *Ops) WorkersGet(ctx context.Context, namespace string, id uuid.UUID) (Worker, error) {
	row := workersGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": namespace, "worker_id": id})
	w, err := scanWorker(row)
	if err != nil {
		return Worker{}, mapErr(fmt.Sprintf("get worker %s", id), err)
	}
	return w, nil
}

// The size of WorkersList's answer. Workers are listed whole (no cursor):
// the bound is what one answer carries.
const (
	DefaultWorkersPage = 1000
	MaxWorkersPage     = 10000
)

// WorkersListParams filter WorkersList.
type WorkersListParams struct {
	Namespace string
	// Queue filter; empty means every queue.
	Queue string
	// Status filter; empty means every status.
	Status WorkerStatus
	// Limit caps the list (0: DefaultWorkersPage, at most MaxWorkersPage).
	Limit int
}

// WorkersList lists the namespace's workers by queue, then oldest
// registration first.
func (s *Ops) WorkersList(ctx context.Context, p WorkersListParams) ([]Worker, error) {
	if err := checkName("namespace", p.Namespace, true); err != nil {
		return nil, err
	}
	if p.Status != "" && !p.Status.Valid() {
		return nil, invalidf("unknown worker status %q", p.Status)
	}
	switch {
	case p.Limit == 0:
		p.Limit = DefaultWorkersPage
	case p.Limit < 0:
		return nil, invalidf("limit %d is negative; give 1 to %d, or 0 for %d", p.Limit, MaxWorkersPage, DefaultWorkersPage)
	case p.Limit > MaxWorkersPage:
		return nil, invalidf("limit %d is above the maximum %d", p.Limit, MaxWorkersPage)
	}
	rows, err := workersListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": p.Namespace, "queue": p.Queue, "status": string(p.Status), "limit": p.Limit})
	if err != nil {
		return nil, mapErr("list workers", err)
	}
	ws, err := collectWorkers(rows)
	return ws, mapErr("list workers", err)
}

// WorkersCountOnline counts ONLINE workers by "namespace/queue" (a metric).
// DRAINING workers take no new work and are not counted.
func (s *Ops) WorkersCountOnline(ctx context.Context) (map[string]int64, error) {
	rows, err := workersCountOnlineSQL.QueryPos(ctx, s.h.DB)
	if err != nil {
		return nil, mapErr("count online workers", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var ns, q string
		var n int64
		if err := rows.Scan(&ns, &q, &n); err != nil {
			return nil, mapErr("count online workers", err)
		}
		out[ns+"/"+q] = n
	}
	return out, mapErr("count online workers", rows.Err())
}

// WorkersDeleteOffline deletes OFFLINE workers last heard of before before,
// so the table does not grow with every worker that ever ran. It returns
// how many it deleted.
func (s *Ops) WorkersDeleteOffline(ctx context.Context, before time.Time) (int64, error) {
	tag, err := workersDeleteOfflineSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"before": before})
	if err != nil {
		return 0, mapErr("delete offline workers", err)
	}
	return tag.RowsAffected(), nil
}

// WorkersServing counts the live workers of the namespace and queue that
// serve runs of typ at version (empty: any version of typ): 0 means such
// runs wait, PENDING, until a worker registers the type. Workers are live
// until the reaper marks them OFFLINE (a worker timeout after their last
// heartbeat).
func (s *Ops) WorkersServing(ctx context.Context, namespace, queue, typ, version string) (int, error) {
	var n int
	err := workersServingSQL.QueryRow(ctx, s.h.DB,
		pgx.NamedArgs{"namespace": namespace, "queue": queue, "type": typ, "version": version}).Scan(&n)
	return n, mapErr("count serving workers", err)
}
