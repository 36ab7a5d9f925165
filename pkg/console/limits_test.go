package console_test

import (
	"html"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/store"
)

// TestLimitsPanel: the queues view's Limits panel and /api/v1/limits show
// a per-key limit with the RUNNING runs of its type and of its busiest
// keys, and a rate limit with the claims of its current window; a key
// holding markup is shown as text.
func TestLimitsPanel(t *testing.T) {
	e := start(t, console.Options{})
	ctx := t.Context()
	st := e.srv.Store
	// No worker serves Limited: only the claim below runs its runs.
	const typ, hostileKey = "Limited", `<b onmouseover=alert(1)>k</b>`
	if _, err := st.LimitsSet(ctx, "default", "default", typ, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LimitsSetPerKey(ctx, "default", "default", typ, 2); err != nil {
		t.Fatal(err)
	}
	// A window of a day, the longest: the claims below and the reads
	// after them fall in the same one.
	if _, err := st.RateLimitsSet(ctx, "default", "crm-api", 5, store.MaxRatePeriod); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.RunsCreateParams{
		{ConcurrencyKey: "acme", RateLimitKey: "crm-api"}, {ConcurrencyKey: "acme", RateLimitKey: "crm-api"},
		{ConcurrencyKey: "acme"}, // over acme's 2: held back
		{ConcurrencyKey: hostileKey, RateLimitKey: "crm-api"}, {ConcurrencyKey: "beta"}, {},
	} {
		p.Namespace, p.Queue, p.Type = "default", "default", typ
		if _, _, err := st.RunsCreate(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: typ, Version: "v1"}}, Limit: 10, Lease: time.Hour})
	if err != nil || len(claimed) != 5 {
		t.Fatalf("claimed %d runs (%v), want 5", len(claimed), err)
	}

	var got console.LimitsView
	e.getJSON("/api/v1/limits?ns=default", &got)
	if len(got.Concurrency) != 1 || got.TopKeys != 10 {
		t.Fatalf("concurrency limits: %+v", got)
	}
	l := got.Concurrency[0]
	wantKeys := []console.KeyUsageView{{Key: "acme", Running: 2}, {Key: hostileKey, Running: 1}, {Key: "beta", Running: 1}}
	if l.Queue != "default" || l.Type != typ || l.Max != 10 || l.MaxPerKey != 2 || l.Running != 5 || len(l.Keys) != len(wantKeys) {
		t.Fatalf("limit of %s: %+v", typ, l)
	}
	// Busiest first; keys with as many runs are in the database's order.
	if l.Keys[0] != wantKeys[0] || !slices.Contains(l.Keys, wantKeys[1]) || !slices.Contains(l.Keys, wantKeys[2]) {
		t.Fatalf("busiest keys: %+v, want %+v", l.Keys, wantKeys)
	}
	if len(got.Rate) != 1 {
		t.Fatalf("rate limits: %+v", got.Rate)
	}
	r := got.Rate[0]
	if r.Key != "crm-api" || r.Limit != 5 || r.PeriodMS != store.MaxRatePeriod.Milliseconds() || r.Claims != 3 ||
		!r.WindowEnd.Equal(r.WindowStart.Add(store.MaxRatePeriod)) || !r.WindowEnd.After(time.Now()) {
		t.Fatalf("rate limit: %+v", r)
	}

	// The queues view's JSON carries the same panel.
	var qs struct {
		Limits     []console.LimitUseView  `json:"limits"`
		RateLimits []console.RateLimitView `json:"rate_limits"`
	}
	e.getJSON("/api/v1/queues?ns=default", &qs)
	if len(qs.Limits) != 1 || qs.Limits[0].Running != 5 || len(qs.Limits[0].Keys) != 3 || len(qs.RateLimits) != 1 || qs.RateLimits[0].Claims != 3 {
		t.Fatalf("queues view's limits: %+v %+v", qs.Limits, qs.RateLimits)
	}

	code, body := e.do(http.MethodGet, "/queues?ns=default", nil)
	page := string(body)
	if code != http.StatusOK {
		t.Fatalf("queues page: %d\n%s", code, page)
	}
	for _, want := range []string{
		`id="limits-panel"`,
		`<td class="running">5 / 10</td>`,
		`data-key="acme"`, `acme <b>2</b>/2`,
		`beta <b>1</b>/2`,
		html.EscapeString(hostileKey) + ` <b>1</b>/2`,
		`<tr data-rate-key="crm-api"><td>crm-api</td><td>5 per 24h0m0s</td><td class="claims">3 / 5</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("queues page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<b onmouseover") {
		t.Error("queues page renders a key's markup")
	}
}
