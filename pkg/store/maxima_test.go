package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// Every duration and count a caller sets has a maximum, refused above it
// with ErrInvalidArgument saying so, never accepted (a run parked for
// decades) nor read as the default.
func TestMaximaAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.create(store.RunsCreateParams{})
	above := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "above the maximum") {
			t.Errorf("%s: %v, want ErrInvalidArgument saying \"above the maximum\"", what, err)
		}
	}
	invalid := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}

	_, err := e.s.RateLimitsSet(e.ctx, "ns", "r0", 1, 876000*time.Hour)
	above("rate period of 100 years", err)
	_, err = e.s.RateLimitsSet(e.ctx, "ns", "r0", 1, store.MaxRatePeriod+time.Millisecond)
	above("rate period just above a day", err)
	if _, err := e.s.RateLimitsSet(e.ctx, "ns", "r0", 1, store.MaxRatePeriod); err != nil {
		t.Errorf("rate period of a day: %v", err)
	}

	deb := func(window, maxWait time.Duration) error {
		_, _, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T",
			Debounce: &store.Debounce{Key: "k", Window: window, MaxWait: maxWait}})
		return err
	}
	above("debounce window of 100 years", deb(876000*time.Hour, 0))
	above("debounce max wait of 8 days", deb(time.Second, store.MaxDebounceWait+time.Hour))
	if err := deb(store.MaxDebounceWindow, store.MaxDebounceWait); err != nil {
		t.Errorf("debounce of a week: %v", err)
	}

	_, _, err = e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", ExternalID: "x",
		IDReuse: store.IDReuseReject, IDReuseWindow: store.MaxIDReuseWindow + time.Hour})
	above("id reuse window", err)

	long := store.MaxKeep + 24*time.Hour
	_, err = e.s.RetentionSet(e.ctx, store.RetentionSetParams{Namespace: "ns", KeepFailed: &long})
	above("retention", err)

	_, _, err = e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Limit: -1})
	invalid("a negative page size", err)
	_, _, err = e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Limit: store.MaxPageSize + 1})
	above("a page above the maximum", err)
	_, err = e.s.SchedulesHistory(e.ctx, "ns", uuid.New(), -1)
	invalid("a negative history size", err)
	_, err = e.s.WorkersList(e.ctx, store.WorkersListParams{Namespace: "ns", Limit: -1})
	invalid("a negative workers' limit", err)
	_, _, err = e.s.RunsExport(e.ctx, store.RunsExportParams{Namespace: "ns", Limit: -1})
	invalid("a negative export page", err)
	if runs, _, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns"}); err != nil || len(runs) == 0 {
		t.Errorf("page size 0 takes the default: %d runs, %v", len(runs), err)
	}

	_, err = e.s.StepsStream(e.ctx, store.StepsStreamParams{Namespace: "ns", RunID: run.ID, Name: "tok", After: 99999999998})
	above("a stream index past any entry", err)
	if _, err := e.s.StepsStream(e.ctx, store.StepsStreamParams{Namespace: "ns", RunID: run.ID, Name: "tok",
		After: protocol.MaxStreamEntries}); err != nil {
		t.Errorf("reading after the last possible entry: %v", err)
	}
}

// An id or key a caller chooses is printed where operators read it: one
// with a control character (a terminal escape) is refused, at every edge
// that takes one.
func TestIDsAndKeysRefuseControlCharacters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, bad := range []string{"a\x1b[2Jb", "tab\there", "new\nline", "c1\u009b", "del\x7f"} {
		for what, p := range map[string]store.RunsCreateParams{
			"external id":     {ExternalID: bad},
			"concurrency key": {ConcurrencyKey: bad},
			"rate limit key":  {RateLimitKey: bad},
			"debounce key":    {Debounce: &store.Debounce{Key: bad, Window: time.Second}},
		} {
			p.Namespace, p.Queue, p.Type = "ns", "q", "T"
			_, _, err := e.s.RunsCreate(e.ctx, p)
			if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "control character") {
				t.Errorf("%s %q: %v, want ErrInvalidArgument naming a control character", what, bad, err)
			}
		}
		_, err := e.s.EventsSend(e.ctx, store.EventsSendParams{Namespace: "ns", ExternalID: bad, Name: "e"})
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("event to external id %q: %v", bad, err)
		}
	}
	if _, _, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T",
		ExternalID: "order 42 — café ✓"}); err != nil {
		t.Errorf("printable text with spaces is an external id: %v", err)
	}
}
