package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kagzi/kagzi/internal/durations"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// Retention: the queues view shows how long the namespace's finished runs
// are kept and sets the periods (of the namespace, or of one workflow
// type) through the client.

const day = 24 * time.Hour

// RetentionView is the retention of a namespace as the console shows it.
type RetentionView struct {
	// Completed (COMPLETED and CANCELLED runs) and Failed are the periods
	// of the namespace's types without their own; DefaultCompleted and
	// DefaultFailed those of every namespace without its own.
	Completed        PeriodView          `json:"completed"`
	Failed           PeriodView          `json:"failed"`
	DefaultCompleted PeriodView          `json:"default_completed"`
	DefaultFailed    PeriodView          `json:"default_failed"`
	Types            []TypeRetentionView `json:"types"`
}

// TypeRetentionView is the retention of one workflow type.
type TypeRetentionView struct {
	Type      string     `json:"type"`
	Completed PeriodView `json:"completed"`
	Failed    PeriodView `json:"failed"`
}

// PeriodView is one retention period.
type PeriodView struct {
	Seconds int64  `json:"seconds"` // 0: kept for ever
	Text    string `json:"text"`
}

func periodView(d time.Duration) PeriodView {
	return PeriodView{Seconds: int64(d / time.Second), Text: fmtPeriod(d)}
}

func retentionView(r *client.Retention) RetentionView {
	v := RetentionView{Completed: periodView(r.Periods.Completed), Failed: periodView(r.Periods.Failed),
		DefaultCompleted: periodView(r.Default.Completed), DefaultFailed: periodView(r.Default.Failed),
		Types: make([]TypeRetentionView, len(r.Types))}
	for i, t := range r.Types {
		v.Types[i] = TypeRetentionView{Type: t.Type, Completed: periodView(t.Periods.Completed), Failed: periodView(t.Periods.Failed)}
	}
	return v
}

func (c *Console) retentionData(r *http.Request, ns string) (any, error) {
	cl, err := c.client(ns)
	if err != nil {
		return nil, err
	}
	ret, err := cl.Retention(r.Context())
	if err != nil {
		return nil, err
	}
	return retentionView(ret), nil
}

// setRetention sets the periods given (type: of that workflow type only;
// completed, failed: "7d", "12h", "0" or "forever"; an empty one is left
// as it is).
func (c *Console) setRetention(r *http.Request, ns string) (any, error) {
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	o := client.RetentionOptions{Type: strings.TrimSpace(p["type"])}
	if o.Completed, err = parsePeriod("completed", p["completed"]); err != nil {
		return nil, err
	}
	if o.Failed, err = parsePeriod("failed", p["failed"]); err != nil {
		return nil, err
	}
	ret, err := cl.SetRetention(r.Context(), o)
	if err != nil {
		return nil, err
	}
	return retentionView(ret), nil
}

// parsePeriod reads a period as the CLI takes it: days (7d), a Go
// duration (12h), both (1d12h), or 0 / forever; "" is not given.
func parsePeriod(what, s string) (*time.Duration, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return nil, nil
	}
	var d time.Duration
	if s == "0" || s == "forever" {
		return &d, nil
	}
	d, err := durations.Parse(s)
	switch {
	case errors.Is(err, durations.ErrTooLong):
		// Too long to hold: the store, which checks every other period,
		// cannot see it.
		return nil, fmt.Errorf("%w: %s retention %s is above the maximum %s (0 keeps for ever)", store.ErrInvalidArgument, what, s,
			durations.Format(store.MaxKeep))
	case err != nil || d < 0:
		return nil, fmt.Errorf("%w: %s %q: give days (7d), a duration (12h) or forever", store.ErrInvalidArgument, what, s)
	}
	return &d, nil
}

func fmtPeriod(d time.Duration) string {
	switch {
	case d == 0:
		return "forever"
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d > day:
		return fmt.Sprintf("%dd%s", d/day, d%day)
	}
	return d.String()
}
