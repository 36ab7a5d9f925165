package console

import (
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
)

// A step's row is written after it ran; its wait on the timeline is the gap
// since what came before it (the run's creation, then the previous step, a
// sleep between attempts included), never negative.
func TestTimelineWaitsFromWhatCameBefore(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) *time.Time { v := t0.Add(time.Duration(ms) * time.Millisecond); return &v }
	run := &store.Run{CreatedAt: t0, FinishedAt: at(1000)}
	steps := []store.Step{
		// Started 5 ms after the run was created; its row written 2 ms after it ended.
		{StepID: "a", RunAttempt: 1, StartedAt: at(5), FinishedAt: at(10), CreatedAt: *at(12)},
		// The worker's clock a little behind the database's: began before the
		// previous step's end as the database saw it.
		{StepID: "b", RunAttempt: 1, StartedAt: at(9), FinishedAt: at(20), CreatedAt: *at(21)},
		// After a 500 ms sleep, in the run's next execution.
		{StepID: "c", RunAttempt: 2, StartedAt: at(520), FinishedAt: at(530), CreatedAt: *at(531)},
	}
	got := timeline(run, steps, *at(1000))
	if len(got) != 2 || len(got[0].Steps) != 2 || len(got[1].Steps) != 1 {
		t.Fatalf("attempts: %+v", got)
	}
	want := []struct{ queue, exec int64 }{{5, 5}, {0, 11}, {500, 10}}
	all := append(append([]StepView{}, got[0].Steps...), got[1].Steps...)
	for i, w := range want {
		s := all[i]
		if s.QueueMS != w.queue || s.ExecMS != w.exec || s.Wait < 0 || s.Left < 0 || s.Start > 100 {
			t.Errorf("step %s: queue %d ms exec %d ms (want %d, %d), left %.1f wait %.1f", s.StepID, s.QueueMS, s.ExecMS, w.queue, w.exec, s.Left, s.Wait)
		}
	}
}

// A sleep's row is written when it starts; on the timeline it lasts until
// its wake time, and the step after it waits only from there.
func TestTimelineSleepLastsUntilItsWakeTime(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) *time.Time { v := t0.Add(time.Duration(ms) * time.Millisecond); return &v }
	run := &store.Run{CreatedAt: t0, FinishedAt: at(1100)}
	wake := []byte(`"` + at(1010).Format(time.RFC3339Nano) + `"`)
	steps := []store.Step{
		{StepID: "nap", Kind: store.StepSleep, Status: store.StepCompleted, RunAttempt: 1, StartedAt: at(10), FinishedAt: at(10),
			CreatedAt: *at(11), Output: wake},
		{StepID: "after", Kind: store.StepFunction, Status: store.StepCompleted, RunAttempt: 2, StartedAt: at(1015), FinishedAt: at(1020),
			CreatedAt: *at(1021)},
	}
	got := timeline(run, steps, *at(1100))
	nap, after := got[0].Steps[0], got[1].Steps[0]
	if nap.ExecMS != 1000 || after.QueueMS != 5 {
		t.Fatalf("the sleep lasts %d ms (want 1000), the next step waits %d ms (want 5)", nap.ExecMS, after.QueueMS)
	}
	// Still asleep: the bar ends now, not at the wake time ahead.
	got = timeline(&store.Run{CreatedAt: t0}, steps[:1], *at(400))
	if s := got[0].Steps[0]; s.ExecMS != 390 || s.Start+s.Width > 100.0001 {
		t.Fatalf("asleep: %d ms (want 390), ends at %.2f %%", s.ExecMS, s.Start+s.Width)
	}
}
