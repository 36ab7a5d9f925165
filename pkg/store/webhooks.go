package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/webhook"
)

// Webhooks (docs/webhooks.md): a webhook source's signed deliveries become
// published events. The signature formats are package webhook's; the store
// keeps the sources and, in the transaction that publishes a delivery's
// event, the delivery id, so a replay is refused and publishes nothing.

// MaxWebhookSources bounds the webhook sources of one namespace.
const MaxWebhookSources = 100

// ErrWebhookReplay is a delivery accepted before (its delivery id, or its
// event, is stored already): it is refused and nothing is added.
var ErrWebhookReplay = fmt.Errorf("%w: webhook delivery was received already", ErrConflict)

// WebhookSource is a configured webhook sender.
type WebhookSource struct {
	ID        uuid.UUID
	Namespace string
	// Name is unique in the namespace; POST /webhooks/{Name} receives.
	Name string
	// Source is the signature format, secret, tolerance and event name
	// template.
	webhook.Source
	CreatedAt time.Time
}

var (
	webhookSourcesCreateSQL = stmt("WebhookSourcesCreate")
	webhookSourcesListSQL   = stmt("WebhookSourcesList")
	webhookSourcesGetSQL    = stmt("WebhookSourcesGet")
	webhookSourcesDeleteSQL = stmt("WebhookSourcesDelete")
	webhookDeliveriesAddSQL = stmt("WebhookDeliveriesAdd")
)

// WebhookSourcesCreate adds a source. A name the namespace has already is
// ErrConflict; bad input or a namespace at MaxWebhookSources is
// ErrInvalidArgument.
func (s *Store) WebhookSourcesCreate(ctx context.Context, w WebhookSource) (WebhookSource, error) {
	for _, c := range []struct{ what, v string }{{"namespace", w.Namespace}, {"webhook source name", w.Name}} {
		if err := protocol.ValidToken(c.what, c.v); err != nil {
			return WebhookSource{}, invalidf("%v", err)
		}
	}
	if err := w.Check(); err != nil {
		return WebhookSource{}, invalidf("%v", err)
	}
	if w.Tolerance == 0 {
		w.Tolerance = webhook.DefaultTolerance
	}
	w.Tolerance = w.Tolerance.Truncate(time.Second)
	id, err := uuid.NewV7()
	if err != nil {
		return WebhookSource{}, fmt.Errorf("generate webhook source id: %w", err)
	}
	w.ID = id
	err = webhookSourcesCreateSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"source_id": id, "namespace": w.Namespace, "name": w.Name,
		"kind": string(w.Kind), "secret": string(w.Secret), "tolerance_s": int(w.Tolerance / time.Second),
		"event_template": w.Template, "max_sources": MaxWebhookSources}).Scan(&w.CreatedAt)
	if isNoRows(err) {
		if _, gerr := s.WebhookSourcesGet(ctx, w.Namespace, w.Name); gerr == nil {
			return WebhookSource{}, fmt.Errorf("%w: webhook source %q exists in namespace %q", ErrConflict, w.Name, w.Namespace)
		}
		return WebhookSource{}, invalidf("namespace %q has %d webhook sources, the most it may have", w.Namespace, MaxWebhookSources)
	}
	return w, mapErr("create webhook source", err)
}

func scanWebhookSource(r pgx.Row) (WebhookSource, error) {
	var (
		w            WebhookSource
		kind, secret string
		tol          int
	)
	err := r.Scan(&w.ID, &w.Namespace, &w.Name, &kind, &secret, &tol, &w.Template, &w.CreatedAt)
	w.Kind, w.Secret, w.Tolerance = webhook.Kind(kind), []byte(secret), time.Duration(tol)*time.Second
	return w, err
}

// WebhookSourcesList returns the sources of a namespace by name, with
// their secrets (which the CLI does not print).
func (s *Store) WebhookSourcesList(ctx context.Context, ns string) ([]WebhookSource, error) {
	rows, err := webhookSourcesListSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns})
	if err != nil {
		return nil, mapErr("list webhook sources", err)
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookSource, error) { return scanWebhookSource(r) })
	return ws, mapErr("list webhook sources", err)
}

// WebhookSourcesGet returns a source (ErrNotFound if there is none).
func (s *Store) WebhookSourcesGet(ctx context.Context, ns, name string) (WebhookSource, error) {
	w, err := scanWebhookSource(webhookSourcesGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns, "name": name}))
	return w, mapErr(fmt.Sprintf("webhook source %q", protocol.Echo(name)), err)
}

// WebhookSourcesDelete removes a source and its delivery records
// (ErrNotFound if there is none); the events it published stay.
func (s *Store) WebhookSourcesDelete(ctx context.Context, ns, name string) error {
	tag, err := webhookSourcesDeleteSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns, "name": name})
	if err != nil {
		return mapErr("delete webhook source", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("webhook source %q in namespace %q: %w", protocol.Echo(name), ns, ErrNotFound)
	}
	return nil
}

// WebhookDeliveriesAdd publishes a verified delivery of source w as event
// name with the body as payload, under the event id derived from
// (namespace, source, delivery id) (webhook.EventID), and records the
// delivery id, in one transaction. A delivery id recorded already, or an
// event with that id published already, is ErrWebhookReplay; other
// refusals are PublishedEventsAdd's. A refusal stores nothing.
func (s *Store) WebhookDeliveriesAdd(ctx context.Context, w WebhookSource, deliveryID, name string, body []byte) (uuid.UUID, error) {
	id := webhook.EventID(w.Namespace, w.Name, deliveryID)
	err := s.InTx(ctx, func(tx *Store) error {
		p, err := tx.PublishedEventsAdd(ctx, PublishParams{Namespace: w.Namespace, ID: id, Name: name, Payload: body})
		if errors.Is(err, ErrConflict) || (err == nil && !p.Created) {
			return ErrWebhookReplay
		}
		if err != nil {
			return err
		}
		var at time.Time
		err = webhookDeliveriesAddSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"source_id": w.ID, "delivery_id": deliveryID, "event_id": id}).Scan(&at)
		if isNoRows(err) {
			return ErrWebhookReplay
		}
		return mapErr("record webhook delivery", err)
	})
	return id, err
}
