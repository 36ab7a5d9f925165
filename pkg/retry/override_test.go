package retry_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/retry"
)

func TestValidateOverrideBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p  retry.Policy
		ok bool
	}{
		{retry.Policy{MaxAttempts: 1}, true},
		{retry.Policy{MaxAttempts: retry.MaxOverrideAttempts}, true},
		{retry.Policy{MaxAttempts: retry.MaxOverrideAttempts + 1}, false},
		{retry.Policy{MaxAttempts: -1}, false},
		{retry.Policy{InitialInterval: time.Millisecond, MaxInterval: retry.MaxOverrideInterval}, true},
		{retry.Policy{InitialInterval: retry.MaxOverrideInterval + time.Millisecond}, false},
		{retry.Policy{MaxIntervalMS: retry.MaxOverrideInterval.Milliseconds() + 1}, false},
		{retry.Policy{InitialInterval: -time.Second}, false},
		{retry.Policy{InitialInterval: time.Minute, MaxInterval: time.Second}, false},
		{retry.Policy{BackoffCoefficient: 1}, true},
		{retry.Policy{BackoffCoefficient: retry.MaxOverrideBackoff}, true},
		{retry.Policy{BackoffCoefficient: retry.MaxOverrideBackoff + 1}, false},
		{retry.Policy{BackoffCoefficient: 0.5}, false},
		{retry.Policy{BackoffCoefficient: math.NaN()}, false},
		{retry.Policy{Jitter: 0.5}, false},
		{retry.Policy{NonRetryable: []string{"X"}}, false},
	} {
		err := c.p.ValidateOverride()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, retry.ErrInvalidPolicy)) {
			t.Errorf("ValidateOverride(%+v) = %v, want ok %v", c.p, err, c.ok)
		}
	}
}

func TestWithOverrideReplacesOnlyTheFieldsSet(t *testing.T) {
	t.Parallel()
	code := retry.Policy{MaxAttempts: 3, InitialInterval: time.Hour, MaxInterval: 4 * time.Hour, Jitter: -1, NonRetryable: []string{"Fatal"}}
	if got, want := code.WithOverride(nil), code.WithDefaults(); got.MaxAttempts != want.MaxAttempts || got.InitialInterval != want.InitialInterval {
		t.Fatalf("nil override: %+v, want %+v", got, want)
	}
	o := retry.Policy{MaxAttempts: 5, InitialInterval: 10 * time.Millisecond}.Overriding()
	if o.InitialInterval != 0 || o.InitialIntervalMS != 10 || o.MaxAttempts != 5 {
		t.Fatalf("Overriding: %+v", o)
	}
	p := code.WithOverride(&o)
	if p.MaxAttempts != 5 || p.InitialInterval != 10*time.Millisecond || p.MaxInterval != 4*time.Hour ||
		p.BackoffCoefficient != 2 || p.Jitter != -1 || !p.IsNonRetryable("Fatal") {
		t.Fatalf("override %+v of %+v: %+v", o, code, p)
	}
	if d := p.Delay(2, 0.5); d != 20*time.Millisecond {
		t.Fatalf("delay after attempt 2: %v", d)
	}
	// A lower cap alone caps the first wait too.
	p = code.WithOverride(&retry.Policy{MaxIntervalMS: 50})
	if p.InitialInterval != 50*time.Millisecond || p.MaxInterval != 50*time.Millisecond || p.Delay(1, 0.5) != 50*time.Millisecond {
		t.Fatalf("cap override: %+v", p)
	}
	if !(retry.Policy{}).IsZero() || (retry.Policy{MaxIntervalMS: 1}).IsZero() {
		t.Fatal("IsZero")
	}
}
