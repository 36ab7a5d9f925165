package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// ForkView is one fork of a run on its page.
type ForkView struct {
	RunID     uuid.UUID `json:"run_id"`
	Step      string    `json:"step"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// ForkAnswer is what a fork action answers.
type ForkAnswer struct {
	RunID      uuid.UUID `json:"run_id"`
	Created    bool      `json:"created"`
	ForkedFrom uuid.UUID `json:"forked_from"`
	Step       string    `json:"step"`
}

// forkLinks fills d's links to the run it was forked from and its forks.
func (c *Console) forkLinks(ctx context.Context, ns string, id uuid.UUID, d *RunDetail) error {
	l, err := c.st.RunsForkLinks(ctx, ns, id)
	if err != nil {
		return err
	}
	d.ForkedFrom, d.ForkedAtStep, d.Forks = l.ForkedFrom, l.ForkedAtStep, []ForkView{}
	for _, f := range l.Forks {
		d.Forks = append(d.Forks, ForkView{RunID: f.RunID, Step: f.Step, Status: string(f.Status), CreatedAt: f.CreatedAt})
	}
	return nil
}

// forkRun forks the run the path names from the step given ("" from the
// start) through client.Fork, and answers with the fork (data-goto="run"
// opens it).
func (c *Console) forkRun(r *http.Request, ns string) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	h, err := cl.Fork(r.Context(), id, client.ForkOptions{Step: p["step"], Version: p["version"]})
	if err != nil {
		return nil, err
	}
	c.hub.note(ns, []uuid.UUID{h.RunID}, false)
	return ForkAnswer{RunID: h.RunID, Created: h.Created, ForkedFrom: id, Step: p["step"]}, nil
}

// bulkFork forks the failed runs of a dead-letter group (type and
// fingerprint, each optional; since and until bound their finish time)
// through client.ForkMany: each from its failed step unless a step is
// given, at most limit (default and cap maxBulkRetry). It answers with the
// counts and the forks.
func (c *Console) bulkFork(r *http.Request, ns string) (any, error) {
	p, cl, err := c.writeArgs(r, ns)
	if err != nil {
		return nil, err
	}
	f := client.ForkFilter{Type: p["type"], ErrorGroup: p["fingerprint"], Step: p["step"], FromFailedStep: p["step"] == "",
		Version: p["version"], Limit: maxBulkRetry}
	if l := p["limit"]; l != "" {
		if f.Limit, err = strconv.Atoi(l); err != nil || f.Limit <= 0 || f.Limit > maxBulkRetry {
			return nil, fmt.Errorf("%w: limit %q must be 1 to %d", store.ErrInvalidArgument, l, maxBulkRetry)
		}
	}
	for _, b := range []struct {
		key string
		to  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		t, err := parseTime(p[b.key])
		if err != nil {
			return nil, err
		}
		if t != nil {
			*b.to = *t
		}
	}
	res, err := cl.ForkMany(r.Context(), f)
	if err != nil {
		return nil, err
	}
	var made []uuid.UUID
	for _, fk := range res.Forks {
		if fk.Created {
			made = append(made, fk.RunID)
		}
	}
	if len(made) > 0 {
		c.hub.note(ns, made, false)
	}
	forks := make([]ForkAnswer, len(res.Forks))
	for i, fk := range res.Forks {
		forks[i] = ForkAnswer{RunID: fk.RunID, Created: fk.Created, ForkedFrom: fk.From, Step: fk.Step}
	}
	return map[string]any{"matched": res.Matched, "forked": res.Forked, "already_forked": res.AlreadyForked,
		"skipped": res.Skipped, "forks": forks}, nil
}
