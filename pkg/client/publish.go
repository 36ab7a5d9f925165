package client

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/store"
)

// PublishOptions tune Publish.
type PublishOptions struct {
	// EventID is the event's idempotency key: publishing an id that was
	// published already adds nothing and returns the same id, so a
	// publisher may retry freely. Zero: a UUID v7 is made.
	EventID uuid.UUID
}

// Published is an event Publish stored, or found stored.
type Published struct {
	EventID uuid.UUID
	// Created is false when the id was published before: nothing was
	// added and no run will start twice.
	Created bool
}

// Publish publishes an event of the client's namespace (docs/triggers.md):
// every trigger whose pattern matches name starts a run, exactly once per
// trigger, with the payload (encoded as JSON; nil is null, a
// json.RawMessage is taken as it is), or the key of it the trigger names,
// as its input. The reaper's leader starts the runs shortly after, woken
// by the publish. Names are dot-separated tokens ("order.created"); a bad
// name or payload is ErrInvalidArgument, a payload above the limit
// ErrPayloadTooLarge, an event id reused for another name ErrConflict.
func (c *Client) Publish(ctx context.Context, name string, payload any, opts PublishOptions) (Published, error) {
	return c.publish(ctx, c.st, name, payload, opts)
}

// PublishTx is Publish inside the caller's transaction: the event exists,
// and its runs start, only if the caller commits.
func (c *Client) PublishTx(ctx context.Context, tx pgx.Tx, name string, payload any, opts PublishOptions) (Published, error) {
	return c.publish(ctx, c.st.WithTx(tx), name, payload, opts)
}

func (c *Client) publish(ctx context.Context, st *store.Store, name string, payload any, opts PublishOptions) (Published, error) {
	raw, err := encodeInput(payload)
	if err != nil {
		return Published{}, fmt.Errorf("publish %q: %w", name, err)
	}
	p, err := st.PublishedEventsAdd(ctx, store.PublishParams{Namespace: c.ns, ID: opts.EventID, Name: name, Payload: raw})
	if err != nil {
		return Published{}, fmt.Errorf("publish: %w", err)
	}
	return Published{EventID: p.ID, Created: p.Created}, nil
}
