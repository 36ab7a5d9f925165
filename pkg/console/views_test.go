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
