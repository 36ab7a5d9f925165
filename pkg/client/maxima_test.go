package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
)

// The client's maxima are the engine's: above one, a call fails with
// ErrInvalidArgument saying so instead of doing something else.
func TestClientMaxima(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := f.cl.Start(ctx, "T", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.cl.List(ctx, client.ListOptions{Limit: -1}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("List(Limit: -1): %v, want ErrInvalidArgument", err)
	}
	if runs, _, err := f.cl.List(ctx, client.ListOptions{}); err != nil || len(runs) != 1 {
		t.Errorf("List(Limit: 0) takes the default page: %d runs, %v", len(runs), err)
	}
	if _, _, err := f.cl.List(ctx, client.ListOptions{Limit: client.MaxPageSize + 1}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("List above MaxPageSize: %v", err)
	}
	above := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "above the maximum") {
			t.Errorf("%s: %v, want ErrInvalidArgument saying \"above the maximum\"", what, err)
		}
	}
	_, _, err = f.cl.StreamEntries(ctx, h.RunID, "tok", 99999999999)
	above("StreamEntries from 99999999999", err)
	r := f.cl.ReadStreamRaw(ctx, h.RunID, "tok", client.MaxStreamEntries+1)
	_, err = r.Next(ctx)
	r.Close()
	above("ReadStreamRaw past the last entry", err)
	_, err = f.cl.SetRateLimit(ctx, "r0", 1, 876000*time.Hour)
	above("SetRateLimit per 100 years", err)
	_, err = f.cl.Start(ctx, "Echo", nil, client.StartOptions{Debounce: &client.Debounce{Key: "k", Window: 876000 * time.Hour}})
	above("a debounce window of 100 years", err)
	_, err = f.cl.Start(ctx, "Echo", nil, client.StartOptions{Debounce: &client.Debounce{Key: "k", Window: time.Second,
		MaxWait: client.MaxDebounceWait + time.Second}})
	above("a debounce max wait above a week", err)
}

// Raw JSON that is not UTF-8 is refused, at every way in, rather than
// stored and read back with U+FFFD in place of each bad byte.
func TestRawJSONMustBeUTF8(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bad := json.RawMessage("{\"name\": \"caf\xe9\"}")
	if _, err := f.cl.Start(ctx, "T", bad, client.StartOptions{}); !errors.Is(err, client.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("start with Latin-1 JSON: %v, want ErrInvalidArgument about UTF-8", err)
	}
	h, err := f.cl.Start(ctx, "T", json.RawMessage(`{"name": "café"}`), client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cl.SendEvent(ctx, h.RunID, "e", bad); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("event with Latin-1 JSON: %v", err)
	}
	// Nested in a value: the RawMessage is copied as is by json.Marshal.
	if _, err := f.cl.SendEvent(ctx, h.RunID, "e", map[string]any{"raw": bad}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("event with Latin-1 JSON inside: %v", err)
	}
	r, err := f.cl.Get(ctx, h.RunID)
	if err != nil || string(r.Input) != `{"name": "café"}` {
		t.Errorf("UTF-8 input: %q %v", r.Input, err)
	}
}

// Get returns the flow control keys a run was started with.
func TestGetReturnsFlowKeys(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := f.cl.Start(ctx, "T", nil, client.StartOptions{ConcurrencyKey: "customer-7", RateLimitKey: "crm-api"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.cl.Get(ctx, h.RunID)
	if err != nil || r.ConcurrencyKey != "customer-7" || r.RateLimitKey != "crm-api" {
		t.Fatalf("Get: %q %q %v", r.ConcurrencyKey, r.RateLimitKey, err)
	}
}
