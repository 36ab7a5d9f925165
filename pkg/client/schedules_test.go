package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestSchedulesLifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	type in struct {
		Days int `json:"days"`
	}
	before := time.Now()
	sc, err := f.cl.CreateSchedule(ctx, "Cleanup", in{Days: 30}, client.ScheduleOptions{
		Cron: "0 3 * * *", Timezone: "Europe/Paris", Version: "v2", MaxCatchup: 2,
		RetryPolicy: &retry.Policy{MaxAttempts: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Namespace != "default" || sc.Queue != "default" || sc.Type != "Cleanup" || sc.Version != "v2" ||
		sc.Timezone != "Europe/Paris" || sc.MaxCatchup != 2 || sc.Status != client.StatusScheduled ||
		sc.NextFireAt == nil || !sc.NextFireAt.After(before) || sc.NextFireAt.After(before.Add(25*time.Hour)) {
		t.Fatalf("created: %+v", sc)
	}
	got, err := f.cl.GetSchedule(ctx, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	var gotIn in
	if err := json.Unmarshal(got.Input, &gotIn); err != nil || gotIn.Days != 30 {
		t.Fatalf("input %q: %v", got.Input, err)
	}
	if got.RetryPolicy == nil || got.RetryPolicy.MaxAttempts != 4 {
		t.Fatalf("retry policy: %+v", got.RetryPolicy)
	}

	paused, err := f.cl.PauseSchedule(ctx, sc.ID)
	if err != nil || paused.Status != client.StatusPaused || paused.NextFireAt != nil {
		t.Fatalf("pause: %+v %v", paused, err)
	}
	resumed, err := f.cl.ResumeSchedule(ctx, sc.ID)
	if err != nil || resumed.Status != client.StatusScheduled || resumed.NextFireAt == nil || !resumed.NextFireAt.After(time.Now()) {
		t.Fatalf("resume: %+v %v", resumed, err)
	}

	h, err := f.cl.TriggerSchedule(ctx, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.cl.Get(ctx, h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.ScheduleID == nil || *run.ScheduleID != sc.ID || run.Type != "Cleanup" || run.Version != "v2" || string(run.Input) != `{"days":30}` {
		t.Fatalf("triggered run: %+v", run)
	}
	hist, err := f.cl.ScheduleHistory(ctx, sc.ID, 10)
	if err != nil || len(hist) != 1 || hist[0].ID != h.RunID {
		t.Fatalf("history: %+v %v", hist, err)
	}
	// Triggering does not move the schedule.
	if again, _ := f.cl.GetSchedule(ctx, sc.ID); !again.NextFireAt.Equal(*resumed.NextFireAt) {
		t.Fatalf("trigger moved the schedule: %v, was %v", again.NextFireAt, resumed.NextFireAt)
	}

	if err := f.cl.DeleteSchedule(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cl.GetSchedule(ctx, sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := f.cl.ScheduleHistory(ctx, sc.ID, 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("history of deleted: %v", err)
	}
	if err := f.cl.DeleteSchedule(ctx, sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := f.cl.TriggerSchedule(ctx, sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("trigger deleted: %v", err)
	}
	// The fired run stays.
	if _, err := f.cl.Get(ctx, h.RunID); err != nil {
		t.Fatalf("run of a deleted schedule: %v", err)
	}
}

func TestCreateScheduleValidation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	cases := []struct {
		name, typ string
		input     any
		o         client.ScheduleOptions
		want      error
		mention   string
	}{
		{"no cron", "T", nil, client.ScheduleOptions{}, store.ErrInvalidArgument, "cron"},
		{"bad cron", "T", nil, client.ScheduleOptions{Cron: "61 * * * *"}, store.ErrInvalidArgument, "61 * * * *"},
		{"bad zone", "T", nil, client.ScheduleOptions{Cron: "@daily", Timezone: "Mars/Base"}, store.ErrInvalidArgument, "Mars/Base"},
		{"bad type", "a.b", nil, client.ScheduleOptions{Cron: "@daily"}, store.ErrInvalidArgument, "workflow type"},
		{"bad queue", "T", nil, client.ScheduleOptions{Cron: "@daily", Queue: "q 1"}, store.ErrInvalidArgument, "queue"},
		{"negative catch-up", "T", nil, client.ScheduleOptions{Cron: "@daily", MaxCatchup: -1}, store.ErrInvalidArgument, "catch-up"},
		{"bad raw input", "T", json.RawMessage(`{`), client.ScheduleOptions{Cron: "@daily"}, store.ErrInvalidArgument, "JSON"},
		{"input that does not encode", "T", func() {}, client.ScheduleOptions{Cron: "@daily"}, store.ErrInvalidArgument, "JSON"},
	}
	for _, c := range cases {
		_, err := f.cl.CreateSchedule(ctx, c.typ, c.input, c.o)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: want %v mentioning %q, got %v", c.name, c.want, c.mention, err)
		}
	}
	list, _, err := f.cl.ListSchedules(ctx, client.ListSchedulesOptions{})
	if err != nil || len(list) != 0 {
		t.Fatalf("rejected schedules were stored: %+v %v", list, err)
	}
	// An id that exists is a conflict: creation by a derived id is idempotent.
	id := uuid.New()
	if _, err := f.cl.CreateSchedule(ctx, "T", nil, client.ScheduleOptions{ID: id, Cron: "@daily"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cl.CreateSchedule(ctx, "T", nil, client.ScheduleOptions{ID: id, Cron: "@daily"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("same id twice: %v", err)
	}
	if _, err := f.cl.GetSchedule(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
}

func TestListSchedulesPages(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	want := map[uuid.UUID]bool{}
	for i := 0; i < 5; i++ {
		sc, err := f.cl.CreateSchedule(ctx, "T", i, client.ScheduleOptions{Cron: "*/5 * * * *", Queue: "other"})
		if err != nil {
			t.Fatal(err)
		}
		want[sc.ID] = true
	}
	seen := map[uuid.UUID]bool{}
	cursor := ""
	for page := 0; ; page++ {
		list, next, err := f.cl.ListSchedules(ctx, client.ListSchedulesOptions{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range list {
			if sc.Queue != "other" || sc.Input != nil {
				t.Fatalf("listed: %+v", sc)
			}
			seen[sc.ID] = true
		}
		if next == "" {
			break
		}
		if page > 5 {
			t.Fatal("paging does not end")
		}
		cursor = next
	}
	if len(seen) != len(want) {
		t.Fatalf("saw %d schedules, want %d", len(seen), len(want))
	}
	for id := range want {
		if !seen[id] {
			t.Fatalf("schedule %s not listed", id)
		}
	}
	if _, _, err := f.cl.ListSchedules(ctx, client.ListSchedulesOptions{Cursor: "garbage"}); err == nil {
		t.Fatal("a garbage cursor was accepted")
	}
}
