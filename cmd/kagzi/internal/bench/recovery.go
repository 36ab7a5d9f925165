package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// RecoveryResult is the figures of the recovery scenario.
type RecoveryResult struct {
	Scenario string `json:"scenario"`
	Runs     int    `json:"runs"`
	// WorkerTimeoutMS and HeartbeatIntervalMS configure the processes.
	WorkerTimeoutMS     int64 `json:"worker_timeout_ms"`
	HeartbeatIntervalMS int64 `json:"heartbeat_interval_ms"`
	// RetryBackoffMS is the initial retry interval of the runs: a recovered
	// run is retried after its policy's backoff, 1 s by default.
	RetryBackoffMS int64 `json:"retry_backoff_ms"`
	// SinceHeartbeatMS is how long before the kill worker A's last
	// heartbeat was sent: it is declared dead that much before a full
	// timeout after the kill.
	SinceHeartbeatMS float64 `json:"since_heartbeat_ms"`
	// ReleasedMS is kill → none of the runs locked to A any more (the reaper
	// marked A offline and recovered its runs).
	ReleasedMS float64 `json:"released_ms"`
	// RecoveryMS is kill → every run RUNNING on worker B.
	RecoveryMS float64 `json:"recovery_ms"`
	// OverheadMS is what recovery took beyond the silence the timeout
	// demands (worker timeout minus SinceHeartbeatMS): the reaper's timer,
	// its statements, the wakeup, the claim and the delivery to B.
	OverheadMS float64 `json:"overhead_ms"`
	TargetMS   float64 `json:"target_ms"`
	Met        bool    `json:"met"`
}

// Rows implements Detail.
func (r *RecoveryResult) Rows() [][2]string {
	return [][2]string{
		{"scenario", r.Scenario},
		{"runs held by the killed worker", fmt.Sprintf("%d", r.Runs)},
		{"worker timeout / heartbeat", fmt.Sprintf("%d / %d ms (retry backoff %d ms)", r.WorkerTimeoutMS, r.HeartbeatIntervalMS, r.RetryBackoffMS)},
		{"last heartbeat before kill", fmt.Sprintf("%.1f ms", r.SinceHeartbeatMS)},
		{"kill -> runs released", fmt.Sprintf("%.1f ms", r.ReleasedMS)},
		{"kill -> all running on B", fmt.Sprintf("%.1f ms (target <= %.0f ms: %s)", r.RecoveryMS, r.TargetMS, verdict(r.Met))},
		{"beyond the timeout", fmt.Sprintf("%.1f ms (timer, reaper statements, wakeup, claim, delivery)", r.OverheadMS)},
	}
}

// pollEvery is the recovery scenario's polling interval. Polling is not
// how Kagzi works; it is how this bench, from outside, watches the
// database for the moment the runs moved (a 5 ms loop of one indexed
// query, for a few seconds).
const pollEvery = 5 * time.Millisecond

// waitHeld polls until want of ids are RUNNING on worker w.
func (e *env) waitHeld(ctx context.Context, ids []uuid.UUID, w uuid.UUID, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		by, err := measure.RunsLockedBy(ctx, e.pool, "bench", ids)
		if err != nil {
			return err
		}
		if by[w] >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %d of %d runs running on worker %s after %v", by[w], want, w, limit)
		}
		if err := sleepCtx(ctx, pollEvery); err != nil {
			return err
		}
	}
}

func (e *env) recovery(ctx context.Context) (Detail, error) {
	o := e.o
	if len(e.x.workers) != 1 {
		return nil, errors.New("bench: recovery starts with one worker")
	}
	a := e.x.workers[0]
	backoff := time.Millisecond
	r := &RecoveryResult{Scenario: "recovery", Runs: o.Runs, WorkerTimeoutMS: o.workerTimeout().Milliseconds(),
		HeartbeatIntervalMS: o.heartbeatInterval().Milliseconds(), RetryBackoffMS: backoff.Milliseconds(),
		TargetMS: float64((o.workerTimeout() + 100*time.Millisecond).Milliseconds())}

	// A's heartbeats, to know when it was last heard.
	var (
		mu       sync.Mutex
		lastHB   time.Time
		lastHeld int
		beat     = make(chan struct{}, 1)
	)
	hb, err := e.nc.Subscribe(protocol.SubjectWorkerHeartbeatAll, func(m *nats.Msg) {
		var h protocol.Heartbeat
		if protocol.Decode(m.Data, &h) == nil && h.WorkerID == a.id {
			mu.Lock()
			lastHB, lastHeld = time.Now(), len(h.Runs)
			mu.Unlock()
			select {
			case beat <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = hb.Unsubscribe() }()

	// Runs that hold their worker until cancelled; a recovered run retries
	// after 1 ms rather than the default 1 s backoff.
	pol := &retry.Policy{InitialInterval: backoff, Jitter: -1}
	reqs := make([]client.StartRequest, o.Runs)
	for i := range reqs {
		reqs[i] = client.StartRequest{Type: "Hold", Input: map[string]any{}, Options: client.StartOptions{RetryPolicy: pol}}
	}
	hs, err := e.cl.StartMany(ctx, reqs)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(hs))
	for i, h := range hs {
		ids[i] = h.RunID
	}
	if err := e.waitHeld(ctx, ids, a.id, len(ids), 30*time.Second); err != nil {
		return nil, err
	}
	// …and until A's heartbeats list them all: A holds them, as far as
	// everyone can tell.
	for heard := time.Now(); ; {
		mu.Lock()
		n := lastHeld
		mu.Unlock()
		if n >= len(ids) {
			break
		}
		if time.Since(heard) > 10*o.heartbeatInterval()+5*time.Second {
			return nil, fmt.Errorf("bench: worker A's heartbeats list %d of %d runs", n, len(ids))
		}
		if err := sleepCtx(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
	o.Log.Info("recovery: all runs running on worker A", "worker", a.id)

	// Worker B, parked on an empty queue.
	work := make(chan struct{}, 16)
	onWork := func(m *nats.Msg) {
		var req protocol.WorkRequest
		if protocol.Decode(m.Data, &req) == nil {
			select {
			case work <- struct{}{}:
			default:
			}
		}
	}
	for _, subj := range []string{protocol.SubjectWorkAll, protocol.SubjectDirectWorkAll} {
		ws, err := e.nc.Subscribe(subj, onWork)
		if err != nil {
			return nil, err
		}
		defer func() { _ = ws.Unsubscribe() }()
	}
	bs, err := e.startWorkers(ctx, 1)
	if err != nil {
		return nil, err
	}
	b := bs[0]
	// B's request for work is parked once it was sent (give it a moment to
	// reach the dispatcher).
	select {
	case <-work:
	case <-time.After(5 * time.Second):
	}
	if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
		return nil, err
	}
	// Kill A just after a heartbeat: the worst case, a whole timeout of
	// silence before the reaper may declare it dead.
	select {
	case <-beat:
	default:
	}
	select {
	case <-beat:
	case <-time.After(10 * o.heartbeatInterval()):
		return nil, errors.New("bench: worker A stopped sending heartbeats")
	}

	mu.Lock()
	since := time.Since(lastHB)
	mu.Unlock()
	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		return nil, fmt.Errorf("bench: kill worker A: %w", err)
	}
	r.SinceHeartbeatMS = measure.Round2(ms(since))
	limit := 10*o.workerTimeout() + 30*time.Second
	deadline := killed.Add(limit)
	for {
		by, err := measure.RunsLockedBy(ctx, e.pool, "bench", ids)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if r.ReleasedMS == 0 && by[a.id] == 0 {
			r.ReleasedMS = measure.Round2(ms(now.Sub(killed)))
		}
		if by[b.id] == len(ids) {
			r.RecoveryMS = measure.Round2(ms(now.Sub(killed)))
			break
		}
		if now.After(deadline) {
			return nil, fmt.Errorf("bench: %d of %d runs running on worker B %v after the kill", by[b.id], len(ids), limit)
		}
		if err := sleepCtx(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
	r.OverheadMS = measure.Round2(r.RecoveryMS - (float64(r.WorkerTimeoutMS) - r.SinceHeartbeatMS))
	r.Met = r.RecoveryMS <= r.TargetMS
	return r, nil
}
