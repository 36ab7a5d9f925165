// Package httpbench is kagzi bench's http scenario: runs are started at a
// fixed rate, by turns with the Go client and through the HTTP API
// (POST /v1/runs on a web console of the bench's database, with a pool of
// its own, over keep-alive connections from this process), and each
// start's latency, call to answer, is measured per path. The target: the
// HTTP p99 at most TargetMS above the Go client's.
package httpbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/store"
)

// Defaults and target of the http scenario.
const (
	// DefaultRate is the starts per second of the load, both paths
	// together (--rate).
	DefaultRate = 200
	// DefaultDuration is how long each load lasts (--duration).
	DefaultDuration = 15 * time.Second
	// TargetMS bounds the HTTP start p99 above the Go client's.
	TargetMS = 5.0
	// queue is served by no worker: the scenario measures the start alone.
	queue = "httpbench"
	// warmup is the starts of each path before the load.
	warmup = 100
)

// Result is the http scenario's figures, in milliseconds.
type Result struct {
	Scenario string  `json:"scenario"`
	Rate     float64 `json:"rate"`
	// Starts is the starts of each path.
	Starts int `json:"starts"`
	// GoP50ms..HTTPP99ms are the starts' latencies by path.
	GoP50ms   float64 `json:"go_p50_ms"`
	GoP99ms   float64 `json:"go_p99_ms"`
	HTTPP50ms float64 `json:"http_p50_ms"`
	HTTPP99ms float64 `json:"http_p99_ms"`
	// DeltaP99ms is HTTPP99ms - GoP99ms.
	DeltaP99ms float64 `json:"delta_p99_ms"`
	TargetMS   float64 `json:"target_ms"`
	Met        bool    `json:"met"`
}

// Rows implements the bench's Detail.
func (r *Result) Rows() [][2]string {
	return [][2]string{
		{"scenario", r.Scenario},
		{"load", fmt.Sprintf("%d starts by each path, taking turns, at %.0f/s in all", r.Starts, r.Rate)},
		{"Go client start", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", r.GoP50ms, r.GoP99ms)},
		{"HTTP start (POST /v1/runs)", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", r.HTTPP50ms, r.HTTPP99ms)},
		{"p99 above the Go client's", fmt.Sprintf("%.2f ms (target ≤ %.0f ms: %s)", r.DeltaP99ms, r.TargetMS, verdict(r.Met))},
	}
}

// Options are the scenario's settings.
type Options struct {
	// Rate is the starts per second of the load (the paths taking turns);
	// Duration how long it lasts.
	Rate     float64
	Duration time.Duration
}

// Deps is what the bench gives the scenario: its client, the database
// (whose pool's config the console's pool copies) and NATS, and its log.
type Deps struct {
	Client *client.Client
	Store  *store.Store
	Pool   *pgxpool.Pool
	NATS   *nats.Conn
	Log    *slog.Logger
}

// Run runs the scenario.
func Run(ctx context.Context, d Deps, o Options) (*Result, error) {
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	ns := d.Client.Namespace()
	// The console is a process of its own in a deployment: it gets a pool
	// of its own, as the bench's pool's config makes it.
	pool, err := pgxpool.NewWithConfig(ctx, d.Pool.Config().Copy())
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	con, err := console.New(console.Options{Pool: pool, NATS: d.NATS, Namespace: ns})
	if err != nil {
		return nil, err
	}
	defer con.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	tok, secret, err := d.Store.APITokensCreate(ctx, store.APITokenParams{Namespace: ns, Name: fmt.Sprintf("bench-%d", time.Now().UnixNano()),
		Scopes: []string{store.ScopeRunsStart}, Rate: store.MaxAPITokenRate})
	if err != nil {
		return nil, err
	}
	defer func() { _, _ = d.Store.APITokensRevoke(context.WithoutCancel(ctx), ns, tok.Name) }()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}, Timeout: 30 * time.Second}
	url := "http://" + ln.Addr().String() + "/v1/runs"
	body := []byte(`{"type": "Noop", "queue": "` + queue + `", "input": {"steps": 0}}`)
	viaHTTP := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("POST /v1/runs: %d %s", resp.StatusCode, b)
		}
		return nil
	}
	viaGo := func(ctx context.Context) error {
		_, err := d.Client.Start(ctx, "Noop", map[string]int{"steps": 0}, client.StartOptions{Queue: queue})
		return err
	}
	r := &Result{Scenario: "http", Rate: o.Rate, Starts: int(o.Rate * o.Duration.Seconds() / 2), TargetMS: TargetMS}
	for range warmup {
		if err := errors.Join(viaGo(ctx), viaHTTP(ctx)); err != nil {
			return nil, err
		}
	}
	// One load, the paths taking turns start by start: both meet the same
	// database, host and moment, which two loads one after the other on a
	// shared host would not.
	lat, err := load(ctx, func(ctx context.Context, i int) error {
		if i%2 == 0 {
			return viaGo(ctx)
		}
		return viaHTTP(ctx)
	}, 2*r.Starts, o.Rate)
	if err != nil {
		return nil, err
	}
	var goLat, httpLat []float64
	for i, l := range lat {
		if i%2 == 0 {
			goLat = append(goLat, l)
		} else {
			httpLat = append(httpLat, l)
		}
	}
	r.GoP50ms, r.GoP99ms = pct(goLat, 50), pct(goLat, 99)
	r.HTTPP50ms, r.HTTPP99ms = pct(httpLat, 50), pct(httpLat, 99)
	d.Log.Info("http: load measured", "starts", 2*r.Starts, "go_p99_ms", r.GoP99ms, "http_p99_ms", r.HTTPP99ms)
	r.DeltaP99ms = round2(r.HTTPP99ms - r.GoP99ms)
	r.Met = r.DeltaP99ms <= TargetMS
	return r, nil
}

// load calls start n times (with its index) at rate per second, each on its own schedule
// (open loop: a slow start does not delay the next), and returns each
// call's latency in milliseconds.
func load(ctx context.Context, start func(context.Context, int) error, n int, rate float64) ([]float64, error) {
	lat := make([]float64, n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	t0 := time.Now()
	for i := range n {
		at := t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if w := time.Until(at); w > 0 {
			t := time.NewTimer(w)
			select {
			case <-ctx.Done():
				t.Stop()
				wg.Wait()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			err := start(ctx, i)
			lat[i] = float64(time.Since(s).Microseconds()) / 1000
			if err != nil {
				mu.Lock()
				first = errors.Join(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, first
}

// pct is the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return round2(s[max(0, min(i, len(s)-1))])
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}
