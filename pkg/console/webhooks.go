package console

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/webhook"
)

// Webhooks: POST /webhooks/{source} publishes a signed delivery of a
// webhook source of the console's namespace as an event
// (docs/webhooks.md). The signature is the credential, so the route is
// outside the guard, as /callbacks/ is. Package webhook verifies; this
// reads, counts and publishes.

// WebhookStats returns the counts of the webhook deliveries this console
// received: accepted, and refused by reason.
func (c *Console) WebhookStats() webhook.Stats { return c.hooks.Stats() }

// refuseWebhook counts a refused delivery and answers with status.
func (c *Console) refuseWebhook(w http.ResponseWriter, o webhook.Outcome, status int, err error) {
	c.hooks.Count(o)
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func (c *Console) receiveWebhook(w http.ResponseWriter, r *http.Request) {
	if c.opts.ReadOnly {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "the console is read-only"})
		return
	}
	ctx := r.Context()
	src, err := c.st.WebhookSourcesGet(ctx, c.opts.Namespace, r.PathValue("source"))
	if errors.Is(err, store.ErrNotFound) {
		c.refuseWebhook(w, webhook.UnknownSource, http.StatusNotFound, err)
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if err = bodyErr(err); errors.Is(err, store.ErrPayloadTooLarge) {
			c.refuseWebhook(w, webhook.TooLarge, http.StatusRequestEntityTooLarge, err)
		} else {
			writeErr(w, err)
		}
		return
	}
	d, err := webhook.Verify(src.Source, r.Header, body, time.Now())
	if err != nil {
		o, status := webhook.Refusal(err)
		c.refuseWebhook(w, o, status, err)
		return
	}
	id, err := c.st.WebhookDeliveriesAdd(ctx, src, d.ID, webhook.EventName(src.Template, d), body)
	switch {
	case err == nil:
		c.hooks.Count(webhook.Accepted)
		writeJSON(w, http.StatusAccepted, map[string]string{"event_id": id.String()})
	case errors.Is(err, store.ErrWebhookReplay):
		c.refuseWebhook(w, webhook.Replayed, http.StatusConflict, err)
	case errors.Is(err, store.ErrPayloadTooLarge):
		c.refuseWebhook(w, webhook.TooLarge, http.StatusRequestEntityTooLarge, err)
	case errors.Is(err, store.ErrInvalidArgument):
		c.refuseWebhook(w, webhook.Malformed, http.StatusBadRequest, err)
	default:
		writeErr(w, err)
	}
}
