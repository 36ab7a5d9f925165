package console

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// retryStep makes a run that backs off before a failing step's next
// attempt try it now (client.RetryStepNow), optionally with new retry
// options: max_attempts (a number), initial_interval and max_interval
// (Go durations, "30s"), backoff (a number). The client checks their
// bounds; an absent or empty field keeps the step's value.
func (c *Console) retryStep(r *http.Request, ns string) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	var o client.RetryStepNowOptions
	if s := p["max_attempts"]; s != "" {
		if o.MaxAttempts, err = strconv.Atoi(s); err != nil || o.MaxAttempts == 0 {
			return nil, fmt.Errorf("%w: max_attempts %q is not a whole number from 1", store.ErrInvalidArgument, protocol.Echo(s))
		}
	}
	for _, d := range []struct {
		key string
		to  *time.Duration
	}{{"initial_interval", &o.InitialInterval}, {"max_interval", &o.MaxInterval}} {
		if s := p[d.key]; s != "" {
			if *d.to, err = time.ParseDuration(s); err != nil || *d.to == 0 {
				return nil, fmt.Errorf("%w: %s %q is not a positive duration (\"30s\")", store.ErrInvalidArgument, d.key, protocol.Echo(s))
			}
		}
	}
	if s := p["backoff"]; s != "" {
		if o.BackoffCoefficient, err = strconv.ParseFloat(s, 64); err != nil || o.BackoffCoefficient == 0 {
			return nil, fmt.Errorf("%w: backoff %q is not a number from 1", store.ErrInvalidArgument, protocol.Echo(s))
		}
	}
	steps, err := cl.RetryStepNow(r.Context(), id, o)
	if err != nil {
		return nil, err
	}
	c.hub.note(ns, []uuid.UUID{id}, false)
	return map[string]any{"run_id": id, "steps": steps}, nil
}
