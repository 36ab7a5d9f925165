// Package retry owns Kagzi's retry policy: its fields, defaults, validation
// and the backoff it yields. It has no dependencies so the store, the wire
// protocol and the worker SDK share one definition.
package retry

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults, as a user of Temporal would expect them.
const (
	DefaultMaxAttempts        = 5
	DefaultInitialInterval    = time.Second
	DefaultBackoffCoefficient = 2.0
	DefaultMaxInterval        = 60 * time.Second
	DefaultJitter             = 0.2
)

// ErrInvalidPolicy is wrapped by every validation error of a Policy.
var ErrInvalidPolicy = errors.New("invalid retry policy")

// Policy says how often and how soon a failed run or step is tried again.
// Zero fields take the defaults (see WithDefaults). It is stored as JSON
// with durations in milliseconds.
type Policy struct {
	// MaxAttempts counts every attempt including the first; 1 means never
	// retry, a negative value means retry forever. 0 means the default (5).
	MaxAttempts int `json:"max_attempts,omitempty" kagzi:"1"`
	// InitialInterval is the wait before the second attempt (default 1 s).
	InitialInterval time.Duration `json:"-" kagzi:"-"`
	// BackoffCoefficient multiplies the wait after each failure (default 2).
	BackoffCoefficient float64 `json:"backoff_coefficient,omitempty" kagzi:"2"`
	// MaxInterval caps the wait (default 60 s).
	MaxInterval time.Duration `json:"-" kagzi:"-"`
	// Jitter spreads each wait by up to ±Jitter of itself (0 to 1, default
	// 0.2), so failures of many runs at once do not retry in lockstep. A
	// negative value disables jitter.
	Jitter float64 `json:"jitter,omitempty" kagzi:"3"`
	// NonRetryable lists error types that fail at once, whatever the
	// attempts left.
	NonRetryable []string `json:"non_retryable,omitempty" kagzi:"4"`

	// InitialIntervalMS and MaxIntervalMS carry the intervals in JSON and
	// on the wire (the kagzi tags number the fields of pkg/protocol's
	// binary form).
	InitialIntervalMS int64 `json:"initial_interval_ms,omitempty" kagzi:"5"`
	MaxIntervalMS     int64 `json:"max_interval_ms,omitempty" kagzi:"6"`
}

// Default returns the default policy: 5 attempts, 1 s, ×2, at most 60 s.
func Default() Policy { return Policy{}.WithDefaults() }

// WithDefaults fills zero fields with the defaults and syncs the
// millisecond fields used on the wire with the durations, which it keeps
// to whole milliseconds (at least 1 ms once set), as the wire does.
func (p Policy) WithDefaults() Policy {
	if p.InitialInterval == 0 && p.InitialIntervalMS > 0 {
		p.InitialInterval = fromMS(p.InitialIntervalMS)
	}
	if p.MaxInterval == 0 && p.MaxIntervalMS > 0 {
		p.MaxInterval = fromMS(p.MaxIntervalMS)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialInterval == 0 {
		p.InitialInterval = DefaultInitialInterval
	}
	if p.BackoffCoefficient == 0 {
		p.BackoffCoefficient = DefaultBackoffCoefficient
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = DefaultMaxInterval
	}
	// Keep what a worker reads back from the wire, which carries whole
	// milliseconds, so the policy a run is given is the policy it runs.
	p.InitialInterval, p.MaxInterval = wireInterval(p.InitialInterval), wireInterval(p.MaxInterval)
	if p.MaxInterval < p.InitialInterval {
		p.MaxInterval = p.InitialInterval
	}
	if p.Jitter == 0 {
		p.Jitter = DefaultJitter
	}
	p.InitialIntervalMS = p.InitialInterval.Milliseconds()
	p.MaxIntervalMS = p.MaxInterval.Milliseconds()
	return p
}

// maxIntervalMS is the longest interval in milliseconds a time.Duration
// holds (about 292 years).
const maxIntervalMS = math.MaxInt64 / int64(time.Millisecond)

// fromMS converts wire milliseconds to a duration, saturating instead of
// overflowing into a negative one.
func fromMS(ms int64) time.Duration {
	if ms > maxIntervalMS {
		ms = maxIntervalMS
	}
	return time.Duration(ms) * time.Millisecond
}

// wireInterval truncates d to whole milliseconds; a positive d under 1 ms
// becomes 1 ms, since 0 ms on the wire would mean the default.
func wireInterval(d time.Duration) time.Duration {
	ms := d.Milliseconds()
	if ms == 0 && d > 0 {
		ms = 1
	}
	return fromMS(ms)
}

// Validate reports the first field out of range.
func (p Policy) Validate() error {
	switch {
	case p.InitialInterval < 0 || p.InitialIntervalMS < 0:
		return fmt.Errorf("%w: initial interval %v is negative", ErrInvalidPolicy, p.InitialInterval)
	case p.MaxInterval < 0 || p.MaxIntervalMS < 0:
		return fmt.Errorf("%w: max interval %v is negative", ErrInvalidPolicy, p.MaxInterval)
	case p.InitialIntervalMS > maxIntervalMS || p.MaxIntervalMS > maxIntervalMS:
		return fmt.Errorf("%w: an interval of %d ms is longer than a time.Duration holds", ErrInvalidPolicy,
			max(p.InitialIntervalMS, p.MaxIntervalMS))
	case p.BackoffCoefficient != 0 && (p.BackoffCoefficient < 1 || math.IsNaN(p.BackoffCoefficient) || math.IsInf(p.BackoffCoefficient, 0)):
		return fmt.Errorf("%w: backoff coefficient %v must be at least 1", ErrInvalidPolicy, p.BackoffCoefficient)
	case p.Jitter > 1 || math.IsNaN(p.Jitter) || math.IsInf(p.Jitter, 0):
		// An infinite jitter would not even encode as JSON.
		return fmt.Errorf("%w: jitter %v must be a finite number at most 1", ErrInvalidPolicy, p.Jitter)
	}
	for _, t := range p.NonRetryable {
		if t == "" {
			return fmt.Errorf("%w: empty non-retryable error type", ErrInvalidPolicy)
		}
		// JSON would replace invalid UTF-8, so the stored type would never
		// match, and Postgres jsonb refuses \u0000.
		if !utf8.ValidString(t) || strings.ContainsRune(t, 0) {
			return fmt.Errorf("%w: non-retryable error type %q is not UTF-8 text without NUL", ErrInvalidPolicy, t)
		}
	}
	return nil
}

// Exhausted reports whether a run or step that has made attempts attempts
// may not be tried again.
func (p Policy) Exhausted(attempts int) bool {
	p = p.WithDefaults()
	return p.MaxAttempts > 0 && attempts >= p.MaxAttempts
}

// IsNonRetryable reports whether errType is listed as non-retryable.
func (p Policy) IsNonRetryable(errType string) bool {
	for _, t := range p.NonRetryable {
		if t == errType {
			return true
		}
	}
	return false
}

// Delay is the wait after failed attempt number attempt (1-based) before
// the next. rnd in [0,1) picks the jitter; pass rand.Float64().
func (p Policy) Delay(attempt int, rnd float64) time.Duration {
	p = p.WithDefaults()
	if attempt < 1 {
		attempt = 1
	}
	d := float64(p.InitialInterval) * math.Pow(p.BackoffCoefficient, float64(attempt-1))
	if d > float64(p.MaxInterval) || math.IsInf(d, 0) {
		d = float64(p.MaxInterval)
	}
	if p.Jitter > 0 {
		d += d * p.Jitter * (2*rnd - 1)
	}
	if d < 0 {
		d = 0
	}
	// Jitter can take d past the largest Duration, and converting such a
	// float to an integer yields a negative wait.
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// Bounds of the new retry options a failing step may be given while it
// backs off (RetryStepNow): an operator's override of the code's policy.
const (
	MaxOverrideAttempts = 10000
	// MaxOverrideInterval bounds both intervals: a step that should wait
	// longer is better paused.
	MaxOverrideInterval = 30 * 24 * time.Hour
	MaxOverrideBackoff  = 100.0
)

// ValidateOverride checks p as new retry options of a failing step: the
// checks of Validate, and each field that is set within its bound —
// MaxAttempts 1 to MaxOverrideAttempts, each interval at most
// MaxOverrideInterval (and the initial no longer than the maximum when both
// are set), BackoffCoefficient 1 to MaxOverrideBackoff. Zero fields keep the
// code's values; Jitter and NonRetryable are the code's and may not be set.
func (p Policy) ValidateOverride() error {
	if err := p.Validate(); err != nil {
		return err
	}
	initial, maxI := p.overrideIntervals()
	switch {
	case p.MaxAttempts < 0 || p.MaxAttempts > MaxOverrideAttempts:
		return fmt.Errorf("%w: max attempts %d must be 1 to %d", ErrInvalidPolicy, p.MaxAttempts, MaxOverrideAttempts)
	case initial > MaxOverrideInterval:
		return fmt.Errorf("%w: initial interval %v is longer than %v", ErrInvalidPolicy, initial, MaxOverrideInterval)
	case maxI > MaxOverrideInterval:
		return fmt.Errorf("%w: max interval %v is longer than %v", ErrInvalidPolicy, maxI, MaxOverrideInterval)
	case initial > 0 && maxI > 0 && initial > maxI:
		return fmt.Errorf("%w: initial interval %v is longer than the max interval %v", ErrInvalidPolicy, initial, maxI)
	case p.BackoffCoefficient > MaxOverrideBackoff:
		return fmt.Errorf("%w: backoff coefficient %v must be 1 to %v", ErrInvalidPolicy, p.BackoffCoefficient, MaxOverrideBackoff)
	case p.Jitter != 0 || len(p.NonRetryable) > 0:
		return fmt.Errorf("%w: jitter and non-retryable error types are the code's, not an override's", ErrInvalidPolicy)
	}
	return nil
}

// IsZero reports whether p sets no field: as an override, it changes
// nothing.
func (p Policy) IsZero() bool {
	initial, maxI := p.overrideIntervals()
	return p.MaxAttempts == 0 && initial == 0 && maxI == 0 && p.BackoffCoefficient == 0 &&
		p.Jitter == 0 && len(p.NonRetryable) == 0
}

// Overriding returns p as the override stored and sent on the wire: the
// fields an override sets, intervals in whole milliseconds only.
func (p Policy) Overriding() Policy {
	initial, maxI := p.overrideIntervals()
	return Policy{MaxAttempts: p.MaxAttempts, BackoffCoefficient: p.BackoffCoefficient,
		InitialIntervalMS: wireInterval(initial).Milliseconds(), MaxIntervalMS: wireInterval(maxI).Milliseconds()}
}

// WithOverride returns p (the code's policy) with the fields o sets
// replacing its own, defaults filled; a nil o leaves p as it is. Jitter and
// the non-retryable types stay p's.
func (p Policy) WithOverride(o *Policy) Policy {
	if o == nil {
		return p.WithDefaults()
	}
	p = p.WithDefaults()
	initial, maxI := o.overrideIntervals()
	if o.MaxAttempts != 0 {
		p.MaxAttempts = o.MaxAttempts
	}
	if o.BackoffCoefficient != 0 {
		p.BackoffCoefficient = o.BackoffCoefficient
	}
	if initial > 0 {
		p.InitialInterval = initial
		if maxI == 0 && p.MaxInterval < initial {
			p.MaxInterval = initial
		}
	}
	if maxI > 0 {
		p.MaxInterval = maxI
		if initial == 0 && p.InitialInterval > maxI {
			// A lower cap alone caps the first wait too.
			p.InitialInterval = maxI
		}
	}
	p.InitialIntervalMS, p.MaxIntervalMS = 0, 0
	return p.WithDefaults()
}

// overrideIntervals are the intervals p sets, as durations (a duration
// field wins over its millisecond field), 0 where unset.
func (p Policy) overrideIntervals() (initial, maxI time.Duration) {
	initial, maxI = p.InitialInterval, p.MaxInterval
	if initial == 0 && p.InitialIntervalMS > 0 {
		initial = fromMS(p.InitialIntervalMS)
	}
	if maxI == 0 && p.MaxIntervalMS > 0 {
		maxI = fromMS(p.MaxIntervalMS)
	}
	return initial, maxI
}
