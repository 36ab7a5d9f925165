package reaper

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Batches: the leader acts on the runs of every running batch operation
// (docs/batches.md), each batch at its own rate. A chunk of a batch is one
// fenced transaction: it locks the next runs still to act on
// (store.BatchRunsTake, skipping runs another transaction holds), acts on
// each in a savepoint of its own, and records every outcome
// (store.BatchRunsSettle) before it commits. So whatever happens to the
// process doing it (killed, frozen, cut off), a run is acted on with its
// outcome or not at all, and a new leader takes the runs still pending:
// none is acted on twice, none is skipped.
//
// The sweep reads the running batches when it takes over, when a batch is
// created or resumed (protocol.BatchChanged with Moved, relayed from the
// batches' trigger) and when a relay (re)starts; in between, its timer is the next
// chunk of a running batch, so an idle system reads nothing.

const (
	// batchTick is the spacing of a batch's chunks at rates that give a
	// chunk more than one run: ten chunks a second.
	batchTick = 100 * time.Millisecond
	// maxBatchChunk bounds the runs of one chunk (one transaction).
	maxBatchChunk = 200
	// batchesRead is the most running batches the leader works at once;
	// others wait for one to end.
	batchesRead = 100
	// batchStepBudget bounds the time one step of the leader's loop
	// spends on batches: past it, the batches still due wait for the next
	// step, after the other sweeps had theirs, so many batches at high
	// rates do not hold up liveness, leases or deadlines.
	batchStepBudget = 100 * time.Millisecond
	// batchHeldRecheck is the wait before a batch whose pending runs other
	// transactions hold (a former leader's, stalled) is tried again.
	batchHeldRecheck = time.Second
)

// batches is the batch sweep.
type batches struct {
	*shared
	faults

	// reread is set when the running batches must be read again (a batch
	// changed, a relay restarted); the leader's loop reads them.
	reread atomic.Bool
	tm     batchesTerm
	c      batchCounters
	// tracer gives each batch its span, ended when the leader records
	// its last run.
	tracer trace.Tracer

	// onActed, if set, is told of each chunk acted on (the attribute
	// counts' news of work: a fork or a deletion changes them).
	onActed func()

	// ctx is the sweep's (life.Begin), for the malformed messages'
	// counter.
	ctx  context.Context
	sub  *nats.Subscription
	life lifecycle.Base
}

// batchesTerm is the batch sweep's state for one term.
type batchesTerm struct {
	// running are the batches acted on, each with when its next chunk
	// is due.
	running map[uuid.UUID]*batchWork
}

type batchWork struct {
	b  store.Batch
	at time.Time
}

type batchCounters struct {
	// clashes counts the runs' transactions rolled back on a deadlock
	// and tried again.
	done, failed, skipped, chunks, completed, clashes atomic.Int64
	// running is how many batches the leader works on now (0 on a
	// standby).
	running atomic.Int64
}

func newBatches(sh *shared) *batches {
	return &batches{shared: sh, faults: faults{lg: sh.log}, tracer: otel.GetTracerProvider().Tracer("github.com/kagzi/kagzi/reaper")}
}

// Start subscribes to batch announcements.
func (s *batches) Start(ctx context.Context) error {
	ctx, err := s.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("batches: %w", err)
	}
	s.ctx = ctx
	sub, err := s.nc.Subscribe(protocol.SubjectBatchAll, s.onBatchChanged)
	if err != nil {
		s.life.Stop(nil)
		return fmt.Errorf("batches: subscribe %s: %w", protocol.SubjectBatchAll, err)
	}
	s.sub = sub
	s.drops.Add(sub, s.resync)
	return nil
}

// Stop unsubscribes; safe to call twice.
func (s *batches) Stop() {
	s.life.Stop(func() {
		if s.sub != nil {
			_ = s.sub.Unsubscribe()
		}
	})
}

func (s *batches) onBatchChanged(m *nats.Msg) {
	var c protocol.BatchChanged
	if err := protocol.Decode(m.Data, &c); err != nil {
		s.malformed.Drop(s.ctx, m.Subject, err)
		return
	}
	// Progress, and batches that stop running, change nothing here: the
	// leader's own chunks see them.
	if c.Moved && c.State == string(store.BatchRunning) {
		s.resync()
	}
}

// resync asks the leader to read the running batches again.
func (s *batches) resync() {
	s.reread.Store(true)
	s.wake()
}

// gain takes over: the running batches are read at the first step.
func (s *batches) gain(context.Context, time.Time) error {
	s.tm = batchesTerm{running: map[uuid.UUID]*batchWork{}}
	s.reread.Store(true)
	return nil
}

// next is when the next chunk of a running batch is due (zero: none, or
// at once when a read is asked for).
func (s *batches) next() time.Time {
	if s.reread.Load() {
		return s.clock.Now()
	}
	var e earliest
	for _, w := range s.tm.running {
		e.at(w.at)
	}
	return e.t
}

// step reads the running batches when asked to and acts on one chunk of
// each batch that is due.
func (s *batches) step(ctx context.Context) {
	now := s.clock.Now()
	if s.reread.Swap(false) {
		bs, err := s.st.BatchesRunning(ctx, batchesRead)
		if err != nil {
			if ctx.Err() == nil {
				s.failed("read running batches", err)
				s.reread.Store(true)
			}
			return
		}
		seen := make(map[uuid.UUID]bool, len(bs))
		for _, b := range bs {
			seen[b.ID] = true
			if w, ok := s.tm.running[b.ID]; ok {
				w.b = b
				continue
			}
			s.tm.running[b.ID] = &batchWork{b: b, at: now}
			s.log.Info("batch running", "batch_id", b.ID, "ns", b.Namespace, "action", b.Action, "pending", b.Pending(), "rate", b.Rate)
		}
		for id := range s.tm.running {
			if !seen[id] {
				delete(s.tm.running, id)
			}
		}
	}
	began := s.clock.Now()
	for id, w := range s.tm.running {
		if ctx.Err() != nil {
			return
		}
		if w.at.After(now) {
			continue
		}
		// The map's order is random, so the batches left for the next
		// step differ from step to step.
		if s.clock.Now().Sub(began) > batchStepBudget {
			break
		}
		n, st, err := s.chunk(ctx, w.b)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.failed(fmt.Sprintf("batch %s", id), err)
			}
			w.at = now.Add(retryAfter)
		case st != store.BatchRunning:
			delete(s.tm.running, id)
			if st == store.BatchCompleted {
				s.completed(ctx, w.b)
			}
		case n == 0:
			// Pending runs other transactions hold: a former leader's,
			// which commits or is rolled back.
			w.at = now.Add(batchHeldRecheck)
		default:
			w.at = now.Add(time.Duration(float64(n) / float64(w.b.Rate) * float64(time.Second)))
		}
	}
	s.c.running.Store(int64(len(s.tm.running)))
}

// completed records a completed batch: a log line, and its span, from
// its creation to now, with its counters.
func (s *batches) completed(ctx context.Context, b store.Batch) {
	s.c.completed.Add(1)
	cur, err := s.st.BatchesGet(ctx, b.Namespace, b.ID)
	if err != nil {
		cur = b
	}
	s.log.Info("batch completed", "batch_id", b.ID, "ns", b.Namespace, "action", b.Action, "done", cur.Done, "failed", cur.Failed, "skipped", cur.Skipped)
	_, span := s.tracer.Start(ctx, "kagzi.batch "+string(b.Action), trace.WithTimestamp(b.CreatedAt), trace.WithAttributes(
		attribute.String("kagzi.batch_id", b.ID.String()), attribute.String("kagzi.namespace", b.Namespace),
		attribute.String("kagzi.batch_action", string(b.Action)), attribute.String("kagzi.batch_query", b.Query),
		attribute.Int("kagzi.batch_total", cur.Total), attribute.Int("kagzi.batch_done", cur.Done),
		attribute.Int("kagzi.batch_failed", cur.Failed), attribute.Int("kagzi.batch_skipped", cur.Skipped)))
	span.End()
}

// chunkSize is how many runs one chunk of a batch at rate acts on: a
// tenth of a second's worth, at least one.
func chunkSize(rate int) int {
	return min(max(1, rate*int(batchTick)/int(time.Second)), maxBatchChunk)
}

// batchTries bounds the transactions one run of a batch is tried in when
// each meets a deadlock; the run then waits for a later chunk.
const batchTries = 3

// errBatchClash rolls back a run's transaction whose action met another
// transaction (a deadlock): the run stays pending, to be tried again.
var errBatchClash = errors.New("batch action met another transaction")

// chunk acts on the next runs of b, each in a fenced transaction of its
// own, for at most batchStepBudget, and returns how many it acted on and
// the batch's state after them.
// A transaction per run holds one run's locks at a time: a chunk that held
// every run it had acted on until its end would deadlock with the
// dispatchers' statements, which lock several runs of their own.
func (s *batches) chunk(ctx context.Context, b store.Batch) (int, store.BatchState, error) {
	n, st, began := 0, store.BatchRunning, s.clock.Now()
	for n < chunkSize(b.Rate) && st == store.BatchRunning && s.clock.Now().Sub(began) <= batchStepBudget {
		took, cur, err := s.one(ctx, b)
		if err != nil {
			return n, st, err
		}
		st = cur
		if !took {
			break
		}
		n++
	}
	if n > 0 {
		s.c.chunks.Add(1)
		if s.onActed != nil {
			s.onActed()
		}
	}
	return n, st, nil
}

// one acts on the next pending run of b, in one fenced transaction that
// records its outcome: took is false when no run was free to take (none
// is pending, or other transactions hold those that are). A transaction
// that meets a deadlock is rolled back and tried again, up to batchTries.
func (s *batches) one(ctx context.Context, b store.Batch) (took bool, st store.BatchState, err error) {
	type result struct {
		took bool
		st   store.BatchState
		out  store.BatchOutcome
	}
	for tries := 1; ; tries++ {
		r, err := fenced(ctx, s.shared, func(tx *store.Store) (result, error) {
			// A run whose transaction a crash loses is pending again,
			// its action undone with it: the commit need not wait for
			// the disk.
			if err := tx.AsyncCommit(ctx); err != nil {
				return result{}, err
			}
			ids, err := tx.BatchRunsTake(ctx, b.ID, 1)
			if err != nil {
				return result{}, err
			}
			if len(ids) == 0 {
				cur, err := tx.BatchesGet(ctx, b.Namespace, b.ID)
				return result{st: cur.State}, err
			}
			out, clash := s.act(ctx, tx, b, ids[0])
			if clash {
				return result{}, errBatchClash
			}
			st, err := tx.BatchRunsSettle(ctx, b.ID, []store.BatchOutcome{out})
			return result{took: true, st: st, out: out}, err
		})
		if (errors.Is(err, errBatchClash) || store.IsTransient(err)) && tries < batchTries {
			s.c.clashes.Add(1)
			continue
		}
		if err != nil {
			return false, "", err
		}
		if r.took {
			switch r.out.Outcome {
			case "done":
				s.c.done.Add(1)
			case "failed":
				s.c.failed.Add(1)
			default:
				s.c.skipped.Add(1)
			}
		}
		return r.took, r.st, nil
	}
}

// act applies b's action to run id in a savepoint of tx: a refusal rolls
// back that run's statements only, and is its outcome. A run that is no
// longer in a status the action takes (it finished meanwhile, was
// deleted, is paused already, was retried before its delete) is skipped. clash reports a deadlock or
// another transient clash: no outcome, the run is to be tried again.
func (s *batches) act(ctx context.Context, tx *store.Store, b store.Batch, id uuid.UUID) (_ store.BatchOutcome, clash bool) {
	out := store.BatchOutcome{RunID: id, Outcome: "done"}
	var skip string
	err := tx.InTx(ctx, func(tx *store.Store) error {
		var err error
		switch b.Action {
		case store.BatchCancel:
			_, err = tx.RunsCancel(ctx, b.Namespace, id)
		case store.BatchTerminate:
			_, err = tx.RunsTerminate(ctx, b.Namespace, id, b.Reason)
		case store.BatchSignal:
			_, err = tx.EventsSend(ctx, store.EventsSendParams{Namespace: b.Namespace, RunID: id, Name: b.EventName, Payload: b.Payload})
		case store.BatchUpdate:
			var ev store.SentEvent
			ev, err = tx.UpdatesSend(ctx, store.UpdatesSendParams{Namespace: b.Namespace, RunID: id, Name: b.EventName, Payload: b.Payload})
			out.Detail = "update " + ev.ID.String()
		case store.BatchPause:
			var p store.RunPauseResult
			p, err = tx.RunsPause(ctx, b.Namespace, id, store.PauseOptions{By: batchBy(b), Reason: b.Reason})
			if err == nil && !p.Paused {
				skip = "paused already"
			}
		case store.BatchResume:
			var r store.RunResumeResult
			r, err = tx.RunsResume(ctx, b.Namespace, id)
			if err == nil && !r.Resumed {
				skip = "not paused"
			}
		case store.BatchRetry:
			_, err = tx.RunsRetry(ctx, b.Namespace, id)
		case store.BatchFork:
			var f store.RunsForkManyResult
			f, err = tx.RunsForkMany(ctx, store.RunsForkManyParams{Namespace: b.Namespace, RunID: id, FromFailedStep: true, Limit: 1})
			switch {
			case err == nil && f.Matched == 0:
				skip = "not FAILED"
			case err == nil && f.Forked == 0:
				skip = "forked from that step already"
			case err == nil && len(f.Forks) == 1:
				out.Detail = "fork " + f.Forks[0].Run.ID.String()
			}
		case store.BatchSetAttributes, store.BatchRemoveAttributes:
			// The payload is the change, checked at the batch's creation;
			// a declaration removed since, or a run past its limits, is
			// the run's failure.
			err = tx.RunsAttributesChange(ctx, b.Namespace, id, b.Payload)
		case store.BatchDelete:
			err = tx.RunsDelete(ctx, b.Namespace, id)
		default:
			err = fmt.Errorf("%w: batch action %q", store.ErrInvalidArgument, b.Action)
		}
		return err
	})
	switch {
	case store.IsTransient(err):
		return out, true
	case err != nil:
		out.Detail = ""
	}
	switch {
	case err == nil && skip != "":
		out.Outcome, out.Error, out.Detail = "skipped", skip, ""
	case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
		out.Outcome, out.Error = "skipped", err.Error()
	case err != nil:
		out.Outcome, out.Error = "failed", err.Error()
	}
	return out, false
}

// batchBy is who a batch's pause names: its creator, or the batch.
func batchBy(b store.Batch) string {
	if b.CreatedBy != "" {
		return b.CreatedBy
	}
	return "batch " + b.ID.String()
}
