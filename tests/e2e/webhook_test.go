package e2e_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/webhook"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// hookEnv is a system with an OnPush workflow and a console.
type hookEnv struct {
	*env
	con     *console.Console
	console string
}

func startHooks(t *testing.T) *hookEnv {
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "OnPush", func(ctx workflow.Context, in struct {
			Ref string `json:"ref"`
		}) (string, error) {
			return "built " + in.Ref, nil
		})
	}})
	c, err := console.New(console.Options{Pool: e.srv.Pool, BasicAuth: "admin:secret"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return &hookEnv{env: e, con: c, console: srv.URL}
}

// deliver posts body with headers kv to /webhooks/source; it returns the
// status.
func (e *hookEnv) deliver(t *testing.T, source string, body []byte, kv ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.console+"/webhooks/"+source, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

func hexMAC(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// A GitHub-signed delivery starts the run of the trigger on github.push;
// replayed it is refused and starts nothing; a forged one, a Stripe one
// signed too long ago and an oversized one are refused and store nothing;
// the console counts each.
func TestWebhookDeliveriesBecomeEvents(t *testing.T) {
	t.Parallel()
	e := startHooks(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := e.srv.Store
	const ghSecret, stripeSecret = "github-secret-0123456789", "whsec_stripe-0123456789"
	for _, s := range []store.WebhookSource{
		{Namespace: "default", Name: "gh", Source: webhook.Source{Kind: webhook.GitHub, Secret: []byte(ghSecret), Template: "github.{event}"}},
		{Namespace: "default", Name: "stripe", Source: webhook.Source{Kind: webhook.Stripe, Secret: []byte(stripeSecret), Template: "stripe.{event}"}},
	} {
		if _, err := st.WebhookSourcesCreate(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.TriggersCreate(ctx, store.Trigger{Namespace: "default", Name: "build", Pattern: "github.push", Type: "OnPush", Queue: "default"}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"ref": "refs/heads/main"}`)
	signed := []string{"X-Hub-Signature-256", "sha256=" + hexMAC(ghSecret, string(body)), "X-GitHub-Delivery", "d-1", "X-GitHub-Event", "push"}
	if got := e.deliver(t, "gh", body, signed...); got != http.StatusAccepted {
		t.Fatalf("delivery: %d", got)
	}
	id := webhook.EventID("default", "gh", "d-1")
	var ev store.PublishedEvent
	var err error
	waitUntil(t, 30*time.Second, "the delivery's event fanned out", func() bool {
		ev, err = st.PublishedEventsGet(ctx, "default", id)
		return err == nil && ev.FannedOutAt != nil
	})
	if ev.Name != "github.push" || len(ev.Firings) != 1 {
		t.Fatalf("event: %+v", ev)
	}
	var out string
	if err := e.cl.Handle(ev.Firings[0].RunID).Result(ctx, &out); err != nil || out != "built refs/heads/main" {
		t.Fatalf("run: %q %v", out, err)
	}

	// The same delivery again: refused, nothing published.
	if got := e.deliver(t, "gh", body, signed...); got != http.StatusConflict {
		t.Fatalf("replay: %d", got)
	}
	// Forged: the right headers, a signature of another body.
	forged := []string{"X-Hub-Signature-256", "sha256=" + hexMAC("not-the-secret-0123", string(body)), "X-GitHub-Delivery", "d-2", "X-GitHub-Event", "push"}
	if got := e.deliver(t, "gh", body, forged...); got != http.StatusUnauthorized {
		t.Fatalf("forged: %d", got)
	}
	// Stripe, correctly signed ten minutes ago.
	sbody := []byte(`{"id": "evt_1", "type": "charge.succeeded"}`)
	ts := fmt.Sprint(time.Now().Add(-10 * time.Minute).Unix())
	if got := e.deliver(t, "stripe", sbody, "Stripe-Signature", "t="+ts+",v1="+hexMAC(stripeSecret, ts+"."+string(sbody))); got != http.StatusUnauthorized {
		t.Fatalf("stale stripe: %d", got)
	}
	// Over the console's body limit.
	big := []byte(`{"pad": "` + strings.Repeat("x", 4<<20) + `"}`)
	if got := e.deliver(t, "gh", big, "X-Hub-Signature-256", "sha256="+hexMAC(ghSecret, string(big)), "X-GitHub-Delivery", "d-3",
		"X-GitHub-Event", "push"); got != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized: %d", got)
	}
	if got := e.deliver(t, "nope", body, signed...); got != http.StatusNotFound {
		t.Fatalf("unknown source: %d", got)
	}

	// Nothing of the refused deliveries is stored: no event, no pending
	// fan-out, one run.
	for _, n := range []struct{ src, delivery string }{{"gh", "d-2"}, {"stripe", "evt_1"}, {"gh", "d-3"}} {
		if _, err := st.PublishedEventsGet(ctx, "default", webhook.EventID("default", n.src, n.delivery)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("event of refused delivery %v: %v", n, err)
		}
	}
	if pend, err := st.PublishedEventsPending(ctx, 10); err != nil || len(pend) != 0 {
		t.Fatalf("pending: %v %v", pend, err)
	}
	runs, _, err := st.RunsList(ctx, store.RunsListParams{Namespace: "default", Limit: 10})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %+v %v", runs, err)
	}
	want := webhook.Stats{Accepted: 1, Replayed: 1, BadSignature: 1, Stale: 1, TooLarge: 1, UnknownSource: 1}
	if got := e.con.WebhookStats(); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
}

// The curl example of docs/webhooks.md and the README's copy (openssl
// computes the generic form's HMAC), each against a stack of its own since
// the delivery id is single-use: it publishes shop.order.placed, whose
// trigger starts a run.
func TestWebhookDocExample(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"curl", "openssl"} {
		_, err := exec.LookPath(tool)
		needTool(t, tool, err)
	}
	for _, page := range []string{"../../docs/webhooks.md", "../../README.md"} {
		t.Run(page[len("../../"):], func(t *testing.T) {
			t.Parallel()
			e := startHooks(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const secret = "3f8a1c2e9b7d4a60c5e1f2a3b4c5d6e7"
			if _, err := e.srv.Store.WebhookSourcesCreate(ctx, store.WebhookSource{Namespace: "default", Name: "shop",
				Source: webhook.Source{Kind: webhook.Generic, Secret: []byte(secret), Template: "shop.order.{event}"}}); err != nil {
				t.Fatal(err)
			}
			var ran int
			for _, b := range docBlocks(t, page, "sh") {
				if !strings.Contains(b, "/webhooks/") {
					continue
				}
				ran++
				cmd := exec.Command("bash", "-c", "set -e\n"+b)
				cmd.Env = append(os.Environ(), "KAGZI_CONSOLE="+e.console, "SHOP_SECRET="+secret)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("the curl example failed: %v\n%s", err, out)
				}
			}
			if ran != 1 {
				t.Fatalf("%d webhook curl examples in %s, want 1", ran, page)
			}
			ev, err := e.srv.Store.PublishedEventsGet(ctx, "default", webhook.EventID("default", "shop", "order-T-1"))
			if err != nil || ev.Name != "shop.order.placed" {
				t.Fatalf("event: %+v %v", ev, err)
			}
			if s := e.con.WebhookStats(); s.Accepted != 1 {
				t.Fatalf("stats: %+v", s)
			}
		})
	}
}
