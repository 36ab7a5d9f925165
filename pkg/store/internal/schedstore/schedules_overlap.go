package schedstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// OverlapPolicies lists the policies, in the order of the documentation.
var OverlapPolicies = []OverlapPolicy{OverlapSkip, OverlapBufferOne, OverlapAllowAll, OverlapCancelOther, OverlapTerminateOther}

// ParseOverlap checks a policy's name; "" is OverlapAllowAll. An unknown
// name is ErrInvalidArgument.
func ParseOverlap(s string) (OverlapPolicy, error) {
	if s == "" {
		return OverlapAllowAll, nil
	}
	if p := OverlapPolicy(s); slices.Contains(OverlapPolicies, p) {
		return p, nil
	}
	return "", invalidf("overlap policy %q: want one of skip, buffer-one, allow-all, cancel-other, terminate-other", s)
}

// MaxJitter bounds a schedule's jitter.
const MaxJitter = 7 * 24 * time.Hour

// MaxBackfill bounds how many fire times one backfill may cover.
const MaxBackfill = 1000

// JitterDelay is the delay of the run fired for fireAt by schedule id with
// the given jitter: in [0, jitter), the same for the same schedule and fire
// time (a hash of both), so a retried or repeated fire gets the same
// delay, and spread over the range across fire times and schedules.
func JitterDelay(id uuid.UUID, fireAt time.Time, jitter time.Duration) time.Duration {
	if jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write(id[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(fireAt.UnixMicro()))
	_, _ = h.Write(b[:])
	// Microseconds: what Postgres keeps.
	n := uint64(jitter / time.Microsecond)
	if n == 0 {
		return 0
	}
	return time.Duration(h.Sum64()%n) * time.Microsecond
}

// jitteredAt is when the run fired for fireAt becomes available: nil (the
// statement's now()) without jitter, else fireAt plus its delay, which the
// statements raise to now() (greatest ignores a NULL) when it is past.
func jitteredAt(id uuid.UUID, fireAt time.Time, jitter time.Duration) *time.Time {
	if jitter <= 0 {
		return nil
	}
	at := fireAt.Add(JitterDelay(id, fireAt, jitter))
	return &at
}

// overlapPlan is what a policy makes of a sequence of fire times.
type overlapPlan struct {
	start []time.Time
	// buffered is the fire time held after the plan (nil: none).
	buffered *time.Time
	// stop: cancel or terminate the live instances first.
	stop bool
	// dropped are the fire times the policy started nothing for.
	dropped []time.Time
}

// planOverlap applies policy p to fires (oldest first), as if each came in
// turn: live says an instance is live before the first, buffered is the
// fire time held from before. Skip starts the first fire when nothing is
// live; BufferOne starts the held fire or the first when nothing is live
// and holds the next; CancelOther and TerminateOther stop the live
// instances and start the last fire only (each fire would stop the one
// before it).
func planOverlap(p OverlapPolicy, live bool, buffered *time.Time, fires []time.Time) overlapPlan {
	var pl overlapPlan
	switch p {
	case OverlapSkip:
		for _, f := range fires {
			if live {
				pl.dropped = append(pl.dropped, f)
				continue
			}
			pl.start, live = append(pl.start, f), true
		}
	case OverlapBufferOne:
		if !live && buffered != nil {
			pl.start, live, buffered = append(pl.start, *buffered), true, nil
		}
		for _, f := range fires {
			switch {
			case !live:
				pl.start, live = append(pl.start, f), true
			case buffered == nil:
				b := f
				buffered = &b
			default:
				pl.dropped = append(pl.dropped, f)
			}
		}
		pl.buffered = buffered
	case OverlapCancelOther, OverlapTerminateOther:
		if len(fires) > 0 {
			pl.stop = live
			pl.dropped = slices.Clone(fires[:len(fires)-1])
			pl.start = []time.Time{fires[len(fires)-1]}
		}
	default:
		pl.start = slices.Clone(fires)
	}
	return pl
}

// Overlap's statements, written in sql/schedules.sql.
var (
	schedulesLiveSQL           = stmt("SchedulesLive")
	schedulesLockSQL           = stmt("SchedulesLock")
	schedulesBufferSQL         = stmt("SchedulesBuffer")
	schedulesBackfillLockSQL   = stmt("SchedulesBackfillLock")
	schedulesBackfillBufferSQL = stmt("SchedulesBackfillBuffer")
	schedulesBackfillSQL       = stmt("SchedulesBackfill")
	schedulesFiredSQL          = stmt("SchedulesFired")
)

// scheduleLive returns the ids of a schedule's live instances.
func (s *Schedules) scheduleLive(ctx context.Context, id uuid.UUID) ([]uuid.UUID, error) {
	rows, err := schedulesLiveSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"schedule_id": id})
	if err != nil {
		return nil, mapErr("live instances", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	return ids, mapErr("live instances", err)
}

// stopLive cancels or terminates a schedule's live instances for a new
// fire; one that ended meanwhile is passed over.
func (s *Schedules) stopLive(ctx context.Context, sc Schedule, p OverlapPolicy, live []uuid.UUID) ([]uuid.UUID, error) {
	var stopped []uuid.UUID
	for _, id := range live {
		var err error
		if p == OverlapTerminateOther {
			_, err = s.RunsTerminate(ctx, sc.Namespace, id, fmt.Sprintf("schedule %s overlap policy terminate-other", sc.ID))
		} else {
			_, err = s.RunsCancel(ctx, sc.Namespace, id)
		}
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		stopped = append(stopped, id)
	}
	return stopped, nil
}

// schedulesFireOverlap fires one schedule with an overlap policy other
// than allow-all, in a transaction of its own: it locks the template if it
// is still due at due (else nothing happens: another scheduler, a pause or
// a delete came first), reads its live instances, plans the fires with the
// policy, stops the live instances (CancelOther, TerminateOther), creates
// the instances the plan starts and advances the template to next with the
// plan's held fire. The lock is taken before the live instances are read,
// which is what makes BufferOne's wakeup exact (migration 015's trigger
// locks the template when an instance ends).
func (s *Schedules) schedulesFireOverlap(ctx context.Context, sc Schedule, due time.Time, fires []time.Time, next *time.Time) (SchedulesFireDueManyResult, error) {
	res := SchedulesFireDueManyResult{ScheduleID: sc.ID}
	err := s.inTx(ctx, func(tx *Schedules) error {
		locked, err := scanSchedule(schedulesLockSQL.QueryRow(ctx, tx.h.DB,
			pgx.NamedArgs{"run_id": sc.ID, "namespace": sc.Namespace, "due": due}))
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return mapErr("lock schedule", err)
		}
		live, err := tx.scheduleLive(ctx, sc.ID)
		if err != nil {
			return err
		}
		pl := planOverlap(locked.Overlap, len(live) > 0, locked.BufferedFireAt, fires)
		if pl.stop {
			if res.Stopped, err = tx.stopLive(ctx, locked, locked.Overlap, live); err != nil {
				return err
			}
		}
		fired, err := tx.schedulesFire(ctx, []scheduleFiring{{namespace: sc.Namespace, id: sc.ID, due: due,
			fires: pl.start, next: next, jitter: locked.Jitter}}, "")
		if err != nil {
			return err
		}
		if !fired[0].advanced {
			return fmt.Errorf("schedule %s was locked due and did not advance", sc.ID)
		}
		if locked.Overlap == OverlapBufferOne {
			if _, err := schedulesBufferSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"run_id": sc.ID, "buffered": pl.buffered}); err != nil {
				return mapErr("buffer fire", err)
			}
		}
		res.Advanced, res.Runs, res.Dropped, res.Buffered = true, fired[0].runs, pl.dropped, pl.buffered
		return nil
	})
	if err != nil {
		return SchedulesFireDueManyResult{}, fmt.Errorf("fire schedule %s: %w", sc.ID, err)
	}
	return res, nil
}

// SchedulesBackfillParams name a backfill.
type SchedulesBackfillParams struct {
	Namespace  string
	ScheduleID uuid.UUID
	// From and To bound the fire times backfilled: the schedule's cron
	// times in [From, To). To may not be after Now.
	From, To time.Time
	// Overlap is the policy the backfill applies; "" means the schedule's.
	Overlap OverlapPolicy
	// Now is when the backfill runs; zero means time.Now().
	Now time.Time
}

// SchedulesBackfillResult is what a backfill did.
type SchedulesBackfillResult struct {
	// FireTimes are the cron times in the range, oldest first.
	FireTimes []time.Time
	// Runs are the instances the backfill started, oldest fire time first.
	Runs []Run
	// Existing are the fire times of the range that had a run already
	// (fired, triggered or backfilled before): started nothing.
	Existing []time.Time
	// Dropped are the fire times the policy started nothing for.
	Dropped []time.Time
	// Buffered is the fire time BufferOne holds after the backfill.
	Buffered *time.Time
	// Stopped are the live instances cancelled or terminated.
	Stopped []uuid.UUID
}

// SchedulesBackfill starts the runs of the schedule's fire times in
// [From, To) that have none, paused or not, applying the overlap policy as
// if the fire times came one after the other now: the policy is planned
// over every fire time of the range, and a fire time that has a run
// already starts nothing. A fire time fires once however often it is
// backfilled (the unique (schedule_id, schedule_fire_at) index), so a
// repeated backfill of the same range starts nothing new under
// allow-all, cancel-other and terminate-other; under skip and buffer-one
// it may start a fire time the first one dropped, if nothing is live by
// then. The schedule's next fire time does not move. A range of more
// than MaxBackfill fire times, an empty range or one ending after now is
// ErrInvalidArgument; an unknown schedule ErrNotFound.
func (s *Schedules) SchedulesBackfill(ctx context.Context, p SchedulesBackfillParams) (SchedulesBackfillResult, error) {
	var res SchedulesBackfillResult
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	if p.From.IsZero() || p.To.IsZero() || !p.From.Before(p.To) {
		return res, invalidf("backfill range [%s, %s) is empty", fmtTime(p.From), fmtTime(p.To))
	}
	if p.To.After(now) {
		return res, invalidf("backfill range ends at %s, after now (%s): the scheduler fires what is to come", fmtTime(p.To), fmtTime(now))
	}
	overlap := p.Overlap
	if overlap != "" {
		var err error
		if overlap, err = ParseOverlap(string(p.Overlap)); err != nil {
			return res, err
		}
	}
	err := s.inTx(ctx, func(tx *Schedules) error {
		sc, err := scanSchedule(schedulesBackfillLockSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"run_id": p.ScheduleID, "namespace": p.Namespace}))
		if err != nil {
			return mapErr(fmt.Sprintf("get schedule %s", p.ScheduleID), err)
		}
		loc, _, err := loadZone(sc.Timezone)
		if err != nil {
			return err
		}
		times, err := fireTimesIn(sc.Cron, loc, p.From, p.To, MaxBackfill)
		if err != nil {
			return err
		}
		res.FireTimes = times
		if overlap == "" {
			overlap = sc.Overlap
		}
		existing, err := tx.scheduleFired(ctx, sc.ID, times)
		if err != nil {
			return err
		}
		live, err := tx.scheduleLive(ctx, sc.ID)
		if err != nil {
			return err
		}
		buffered := sc.BufferedFireAt
		if overlap != OverlapBufferOne {
			buffered = nil
		}
		pl := planOverlap(overlap, len(live) > 0, buffered, times)
		var start []time.Time
		for _, t := range pl.start {
			if !existing[t.UnixMicro()] {
				start = append(start, t)
			}
		}
		for _, t := range times {
			if existing[t.UnixMicro()] {
				res.Existing = append(res.Existing, t)
			}
		}
		res.Dropped = pl.dropped
		if pl.buffered != nil && existing[pl.buffered.UnixMicro()] {
			pl.buffered = nil
		}
		if pl.stop && len(start) > 0 {
			if res.Stopped, err = tx.stopLive(ctx, sc, overlap, live); err != nil {
				return err
			}
		}
		if pl.buffered != nil && sc.Overlap != OverlapBufferOne {
			// Only a buffer-one schedule holds a fire.
			res.Dropped, pl.buffered = append(res.Dropped, *pl.buffered), nil
		}
		if sc.Overlap == OverlapBufferOne && overlap == OverlapBufferOne {
			if _, err := schedulesBackfillBufferSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"run_id": sc.ID, "buffered": pl.buffered}); err != nil {
				return mapErr("buffer fire", err)
			}
			res.Buffered = pl.buffered
		}
		if len(start) == 0 {
			return nil
		}
		ids, avail, traces := make([]uuid.UUID, len(start)), make([]*time.Time, len(start)), make([]string, len(start))
		for k, t := range start {
			if ids[k], err = newRunID(); err != nil {
				return err
			}
			if traces[k], err = newTraceParent(); err != nil {
				return err
			}
			avail[k] = jitteredAt(sc.ID, t, sc.Jitter)
		}
		rows, err := schedulesBackfillSQL.Query(ctx, tx.h.DB, pgx.NamedArgs{"schedule_id": sc.ID, "namespace": sc.Namespace,
			"run_ids": ids, "fire_ats": start, "available_ats": avail, "trace_contexts": traces})
		if err != nil {
			return mapErr("backfill", err)
		}
		res.Runs, err = collectRuns(rows)
		return mapErr("backfill", err)
	})
	if err != nil {
		return SchedulesBackfillResult{}, fmt.Errorf("backfill schedule %s: %w", p.ScheduleID, err)
	}
	return res, nil
}

// scheduleFired says which of times (by UnixMicro) already have an
// instance.
func (s *Schedules) scheduleFired(ctx context.Context, id uuid.UUID, times []time.Time) (map[int64]bool, error) {
	rows, err := schedulesFiredSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"schedule_id": id, "fire_ats": times})
	if err != nil {
		return nil, mapErr("fired times", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, mapErr("fired times", err)
	}
	out := make(map[int64]bool, len(got))
	for _, t := range got {
		out[t.UnixMicro()] = true
	}
	return out, nil
}

// fireTimesIn lists the cron's times in [from, to), UTC, oldest first; more
// than limit is ErrInvalidArgument.
func fireTimesIn(cron string, loc *time.Location, from, to time.Time, limit int) ([]time.Time, error) {
	var out []time.Time
	// The first time at or after from: the first strictly after a
	// microsecond before it (Postgres keeps microseconds).
	t := cronNext(cron, loc, from.Add(-time.Microsecond))
	for t != nil && t.Before(to) {
		if len(out) == limit {
			return nil, invalidf("backfill range [%s, %s) has more than %d fire times: split it", fmtTime(from), fmtTime(to), limit)
		}
		out = append(out, t.UTC())
		t = cronNext(cron, loc, *t)
	}
	return out, nil
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
