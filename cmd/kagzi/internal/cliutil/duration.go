package cliutil

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/kagzi/kagzi/internal/durations"
)

// Every duration the CLI reads goes through ParseDuration (a flag given
// as text) or DurationVar (a duration flag): days (7d), a Go duration
// (12h, 1.5s) or both (1d12h), each with its maximum. The maxima are the
// engine's own constants (store.MaxDebounceWindow, …), which the store
// checks again for every other caller: the CLI checks first only to name
// the flag, and to say "above the maximum" of a value too long to hold.

// ParseDuration reads the value s of flag, at most max (0: as long as a
// duration holds).
func ParseDuration(flag, s string, max time.Duration) (time.Duration, error) {
	d, err := CheckDuration(s, max)
	if err != nil {
		return 0, Usagef("%s %s", flag, err)
	}
	return d, nil
}

// CheckDuration is ParseDuration without the flag's name.
func CheckDuration(s string, max time.Duration) (time.Duration, error) {
	if max <= 0 {
		max = durations.Longest
	}
	d, err := durations.Parse(s)
	switch {
	case errors.Is(err, durations.ErrTooLong), err == nil && d > max:
		return 0, fmt.Errorf("%s is above the maximum %s", s, durations.Format(max))
	case err != nil:
		return 0, fmt.Errorf("%q: give days (7d), a duration (12h) or both (1d12h)", s)
	}
	return d, nil
}

// DurationValue is a duration flag read by CheckDuration.
type DurationValue struct {
	d   *time.Duration
	max time.Duration
}

// Set parses s as the flag's value, within its maximum.
func (v *DurationValue) Set(s string) error {
	d, err := CheckDuration(s, v.max)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// Type names the flag's kind in help.
func (v *DurationValue) Type() string { return "duration" }

// String prints the value as the CLI prints every duration; zero is "0"
// so that help leaves out a zero default, as for pflag's own durations.
func (v *DurationValue) String() string {
	if *v.d == 0 {
		return "0"
	}
	return durations.Format(*v.d)
}

// DurationVar defines a duration flag that takes days as well as Go
// durations and refuses a value above max (0: no maximum but what a
// duration holds) with "above the maximum"; help gives the maximum.
func DurationVar(f *pflag.FlagSet, p *time.Duration, name string, def, max time.Duration, usage string) {
	*p = def
	if max > 0 {
		usage += fmt.Sprintf(" (at most %s)", durations.Format(max))
	}
	f.Var(&DurationValue{d: p, max: max}, name, usage)
}
