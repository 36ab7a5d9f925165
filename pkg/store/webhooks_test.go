package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/webhook"
	"github.com/kagzi/kagzi/tests/testdb"
)

// Sources are validated with maxima and unique by name; a delivery is
// published once with its derived id, and a replay — the same delivery
// id, or the same event under a recreated source — adds nothing.
func TestWebhookSourcesAndDeliveries(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	count := func(table string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM kagzi."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	secret := []byte("0123456789abcdef")
	ok := store.WebhookSource{Namespace: "ns", Name: "gh", Source: webhook.Source{Kind: webhook.GitHub, Secret: secret, Template: "github.{event}"}}
	for _, bad := range []store.WebhookSource{
		{Namespace: "ns", Name: "a.b", Source: ok.Source},
		{Namespace: "ns", Name: strings.Repeat("n", 300), Source: ok.Source},
		{Namespace: "ns", Name: "x", Source: webhook.Source{Kind: "gitlab", Secret: secret, Template: "x"}},
		{Namespace: "ns", Name: "x", Source: webhook.Source{Kind: webhook.Stripe, Secret: secret, Template: "x", Tolerance: 2 * time.Hour}},
	} {
		if _, err := s.WebhookSourcesCreate(ctx, bad); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid", bad.Name, err)
		}
	}
	made, err := s.WebhookSourcesCreate(ctx, ok)
	if err != nil || made.Tolerance != webhook.DefaultTolerance {
		t.Fatalf("create: %+v %v", made, err)
	}
	if _, err := s.WebhookSourcesCreate(ctx, ok); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	got, err := s.WebhookSourcesGet(ctx, "ns", "gh")
	if err != nil || string(got.Secret) != string(secret) || got.Kind != webhook.GitHub || got.ID != made.ID {
		t.Fatalf("get: %+v %v", got, err)
	}
	if ws, err := s.WebhookSourcesList(ctx, "ns"); err != nil || len(ws) != 1 {
		t.Fatalf("list: %+v %v", ws, err)
	}

	id, err := s.WebhookDeliveriesAdd(ctx, got, "d1", "github.push", []byte(`{"a":1}`))
	if err != nil || id != webhook.EventID("ns", "gh", "d1") {
		t.Fatalf("deliver: %v %v", id, err)
	}
	if _, err := s.WebhookDeliveriesAdd(ctx, got, "d1", "github.push", []byte(`{"a":2}`)); !errors.Is(err, store.ErrWebhookReplay) {
		t.Fatalf("replay: %v", err)
	}
	if _, err := s.WebhookDeliveriesAdd(ctx, got, "d2", "github push", nil); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad name: %v", err)
	}
	if n := count("webhook_deliveries"); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
	// Deleted and made again, the source still refuses the old delivery.
	if err := s.WebhookSourcesDelete(ctx, "ns", "gh"); err != nil {
		t.Fatal(err)
	}
	if err := s.WebhookSourcesDelete(ctx, "ns", "gh"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete again: %v", err)
	}
	again, err := s.WebhookSourcesCreate(ctx, ok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WebhookDeliveriesAdd(ctx, again, "d1", "github.push", nil); !errors.Is(err, store.ErrWebhookReplay) {
		t.Fatalf("replay after recreation: %v", err)
	}
	if n, m := count("webhook_deliveries"), count("published_events"); n != 0 || m != 1 {
		t.Fatalf("%d deliveries, %d events", n, m)
	}
	if _, err := s.WebhookSourcesGet(ctx, "ns", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
}
