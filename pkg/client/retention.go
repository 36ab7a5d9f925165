package client

import (
	"context"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
)

// Retention: finished runs are deleted, with their steps, payloads and
// events, once they are older than their namespace's (or their workflow
// type's) retention period. The reaper deletes them; the periods are
// settings of the database, which these methods read and change for the
// client's namespace.

// RetentionPeriods are how long finished runs are kept after they finish:
// Completed for COMPLETED and CANCELLED runs, Failed for FAILED runs
// (dead letters, which can still be retried until then). Zero keeps them
// for ever.
type RetentionPeriods struct {
	Completed, Failed time.Duration
}

// Retention is the retention of the client's namespace.
type Retention struct {
	// Periods apply to the namespace's workflow types without periods of
	// their own: the namespace's, where it set them, else Default's.
	Periods RetentionPeriods
	// Default is what every namespace without periods of its own keeps
	// (7 and 30 days unless an operator changed it: store.DefaultKeepCompleted,
	// store.DefaultKeepFailed).
	Default RetentionPeriods
	// Types are the workflow types with a period of their own, by name,
	// with the periods that apply to them.
	Types []TypeRetention
}

// TypeRetention is the retention of one workflow type.
type TypeRetention struct {
	Type    string
	Periods RetentionPeriods
}

// RetentionOptions change one retention policy of the namespace.
type RetentionOptions struct {
	// Type, if set, changes the periods of that workflow type only.
	Type string
	// Completed and Failed are the new periods (zero: keep for ever; else
	// from store.MinKeep to store.MaxKeep); nil leaves a period as it is
	// (inherited, for a policy set for the first time). One at least is
	// needed.
	Completed, Failed *time.Duration
}

// SetRetention changes how long the namespace's finished runs (or one
// workflow type's) are kept and returns the namespace's retention. The
// reaper applies it within the hour; a shorter period deletes at once the
// runs it makes expired.
func (c *Client) SetRetention(ctx context.Context, o RetentionOptions) (*Retention, error) {
	if _, err := c.st.RetentionSet(ctx, store.RetentionSetParams{Namespace: c.ns, Type: o.Type,
		KeepCompleted: o.Completed, KeepFailed: o.Failed}); err != nil {
		return nil, err
	}
	return c.Retention(ctx)
}

// RemoveRetention removes the periods of workflow type typ (typ "": the
// namespace's own), which then inherits again; ErrNotFound if it had none.
func (c *Client) RemoveRetention(ctx context.Context, typ string) error {
	return c.st.RetentionDelete(ctx, c.ns, typ)
}

// Retention returns the retention of the client's namespace.
func (c *Client) Retention(ctx context.Context) (*Retention, error) {
	pols, err := c.st.RetentionList(ctx, c.ns)
	if err != nil {
		return nil, err
	}
	periods := func(r store.Retention) RetentionPeriods {
		return RetentionPeriods{Completed: r.KeepCompleted, Failed: r.KeepFailed}
	}
	out := &Retention{Periods: periods(store.RetentionFor(pols, c.ns, "")), Default: periods(store.RetentionFor(pols, "", ""))}
	for _, p := range pols {
		if p.Namespace == c.ns && p.Type != "" {
			out.Types = append(out.Types, TypeRetention{Type: p.Type, Periods: periods(store.RetentionFor(pols, c.ns, p.Type))})
		}
	}
	return out, nil
}
