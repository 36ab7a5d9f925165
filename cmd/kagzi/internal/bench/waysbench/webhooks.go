package waysbench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/webhook"
)

// WebhooksResult is the figures of the webhooks scenario.
type WebhooksResult struct {
	Scenario   string  `json:"scenario"`
	Deliveries int     `json:"deliveries"`
	Rate       float64 `json:"rate"`
	// Sec is the first request to the last answer; PerMin the deliveries
	// per minute that made.
	Sec    float64 `json:"sec"`
	PerMin float64 `json:"per_min"`
	// Each request, sent to answered, in milliseconds.
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// Accepted (202), Other (any other status or no answer); Replayed
	// deliveries sent again, Refused409 those refused as replays; Stored
	// the deliveries whose event is stored, with its name.
	Accepted   int  `json:"accepted"`
	Other      int  `json:"other"`
	Replayed   int  `json:"replayed"`
	Refused409 int  `json:"replays_refused"`
	Stored     int  `json:"stored"`
	TargetMin  int  `json:"target_per_min"`
	Met        bool `json:"met"`
}

// Rows implements the bench's Detail.
func (r *WebhooksResult) Rows() [][2]string {
	return [][2]string{
		{"scenario", r.Scenario},
		{"deliveries", fmt.Sprintf("%d signed GitHub deliveries to a console process at %s: %.1f s, %.0f per minute",
			r.Deliveries, rateText(r.Rate), r.Sec, r.PerMin)},
		{"request p50 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f ms", r.P50ms, r.P99ms, r.MaxMS)},
		{"accepted (202) / other", fmt.Sprintf("%d / %d", r.Accepted, r.Other)},
		{"events stored", fmt.Sprintf("%d of %d", r.Stored, r.Deliveries)},
		{"replays refused (409)", fmt.Sprintf("%d of %d", r.Refused409, r.Replayed)},
		{"every delivery once, none lost, >= 10,000/min", verdict(r.Met)},
	}
}

// webhooks runs the webhooks scenario.
func webhooks(ctx context.Context, d Deps, o Options) (*WebhooksResult, error) {
	r := &WebhooksResult{Scenario: "webhooks", Deliveries: o.N, Rate: o.Rate, TargetMin: TargetPerMin}
	var key [32]byte
	_, _ = rand.Read(key[:])
	secret := []byte(hex.EncodeToString(key[:]))
	if _, err := d.Store.WebhookSourcesCreate(ctx, store.WebhookSource{Namespace: "bench", Name: "gh",
		Source: webhook.Source{Kind: webhook.GitHub, Secret: secret, Template: "github.{event}"}}); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// The console, as its own process, as `kagzi console` runs it.
	cmd := exec.CommandContext(ctx, d.Exe, "--namespace", "bench", "console", "--addr", addr)
	cmd.Env = append(append(os.Environ(), d.Env...), "KAGZI_CONSOLE_ADDR="+addr)
	cmd.Stdout, cmd.Stderr = d.ServiceLog, d.ServiceLog
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start console: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	base := "http://" + addr
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: senders, MaxConnsPerHost: senders}}
	if _, err := waitFor(ctx, hc, base+"/healthz", "ok", 30*time.Second); err != nil {
		return nil, err
	}

	ids := make([]string, o.N)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	send := func(i int) (int, time.Duration) {
		body := fmt.Appendf(nil, `{"n": %d, "ref": "refs/heads/main", "repository": {"full_name": "kagzi/bench"}}`, i)
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhooks/gh", bytes.NewReader(body))
		if err != nil {
			return 0, 0
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		req.Header.Set("X-GitHub-Delivery", ids[i])
		req.Header.Set("X-GitHub-Event", "push")
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			d.Log.Warn("webhooks: send", "err", err)
			return 0, time.Since(start)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	if d.Counter != nil {
		d.Counter.AddTotal(int64(o.N))
	}
	lat := make([]float64, o.N)
	status := make([]int, o.N)
	start := time.Now()
	pace(ctx, o.N, o.Rate, func(i int) {
		s, took := send(i)
		status[i], lat[i] = s, ms(took)
		if d.Counter != nil {
			d.Counter.Add(1)
		}
	})
	el := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.Sec = measure.Round2(el.Seconds())
	r.PerMin = measure.Round2(float64(o.N) / el.Minutes())
	r.P50ms, r.P99ms, r.MaxMS = measure.Round2(measure.Pct(lat, 50)), measure.Round2(measure.Pct(lat, 99)), measure.Round2(measure.Pct(lat, 100))
	for _, s := range status {
		if s == http.StatusAccepted {
			r.Accepted++
		} else {
			r.Other++
		}
	}
	// The same deliveries again: refused, nothing added.
	r.Replayed = min(100, o.N)
	for i := range r.Replayed {
		if s, _ := send(i); s == http.StatusConflict {
			r.Refused409++
		}
	}
	var (
		mu       sync.Mutex
		firstErr error
	)
	pace(ctx, o.N, 0, func(i int) {
		e, err := d.Store.PublishedEventsGet(ctx, "bench", webhook.EventID("bench", "gh", ids[i]))
		mu.Lock()
		defer mu.Unlock()
		var p struct{ N int }
		switch {
		case err == nil && e.Name == "github.push" && json.Unmarshal(e.Payload, &p) == nil && p.N == i:
			r.Stored++
		case err != nil && firstErr == nil && !errors.Is(err, store.ErrNotFound):
			firstErr = err
		}
	})
	if firstErr != nil {
		return nil, firstErr
	}
	r.Met = r.Accepted == o.N && r.Other == 0 && r.Stored == o.N && r.Refused409 == r.Replayed && r.PerMin >= TargetPerMin
	return r, nil
}
