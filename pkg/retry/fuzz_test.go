package retry_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/retry"
)

// FuzzPolicy checks what a caller's retry policy becomes. Validate never
// panics and fails only with ErrInvalidPolicy; a policy it accepts fills
// to an in-range, idempotent WithDefaults that keeps the intervals the
// caller set (to the millisecond the wire carries), survives the JSON the
// store writes and a worker reads back unchanged, and yields delays that
// are never negative, grow with the attempt and stay within MaxInterval
// plus jitter.
func FuzzPolicy(f *testing.F) {
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		attempts                int
		initial, maxI, iMS, mMS int64
		coef, jitter            float64
		nonRetryable            string
		attempt                 int
		rnd                     uint16
	}{
		{},
		{5, int64(time.Second), int64(time.Minute), 0, 0, 2, 0.2, "", 3, 1 << 15},
		{-1, 50 * ms, int64(time.Second), 0, 0, 1, -1, "Fatal,Other", 100, 0},
		{3, 0, 0, 500, 10000, 1.5, 0.1, "Fatal", 2, 65535},
		{1, 10 * ms, 5 * ms, 0, 0, 10, 1, "", 1, 7},
		{6, 200 * ms, 5 * int64(time.Second), 0, 0, 2, 0, "CardDeclined", 40, 9},
		{0, 1, 1, 0, 0, 0, 0, "", 1, 0},
		{0, 0, 0, math.MaxInt64, math.MaxInt64, 0, 0, "", 2, 1},
		{0, math.MaxInt64, math.MaxInt64, 0, 0, math.MaxFloat64, 1, "", math.MaxInt, 65535},
		{0, -1, 0, 0, 0, 0, 0, "", 0, 0},
		{0, 0, 0, -1, 0, 0, 0, "", 0, 0},
		{0, 0, 0, 0, 0, 0.5, 0, "", 0, 0},
		{0, 0, 0, 0, 0, 0, 1.5, "", 0, 0},
		{0, 0, 0, 0, 0, math.NaN(), 0, "", 0, 0},
		{0, 0, 0, 0, 0, 0, math.NaN(), "", 0, 0},
		{0, 0, 0, 0, 0, math.Inf(1), 0, "", 0, 0},
		{0, 0, 0, 0, 0, 0, 0, "a,,b", 0, 0},
	} {
		f.Add(c.attempts, c.initial, c.maxI, c.iMS, c.mMS, c.coef, c.jitter, c.nonRetryable, c.attempt, c.rnd)
	}
	f.Fuzz(func(t *testing.T, attempts int, initial, maxI, iMS, mMS int64, coef, jitter float64, nonRetryable string, attempt int, rnd uint16) {
		p := retry.Policy{MaxAttempts: attempts, InitialInterval: time.Duration(initial), MaxInterval: time.Duration(maxI),
			InitialIntervalMS: iMS, MaxIntervalMS: mMS, BackoffCoefficient: coef, Jitter: jitter}
		if nonRetryable != "" {
			p.NonRetryable = strings.Split(nonRetryable, ",")
		}
		if err := p.Validate(); err != nil {
			if !errors.Is(err, retry.ErrInvalidPolicy) {
				t.Fatalf("Validate(%+v) = %v, not ErrInvalidPolicy", p, err)
			}
			return
		}
		q := p.WithDefaults()
		if err := q.Validate(); err != nil {
			t.Fatalf("WithDefaults made %+v invalid: %+v: %v", p, q, err)
		}
		if again := q.WithDefaults(); !reflect.DeepEqual(again, q) {
			t.Fatalf("WithDefaults is not idempotent:\n%+v\n%+v", q, again)
		}
		switch {
		case q.MaxAttempts == 0:
			t.Fatalf("MaxAttempts left 0: %+v", q)
		case q.InitialInterval <= 0 || q.MaxInterval < q.InitialInterval:
			t.Fatalf("intervals out of order: %+v", q)
		case q.BackoffCoefficient < 1:
			t.Fatalf("backoff below 1: %+v", q)
		case q.Jitter == 0 || q.Jitter > 1:
			t.Fatalf("jitter out of range: %+v", q)
		case q.InitialIntervalMS != q.InitialInterval.Milliseconds() || q.MaxIntervalMS != q.MaxInterval.Milliseconds():
			t.Fatalf("millisecond fields disagree with the durations: %+v", q)
		}
		// An interval the caller set is kept, not replaced by the default.
		near := func(a, b time.Duration) bool { return a-b < time.Millisecond && b-a < time.Millisecond }
		if p.InitialInterval > 0 && !near(q.InitialInterval, p.InitialInterval) {
			t.Fatalf("initial interval %v became %v", p.InitialInterval, q.InitialInterval)
		}
		if p.InitialInterval == 0 && p.InitialIntervalMS > 0 && q.InitialIntervalMS != p.InitialIntervalMS {
			t.Fatalf("initial interval %d ms became %d ms", p.InitialIntervalMS, q.InitialIntervalMS)
		}
		if p.MaxInterval > 0 && !near(q.MaxInterval, max(p.MaxInterval, q.InitialInterval)) {
			t.Fatalf("max interval %v became %v (initial %v)", p.MaxInterval, q.MaxInterval, q.InitialInterval)
		}

		// The store writes q as JSON; a worker decodes it and fills defaults.
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatalf("a valid policy does not encode: %+v: %v", q, err)
		}
		var back retry.Policy
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		if back = back.WithDefaults(); !reflect.DeepEqual(back, q) {
			t.Fatalf("JSON round trip changed the policy:\n%+v\n%s\n%+v", q, b, back)
		}

		if q.MaxAttempts > 0 && (!p.Exhausted(q.MaxAttempts) || p.Exhausted(q.MaxAttempts-1)) {
			t.Fatalf("Exhausted disagrees with %d attempts", q.MaxAttempts)
		}
		r := float64(rnd) / (1 << 16)
		d := p.Delay(attempt, r)
		spread := 1.0
		if q.Jitter > 0 {
			spread += q.Jitter
		}
		if d < 0 || float64(d) > float64(q.MaxInterval)*spread*(1+1e-9) {
			t.Fatalf("Delay(%d, %v) = %v, outside [0, %v × %v]", attempt, r, d, q.MaxInterval, spread)
		}
		if q.Jitter < 0 {
			// Without jitter the waits grow from InitialInterval to MaxInterval.
			next := p.Delay(attempt+1, r)
			if attempt == math.MaxInt {
				next = d
			}
			lo := float64(q.InitialInterval) * (1 - 1e-9)
			if float64(d) < lo || next < d || d > q.MaxInterval {
				t.Fatalf("Delay(%d) = %v, Delay(%d) = %v, policy %+v", attempt, d, attempt+1, next, q)
			}
		}
	})
}
