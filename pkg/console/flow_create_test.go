package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
)

// TestRunPageDebounce: a debounced run's page names its key and how many
// starts it took in.
func TestRunPageDebounce(t *testing.T) {
	e := start(t, console.Options{})
	d := &client.Debounce{Key: "catalog", Window: time.Hour}
	var id string
	for i := range 3 {
		h, err := e.cl.Start(t.Context(), "Unserved", i, client.StartOptions{Debounce: d})
		if err != nil {
			t.Fatal(err)
		}
		id = h.RunID.String()
	}
	var got console.RunDetail
	e.getJSON("/api/v1/runs/"+id+"?ns=default", &got)
	if got.DebounceKey != "catalog" || got.DebounceStarts != 3 {
		t.Fatalf("detail: key %q starts %d, want catalog and 3", got.DebounceKey, got.DebounceStarts)
	}
	_, page := e.do(http.MethodGet, "/runs/"+id+"?ns=default", nil)
	if !strings.Contains(string(page), `id="debounce"`) || !strings.Contains(string(page), "catalog (3 starts merged)") {
		t.Errorf("run page lacks the debounce key:\n%s", page)
	}
	// It says why the run waits, and until when.
	if got.Waiting == nil || got.Waiting.Reason != "debounced" || got.Waiting.Until == nil {
		t.Fatalf("detail: waiting %+v, want debounced with a time", got.Waiting)
	}
	if !strings.Contains(string(page), `<dd id="waiting" data-reason="debounced">debounced: another start with its key before then pushes it back, until`) {
		t.Errorf("run page does not say why the run waits:\n%s", page)
	}
}

// A run's page and its JSON name its concurrency and rate limit keys.
func TestRunPageFlowKeys(t *testing.T) {
	e := start(t, console.Options{})
	h, err := e.cl.Start(t.Context(), "Unserved", nil, client.StartOptions{ConcurrencyKey: "customer-7", RateLimitKey: "crm-api"})
	if err != nil {
		t.Fatal(err)
	}
	id := h.RunID.String()
	var got console.RunDetail
	e.getJSON("/api/v1/runs/"+id+"?ns=default", &got)
	if got.ConcurrencyKey != "customer-7" || got.RateLimitKey != "crm-api" {
		t.Fatalf("detail: keys %q %q", got.ConcurrencyKey, got.RateLimitKey)
	}
	_, page := e.do(http.MethodGet, "/runs/"+id+"?ns=default", nil)
	if !strings.Contains(string(page), `<dd id="concurrency-key">customer-7</dd>`) || !strings.Contains(string(page), `<dd id="rate-key">crm-api</dd>`) {
		t.Errorf("run page lacks the flow keys:\n%s", page)
	}
}
